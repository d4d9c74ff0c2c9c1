# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The throwaway CA, the server certificate and the kubeconfig, checked over real HTTPS.

A minimal HTTPS endpoint answers /version with the same certificate and authenticator the
simulated cluster uses, so these tests do not depend on the rest of the simulated cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import ssl
import stat
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from tests.simcluster import auth
from tests.simcluster.kubeconfig import kubeconfig_dict, write_kubeconfig

# every field: kubernetes 37's VersionInfo model refuses a /version answer that lacks one
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "gitCommit": "0" * 40, "gitTreeState": "clean",
           "buildDate": "2024-12-11T17:58:19Z", "goVersion": "go1.23.3", "compiler": "gc",
           "platform": "linux/amd64"}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        who = self.server.authenticator.authenticate(self.headers, self.connection.getpeercert())
        self.server.seen.append((self.path, who))
        if who is None:
            code, body = 401, auth.unauthorized_status()
        else:
            code, body = 200, VERSION
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def endpoint(tmp_path):
    ca, cert, key = auth.make_tls(str(tmp_path / "pki"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.socket = auth.server_ssl_context(ca, cert, key).wrap_socket(server.socket, server_side=True)
    server.authenticator = auth.Authenticator({})
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = "https://127.0.0.1:%d" % server.server_address[1]
    server.ca = ca
    server.key = key
    server.pki = str(tmp_path / "pki")
    yield server
    server.shutdown()
    server.server_close()


def _get(url, token, context):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    with urllib.request.urlopen(req, context=context, timeout=5) as resp:
        return json.loads(resp.read())


def test_certificate_verifies_for_ip_and_localhost(endpoint):
    ctx = ssl.create_default_context(cafile=endpoint.ca)
    assert _get(endpoint.url + "/version", endpoint.authenticator.admin_token, ctx) == VERSION
    localhost = endpoint.url.replace("127.0.0.1", "localhost")
    assert _get(localhost + "/version", endpoint.authenticator.admin_token, ctx) == VERSION
    assert oct(stat.S_IMODE(os.stat(endpoint.key).st_mode)) == "0o600"


def test_untrusted_without_the_ca_and_no_request_reaches_the_server(endpoint):
    with pytest.raises(urllib.error.URLError) as err:
        _get(endpoint.url + "/version", endpoint.authenticator.admin_token, ssl.create_default_context())
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert endpoint.seen == []


def test_each_cluster_has_its_own_ca(endpoint, tmp_path):
    other_ca = auth.make_tls(str(tmp_path / "other"))[0]
    with pytest.raises(urllib.error.URLError):
        _get(endpoint.url + "/version", endpoint.authenticator.admin_token, ssl.create_default_context(cafile=other_ca))


def test_wrong_token_is_401(endpoint):
    ctx = ssl.create_default_context(cafile=endpoint.ca)
    with pytest.raises(urllib.error.HTTPError) as err:
        _get(endpoint.url + "/version", "wrong", ctx)
    assert err.value.code == 401
    assert json.loads(err.value.read())["reason"] == "Unauthorized"


def test_kubeconfig_file_for_official_client(endpoint, tmp_path):
    from kubernetes import client, config

    path = write_kubeconfig(str(tmp_path / "kube" / "config"), endpoint.url, endpoint.ca,
                            endpoint.authenticator.admin_token)
    assert oct(stat.S_IMODE(os.stat(path).st_mode)) == "0o600"
    data = yaml.safe_load(open(path))
    assert data["current-context"] == "simcluster"
    assert data["users"] == [{"name": "simcluster-admin", "user": {"token": endpoint.authenticator.admin_token}}]
    assert "certificate-authority" not in data["clusters"][0]["cluster"]

    api_client = config.new_client_from_config(config_file=path)
    try:
        assert client.VersionApi(api_client).get_code().git_version == "v1.32.0"
    finally:
        api_client.close()
    # the CA travelled inside the file: the directory holding the PEM can go away
    shutil.rmtree(os.path.dirname(endpoint.ca))
    api_client = config.new_client_from_config(config_file=path)
    try:
        assert client.VersionApi(api_client).get_code().git_version == "v1.32.0"
    finally:
        api_client.close()


def test_kubeconfig_dict_with_named_context(endpoint):
    from kubernetes import client, config

    data = kubeconfig_dict(endpoint.url, endpoint.ca, endpoint.authenticator.admin_token,
                           context="lab", user="robot", namespace="kubehw")
    assert data["contexts"] == [{"name": "lab", "context": {"cluster": "simcluster", "user": "robot",
                                                            "namespace": "kubehw"}}]
    api_client = config.new_client_from_config_dict(data, context="lab")
    try:
        assert client.VersionApi(api_client).get_code().minor == "32"
    finally:
        api_client.close()


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
def test_kubeconfig_file_for_kubectl(endpoint, tmp_path):
    path = write_kubeconfig(str(tmp_path / "config"), endpoint.url, endpoint.ca, endpoint.authenticator.admin_token)
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("KUBECONFIG", None)
    out = subprocess.run(["kubectl", "--kubeconfig", path, "get", "--raw", "/version"], env=env,
                         capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == VERSION
    assert endpoint.seen[-1] == ("/version", {"user": "kubernetes-admin",
                                              "groups": ["system:masters", "system:authenticated"]})


def test_client_certificate_identifies_user_and_groups(endpoint):
    cert, key = auth.make_client_cert(endpoint.pki, "alice", ["devs", "system:masters"])
    ctx = ssl.create_default_context(cafile=endpoint.ca)
    ctx.load_cert_chain(cert, key)
    assert _get(endpoint.url + "/version", None, ctx) == VERSION
    assert endpoint.seen[-1][1] == {"user": "alice", "groups": ["devs", "system:masters", "system:authenticated"]}
    # the certificate authenticates before a bearer token, as the x509 authenticator runs first
    _get(endpoint.url + "/version", "not-a-token", ctx)
    assert endpoint.seen[-1][1]["user"] == "alice"
    # without a client certificate the same server still takes tokens
    _get(endpoint.url + "/version", endpoint.authenticator.admin_token, ssl.create_default_context(cafile=endpoint.ca))
    assert endpoint.seen[-1][1]["user"] == "kubernetes-admin"
    assert oct(stat.S_IMODE(os.stat(key).st_mode)) == "0o600"


def test_client_certificate_from_another_ca_fails_the_handshake(endpoint, tmp_path):
    other = str(tmp_path / "other")
    auth.make_tls(other)
    cert, key = auth.make_client_cert(other, "mallory", ["system:masters"])
    ctx = ssl.create_default_context(cafile=endpoint.ca)
    ctx.load_cert_chain(cert, key)
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _get(endpoint.url + "/version", None, ctx)
    assert all(who is None or who["user"] != "mallory" for _path, who in endpoint.seen)


def test_kubeconfig_with_embedded_client_certificate(endpoint, tmp_path):
    from kubernetes import client, config

    cert, key = auth.make_client_cert(endpoint.pki, "kubernetes-admin", ["system:masters"])
    path = write_kubeconfig(str(tmp_path / "config"), endpoint.url, endpoint.ca, None, client_cert=cert,
                            client_key=key)
    data = yaml.safe_load(open(path))
    assert sorted(data["users"][0]["user"]) == ["client-certificate-data", "client-key-data"]
    api_client = config.new_client_from_config(config_file=path)
    try:
        assert client.VersionApi(api_client).get_code().minor == "32"
    finally:
        api_client.close()
    assert endpoint.seen[-1][1]["user"] == "kubernetes-admin"
