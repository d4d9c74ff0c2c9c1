# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one error type of kubehw.devices (``KubeHwError``) and the translation of an API error into it.

Private to the collection: the interface may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.common.text.converters import to_native

HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class KubeHwError(Exception):
    """The one error type of kubehw.devices module_utils.

    ``status`` is the HTTP status code (None when no answer came back),
    ``reason`` the Kubernetes Status reason (``NotFound``, ``Invalid``,
    ``Conflict``...) or a short word for client-side failures, ``body`` the
    decoded Status object when the server sent one, ``ambiguous`` whether a
    create may have been stored although it failed.
    """

    # True when a create failed in a way that leaves unknown whether the object was stored.
    ambiguous = False
    # True when an earlier attempt of the same request may have been applied (its answer was lost).
    after_lost_answer = False

    def __init__(self, msg, status=None, reason=None, body=None):
        super(KubeHwError, self).__init__(msg)
        self.msg = msg
        self.status = status
        self.reason = reason
        self.body = body

    def __str__(self):
        return self.msg


def fail_from_error(module, err, **result):
    """Fail the module from a KubeHwError, keeping the partial result."""
    result.pop("msg", None)
    module.fail_json(msg=err.msg, status=err.status, reason=err.reason, **result)


def _status_body(exc):
    try:
        body = json.loads(exc.body) if exc.body else None
    except (TypeError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def error_from_api_exception(exc, what):
    body = _status_body(exc)
    status = exc.status
    reason = (body or {}).get("reason") or exc.reason or HTTP_REASONS.get(status)
    message = (body or {}).get("message") or to_native(exc.body or exc.reason or "").strip()
    http_reason = HTTP_REASONS.get(status, exc.reason or "")
    msg = "Failed to %s: %s %s" % (what, status, http_reason)
    if message:
        msg += ": %s" % message
    return KubeHwError(msg, status=status, reason=reason, body=body)
