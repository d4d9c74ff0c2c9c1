# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fault-injecting HTTPS proxy between a Kubernetes client and a real kube-apiserver (test equipment).

A real apiserver cannot be told to answer 429, to lose the answer of a stored write or to end a watch with 410 Gone.
This proxy gives tests those powers on a real one, with kube-apiserver's own Status bodies (tests/support/faults.py)::

    proxy = FaultProxy(kubeconfig_path, context=None)  # upstream: that kubeconfig's (current) context
    proxy.start()                        # serves https://127.0.0.1:<free port>, own CA and certificate in a temp dir
    proxy.url, proxy.ca_cert_path
    proxy.write_kubeconfig(path, token=None)  # a kubeconfig pointing at the proxy; returns path
    proxy.requests                       # list copy of {method, path, query, content_type, body, status, user, username, time}
    proxy.clear_requests()
    proxy.inject_fault(method, path_regex, status=500, count=1, retry_after=None)
    proxy.clear_faults()
    proxy.faults                         # the faults not yet used up: [{method, path_regex, status, count}]
    proxy.open_watches                   # the watches being relayed now: [{id, path, resource, query, since}]
    proxy.compact(expire_watches=False)
    proxy.close_connections()            # drop every client connection, as an apiserver restart does
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
when a test asks, None when it does not authenticate); ``time`` (time.time() at arrival); ``connection`` (the number
of the client connection it came on, counted from 1 as the proxy accepts them: requests a client sends on a
kept-alive connection share it).

**Client certificates.** The proxy asks for (does not require) a client certificate signed by its own CA (its
``ca.key`` lies beside ``ca_cert_path``, so tests issue one with tests/support/tls.py make_client_cert). A request
that carries one and no Authorization header goes upstream with the kubeconfig's credentials and the certificate's
subject as Impersonate-User (CN) and Impersonate-Group (each O): the apiserver authorizes it as that user.

**Faults** (tests/support/faults.py FAULT_VERBS): ``inject_fault`` adds one
that the next ``count`` requests use whose method is ``method`` (or "*") and whose path (without query) matches
``path_regex`` (re.search), oldest fault first; a fault kind limited to some verbs (below) is skipped by other
requests. The proxy does not know whether the apiserver will authorize a request, so a request that would be
refused uses the fault as well. ``status``:

- 409, 429, 500, 502, 503, 504: answered by the proxy, not forwarded, with kube-apiserver's Status body;
  ``retry_after`` adds a Retry-After header and ``details.retryAfterSeconds``.
- "drop": the connection is closed without an answer; nothing is forwarded.
- "commit-504" / "commit-drop" (create, update, patch): forwarded, so the apiserver stores the write; a 2xx answer
  is then replaced by 504 Timeout / a closed connection. Any other answer is passed on.
- "too-large-rv" (list): 504 Timeout with cause ResourceVersionTooLarge and Retry-After 1, not forwarded.
- "continue-expired" (a list that sends a continue token): 410 Expired, not forwarded.
- "watch-expired" / "watch-too-large" (watch): 200, one ERROR event carrying a 410 Expired / 504 Timeout Status,
  then the stream ends; not forwarded.

**inject_answer(method, path_regex, code, body, count=1)** answers the next ``count`` matching requests with that
status and JSON body, unforwarded: what another release or configuration of kube-apiserver would answer (a
discovery document of a cluster that serves no resource.k8s.io/v1, the /version of an older release).

What the apiserver answers itself (its own 410s and ERROR events included) passes through untouched.

**compact(expire_watches=False)** stands in for an etcd compaction at the apiserver's current resourceVersion
(read upstream by a one-item list, and returned): from then on a watch from an older resourceVersion answers 200
and one ERROR 410 Expired event, and a list with a continue token issued at or before it answers 410 Expired, both
without being forwarded (as an apiserver answers after a compaction). ``expire_watches=True`` also ends every
watch being relayed with an ERROR 410 Expired event (within a fraction of a second; a watch in a format other than
JSON is just ended).

Not supported: upgrades (exec, attach, port-forward) and HTTP/2 to the client.

