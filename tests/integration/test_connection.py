# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection options reach the cluster every documented way, and TLS and RBAC hold.

Runs on the suite's own control plane and on any real one (KUBECONFIG): each way of connecting uses its
own service account, with a token from the TokenRequest API, bound to a ClusterRole that may only
get/list nodes. Tasks that connect by token run with no kubeconfig at all, so a success proves the
token was used (anonymous requests may not list nodes). On the suite's own control plane the request log
also shows which identity each task really used (and that a refused TLS handshake never got as far
as authentication).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import pytest
import yaml

from tests.support.kubeconfig import kubeconfig_dict
from tests.support.tls import make_client_cert, make_tls

MODULE = "kubehw.devices.extended_resource_info"
NO_LOG_MASK = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"

READERS_GROUP = "kubehw:node-readers"
PROBES = ("env-user", "options-user", "defaults-user", "untrusted-probe", "insecure-probe", "insecure-env-probe",
          "other-ca-probe", "node-reader")

NODES = [
    {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 4}},
    {"name": "cpu-1"},
]

pytestmark = pytest.mark.node_config({"nodes": NODES})


class Identities:
    """Service accounts of this test: .token[name], .user[name]; the probes may get/list nodes."""

    def __init__(self, cluster):
        self.token, self.user = {}, {}
        for name in PROBES + ("nobody",):
            self.user[name], self.token[name] = cluster.service_account(name)
        subjects = [{"kind": "ServiceAccount", "name": name, "namespace": cluster.namespace()} for name in PROBES]
        # and a group, for the client certificate (its O) on the suite's own control plane
        subjects.append({"kind": "Group", "name": READERS_GROUP, "apiGroup": "rbac.authorization.k8s.io"})
        cluster.bind([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}], subjects)


@pytest.fixture
def ids(cluster):
    return Identities(cluster)


def info_task(title, ignore_errors=False, environment=None, **params):
    params.setdefault("include_pods", False)
    if not any(key in params for key in ("name", "names", "label_selectors", "field_selectors")):
        params.setdefault("all_nodes", True)  # a missing target is an error: every node needs all_nodes=true
    task = {"name": title, MODULE: params}
    if ignore_errors:
        task["ignore_errors"] = True
    if environment:
        task["environment"] = environment
    return task


def node_names(result):
    return sorted(n["name"] for n in result["nodes"])


def users_seen(cluster, since):
    """Who made the requests since the mark (the request log: suite's own control plane only)."""
    return [r["user"] for r in cluster.requests(since)]


def assert_ok(run, name):
    res = run.result(name)
    assert not res.get("failed"), "%s failed: %s\n%s" % (name, res.get("msg"), run.output())
    return res


def assert_failed(run, name):
    res = run.result(name)
    assert res.get("failed"), "%s should have failed\n%s" % (name, run.output())
    return res


def test_kubeconfig_path_env_and_dict(cluster, ansible):
    """kubeconfig from K8S_AUTH_KUBECONFIG, as a path option and as an inline dict."""
    with open(cluster.kubeconfig.split(os.pathsep)[0]) as f:
        as_dict = yaml.safe_load(f)
    expected = cluster.node_names()
    since = cluster.mark()
    run = ansible([
        info_task("From K8S_AUTH_KUBECONFIG"),
        info_task("Path option", environment={"K8S_AUTH_KUBECONFIG": ""}, kubeconfig=cluster.kubeconfig),
        info_task("Dict option", environment={"K8S_AUTH_KUBECONFIG": ""}, kubeconfig=as_dict),
    ])
    assert run.rc == 0, run.output()
    for name in ("From K8S_AUTH_KUBECONFIG", "Path option", "Dict option"):
        res = assert_ok(run, name)
        assert node_names(res) == expected
        assert res["changed"] is False
    if cluster.controlled:
        assert expected == ["cpu-1", "gpu-1"]
        # a read-only module: three list requests and not a single write
        assert [(r["method"], r["path"], r["status"]) for r in cluster.requests(since)] == [
            ("GET", "/api/v1/nodes", 200)] * 3
        assert cluster.writes(since) == []


