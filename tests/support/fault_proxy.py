# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fault-injecting HTTPS proxy between a Kubernetes client and a real kube-apiserver (test equipment).

The simulated cluster (tests/simcluster) can be told to answer 429, to lose the answer of a stored write or to
end a watch with 410 Gone; a real apiserver cannot. This proxy gives tests the same powers on a real one, with
the simulated cluster's own fault table and Status bodies (imported, so both word every fault alike)::

    proxy = FaultProxy(kubeconfig_path, context=None)  # upstream: that kubeconfig's (current) context
    proxy.start()                        # serves https://127.0.0.1:<free port>, own CA and certificate in a temp dir
    proxy.url, proxy.ca_cert_path
    proxy.write_kubeconfig(path, token=None)  # a kubeconfig pointing at the proxy; returns path
    proxy.requests                       # list copy of {method, path, query, content_type, body, status, user, username, time}
    proxy.clear_requests()
    proxy.inject_fault(method, path_regex, status=500, count=1, retry_after=None)
    proxy.clear_faults()
    proxy.faults                         # the faults not yet used up: [{method, path_regex, status, count}]
    proxy.open_watches                   # the watches being relayed now: [{path, resource, query, since}]
    proxy.compact(expire_watches=False)
    proxy.stop()                         # also a context manager: with FaultProxy(path) as proxy: ...

**Forwarding.** Every request goes upstream unchanged: method, path, query, body and headers (Content-Type,
Accept, Authorization, Impersonate-*), except the hop-by-hop ones. A request that carries an Authorization header
is forwarded with it, on a TLS connection without the kubeconfig's client certificate (the apiserver's x509
authenticator runs first and would shadow the token); one without Authorization gets the kubeconfig user's
credentials (its bearer token, or its client certificate). The upstream is verified against the kubeconfig's CA
(or the system's trust store when it names none); a kubeconfig with ``insecure-skip-tls-verify``, ``exec`` or an
``auth-provider`` is refused. Answers stream back as they arrive: a watch is relayed event by event, however
long it lasts. Every client connection is served by its own thread and keeps its own upstream connections alive.

**write_kubeconfig(path, token=None)**: the proxy's URL and CA, and as user ``token`` when given, else the
upstream kubeconfig user's token or client certificate (the proxy does not ask clients for certificates, so such
a client sends none and the proxy adds the upstream one).

**The request log.** One entry per request, appended when it arrives: ``method``; ``path`` (without query);
``query`` (name -> last value); ``content_type`` (lowercase, without parameters, or None); ``body`` (parsed
JSON when it is JSON or has no Content-Type and parses, else text, bytes when it is not UTF-8, None when empty);
``status`` (what the client got: the apiserver's code, an injected one, or "drop" when the connection was closed
instead of answered; set before the answer's first byte is sent, None until then); ``user`` ("upstream" when the
request went with the kubeconfig's credentials, that is without an Authorization header or with the kubeconfig
user's own token; ``"cert:<CN>"`` for a client certificate signed by the proxy's CA; else ``"token:<first 8 hex
digits of the token's sha256>"``, never the token); ``username`` (the certificate's CN, else None: ``usernames(entries)``
fills in what the apiserver authenticates each credential as, by a SelfSubjectReview made with it once per credential
when a test asks, None when it does not authenticate); ``time`` (time.time() at arrival).

**Client certificates.** The proxy asks for (does not require) a client certificate signed by its own CA (its
``ca.key`` lies beside ``ca_cert_path``, so tests issue one with tests/simcluster/auth.py make_client_cert). A request
that carries one and no Authorization header goes upstream with the kubeconfig's credentials and the certificate's
subject as Impersonate-User (CN) and Impersonate-Group (each O): the apiserver authorizes it as that user.

**Faults** (the simulated cluster's vocabulary, tests/simcluster/faults.py FAULT_VERBS): ``inject_fault`` adds one
that the next ``count`` requests use whose method is ``method`` (or "*") and whose path (without query) matches
``path_regex`` (re.search), oldest fault first; a fault kind limited to some verbs (below) is skipped by other
requests. Unlike the simulated cluster, the proxy does not know whether the apiserver will authorize a request,
so a request that would be refused uses the fault as well. ``status``:

- 409, 429, 500, 502, 503, 504: answered by the proxy, not forwarded, with the simulated cluster's Status body;
  ``retry_after`` adds a Retry-After header and ``details.retryAfterSeconds``.
- "drop": the connection is closed without an answer; nothing is forwarded.
- "commit-504" / "commit-drop" (create, update, patch): forwarded, so the apiserver stores the write; a 2xx answer
  is then replaced by 504 Timeout / a closed connection. Any other answer is passed on.
- "too-large-rv" (list): 504 Timeout with cause ResourceVersionTooLarge and Retry-After 1, not forwarded.
- "continue-expired" (a list that sends a continue token): 410 Expired, not forwarded.
- "watch-expired" / "watch-too-large" (watch): 200, one ERROR event carrying a 410 Expired / 504 Timeout Status,
  then the stream ends; not forwarded.

What the apiserver answers itself (its own 410s and ERROR events included) passes through untouched.

**compact(expire_watches=False)** stands in for an etcd compaction at the apiserver's current resourceVersion
(read upstream by a one-item list, and returned): from then on a watch from an older resourceVersion answers 200
and one ERROR 410 Expired event, and a list with a continue token issued at or before it answers 410 Expired, both
without being forwarded (as the simulated cluster's compaction does). ``expire_watches=True`` also ends every
watch being relayed with an ERROR 410 Expired event (within a fraction of a second; a watch in a format other than
JSON is just ended).

Not supported: upgrades (exec, attach, port-forward) and HTTP/2 to the client.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib
import http.client
import json
import os
import select
import shutil
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse

import yaml

from tests.simcluster.auth import _user_from_peer_cert, make_tls, server_ssl_context
from tests.simcluster.kubeconfig import write_kubeconfig as _write_kubeconfig
from tests.simcluster.errors import status_body
from tests.simcluster.faults import (
    COMMIT_TIMEOUT_MESSAGE, CONTINUE_EXPIRED_MESSAGE, FAULT_VERBS, FaultTableMixin, too_large_rv,
)
from tests.simcluster.http_front import ApiHTTPServer, ApiRequestHandler
from tests.simcluster.request_log import RequestLogMixin
from tests.simcluster.store import StoreError

__all__ = ["FaultProxy", "request_info"]

# Headers of one connection, not of the request (RFC 9110 7.6.1), and those the proxy sets itself.
_HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                         "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"))
_TRUE = ("1", "t", "T", "true", "TRUE", "True")   # Go's strconv.ParseBool, which reads ?watch=
# Methods that may be sent again when a kept-alive upstream connection turns out closed before answering (Go's
# http.Transport retries these alone): a write is never sent twice, so the apiserver stores what the log shows.
_IDEMPOTENT = ("GET", "HEAD", "OPTIONS")
# kube-apiserver closes idle HTTP/1.1 connections after 90 s; a connection idle this long is not reused.
_UPSTREAM_IDLE = 30.0
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


class _SimTables(FaultTableMixin, RequestLogMixin):
    """The simulated apiserver's fault table and request log alone: the same fault checks, matching, counting and
    answers, the same log copies."""

    def __init__(self):
        # what the two tables need (see their mixins)
        self._faults = []
        self._log = []
        self._lock = threading.Lock()

    def append(self, entry):
        with self._lock:
            self._log.append(entry)

    def finish(self, entry, status):
        with self._lock:
            entry["status"] = status

    def take(self, method, path, verb, query):
        return self._take_fault(method, path, verb, query)

    def answer(self, fault, resource, name):
        """(code, Status body, headers) of an HTTP-status fault, or "drop"."""
        return self._fault_answer(fault, resource, name)


def _closed_by_peer(sock):
    """Whether an idle kept-alive connection was closed by the apiserver (it is readable: the close, since nothing
    else arrives between answers), as urllib3 checks a pooled connection before reusing it."""
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def _token_user(token):
    return "token:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:8]