The parts, one concern a file: fault_proxy_upstream.py (the kubeconfig's apiserver and what the proxy asks it),
fault_proxy_handler.py (each connection and request: forwarded, answered, relayed), fault_proxy_log.py (the request
log, the fault table and who sent each request), fault_proxy_watches.py (the watches relayed, compaction and the
reaper).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile
import threading

from tests.support import kubeconfig
from tests.support.tls import make_tls, server_ssl_context
from tests.support.fault_proxy_handler import Handler, ProxyServer
from tests.support.fault_proxy_log import Credentials, ProxyTables, request_info
from tests.support.fault_proxy_upstream import Upstream
from tests.support.fault_proxy_watches import WatchTable

__all__ = ["FaultProxy", "request_info"]


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
        self._credentials = None
        self._tables = ProxyTables()
        self._watches = WatchTable()
        self._httpd = None
        self._threads = []
        self._running = False

    # -- lifecycle
    def start(self):
        self._tmpdir = tempfile.mkdtemp(prefix="fault-proxy-")
        try:
            self._upstream = Upstream(self.kubeconfig_path, self.context, self._tmpdir)
            self._credentials = Credentials(self._upstream)
            self.ca_cert_path, cert, key = make_tls(os.path.join(self._tmpdir, "pki"))
            # A client certificate signed by the proxy's own CA (make_client_cert(dirname(ca_cert_path), ...)) is asked
            # for, not required, as kube-apiserver's --client-ca-file does; its subject reaches the apiserver by
            # impersonation (the proxy cannot present the client's certificate upstream).
            self.ssl_context = server_ssl_context(self.ca_cert_path, cert, key)
            self._httpd = ProxyServer(("127.0.0.1", 0), Handler, self.ssl_context, self._upstream, self._credentials,
                                      self._tables, self._watches)
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
            threading.Thread(target=self._watches.reap, args=(lambda: self._running,), name="fault-proxy-reaper",
                             daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self):
        if self._httpd is None:
            return
        self._running = False
        self._httpd.shutdown()
        self._watches.end_all()
        self._httpd.server_close()
        self.close_connections()
        for thread in self._threads:
            thread.join(5)
        self._httpd = None
        shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._tmpdir = None

    def close_connections(self):
        """Close every client connection, kept-alive ones included, as an apiserver's restart or idle timeout does."""
        self._httpd.close_all()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_kubeconfig(self, path, token=None):
        """A kubeconfig for the proxy (its URL and CA) with token, else the upstream user's credentials."""
        # an upstream user with a client certificate: none in the proxy's kubeconfig (the proxy asks only for
        # certificates of its own CA), the proxy adds it upstream to every request that brings no credential
        return kubeconfig.write_kubeconfig(path, self.url, self.ca_cert_path, token or self._upstream.token,
                                           context="fault-proxy", user="fault-proxy-user", cluster="fault-proxy")

    # -- request log
    @property
    def requests(self):
        return self._tables.requests

    def clear_requests(self):
        self._tables.clear_requests()

    def usernames(self, entries):
        """Fill in each entry's username: what the apiserver authenticates its credential as, asked (a
        SelfSubjectReview made with it) only when a test reads it, once per credential."""
        return self._credentials.usernames(entries)

    # -- faults
    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        """status: 409, 429, 500, 502, 503, 504, "drop", or a kind of FAULT_VERBS (see the module docstring)."""
        self._tables.inject_fault(method, path_regex, status=status, count=count, retry_after=retry_after)

    def inject_answer(self, method, path_regex, code, body, count=1):
        """Answer the next ``count`` matching requests with (code, JSON body), unforwarded (see the docstring)."""
        self._tables.inject_answer(method, path_regex, code, body, count=count)

    def clear_faults(self):
        self._tables.clear_faults()

    @property
    def faults(self):
        return self._tables.pending_faults()

    # -- watches and compaction
    @property
    def open_watches(self):
        return self._watches.open_watches()

    def compact(self, expire_watches=False):
        """Compact at the apiserver's current resourceVersion (returned); see the module docstring."""
        current = self.current_resource_version()
        self._watches.compact(current, expire_watches)
        return current

    def current_resource_version(self):
        """The apiserver's current resourceVersion: that of a one-item list, read with the kubeconfig's credentials."""
        return self._upstream.current_resource_version()
