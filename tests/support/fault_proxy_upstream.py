# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault proxy's upstream (test equipment): the apiserver a kubeconfig context names, how to reach it, and what
the proxy asks it itself.

``Upstream(kubeconfig_path, context, directory)`` reads the context (the current one when context is None): the
server (https only), the CA to verify it with (the system's trust store when the kubeconfig names none) and the
user's credentials, a bearer token (``token`` or ``tokenFile``) and/or a client certificate; ``*-data`` material is
written into directory. A kubeconfig with ``insecure-skip-tls-verify``, ``exec``, ``auth-provider``, a username and
password, ``tls-server-name`` or ``proxy-url`` is refused (ValueError).

- ``connection(with_cert, timeout=None)``: a new HTTPSConnection, with the kubeconfig's client certificate or
  without it (a request that brings its own Authorization header must not carry it: the apiserver's x509
  authenticator runs first and would shadow the token);
- ``auth_headers()``: the kubeconfig's bearer token as an Authorization header, or nothing;
- ``current_resource_version()``: the apiserver's resourceVersion, that of a one-item list of namespaces;
- ``review_username(authorization)``: the name the apiserver authenticates a credential as (a SelfSubjectReview made
  with it; the kubeconfig's when authorization is None), None when it does not authenticate it.

``closed_by_peer(sock)`` tells whether an idle kept-alive connection was closed by the apiserver.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import http.client
import json
import os
import select
import ssl
import urllib.parse

import yaml

__all__ = ["Upstream", "closed_by_peer"]


def closed_by_peer(sock):
    """Whether an idle kept-alive connection was closed by the apiserver (it is readable: the close, since nothing
    else arrives between answers), as urllib3 checks a pooled connection before reusing it."""
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class Upstream:
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

    def current_resource_version(self):
        """The apiserver's current resourceVersion: that of a one-item list, read with the kubeconfig's credentials."""
        conn = self.connection(with_cert=True, timeout=30)
        try:
            headers = dict(self.auth_headers(), Accept="application/json")
            conn.request("GET", self.prefix + "/api/v1/namespaces?limit=1", headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError("fault proxy: cannot read the resourceVersion upstream: %d %s"
                                   % (resp.status, data[:300]))
            return int(json.loads(data)["metadata"]["resourceVersion"])
        finally:
            conn.close()

    def review_username(self, authorization):
        """The name the apiserver authenticates this credential as (a SelfSubjectReview made with it, or with the
        kubeconfig's credentials when authorization is None), None when it does not authenticate it (401). Raises
        OSError or http.client.HTTPException when the review could not be asked."""
        conn = self.connection(with_cert=not authorization, timeout=10)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update({"Authorization": authorization} if authorization else self.auth_headers())
        try:
            conn.request("POST", self.prefix + "/apis/authentication.k8s.io/v1/selfsubjectreviews", headers=headers,
                         body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
            answer = conn.getresponse()
            data = answer.read()
        finally:
            conn.close()
        if answer.status == 201:
            return ((json.loads(data).get("status") or {}).get("userInfo") or {}).get("username")
        return None