def _continue_rv(token):
    """The resourceVersion a continue token was issued at (base64 of {"v", "rv", "start"}), or None."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8"))
        return int(data["rv"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _numeric_rv(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


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


class _Upstream:
    """Where and how to reach the apiserver, read from a kubeconfig context."""

    def __init__(self, kubeconfig_path, context, directory):
        with open(kubeconfig_path) as f:
            config = yaml.safe_load(f) or {}
        base = os.path.dirname(os.path.abspath(kubeconfig_path))
        context_name = context or config.get("current-context")
        ctx = self._named(config, "contexts", context_name, "context")
        cluster = self._named(config, "clusters", ctx.get("cluster"), "cluster")
        user = self._named(config, "users", ctx.get("user"), "user") if ctx.get("user") else {}
        if cluster.get("insecure-skip-tls-verify"):
            raise ValueError("%s: insecure-skip-tls-verify is set; the fault proxy always verifies the apiserver"
                             % kubeconfig_path)
        for unsupported in ("exec", "auth-provider", "username", "password"):
            if user.get(unsupported):
                raise ValueError("%s: user credentials of type %r are not supported by the fault proxy (use a token "
                                 "or a client certificate)" % (kubeconfig_path, unsupported))
        for unsupported in ("tls-server-name", "proxy-url"):
            if cluster.get(unsupported):
                raise ValueError("%s: cluster option %r is not supported by the fault proxy" % (kubeconfig_path, unsupported))
        url = urllib.parse.urlsplit(cluster["server"])
        if url.scheme != "https":
            raise ValueError("%s: the fault proxy needs an https server, not %r" % (kubeconfig_path, cluster["server"]))
        self.host = url.hostname
        self.port = url.port or 443
        self.prefix = url.path.rstrip("/")
        self.ca_path = self._material(cluster, "certificate-authority", base, directory, "upstream-ca.crt")
        self.cert_path = self._material(user, "client-certificate", base, directory, "upstream-client.crt")
        self.key_path = self._material(user, "client-key", base, directory, "upstream-client.key")
        self.token = user.get("token")
        if not self.token and user.get("tokenFile"):
            with open(os.path.join(base, user["tokenFile"])) as f:
                self.token = f.read().strip()
        self.plain_context = self._ssl_context(with_cert=False)
        self.cert_context = self._ssl_context(with_cert=True) if self.cert_path else self.plain_context

    @staticmethod
    def _named(config, section, name, key):
        for item in config.get(section) or []:
            if item.get("name") == name:
                return item.get(key) or {}
        raise ValueError("kubeconfig has no %s named %r" % (section[:-1], name))

    @staticmethod
    def _material(section, key, base, directory, filename):
        """A path to the PEM material of key (or key-data, written to directory), or None."""
        if section.get(key + "-data"):
            path = os.path.join(directory, filename)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(section[key + "-data"]))
            return path
        if section.get(key):
            return os.path.join(base, section[key])
        return None

    def _ssl_context(self, with_cert):
        ctx = ssl.create_default_context(cafile=self.ca_path)
        if with_cert:
            ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx

    def connection(self, with_cert, timeout=None):
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                           context=self.cert_context if with_cert else self.plain_context)

    def auth_headers(self):
        return {"Authorization": "Bearer " + self.token} if self.token else {}


class _Watch:
    """A watch being relayed; compact() and the reaper end it by shutting its upstream socket down."""

    def __init__(self, path, resource, query, since, client_sock):
        self.path = path
        self.resource = resource
        self.query = query
        self.since = since
        self.client_sock = client_sock
        self.upstream_sock = None
        self.expired_at = None      # set by compact(expire_watches=True): end with ERROR 410
        self.gone = False           # the client went away

    def interrupt(self):
        sock = self.upstream_sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class FaultProxy:
    """See the module docstring for the whole interface."""

    def __init__(self, kubeconfig_path, context=None):
        self.kubeconfig_path = kubeconfig_path
        self.context = context
        self.url = None
        self.ca_cert_path = None
        self.port = None
        self.ssl_context = None
        self._tmpdir = None
        self._upstream = None
        self._tables = _SimTables()
        self._lock = threading.Lock()
        self._usernames = {}    # credential -> the name the apiserver authenticates it as
        self._credentials = {}  # a log entry's user -> its credential (never logged or shown)
        self._watches = set()
        self._compacted_rv = None
        self._httpd = None
        self._threads = []
        self._running = False

    # -- lifecycle
    def start(self):
        self._tmpdir = tempfile.mkdtemp(prefix="fault-proxy-")
        try:
            self._upstream = _Upstream(self.kubeconfig_path, self.context, self._tmpdir)
            self.ca_cert_path, cert, key = make_tls(os.path.join(self._tmpdir, "pki"))
            # A client certificate signed by the proxy's own CA (make_client_cert(dirname(ca_cert_path), ...)) is asked
            # for, not required, as kube-apiserver's --client-ca-file does; its subject reaches the apiserver by
            # impersonation (the proxy cannot present the client's certificate upstream).
            self.ssl_context = server_ssl_context(self.ca_cert_path, cert, key)
            self._httpd = _ProxyServer(("127.0.0.1", 0), _Handler, self)
        except Exception:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            raise
        self.port = self._httpd.server_address[1]
        self.url = "https://127.0.0.1:%d" % self.port
        self._running = True
        self._threads = [
            threading.Thread(target=self._httpd.serve_forever, name="fault-proxy", kwargs={"poll_interval": 0.05},
                             daemon=True),
            threading.Thread(target=self._reap, name="fault-proxy-reaper", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self):
        if self._httpd is None:
            return
        self._running = False
        self._httpd.shutdown()
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.gone = True
            watch.interrupt()
        self._httpd.server_close()
        self._httpd.close_all()
        for thread in self._threads:
            thread.join(5)
        self._httpd = None
        shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._tmpdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_kubeconfig(self, path, token=None):
        """A kubeconfig for the proxy (its URL and CA) with token, else the upstream user's credentials."""
        if token:
            return _write_kubeconfig(path, self.url, self.ca_cert_path, token, context="fault-proxy",
                                     user="fault-proxy-user", cluster="fault-proxy")
        # an upstream user with a client certificate: none in the proxy's kubeconfig (the proxy asks only for
        # certificates of its own CA), the proxy adds it upstream to every request that brings no credential
        return _write_kubeconfig(path, self.url, self.ca_cert_path, self._upstream.token, context="fault-proxy",
                                 user="fault-proxy-user", cluster="fault-proxy")

    # -- request log
    @property
    def requests(self):
        return self._tables.requests

    def clear_requests(self):
        self._tables.clear_requests()

    def _log_request(self, method, path, query, content_type, body, user, username=None):
        entry = {"method": method, "path": path, "query": dict((k, v[-1]) for k, v in query.items()),
                 "content_type": content_type or None, "body": _parse_body(body, content_type),
                 "status": None, "user": user, "username": username, "time": time.time()}
        self._tables.append(entry)
        return entry

    def _finish(self, entry, status):
        self._tables.finish(entry, status)

    # -- faults
    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        """status: 409, 429, 500, 502, 503, 504, "drop", or a kind of FAULT_VERBS (see the module docstring)."""
        self._tables.inject_fault(method, path_regex, status=status, count=count, retry_after=retry_after)

    def clear_faults(self):
        self._tables.clear_faults()

    @property
    def faults(self):
        return self._tables.pending_faults()

    # -- watches and compaction
    @property
    def open_watches(self):
        with self._lock:
            return [{"path": w.path, "resource": w.resource, "query": dict(w.query), "since": w.since}
                    for w in self._watches if w.expired_at is None and not w.gone]

    def compact(self, expire_watches=False):
        """Compact at the apiserver's current resourceVersion (returned); see the module docstring."""
        current = self.current_resource_version()
        with self._lock:
            self._compacted_rv = max(current, self._compacted_rv or 0)
            watches = list(self._watches) if expire_watches else []
        for watch in watches:
            watch.expired_at = current
            watch.interrupt()
        return current

    def current_resource_version(self):
        """The apiserver's current resourceVersion: that of a one-item list, read with the kubeconfig's credentials."""
        up = self._upstream
        conn = up.connection(with_cert=True, timeout=30)
        try:
            headers = dict(up.auth_headers(), Accept="application/json")
            conn.request("GET", up.prefix + "/api/v1/namespaces?limit=1", headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError("fault proxy: cannot read the resourceVersion upstream: %d %s"
                                   % (resp.status, data[:300]))
            return int(json.loads(data)["metadata"]["resourceVersion"])
        finally:
            conn.close()

    def _register(self, watch):
        with self._lock:
            self._watches.add(watch)

    def _unregister(self, watch):
        with self._lock:
            self._watches.discard(watch)

    def _reap(self):
        """End the upstream side of watches whose client went away (a watch client sends nothing while it
        reads, so a readable socket means a close), so no upstream watch outlives its client."""
        while self._running:
            with self._lock:
                watches = [w for w in self._watches if not w.gone]
            by_fd = {}
            # poll, not select: a long test session's descriptors go past select's limit of 1024
            poller = select.poll()
            for w in watches:
                try:
                    fd = w.client_sock.fileno()
                except OSError:
                    continue
                if fd >= 0:
                    by_fd[fd] = w
                    poller.register(fd, select.POLLIN | select.POLLPRI)
            if not by_fd:
                time.sleep(0.2)
                continue
            ready = poller.poll(200)
            for fd, _event in ready:
                by_fd[fd].gone = True
                by_fd[fd].interrupt()
            if ready:
                time.sleep(0.05)

    # -- what the handler asks
    def _remember_credential(self, user, authorization):
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
        """The name the apiserver authenticates this credential as (a SelfSubjectReview made with it, once per
        credential), or None when it does not authenticate (401)."""
        key = authorization or ""
        with self._lock:
            if key in self._usernames:
                return self._usernames[key]
        up = self._upstream
        conn = up.connection(with_cert=not authorization, timeout=10)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update({"Authorization": authorization} if authorization else up.auth_headers())
        try:
            conn.request("POST", up.prefix + "/apis/authentication.k8s.io/v1/selfsubjectreviews", headers=headers,
                         body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
            answer = conn.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException):
            return None     # not cached: the next request asks again
        finally:
            conn.close()
        name = None
        if answer.status == 201:
            name = ((json.loads(data).get("status") or {}).get("userInfo") or {}).get("username")
        with self._lock:
            self._usernames[key] = name
        return name

    def _user_of(self, authorization):
        if not authorization:
            return "upstream"
        scheme, _sp, credential = authorization.strip().partition(" ")
        credential = credential.strip() if scheme.lower() == "bearer" else authorization.strip()
        if self._upstream.token and credential == self._upstream.token:
            return "upstream"
        return _token_user(credential)

    def _compaction_answer(self, info, query):
        """A fault the compaction point makes: ("watch", Status) / ("list", Status), or None."""
        with self._lock:
            compacted = self._compacted_rv
        if compacted is None or info is None:
            return None
        verb = info[4]
        if verb == "watch":
            since = _numeric_rv((query.get("resourceVersion") or [""])[-1])
            if since and since < compacted:
                return "watch", StoreError(410, "Expired", "too old resource version: %d (%d)" % (since, compacted + 1))
        if verb == "list" and query.get("continue"):
            issued = _continue_rv(query["continue"][-1])
            if issued is not None and issued <= compacted:
                return "list", StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        return None


class _ProxyServer(ApiHTTPServer):
    """The simulated cluster's threading TLS server (handshakes in the handler threads, every connection closed at
    stop); its ``api`` is the FaultProxy."""

    request_queue_size = 128


class _Handler(ApiRequestHandler):
    """Keeps the simulated cluster's handler's connection handling (TLS handshake, HTTP/1.1 keep-alive, request
    bodies); answers by forwarding."""

    server_version = "fault-proxy"

    def setup(self):
        super(_Handler, self).setup()
        # upstream connections of this client connection: {with_cert: [HTTPSConnection, last used]}
        self._conns = {}
        self._upstream_sock = None
        self._entry = None
        self._peer = None

    def finish(self):
        try:
            super(_Handler, self).finish()
        finally:
            self._close_upstream()

    def _close_upstream(self):
        conns, self._conns = list(self._conns.values()), {}
        for conn, _used in conns:
            conn.close()

    # -- the request
    def _dispatch(self):
        proxy = self.server.api
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        body = self._body()
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        authorization = self.headers.get("Authorization")
        # a client certificate counts where no Authorization header is sent, as on kube-apiserver
        self._peer = None if authorization else _user_from_peer_cert(self.connection.getpeercert())
        if self._peer is not None:
            user, username = "cert:" + self._peer["user"], self._peer["user"]
        else:
            user, username = proxy._user_of(authorization), None
            proxy._remember_credential(user, authorization)
        entry = proxy._log_request(self.command, path, query, content_type, body, user, username)
        info = request_info(self.command, path, query)
        resource, name, verb = (info[0], info[2], info[4]) if info else (None, None, None)
        fault = proxy._tables.take(self.command, path, verb, query)
        # the status goes into the log before the answer goes out, so a client that has its answer finds it there
        self._entry = entry
        try:
            self._answer(proxy, fault, info, query, body, authorization, resource, name, verb)
        finally:
            if entry["status"] is None:
                proxy._finish(entry, "drop")

    def _answer(self, proxy, fault, info, query, body, authorization, resource, name, verb):
        """Answer the request; returns the status the client got ("drop" for a closed connection)."""
        kind = fault.status if fault is not None else None
        if kind is not None and kind not in FAULT_VERBS:
            result = proxy._tables.answer(fault, resource, name)
            if result == "drop":
                return self._drop()
            return self._send_json(*result)
        if kind in ("watch-expired", "watch-too-large"):
            since = (query.get("resourceVersion") or [""])[-1] or "0"
            current = self._current_rv(proxy, _numeric_rv(since) or 0)
            error = (StoreError(410, "Expired", "too old resource version: %s (%d)" % (since, current + 1))
                     if kind == "watch-expired" else too_large_rv(current + 1000, current))
            return self._send_watch_error(error)
        if kind == "too-large-rv":
            current = self._current_rv(proxy, _numeric_rv((query.get("resourceVersion") or [""])[-1]) or 0)
            error = too_large_rv(current + 1000, current)
            return self._send_json(error.code, error.status(), {"Retry-After": str(error.details["retryAfterSeconds"])})
        if kind == "continue-expired":
            error = StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
            return self._send_json(error.code, error.status(), {})
        if kind is None:
            compacted = proxy._compaction_answer(info, query)
            if compacted is not None:
                if compacted[0] == "watch":
                    return self._send_watch_error(compacted[1])
                return self._send_json(compacted[1].code, compacted[1].status(), {})
        try:
            resp = self._forward(proxy, body, authorization)
        except (OSError, http.client.HTTPException) as e:
            if self.command not in _IDEMPOTENT:
                # the write may or may not have reached the apiserver: the client sees what a client of it would
                return self._drop()
            return self._send_json(502, status_body(502, "InternalError", "fault proxy: upstream %s:%s: %s"
                                                    % (proxy._upstream.host, proxy._upstream.port, e)), {})
        if kind in ("commit-504", "commit-drop") and 200 <= resp.status < 300:
            # the write is stored; only its answer is lost
            resp.read()
            if kind == "commit-drop":
                return self._drop()
            return self._send_json(504, status_body(504, "Timeout", COMMIT_TIMEOUT_MESSAGE, {}), {})
        if verb == "watch" and resp.status == 200:
            return self._relay_watch(proxy, resp, info, query)
        return self._relay(resp)

    # -- upstream
    @staticmethod
    def _current_rv(proxy, default):
        """The apiserver's resourceVersion for a fault's message; default when the kubeconfig's user may not list
        namespaces (the message's numbers are all a fault answer depends on it for)."""
        try:
            return proxy.current_resource_version()
        except (RuntimeError, OSError, ValueError, KeyError, http.client.HTTPException):
            return default

    def _connection(self, with_cert):
        proxy = self.server.api
        slot = self._conns.get(with_cert)
        now = time.monotonic()
        if slot is not None and (now - slot[1] > _UPSTREAM_IDLE or _closed_by_peer(slot[0].sock)):
            slot[0].close()
            slot = None
        if slot is None:
            slot = [proxy._upstream.connection(with_cert), now]
            self._conns[with_cert] = slot
        slot[1] = now
        return slot

    def _forward(self, proxy, body, authorization):
        up = proxy._upstream
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
        if not authorization:
            headers += list(up.auth_headers().items())
            if self._peer is not None:
                headers.append(("Impersonate-User", self._peer["user"]))
                headers += [("Impersonate-Group", group) for group in self._peer["groups"]
                            if group != "system:authenticated"]
        headers.append(("Host", "%s:%d" % (up.host, up.port)))
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        with_cert = not authorization
        for attempt in (1, 2):
            slot = self._connection(with_cert)
            conn = slot[0]
            reused = conn.sock is not None
            try:
                conn.putrequest(self.command, up.prefix + self.path, skip_host=True, skip_accept_encoding=True)
                for key, value in headers:
                    conn.putheader(key, value)
                conn.endheaders(body or None)
                # for compact() and the reaper: the socket a relayed watch reads from (getresponse may let go of it)
                sock = conn.sock
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conns.pop(with_cert, None)
                # a kept-alive connection the apiserver closed meanwhile: send a repeatable request once more
                if attempt == 1 and reused and self.command in _IDEMPOTENT:
                    continue
                raise
            self._upstream_sock = sock
            if resp.will_close:
                self._conns.pop(with_cert, None)
            return resp
        raise AssertionError("unreachable")

    # -- answering
    def _send_head(self, code, headers, reason=None):
        self.server.api._finish(self._entry, code)
        self.send_response_only(code, reason)
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()

    def _send_json(self, code, body, headers):
        data = json.dumps(body).encode("utf-8")
        head = [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                ("Cache-Control", "no-cache, private")]
        head += [(k, str(v)) for k, v in headers.items()]
        self._send_head(code, head)
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        return code

    def _drop(self):
        self.server.api._finish(self._entry, "drop")
        self.close_connection = True
        try:
            self.request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return "drop"

    def _write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_watch_error(self, error):
        """200, then one ERROR event with error's Status, then the end of the stream: as the apiserver ends a watch."""
        self._send_head(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
                              ("Cache-Control", "no-cache, private")])
        self._write_chunk((json.dumps({"type": "ERROR", "object": error.status()}) + "\n").encode("utf-8"))
        self._end_chunks()
        return 200

    def _relay_head(self, resp, chunked):
        headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        elif resp.length is not None and self.command != "HEAD":
            headers.append(("Content-Length", str(resp.length)))
        elif resp.getheader("Content-Length") is not None:
            headers.append(("Content-Length", resp.getheader("Content-Length")))
        self._send_head(resp.status, headers, resp.reason)

    def _relay(self, resp):
        no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        chunked = not no_body and resp.length is None
        try:
            self._relay_head(resp, chunked)
            while not no_body:
                data = resp.read1(65536) if chunked else resp.read(65536)
                if not data:
                    break
                if chunked:
                    self._write_chunk(data)
                else:
                    self.wfile.write(data)
            if chunked:
                self._end_chunks()
            self.wfile.flush()
        except OSError:
            resp.close()
            self.close_connection = True
            raise
        return resp.status

    def _relay_watch(self, proxy, resp, info, query):
        """Relay a watch event by event (whole lines only, so an ERROR event can be put after any of them)."""
        json_stream = ((resp.getheader("Content-Type") or "").startswith("application/json")
                       and not resp.getheader("Content-Encoding"))
        since = (query.get("resourceVersion") or [""])[-1]
        watch = _Watch(self.path.split("?")[0], info[0], dict((k, v[-1]) for k, v in query.items()), since, self.request)
        watch.upstream_sock = self._upstream_sock
        proxy._register(watch)
        pending = b""
        try:
            self._relay_head(resp, chunked=True)
            while True:
                try:
                    data = resp.read1(65536)
                except (OSError, ValueError, http.client.HTTPException):
                    data = b""
                if not data:
                    break
                if not json_stream:
                    self._write_chunk(data)
                    continue
                pending += data
                lines, _nl, pending = pending.rpartition(b"\n")
                if lines:
                    self._write_chunk(lines + b"\n")
                    watch.since = self._last_rv(lines) or watch.since
            # no longer open once its client can see the end
            proxy._unregister(watch)
            if watch.gone:
                self.close_connection = True
                return resp.status
            if watch.expired_at is not None:
                # compact(expire_watches=True): what the apiserver sends when the revision a watch follows is gone
                if json_stream:
                    error = StoreError(410, "Expired", "too old resource version: %s (%d)"
                                       % (watch.since or "0", watch.expired_at + 1))
                    self._write_chunk((json.dumps({"type": "ERROR", "object": error.status()}) + "\n").encode("utf-8"))
                # the upstream connection was shut down: the next request opens another
                self._close_upstream()
            elif pending:
                self._write_chunk(pending)
            self._end_chunks()
        except OSError:
            self.close_connection = True
        finally:
            proxy._unregister(watch)
            resp.close()
        return resp.status

    @staticmethod
    def _last_rv(lines):
        for line in reversed(lines.split(b"\n")):
            try:
                rv = json.loads(line)["object"]["metadata"]["resourceVersion"]
            except (ValueError, KeyError, TypeError):
                continue
            if rv:
                return rv
        return None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch
