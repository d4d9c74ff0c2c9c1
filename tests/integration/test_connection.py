# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection options reach the cluster every documented way, and TLS and RBAC hold.

Each way of connecting uses its own bearer token, so the simulated cluster's request log
shows which identity each task really used (and that a refused TLS handshake never got as
far as authentication).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import secrets

import pytest
import yaml

from tests.simcluster.auth import make_client_cert, make_tls
from tests.simcluster.kubeconfig import kubeconfig_dict

MODULE = "kubehw.devices.extended_resource_info"
NO_LOG_MASK = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"

READER_SA = "system:serviceaccount:kubehw:node-reader"
READERS_GROUP = "kubehw:node-readers"
PROBES = ("env-user", "options-user", "defaults-user", "untrusted-probe", "insecure-probe", "insecure-env-probe", "other-ca-probe")
TOKENS = dict((user, secrets.token_hex(16)) for user in PROBES + (READER_SA, "nobody"))

NODES = [
    {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 4}},
    {"name": "cpu-1"},
]
SIM_CONFIG = {
    "nodes": NODES,
    # the probes read nodes through their group; the service account and "nobody" have no group
    "tokens": [{"token": token, "user": user, "groups": [READERS_GROUP] if user in PROBES else []}
               for user, token in TOKENS.items()],
}

pytestmark = pytest.mark.simcluster_config(SIM_CONFIG)


