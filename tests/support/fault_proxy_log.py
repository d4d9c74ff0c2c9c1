# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fault proxy knows of each request (test equipment): what it is, who sent it, the request log and the
fault table. The interface and the log entry's fields are in tests/support/fault_proxy.py's docstring.

- ``request_info(method, path, query)``: (resource, namespace, name, subresource, verb) of a resource request, as the
  apiserver derives them, which the faults are matched on;
- ``ProxyTables``: the fault table (tests/support/faults.py) and the request log (``log``, ``requests``);
- ``Credentials``: the log's ``user`` of a request (``"upstream"`` or a hash of its token, never the token), the
  credential behind each (in memory only) and, asked only when a test reads it, the name the apiserver authenticates
  it as.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client
import json
import threading
import time

from tests.support.faults import FaultTableMixin

__all__ = ["Credentials", "ProxyTables", "request_info"]

_TRUE = ("1", "t", "T", "true", "TRUE", "True")   # Go's strconv.ParseBool, which reads ?watch=
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def request_info(method, path, query):
    """(resource, namespace, name, subresource, verb) of a resource request, as the apiserver's RequestInfo
    (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) derives them; None for other paths.
    query: name -> list of values (urllib.parse.parse_qs)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 3):
        return None
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if not rest:
        return None
    method = method.upper()
    watch = False
    if rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = None
    if len(rest) > 1 and rest[0] == "namespaces":
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return None
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if method in ("GET", "HEAD"):
        if watch:
            verb = "watch"
        elif name:
            verb = "get"
        else:
            verb = "watch" if ((query or {}).get("watch") or [""])[-1] in _TRUE else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method)
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
        verb = verb or method.lower()
    return resource, namespace, name, subresource, verb


def _parse_body(body, content_type):
    if not body:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    # the kubernetes client (37) sends its JSON bodies without a Content-Type
    if not content_type or "json" in content_type:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


class ProxyTables(FaultTableMixin):
    """The fault table (tests/support/faults.py) and the request log."""

    def __init__(self):
        # what the fault table needs (see its mixin), and the log
        self._faults = []
        self._log = []
        self._lock = threading.Lock()
        self._connections = 0

    @property
    def requests(self):
        """Copies of the log's entries, in the order the requests arrived."""
        with self._lock:
            return [dict(e) for e in self._log]

    def clear_requests(self):
        with self._lock:
            del self._log[:]

    def new_connection(self):
        """The number of a client connection the proxy accepted: 1 for its first, then 2..."""
        with self._lock:
            self._connections += 1
            return self._connections

    def log(self, method, path, query, content_type, body, user, username=None, connection=None):
        """Append the log entry of a request as it arrives (its status None until answered); returns it."""
        entry = {"method": method, "path": path, "query": dict((k, v[-1]) for k, v in query.items()),
                 "content_type": content_type or None, "body": _parse_body(body, content_type),
                 "status": None, "user": user, "username": username, "time": time.time(), "connection": connection}
        with self._lock:
            self._log.append(entry)
        return entry

    def finish(self, entry, status):
        with self._lock:
            entry["status"] = status

    def take(self, method, path, verb, query):
        return self._take_fault(method, path, verb, query)

    def answer(self, fault, resource, name):
        """(code, Status body, headers) of an HTTP-status fault, or "drop"."""
        return self._fault_answer(fault, resource, name)


def _token_user(token):
    return "token:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:8]


class Credentials:
    """Who sent each request: the log's user of an Authorization header, and what the apiserver calls it."""

    def __init__(self, upstream):
        self._upstream = upstream
        self._lock = threading.Lock()
        self._usernames = {}    # credential -> the name the apiserver authenticates it as
        self._credentials = {}  # a log entry's user -> its credential (never logged or shown)

    def user_of(self, authorization):
        """The log's user of a request's Authorization header (None: the request has none)."""
        if not authorization:
            return "upstream"
        scheme, _sp, credential = authorization.strip().partition(" ")
        credential = credential.strip() if scheme.lower() == "bearer" else authorization.strip()
        if self._upstream.token and credential == self._upstream.token:
            return "upstream"
        return _token_user(credential)

    def remember(self, user, authorization):
        """Keep the credential behind a log entry's user (in memory only), so usernames() can ask who it is."""
        with self._lock:
            self._credentials.setdefault(user, authorization)

    def usernames(self, entries):
        """Fill in each entry's username: what the apiserver authenticates its credential as, asked (a
        SelfSubjectReview made with it) only when a test reads it, once per credential."""
        for entry in entries:
            if entry.get("username") is None and entry.get("user") in self._credentials:
                entry["username"] = self._username_of(self._credentials[entry["user"]])
        return entries

    def _username_of(self, authorization):
        """The name the apiserver authenticates this credential as (asked once per credential), or None when it
        does not authenticate (401)."""
        key = authorization or ""
        with self._lock:
            if key in self._usernames:
                return self._usernames[key]
        try:
            name = self._upstream.review_username(authorization)
        except (OSError, http.client.HTTPException):
            return None     # not cached: the next request asks again
        with self._lock:
            self._usernames[key] = name
        return name
