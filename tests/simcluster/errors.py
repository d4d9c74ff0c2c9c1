# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apiserver's error answers: Status bodies, field errors and the 422 and 400 StoreErrors built from them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.simcluster.store import RESOURCES, StoreError, kind_of


GENERIC_422 = "the server rejected our request due to an error in our request"


def status_body(code, reason, message, details=None, status="Failure"):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status,
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    if status == "Success":
        body.pop("reason")
        body.pop("message")
    return body


def _qualified_kind(resource):
    group = RESOURCES[resource][0]
    return "%s.%s" % (kind_of(resource), group) if group else kind_of(resource)


class FieldError:
    REASONS = {"Invalid": "FieldValueInvalid", "Required": "FieldValueRequired",
               "Forbidden": "FieldValueForbidden", "NotSupported": "FieldValueNotSupported",
               "Too long": "FieldValueTooLong", "Too many": "FieldValueTooMany"}

    def __init__(self, field, kind, detail, value=None):
        self.field = field
        self.kind = kind
        self.detail = detail
        self.value = value

    def body(self):
        if self.kind == "Invalid":
            return "Invalid value: %s: %s" % (_go_value(self.value), self.detail)
        if self.kind == "Required":
            return "Required value: %s" % self.detail if self.detail else "Required value"
        if self.kind == "Forbidden":
            return "Forbidden: %s" % self.detail
        return "%s: %s" % (self.kind, self.detail)

    def __str__(self):
        return "%s: %s" % (self.field, self.body())


def _go_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid_error(resource, name, errors):
    """StoreError 422 Invalid as errors.NewInvalid builds it."""
    if len(errors) == 1:
        agg = str(errors[0])
    else:
        agg = "[%s]" % ", ".join(str(e) for e in errors)
    kind = _qualified_kind(resource) if resource else ""
    message = '%s "%s" is invalid: %s' % (kind, name, agg)
    details = {}
    if name:
        details["name"] = name
    if resource:
        group = RESOURCES[resource][0]
        if group:
            details["group"] = group
        details["kind"] = kind_of(resource)
    details["causes"] = [{"reason": FieldError.REASONS.get(e.kind, e.kind), "message": e.body(), "field": e.field}
                         for e in errors]
    return StoreError(422, "Invalid", message, details)


def generic_422():
    return StoreError(422, "Invalid", GENERIC_422, {})


def bad_request(message):
    return StoreError(400, "BadRequest", message)