def test_host_token_and_ca_from_env_options_and_module_defaults(cluster, ansible, ids):
    url, ca = cluster.server()
    expected = cluster.node_names()
    since = cluster.mark()
    run = ansible([
        info_task("From K8S_AUTH_* variables", environment={
            "K8S_AUTH_HOST": url, "K8S_AUTH_API_KEY": ids.token["env-user"], "K8S_AUTH_SSL_CA_CERT": ca}),
        info_task("From options", host=url, api_key=ids.token["options-user"], ca_cert=ca),
        # meta/runtime.yml's action group lets a play or block give the connection options once
        dict(info_task("From module_defaults"), module_defaults={"group/kubehw.devices.k8s": {
            "host": url, "api_key": ids.token["defaults-user"], "ca_cert": ca}}),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert node_names(assert_ok(run, "From K8S_AUTH_* variables")) == expected
    res = assert_ok(run, "From options")
    assert node_names(res) == expected
    # the token is a secret: masked in the module's invocation and absent from the output
    assert res["invocation"]["module_args"]["api_key"] == NO_LOG_MASK
    assert ids.token["options-user"] not in run.stdout + run.stderr
    assert node_names(assert_ok(run, "From module_defaults")) == expected
    assert run.rc == 0, run.output()
    if cluster.controlled:
        assert users_seen(cluster, since) == [ids.user["env-user"], ids.user["options-user"], ids.user["defaults-user"]]


def test_untrusted_certificate_refused_unless_validate_certs_false(cluster, ansible, ids, tmp_path):
    """No CA, or another cluster's CA, is refused; the cluster's certificate is issued by its own CA
    (the suite's own control plane's throwaway one, or a real cluster's, which no system trust store holds)."""
    url, _ca = cluster.server()
    expected = cluster.node_names()
    other_ca = make_tls(str(tmp_path / "other-ca"))[0]
    since = cluster.mark()
    run = ansible([
        info_task("No CA given", ignore_errors=True, host=url, api_key=ids.token["untrusted-probe"]),
        info_task("Another cluster's CA", ignore_errors=True, host=url, api_key=ids.token["other-ca-probe"],
                  ca_cert=other_ca),
        info_task("validate_certs false", host=url, api_key=ids.token["insecure-probe"], validate_certs=False),
        info_task("K8S_AUTH_VERIFY_SSL false", host=url, api_key=ids.token["insecure-env-probe"],
                  environment={"K8S_AUTH_VERIFY_SSL": "false"}),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    refused = [assert_failed(run, name) for name in ("No CA given", "Another cluster's CA")]
    for res in refused:
        assert "certificate verify failed" in res["msg"].lower(), res["msg"]
        assert "Traceback" not in res["msg"]
    assert node_names(assert_ok(run, "validate_certs false")) == expected
    assert node_names(assert_ok(run, "K8S_AUTH_VERIFY_SSL false")) == expected
    if cluster.controlled:
        # the refused handshakes never reached authentication: only the insecure tasks were served
        assert users_seen(cluster, since) == [ids.user["insecure-probe"], ids.user["insecure-env-probe"]]
    for res in refused:
        assert "ca_cert" in res["msg"], "the message should say how to fix it: " + res["msg"]
        # no HTTP answer came back, so there is no status code to report (not "0")
        assert res["reason"] == "SSLError", res["msg"]
        assert res.get("status") is None, res["msg"]


def test_wrong_token_is_401_and_context_selects_the_identity(cluster, ansible, ids):
    url, ca = cluster.server()
    two_contexts = kubeconfig_dict(url, ca, "not-a-valid-token", context="broken", user="broken")
    good = kubeconfig_dict(url, ca, ids.token["options-user"], context="good", user="good")
    two_contexts["users"] += good["users"]
    two_contexts["contexts"] += good["contexts"]
    expected = cluster.node_names()
    since = cluster.mark()
    run = ansible([
        info_task("Wrong token", ignore_errors=True, host=url, api_key="not-a-valid-token", ca_cert=ca),
        info_task("Current context has a wrong token", ignore_errors=True, kubeconfig=copy.deepcopy(two_contexts)),
        info_task("Context option", kubeconfig=copy.deepcopy(two_contexts), context="good"),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    for name in ("Wrong token", "Current context has a wrong token"):
        res = assert_failed(run, name)
        assert "401 Unauthorized" in res["msg"], res["msg"]
        assert res["status"] == 401
        assert res["reason"] == "Unauthorized"
    assert node_names(assert_ok(run, "Context option")) == expected
    if cluster.controlled:
        log = [(r["user"], r["status"]) for r in cluster.requests(since)]
        # 401 is not retried: one request per failing task
        assert log == [(None, 401), (None, 401), (ids.user["options-user"], 200)]


def client_certificate(cluster):
    """(cert file, key file, user): issued by the suite's own control plane's CA, or KUBECONFIG's own client
    certificate on a real cluster (kubeadm's admin.conf and kind have one)."""
    if cluster.controlled:
        cert, key = make_client_cert(os.path.dirname(cluster.controls.ca_cert_path), "cert-user", [READERS_GROUP])
        return cert, key, "cert-user"
    import base64

    with open(cluster.kubeconfig.split(os.pathsep)[0]) as f:
        data = yaml.safe_load(f)
    ctx = next(c["context"] for c in data["contexts"] if c["name"] == data["current-context"])
    user = next(u["user"] for u in data["users"] if u["name"] == ctx["user"])
    paths = []
    for field in ("client-certificate", "client-key"):
        if user.get(field + "-data"):
            path = os.path.join(cluster.workdir(), field)
            with open(path, "wb") as f:
                f.write(base64.b64decode(user[field + "-data"]))
            paths.append(path)
        elif user.get(field):
            paths.append(user[field])
    if len(paths) != 2:
        pytest.skip("KUBECONFIG's user has no client certificate, and the suite cannot have the cluster's CA "
                    "sign one without an approver for CertificateSigningRequests")
    return paths[0], paths[1], None


def test_client_certificate_from_options_and_kubeconfig(cluster, ansible, ids):
    """client_cert/client_key options and a kubeconfig with embedded client certificate data
    (the form of kubeadm's admin.conf): CN is the user, O the group."""
    del ids  # the binding of READERS_GROUP is what lets the suite's own control plane's certificate user read nodes
    url, ca = cluster.server()
    cert, key, user = client_certificate(cluster)
    with_cert = kubeconfig_dict(url, ca, None, client_cert=cert, client_key=key)
    expected = cluster.node_names()
    since = cluster.mark()
    run = ansible([
        info_task("Client certificate options", host=url, client_cert=cert, client_key=key, ca_cert=ca),
        info_task("Kubeconfig with client certificate data", kubeconfig=with_cert),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    assert node_names(assert_ok(run, "Client certificate options")) == expected
    assert node_names(assert_ok(run, "Kubeconfig with client certificate data")) == expected
    if cluster.controlled:
        assert users_seen(cluster, since) == [user, user]


def test_least_privilege_token_reads_nodes_and_others_get_403(cluster, ansible, ids):
    url, ca = cluster.server()
    conn = {"host": url, "ca_cert": ca}
    expected = cluster.node_names()
    since = cluster.mark()
    run = ansible([
        info_task("Reader lists nodes", api_key=ids.token["node-reader"], **conn),
        info_task("Reader gets one node", api_key=ids.token["node-reader"], name=expected[0], **conn),
        info_task("Reader may not list pods", ignore_errors=True, api_key=ids.token["node-reader"],
                  include_pods=True, **conn),
        info_task("Unbound token", ignore_errors=True, api_key=ids.token["nobody"], **conn),
        info_task("Admin impersonating the unbound user", ignore_errors=True, kubeconfig=cluster.kubeconfig,
                  impersonate_user=ids.user["nobody"]),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    assert node_names(assert_ok(run, "Reader lists nodes")) == expected
    assert node_names(assert_ok(run, "Reader gets one node")) == expected[:1]

    res = assert_failed(run, "Reader may not list pods")
    assert res["status"] == 403 and res["reason"] == "Forbidden"
    assert ('403 Forbidden: pods is forbidden: User "%s" cannot list resource "pods" in API group "" at the '
            'cluster scope' % ids.user["node-reader"]) in res["msg"], res["msg"]

    nobody_msg = ('403 Forbidden: nodes is forbidden: User "%s" cannot list resource "nodes" in API group "" '
                  'at the cluster scope' % ids.user["nobody"])
    for name in ("Unbound token", "Admin impersonating the unbound user"):
        res = assert_failed(run, name)
        assert res["status"] == 403
        assert nobody_msg in res["msg"], res["msg"]
    if cluster.controlled:
        assert cluster.writes(since) == []
