# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault proxy's server side (test equipment): each client connection, each request forwarded or answered.

``ProxyServer`` is a threading TLS server (handshakes in the handler threads, every connection closed at stop) with
the FaultProxy's parts; ``Handler`` handles each connection (TLS handshake, HTTP/1.1 keep-alive, request bodies)
and, per request: logs it, takes the fault it uses, then answers it (a fault's answer, a compaction's 410) or
forwards it upstream and relays the answer, a watch event by event. Every client connection keeps its own upstream
connections alive. What each fault kind does is in tests/support/fault_proxy.py's docstring.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.faults import (
    COMMIT_TIMEOUT_MESSAGE, CONTINUE_EXPIRED_MESSAGE, FAULT_VERBS, ApiError, status_body, too_large_rv)
from tests.support.fault_proxy_log import request_info
from tests.support.fault_proxy_upstream import closed_by_peer
from tests.support.fault_proxy_watches import Watch, numeric_rv
from tests.support.tls import user_from_peer_cert

__all__ = ["Handler", "ProxyServer"]

# Headers of one connection, not of the request (RFC 9110 7.6.1), and those the proxy sets itself.
_HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                         "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"))
# Methods that may be sent again when a kept-alive upstream connection turns out closed before answering (Go's
# http.Transport retries these alone): a write is never sent twice, so the apiserver stores what the log shows.
_IDEMPOTENT = ("GET", "HEAD", "OPTIONS")
# kube-apiserver closes idle HTTP/1.1 connections after 90 s; a connection idle this long is not reused.
_UPSTREAM_IDLE = 30.0


class ProxyServer(ThreadingHTTPServer):
    """A threading TLS server: handshakes in the handler threads (one slow client never blocks accept()), every
    connection closed at stop (close_all). Its handlers use the FaultProxy's parts it is given: ``upstream`` (an
    Upstream), ``credentials`` (Credentials), ``tables`` (ProxyTables: the log and the faults) and ``watches``
    (a WatchTable)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, handler, ssl_context, upstream, credentials, tables, watches):
        self.ssl_context = ssl_context
        self.upstream = upstream
        self.credentials = credentials
        self.tables = tables
        self.watches = watches
        self._conns = set()
        self._conns_lock = threading.Lock()
        super(ProxyServer, self).__init__(address, handler)

    def get_request(self):
        sock, addr = super(ProxyServer, self).get_request()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self._conns_lock:
            self._conns.add(sock)
        return sock, addr

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super(ProxyServer, self).shutdown_request(request)

    def close_all(self):
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for sock in conns:
            for close in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
                try:
                    close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        # clients that go away (watch closed, dropped by a fault) are not errors of the server
        pass


class Handler(BaseHTTPRequestHandler):
    """One client connection (TLS handshake, HTTP/1.1 keep-alive, request bodies); answers by forwarding."""

    protocol_version = "HTTP/1.1"
    server_version = "fault-proxy"
    sys_version = ""
    timeout = 300

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise
        super(Handler, self).setup()
        self._connection_number = self.server.tables.new_connection()
        # upstream connections of this client connection: {with_cert: [HTTPSConnection, last used]}
        self._conns = {}
        self._upstream_sock = None
        self._entry = None
        self._peer = None

    def finish(self):
        try:
            super(Handler, self).finish()
        finally:
            self._close_upstream()

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass

    def _body(self):
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _close_upstream(self):
        conns, self._conns = list(self._conns.values()), {}
        for conn, _used in conns:
            conn.close()

    # -- the request
    def _dispatch(self):
        server = self.server
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        body = self._body()
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        authorization = self.headers.get("Authorization")
        # a client certificate counts where no Authorization header is sent, as on kube-apiserver
        self._peer = None if authorization else user_from_peer_cert(self.connection.getpeercert())
        if self._peer is not None:
            user, username = "cert:" + self._peer["user"], self._peer["user"]
        else:
            user, username = server.credentials.user_of(authorization), None
            server.credentials.remember(user, authorization)
        entry = server.tables.log(self.command, path, query, content_type, body, user, username, self._connection_number)
        info = request_info(self.command, path, query)
        resource, name, verb = (info[0], info[2], info[4]) if info else (None, None, None)
        fault = server.tables.take(self.command, path, verb, query)
        # the status goes into the log before the answer goes out, so a client that has its answer finds it there
        self._entry = entry
        try:
            self._answer(fault, info, query, body, authorization, resource, name, verb)
        finally:
            if entry["status"] is None:
                server.tables.finish(entry, "drop")

    def _answer(self, fault, info, query, body, authorization, resource, name, verb):
        """Answer the request; returns the status the client got ("drop" for a closed connection)."""
        server = self.server
        kind = fault.status if fault is not None else None
        if kind is not None and kind not in FAULT_VERBS:
            result = server.tables.answer(fault, resource, name)
            if result == "drop":
                return self._drop()
            return self._send_json(*result)
        if kind in ("watch-expired", "watch-too-large"):
            since = (query.get("resourceVersion") or [""])[-1] or "0"
            current = self._current_rv(numeric_rv(since) or 0)
            error = (ApiError(410, "Expired", "too old resource version: %s (%d)" % (since, current + 1))
                     if kind == "watch-expired" else too_large_rv(current + 1000, current))
            return self._send_watch_error(error)
        if kind == "too-large-rv":
            current = self._current_rv(numeric_rv((query.get("resourceVersion") or [""])[-1]) or 0)
            error = too_large_rv(current + 1000, current)
            return self._send_json(error.code, error.status(), {"Retry-After": str(error.details["retryAfterSeconds"])})
        if kind == "continue-expired":
            error = ApiError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
            return self._send_json(error.code, error.status(), {})
        if kind is None:
            compacted = server.watches.compaction_answer(info, query)
            if compacted is not None:
                if compacted[0] == "watch":
                    return self._send_watch_error(compacted[1])
                return self._send_json(compacted[1].code, compacted[1].status(), {})
        try:
            resp = self._forward(body, authorization)
        except (OSError, http.client.HTTPException) as e:
            if self.command not in _IDEMPOTENT:
                # the write may or may not have reached the apiserver: the client sees what a client of it would
                return self._drop()
            return self._send_json(502, status_body(502, "InternalError", "fault proxy: upstream %s:%s: %s"
                                                    % (server.upstream.host, server.upstream.port, e)), {})
        if kind in ("commit-504", "commit-drop") and 200 <= resp.status < 300:
            # the write is stored; only its answer is lost
            resp.read()
            if kind == "commit-drop":
                return self._drop()
            return self._send_json(504, status_body(504, "Timeout", COMMIT_TIMEOUT_MESSAGE, {}), {})
        if verb == "watch" and resp.status == 200:
            return self._relay_watch(resp, info, query)
        return self._relay(resp)

    # -- upstream
    def _current_rv(self, default):
        """The apiserver's resourceVersion for a fault's message; default when the kubeconfig's user may not list
        namespaces (the message's numbers are all a fault answer depends on it for)."""
        try:
            return self.server.upstream.current_resource_version()
        except (RuntimeError, OSError, ValueError, KeyError, http.client.HTTPException):
            return default

    def _connection(self, with_cert):
        server = self.server
        slot = self._conns.get(with_cert)
        now = time.monotonic()
        if slot is not None and (now - slot[1] > _UPSTREAM_IDLE or closed_by_peer(slot[0].sock)):
            slot[0].close()
            slot = None
        if slot is None:
            slot = [server.upstream.connection(with_cert), now]
            self._conns[with_cert] = slot
        slot[1] = now
        return slot

    def _forward(self, body, authorization):
        up = self.server.upstream
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
        self.server.tables.finish(self._entry, code)
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
        self.server.tables.finish(self._entry, "drop")
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

    def _relay_watch(self, resp, info, query):
        """Relay a watch event by event (whole lines only, so an ERROR event can be put after any of them)."""
        json_stream = ((resp.getheader("Content-Type") or "").startswith("application/json")
                       and not resp.getheader("Content-Encoding"))
        since = (query.get("resourceVersion") or [""])[-1]
        watch = Watch(self.path.split("?")[0], info[0], dict((k, v[-1]) for k, v in query.items()), since, self.request)
        watch.upstream_sock = self._upstream_sock
        self.server.watches.register(watch)
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
            self.server.watches.unregister(watch)
            if watch.gone:
                self.close_connection = True
                return resp.status
            if watch.expired_at is not None:
                # compact(expire_watches=True): what the apiserver sends when the revision a watch follows is gone
                if json_stream:
                    error = ApiError(410, "Expired", "too old resource version: %s (%d)"
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
            self.server.watches.unregister(watch)
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
