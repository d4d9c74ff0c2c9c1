# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the collection raises to fail a task, and the translation of an API error.

``Failure`` is the base of four: ``InputRefused`` (bad input, refused before any request), ``KubeHwError`` (an API
request that failed, or a client-side failure on the way), ``WaitTimedOut`` (a wait's time budget spent; a
``KubeHwError`` with reason ``Timeout``, so the request paths that handle API failures see it too) and ``TaskFailed``
(the task cannot go on: a foreign object, a refused eviction, a rollout that fails). Each carries ``msg``, the text the
user reads; a module's ``main()`` turns it into ``fail_json``.

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


class Failure(Exception):
    """Base of what the collection raises to fail a task; ``msg`` is the text the user reads."""

    def __init__(self, msg):
        super(Failure, self).__init__(msg)
        self.msg = msg

    def __str__(self):
        return self.msg


class InputRefused(Failure, ValueError):
    """Input refused before any request: the message names the offending value and the rule it breaks."""


class TaskFailed(Failure):
    """The task cannot go on (a foreign object, a refused eviction, a rollout that fails)."""


class KubeHwError(Failure):
    """An API request that failed, or a client-side failure on the way to the API.

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
        self.status = status
        self.reason = reason
        self.body = body


def timed_out(seconds, doing):
    """The one wording of a timeout, for every wait of the collection: "Timed out after <seconds>s <doing>"."""
    return "Timed out after %ss %s" % (seconds, doing)


class WaitTimedOut(KubeHwError):
    """A wait's time budget was spent. ``objects``: what the wait last saw, keyed as its watch keys them (None when it
    watched no objects)."""

    def __init__(self, seconds, doing, objects=None):
        super(WaitTimedOut, self).__init__(timed_out(seconds, doing), reason="Timeout")
        self.objects = objects


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
