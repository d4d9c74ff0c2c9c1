# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated kube-apiserver: ApiServer authenticates, authorizes, routes and applies faults; the verbs,
the admin endpoints, the request log and the fault table are its mixins (reads.py, writes.py, deletes.py,
admin.py, request_log.py, faults.py), the HTTP(S) plumbing is http_front.py.

What a real apiserver answers is recorded in tests/simcluster/FACTS.md, with sources;
every deviation from it is a bug of the simulated cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import urllib.parse

from tests.simcluster import tokenrequest  # serviceaccounts/token (TokenRequest)
from tests.simcluster import openapi  # the /openapi/v3 kubectl reads
from tests.simcluster import auth, discovery, eviction, users
from tests.simcluster import dra_versions  # resource.k8s.io (Dynamic Resource Allocation)
from tests.simcluster.admin import AdminEndpointsMixin
from tests.simcluster.deletes import DeleteVerbsMixin
from tests.simcluster.errors import status_body
from tests.simcluster.faults import (
    COMMIT_TIMEOUT_MESSAGE, CONTINUE_EXPIRED_MESSAGE, FAULT_VERBS, FaultTableMixin, too_large_rv,
)
from tests.simcluster.http_front import ApiHTTPServer, ApiRequestHandler, Streamed
from tests.simcluster.reads import ReadVerbsMixin
from tests.simcluster.request_log import RequestLogMixin
from tests.simcluster.store import RESOURCES, STATUS_RESOURCES, StoreError, is_namespaced
from tests.simcluster.validation import label_selector_matches
from tests.simcluster.writes import WriteVerbsMixin


class ApiServer(FaultTableMixin, RequestLogMixin, ReadVerbsMixin, WriteVerbsMixin, DeleteVerbsMixin,
                AdminEndpointsMixin):
    """The routing and REST semantics; wired to a TLS ThreadingHTTPServer by start()."""

    def __init__(self, store, authenticator, ssl_context=None, host="127.0.0.1", port=0,
                 bookmark_interval=5.0, admin_hooks=None):
        self.store = store
        # auth.Authenticator: bearer tokens (admin + config), anonymous, impersonation
        self.authenticator = authenticator
        self.admin_token = authenticator.admin_token
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.admin_hooks = admin_hooks or {}
        # users whose requests are test equipment's (the kubelet stand-in): neither logged nor faulted, as on a real
        # control plane where the stand-in talks to the apiserver past the fault proxy and its request log
        self.equipment_users = set()
        self._faults = []
        self._list_snapshots = {}   # continue token -> (items, resourceVersion, offset of the next page)
        self._log = []
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None

    # -- lifecycle
    @property
    def url(self):
        scheme = "https" if self.ssl_context else "http"
        return "%s://%s:%d" % (scheme, self.host, self.port)

    def start(self):
        self._httpd = ApiHTTPServer((self.host, self.port), ApiRequestHandler, self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="simcluster-api",
                                        kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def stop(self):
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self.store.close_watches()
        self._httpd.server_close()
        self._httpd.close_all()
        self._thread.join(5)
        self._httpd = None

    # -- entry point from the handler
    def handle(self, req):
        """Return (code, body, headers) or a Streamed, or "drop"."""
        if req.path.startswith("/simcluster/"):
            return self._admin(req)
        entry, user_name, equipment = None, None, False
        try:
            user, error = self.authenticator.identify(self.store, req.headers, peer_cert=req.peer_cert)
            user_name = users.user_name(user) if error is None else None
            equipment = user_name in self.equipment_users
            if not equipment:
                entry = self._log_request(req)
            if error is not None:
                result = (error[0], error[1], {})
            else:
                result = self._authorized(req, user, faults=not equipment)
        except StoreError as e:
            if entry is None and not equipment:
                entry = self._log_request(req)
            # the apiserver copies details.retryAfterSeconds into a Retry-After header (responsewriters)
            retry = (e.details or {}).get("retryAfterSeconds") if isinstance(e.details, dict) else None
            result = (e.code, e.status(), {"Retry-After": str(retry)} if retry else {})
        if entry is not None:
            code = result if isinstance(result, str) else (200 if isinstance(result, Streamed) else result[0])
            self._finish_log(entry, code, user_name)
        return result

    def _authorized(self, req, user, faults=True):
        route = self._route(req)
        if route is None:
            # a non-resource request's verb is the lowercased HTTP method, GET is "get", never "list"
            # (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, NewRequestInfo)
            verb = req.method.lower()
            allowed, reason = auth.authorize_path(self.store, user, verb, req.path)
            if not allowed:
                return (403, auth.forbidden_path_status(user, verb, req.path, reason), {})
            return self._non_resource(req, user, faults)
        resource, namespace, name, sub, verb = route
        allowed, reason = auth.authorize(self.store, user, verb, resource, sub or "", namespace, name)
        if not allowed:
            return (403, auth.forbidden_status(user, verb, resource, sub or "", None, namespace, name, reason), {})
        fault = self._take_fault(req.method, req.path, verb, req.query) if faults else None
        if fault is not None and fault.status not in FAULT_VERBS:
            return self._fault_answer(fault, resource, name)
        if fault is not None and fault.status in ("watch-expired", "watch-too-large"):
            since = req.q("resourceVersion") or self.store.resource_version
            error = (StoreError(410, "Expired", "too old resource version: %s (%s)"
                                % (since, int(self.store.resource_version) + 1))
                     if fault.status == "watch-expired" else too_large_rv(since, self.store.resource_version))
            return Streamed(None, resource, 0, False, error=error)
        if fault is not None and fault.status == "too-large-rv":
            raise too_large_rv(int(self.store.resource_version) + 1000, self.store.resource_version)
        if fault is not None and fault.status == "continue-expired":
            raise StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        result = dra_versions.around(self, req, resource,
                                     lambda r: self._resource(r, resource, namespace, name, sub, verb))
        if fault is not None and isinstance(result, tuple) and 200 <= result[0] < 300:
            # "commit-504" / "commit-drop": the write is stored; only its answer is lost
            if fault.status == "commit-drop":
                return "drop"
            return (504, status_body(504, "Timeout", COMMIT_TIMEOUT_MESSAGE, {}), {})
        return result

    # -- non-resource paths
    def _non_resource(self, req, user, faults=True):
        fault = self._take_fault(req.method, req.path) if faults else None
        if fault is not None:
            return self._fault_answer(fault)
        if req.method != "GET":
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        path = req.path.rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/livez"):
            return (200, "ok", {})
        if path == "/version":
            release = dra_versions.server_release(self)
            return (200, {"major": "1", "minor": release.split(".")[1], "gitVersion": release + "-simcluster",
                          "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                          "buildDate": "2026-11-01T00:00:00Z", "goVersion": "go1.25.4", "compiler": "gc",
                          "platform": "linux/amd64"}, {})
        answer = openapi.answer(path, lambda resource, version: dra_versions.version_served(self, resource, version))
        if answer is not None:
            return answer
        if path == "/api":
            return (200, {"kind": "APIVersions", "versions": ["v1"],
                          "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                          "serverAddress": "%s:%d" % (self.host, self.port)}]}, {})
        answer = dra_versions.discovery(self, path)
        if answer is not None:
            return answer
        if path == "/apis":
            return (200, {"kind": "APIGroupList", "apiVersion": "v1",
                          "groups": [discovery.group_entry(g) for g in discovery.api_groups() if g]}, {})
        parts = [p for p in path.split("/") if p]
        if parts == ["api", "v1"]:
            return (200, discovery.resource_list("", "v1"), {})
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in discovery.api_groups():
            body = discovery.group_entry(parts[1])
            body.update({"kind": "APIGroup", "apiVersion": "v1"})
            return (200, body, {})
        if len(parts) == 3 and parts[0] == "apis" and parts[1] in discovery.api_groups() and parts[2] == "v1":
            return (200, discovery.resource_list(parts[1], "v1"), {})
        raise StoreError(404, "NotFound", "the server could not find the requested resource", {})

    # -- resource routing
    def _route(self, req):
        parts = [urllib.parse.unquote(p) for p in req.path.split("/") if p]
        if not parts:
            return None
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in RESOURCES and is_namespaced(rest[2]):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        spec = RESOURCES.get(resource)
        if spec is None or spec[0] != group or not dra_versions.version_served(self, resource, version):
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        if namespace is not None and not spec[3]:
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        pod_log = sub == "log" and resource == "pods" and req.method == "GET"
        # TokenRequest (tests/simcluster/tokenrequest.py): POST only, authorized as create serviceaccounts/token
        if sub == "token" and resource == "serviceaccounts" and req.method == "POST" and namespace is not None:
            return resource, namespace, name, sub, "create"
        # the Eviction subresource (tests/simcluster/eviction.py): POST only, authorized as create pods/eviction
        eviction = sub == "eviction" and resource == "pods" and req.method == "POST" and namespace is not None
        if eviction:
            return resource, namespace, name, sub, "create"
        if sub is not None and not pod_log and not (sub == "status" and resource in STATUS_RESOURCES):
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        method = req.method
        if method == "GET":
            if name is None:
                verb = "watch" if (watch_path or req.flag("watch")) else "list"
            else:
                verb = "watch" if watch_path else "get"
        elif method == "POST":
            if name is not None or (spec[3] and namespace is None):
                raise StoreError(405, "MethodNotAllowed",
                                 "the server does not allow this method on the requested resource")
            verb = "create"
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name is not None else "deletecollection"
        else:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if verb in ("update", "patch") and name is None:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return resource, namespace, name, sub, verb

    def _resource(self, req, resource, namespace, name, sub, verb):
        if sub == "eviction":
            return eviction.evict(self, req, namespace, name, label_selector_matches)
        if sub == "token":
            return tokenrequest.create_token(self, req, namespace, name)
        handler = getattr(self, "_do_" + verb)
        return handler(req, resource, namespace, name, sub)
