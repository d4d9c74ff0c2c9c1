# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP(S) plumbing of the simulated apiserver: the threading server, the handler that turns a request into a
Request for ApiServer.handle and writes its answer: a JSON body, or a Streamed watch written in chunks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import queue
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.simcluster.errors import status_body
from tests.simcluster.store import api_version, kind_of


class Request:
    def __init__(self, method, path, query, headers, body, peer_cert=None):
        self.peer_cert = peer_cert
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def q(self, name, default=None):
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name):
        return (self.q(name) or "").lower() in ("true", "1")


class Streamed:
    """A watch answer: written by the handler thread."""

    def __init__(self, watch, resource, timeout, bookmarks, error=None):
        self.watch = watch
        self.resource = resource
        self.timeout = timeout
        self.bookmarks = bookmarks
        self.error = error


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, handler, api):
        self.api = api
        self._conns = set()
        self._conns_lock = threading.Lock()
        super(ApiHTTPServer, self).__init__(address, handler)

    def get_request(self):
        sock, addr = super(ApiHTTPServer, self).get_request()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.api.ssl_context is not None:
            # handshake in the handler thread, so one slow client does not block accept()
            sock = self.api.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self._conns_lock:
            self._conns.add(sock)
        return sock, addr

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super(ApiHTTPServer, self).shutdown_request(request)

    def close_all(self):
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        # clients that go away (watch closed, dropped by a fault) are not errors of the server
        pass


class ApiRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "simcluster"
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
        super(ApiRequestHandler, self).setup()

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

    def _dispatch(self):
        api = self.server.api
        split = urllib.parse.urlsplit(self.path)
        peer_cert = self.request.getpeercert() if isinstance(self.request, ssl.SSLSocket) else None
        req = Request(self.command, split.path, urllib.parse.parse_qs(split.query, keep_blank_values=True),
                      self.headers, self._body(), peer_cert=peer_cert)
        try:
            result = api.handle(req)
        except Exception as e:  # pylint: disable=broad-except
            # a bug of the simulator must reach the test as a 500 naming it, not a hang
            result = (500, status_body(500, "InternalError", "simcluster internal error: %r" % (e,)), {})
        if result == "drop":
            self.close_connection = True
            try:
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(result, Streamed):
            self._stream(api, result)
            return
        code, body, headers = result
        if isinstance(body, str):
            data = body.encode("utf-8")
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(body).encode("utf-8")
            ctype = "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in headers.items():
            for item in (value if isinstance(value, list) else [value]):
                self.send_header(key, item)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, event):
        data = (json.dumps(event) + "\n").encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, api, streamed):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        watch = streamed.watch
        try:
            if streamed.error is not None:
                self._chunk({"type": "ERROR", "object": streamed.error.status()})
            else:
                deadline = time.monotonic() + streamed.timeout
                last_sent = time.monotonic()
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        item = watch.queue.get(timeout=min(remaining, 0.5))
                    except queue.Empty:
                        item = False
                    if item is None:
                        break
                    if item is False:
                        if streamed.bookmarks and time.monotonic() - last_sent >= api.bookmark_interval:
                            self._chunk({"type": "BOOKMARK", "object": {
                                "kind": kind_of(streamed.resource), "apiVersion": api_version(streamed.resource),
                                "metadata": {"resourceVersion": api.store.resource_version}}})
                            last_sent = time.monotonic()
                        continue
                    event_type, obj = item
                    self._chunk({"type": event_type, "object": obj})
                    last_sent = time.monotonic()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, ValueError):
            self.close_connection = True
        finally:
            if watch is not None:
                watch.stop()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch
