# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Injected faults of the fault proxy (tests/support/fault_proxy.py): the kinds beyond an HTTP status, kube-apiserver's
Status bodies and texts for them, and the fault table.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def status_body(code, reason, message, details=None, status="Failure"):
    """A Status body as kube-apiserver writes it."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status,
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    if status == "Success":
        body.pop("reason")
        body.pop("message")
    return body


class ApiError(Exception):
    """An answer of the apiserver's that the proxy gives itself (a compaction's 410, a lagging server's 504)."""

    def __init__(self, code, reason, message, details=None):
        super(ApiError, self).__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self):
        return status_body(self.code, self.reason, self.message, self.details)


# Fault kinds beyond an HTTP status. Each applies only to the verbs named here.
#   "drop": close the connection before doing anything (any verb)
#   "commit-504", "commit-drop": do the write, store it, then answer 504 Timeout / drop the connection
#   "too-large-rv": a list answers 504 ResourceVersionTooLarge (a lagging apiserver behind a load balancer)
#   "continue-expired": a list that sends a continue token answers 410 Expired
#   "watch-expired", "watch-too-large": a watch answers 200 and one ERROR event (410 / 504), then ends
FAULT_VERBS = {
    "commit-504": ("create", "update", "patch"),
    "commit-drop": ("create", "update", "patch"),
    "too-large-rv": ("list",),
    "continue-expired": ("list",),
    "watch-expired": ("watch",),
    "watch-too-large": ("watch",),
}

# The apiserver's text for a write whose storage call outlived the request deadline
# (k8s.io/apiserver endpoints/handlers/finisher).
COMMIT_TIMEOUT_MESSAGE = "Timeout: request did not complete within requested timeout - context deadline exceeded"
# k8s.io/apiserver/pkg/storage/etcd3/store.go, for a continue token older than the compaction.
CONTINUE_EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


def too_large_rv(asked, current):
    """504 as kube-apiserver answers a list at a resourceVersion ahead of the server's."""
    return ApiError(504, "Timeout", "Timeout: Too large resource version: %s, current: %s" % (asked, current),
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})


class Fault:
    def __init__(self, method, path_regex, status, count, retry_after, answer=None):
        self.method = (method or "*").upper()
        self.regex = re.compile(path_regex)
        self.status = status
        self.count = count
        self.retry_after = retry_after
        self.answer = answer    # (code, JSON body) of an "answer" fault

    def matches(self, method, path, verb=None, query=None):
        if not ((self.method in ("*", method)) and self.regex.search(path) is not None):
            return False
        verbs = FAULT_VERBS.get(self.status)
        if verbs is not None and verb not in verbs:
            return False
        if self.status == "continue-expired" and not (query or {}).get("continue"):
            return False
        return True


class FaultTableMixin:
    """The injected faults, used up request by request. Needs ``self._faults`` (a list) and
    ``self._lock``.
    """

    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        if status != "drop" and status not in FAULT_VERBS and status not in (409, 429, 500, 502, 503, 504):
            raise ValueError("status must be 409, 429, 500, 502, 503, 504, 'drop' or one of %s, got %r"
                             % (", ".join(sorted(FAULT_VERBS)), status))
        with self._lock:
            self._faults.append(Fault(method, path_regex, status, int(count), retry_after))

    def inject_answer(self, method, path_regex, code, body, count=1):
        """The next ``count`` matching requests get (code, body) instead of the apiserver's answer, unforwarded: what
        another release or configuration of kube-apiserver would answer (a discovery document without a version)."""
        with self._lock:
            self._faults.append(Fault(method, path_regex, "answer", int(count), None, (int(code), body)))

    def clear_faults(self):
        with self._lock:
            del self._faults[:]

    def pending_faults(self):
        """The injected faults not yet used up: [{method, path_regex, status, count}]."""
        with self._lock:
            return [{"method": f.method, "path_regex": f.regex.pattern, "status": f.status, "count": f.count}
                    for f in self._faults]

    def _take_fault(self, method, path, verb=None, query=None):
        with self._lock:
            for fault in self._faults:
                if fault.count > 0 and fault.matches(method, path, verb, query):
                    fault.count -= 1
                    if fault.count == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _fault_answer(self, fault, resource=None, name=None):
        if fault.status == "drop":
            return "drop"
        if fault.status == "answer":
            return fault.answer[0], fault.answer[1], {}
        if fault.status == 409:
            # what a concurrent writer causes: the apiserver's optimistic-concurrency conflict
            return (409, status_body(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                                     'modified; please apply your changes to the latest version and try again'
                                     % (resource, name), {"name": name, "kind": resource}), {})
        reasons = {429: ("TooManyRequests", "Too many requests, please try again later."),
                   500: ("InternalError", "Internal error occurred: injected fault"),
                   502: ("InternalError", "Bad gateway (injected fault)"),
                   503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
                   504: ("Timeout", "The server was unable to return a response in the time allotted")}
        reason, message = reasons[fault.status]
        headers = {}
        details = None
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
            details = {"retryAfterSeconds": int(fault.retry_after)}
        return (fault.status, status_body(fault.status, reason, message, details), headers)