@pytest.fixture(autouse=True)
def node_reader_role(cluster):
    """A ClusterRole allowing only get/list on nodes, bound to the probes' group and the reader SA."""
    if not cluster.simulated:
        return
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    rbac.create_cluster_role({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "kubehw-node-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]})
    rbac.create_cluster_role_binding({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubehw-node-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubehw-node-reader"},
        "subjects": [{"kind": "Group", "name": READERS_GROUP},
                     {"kind": "ServiceAccount", "name": "node-reader", "namespace": "kubehw"}]})


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
    if cluster.simulated:
        assert expected == ["cpu-1", "gpu-1"]
        # a read-only module: three list requests and not a single write
        assert [(r["method"], r["path"], r["status"]) for r in cluster.requests(since)] == [
            ("GET", "/api/v1/nodes", 200)] * 3
        assert cluster.writes(since) == []


def test_host_token_and_ca_from_env_options_and_module_defaults(cluster, ansible):
    cluster.require_simulated("uses bearer tokens and the CA file the simulated cluster issued")
    sim = cluster.sim
    since = cluster.mark()
    run = ansible([
        info_task("From K8S_AUTH_* variables", environment={
            "K8S_AUTH_HOST": sim.url, "K8S_AUTH_API_KEY": TOKENS["env-user"],
            "K8S_AUTH_SSL_CA_CERT": sim.ca_cert_path}),
        info_task("From options", host=sim.url, api_key=TOKENS["options-user"], ca_cert=sim.ca_cert_path),
        # meta/runtime.yml's action group lets a play or block give the connection options once
        dict(info_task("From module_defaults"), module_defaults={"group/kubehw.devices.k8s": {
            "host": sim.url, "api_key": TOKENS["defaults-user"], "ca_cert": sim.ca_cert_path}}),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert node_names(assert_ok(run, "From K8S_AUTH_* variables")) == ["cpu-1", "gpu-1"]
    res = assert_ok(run, "From options")
    assert node_names(res) == ["cpu-1", "gpu-1"]
    # the token is a secret: masked in the module's invocation and absent from the output
    assert res["invocation"]["module_args"]["api_key"] == NO_LOG_MASK
    assert TOKENS["options-user"] not in run.stdout + run.stderr
    assert node_names(assert_ok(run, "From module_defaults")) == ["cpu-1", "gpu-1"]
    assert run.rc == 0, run.output()
    assert users_seen(cluster, since) == ["env-user", "options-user", "defaults-user"]


def test_untrusted_certificate_refused_unless_validate_certs_false(cluster, ansible, tmp_path):
    cluster.require_simulated("the cluster's certificate is issued by a throwaway CA")
    sim = cluster.sim
    other_ca = make_tls(str(tmp_path / "other-ca"))[0]
    since = cluster.mark()
    run = ansible([
        info_task("No CA given", ignore_errors=True, host=sim.url, api_key=TOKENS["untrusted-probe"]),
        info_task("Another cluster's CA", ignore_errors=True, host=sim.url, api_key=TOKENS["other-ca-probe"],
                  ca_cert=other_ca),
        info_task("validate_certs false", host=sim.url, api_key=TOKENS["insecure-probe"], validate_certs=False),
        info_task("K8S_AUTH_VERIFY_SSL false", host=sim.url, api_key=TOKENS["insecure-env-probe"],
                  environment={"K8S_AUTH_VERIFY_SSL": "false"}),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    refused = [assert_failed(run, name) for name in ("No CA given", "Another cluster's CA")]
    for res in refused:
        assert "certificate verify failed" in res["msg"].lower(), res["msg"]
        assert "Traceback" not in res["msg"]
    assert node_names(assert_ok(run, "validate_certs false")) == ["cpu-1", "gpu-1"]
    assert node_names(assert_ok(run, "K8S_AUTH_VERIFY_SSL false")) == ["cpu-1", "gpu-1"]
    # the refused handshakes never reached authentication: only the insecure tasks were served
    assert users_seen(cluster, since) == ["insecure-probe", "insecure-env-probe"]
    for res in refused:
        assert "ca_cert" in res["msg"], "the message should say how to fix it: " + res["msg"]
        # no HTTP answer came back, so there is no status code to report (not "0")
        assert res["reason"] == "SSLError", res["msg"]
        assert res.get("status") is None, res["msg"]


def test_wrong_token_is_401_and_context_selects_the_identity(cluster, ansible):
    cluster.require_simulated("uses bearer tokens the simulated cluster was configured with")
    sim = cluster.sim
    two_contexts = kubeconfig_dict(sim.url, sim.ca_cert_path, "not-a-valid-token", context="broken", user="broken")
    good = kubeconfig_dict(sim.url, sim.ca_cert_path, TOKENS["options-user"], context="good", user="good")
    two_contexts["users"] += good["users"]
    two_contexts["contexts"] += good["contexts"]
    since = cluster.mark()
    run = ansible([
        info_task("Wrong token", ignore_errors=True, host=sim.url, api_key="not-a-valid-token",
                  ca_cert=sim.ca_cert_path),
        info_task("Current context has a wrong token", ignore_errors=True, kubeconfig=copy.deepcopy(two_contexts)),
        info_task("Context option", kubeconfig=copy.deepcopy(two_contexts), context="good"),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    for name in ("Wrong token", "Current context has a wrong token"):
        res = assert_failed(run, name)
        assert "401 Unauthorized" in res["msg"], res["msg"]
        assert res["status"] == 401
        assert res["reason"] == "Unauthorized"
    assert node_names(assert_ok(run, "Context option")) == ["cpu-1", "gpu-1"]
    log = [(r["user"], r["status"]) for r in cluster.requests(since)]
    # 401 is not retried: one request per failing task
    assert log == [(None, 401), (None, 401), ("options-user", 200)]


def test_client_certificate_from_options_and_kubeconfig(cluster, ansible):
    """client_cert/client_key options and a kubeconfig with embedded client certificate data
    (the form of kubeadm's admin.conf): CN is the user, O the group."""
    cluster.require_simulated("issues a client certificate from the simulated cluster's CA")
    sim = cluster.sim
    cert, key = make_client_cert(os.path.dirname(sim.ca_cert_path), "cert-user", [READERS_GROUP])
    with_cert = kubeconfig_dict(sim.url, sim.ca_cert_path, None, client_cert=cert, client_key=key)
    since = cluster.mark()
    run = ansible([
        info_task("Client certificate options", host=sim.url, client_cert=cert, client_key=key,
                  ca_cert=sim.ca_cert_path),
        info_task("Kubeconfig with client certificate data", kubeconfig=with_cert),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    assert node_names(assert_ok(run, "Client certificate options")) == ["cpu-1", "gpu-1"]
    assert node_names(assert_ok(run, "Kubeconfig with client certificate data")) == ["cpu-1", "gpu-1"]
    assert users_seen(cluster, since) == ["cert-user", "cert-user"]


def test_least_privilege_token_reads_nodes_and_others_get_403(cluster, ansible):
    cluster.require_simulated("uses service-account tokens the simulated cluster was configured with")
    sim = cluster.sim
    conn = {"host": sim.url, "ca_cert": sim.ca_cert_path}
    since = cluster.mark()
    run = ansible([
        info_task("Reader lists nodes", api_key=TOKENS[READER_SA], **conn),
        info_task("Reader gets one node", api_key=TOKENS[READER_SA], name="gpu-1", **conn),
        info_task("Reader may not list pods", ignore_errors=True, api_key=TOKENS[READER_SA], include_pods=True,
                  **conn),
        info_task("Unbound token", ignore_errors=True, api_key=TOKENS["nobody"], **conn),
        info_task("Admin impersonating the unbound user", ignore_errors=True, api_key=sim.admin_token,
                  impersonate_user="nobody", **conn),
    ], env={"K8S_AUTH_KUBECONFIG": None})
    assert run.rc == 0, run.output()
    assert node_names(assert_ok(run, "Reader lists nodes")) == ["cpu-1", "gpu-1"]
    assert node_names(assert_ok(run, "Reader gets one node")) == ["gpu-1"]

    res = assert_failed(run, "Reader may not list pods")
    assert res["status"] == 403 and res["reason"] == "Forbidden"
    assert ('403 Forbidden: pods is forbidden: User "system:serviceaccount:kubehw:node-reader" cannot list '
            'resource "pods" in API group "" at the cluster scope') in res["msg"], res["msg"]

    nobody_msg = ('403 Forbidden: nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" '
                  'at the cluster scope')
    for name in ("Unbound token", "Admin impersonating the unbound user"):
        res = assert_failed(run, name)
        assert res["status"] == 403
        assert nobody_msg in res["msg"], res["msg"]
    assert cluster.writes(since) == []
