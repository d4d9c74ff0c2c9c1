# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault injection: watch ERROR events during every wait, a compaction in the middle of a watch,
expired continue tokens, and writes whose answer is lost after the apiserver stored them
(504 after commit, connection dropped after commit) on every create and update the modules make.

Every test here needs the suite's own control plane: a real apiserver cannot be told to compact or to lose
an answer on cue, so on a real cluster each test skips, naming why.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
import uuid

import pytest
import yaml

from tests.integration.runtime_classes import ensure_nvidia_runtime_class
from tests.support.k8s_objects import read_out
from tests.support.node_configs import DEFAULT_CONFIG_PATH

DONGLE = "example.com/dongle"
SMOKE_LABEL = "app.kubernetes.io/component=smoke-test"
RUN_LABEL = "kubehw.devices/smoke-test-run"
LOST_ANSWERS = ["commit-504", "commit-drop"]
WATCH_ERRORS = ["watch-expired", "watch-too-large"]


def slow_pods_config():
    """The default cluster, with pods that take a while to start, so waits must watch."""
    with open(DEFAULT_CONFIG_PATH) as f:
        config = yaml.safe_load(f)
    config["pod_start_delay"] = 1.5
    return config


def advertise(cluster, node, resources):
    ops = [{"op": "add", "path": "/status/capacity/" + key.replace("~", "~0").replace("/", "~1"), "value": value}
           for key, value in resources.items()]
    read_out(cluster.core.patch_node_status(node, ops, _preload_content=False))


def advertise_allocatable(cluster, node, resources):
    """Advertise, then wait for the kubelet stand-in to copy it into allocatable (the scheduler reads that)."""
    advertise(cluster, node, resources)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = json.loads(cluster.core.read_node(node, _preload_content=False).data)["status"]
        if all((status.get("allocatable") or {}).get(k) == v for k, v in resources.items()):
            return
        time.sleep(0.1)
    raise AssertionError("%s never became allocatable on %s" % (resources, node))


def pending_faults(cluster):
    return [f["status"] for f in cluster.controls.faults]


def watches(cluster, since, path):
    return [r for r in cluster.requests(since) if r["method"] == "GET" and r["path"] == path
            and r["query"].get("watch") in ("true", "True", "1")]


def lists(cluster, since, path):
    return [r for r in cluster.requests(since) if r["method"] == "GET" and r["path"] == path
            and r["query"].get("watch") not in ("true", "True", "1")]


def count_added(cluster, resource, label):
    """Record the objects of `resource` carrying `label` that the store creates from now on."""
    return cluster.watch_added(resource, label)


def smoke_pods_left(cluster):
    resp = cluster.core.list_pod_for_all_namespaces(label_selector=SMOKE_LABEL, _preload_content=False)
    return [p["metadata"]["name"] for p in json.loads(resp.data)["items"]]


# ---------------------------------------------------------------- resource_smoke_test

@pytest.mark.parametrize("fault", LOST_ANSWERS)
def test_smoke_test_lost_create_answer_makes_exactly_one_pod_and_leaves_none(cluster, ansible, fault):
    cluster.require_controlled("injects a lost answer after the apiserver stored the pod")
    added = count_added(cluster, "pods", SMOKE_LABEL)
    cluster.controls.inject_fault("POST", r"^/api/v1/namespaces/default/pods$", status=fault)
    mark = cluster.mark()
    advertise_allocatable(cluster, "dongle-1", {DONGLE: "2"})
    run = ansible([{"name": "Smoke", "kubehw.devices.resource_smoke_test": {
        "resource": DONGLE, "node": "dongle-1", "timeout": 20}}])
    assert run.rc == 0, run.output()
    smoke = run.result("Smoke")
    assert smoke["scheduled"] is True and smoke["node"] == "dongle-1" and smoke["deleted"] is True
    assert pending_faults(cluster) == []
    creates = [r for r in cluster.writes(mark) if r["method"] == "POST" and r["path"].endswith("/pods")]
    assert len(creates) == 1, creates
    assert added == [smoke["pod"]]
    assert smoke_pods_left(cluster) == []


def test_smoke_test_pod_is_pinned_by_node_name_with_a_deadline_and_run_label(cluster, ansible):
    cluster.require_controlled("reads the created pod from the request log")
    mark = cluster.mark()
    advertise_allocatable(cluster, "dongle-1", {DONGLE: "2"})
    run = ansible([{"name": "Smoke", "kubehw.devices.resource_smoke_test": {
        "resource": DONGLE, "node": "dongle-1", "timeout": 20}}])
    assert run.rc == 0, run.output()
    smoke = run.result("Smoke")
    create = [json.loads(r["body"]) for r in cluster.writes(mark) if r["method"] == "POST"][0]
    terms = create["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["dongle-1"]}]}]
    assert "nodeSelector" not in create["spec"]
    assert create["spec"]["activeDeadlineSeconds"] == 20 + 60
    assert create["metadata"]["labels"][RUN_LABEL] == smoke["run_id"]
    assert smoke["node"] == "dongle-1" and smoke_pods_left(cluster) == []


@pytest.mark.node_config(slow_pods_config())
@pytest.mark.parametrize("fault", WATCH_ERRORS)
def test_smoke_test_wait_survives_watch_error_events(cluster, ansible, fault):
    cluster.require_controlled("injects watch ERROR events")
    mark = cluster.mark()
    cluster.controls.inject_fault("GET", r"^/api/v1/namespaces/default/pods$", status=fault)
    advertise_allocatable(cluster, "dongle-1", {DONGLE: "2"})
    run = ansible([{"name": "Smoke", "kubehw.devices.resource_smoke_test": {
        "resource": DONGLE, "node": "dongle-1", "wait_for": "completed", "command": ["true"], "timeout": 30}}])
    assert run.rc == 0, run.output()
    smoke = run.result("Smoke")
    assert smoke["phase"] == "Succeeded" and smoke["deleted"] is True
    assert pending_faults(cluster) == []
    # the ERROR event made the module list again (first list, relist after the error)
    assert len(lists(cluster, mark, "/api/v1/namespaces/default/pods")) >= 3
    assert smoke_pods_left(cluster) == []


# ---------------------------------------------------------------- extended_resource_info

@pytest.mark.parametrize("fault", WATCH_ERRORS + ["compaction"])
def test_wait_allocatable_survives_watch_errors_and_compaction(cluster, ansible, fault):
    cluster.require_controlled("injects watch ERROR events and compacts the watch history")
    mark = cluster.mark()
    steps = [lambda: advertise(cluster, "cpu-1", {DONGLE: "3"})]
    if fault == "compaction":
        # once the wait's watch is open, compaction ends it with an ERROR event, as etcd's would
        steps.insert(0, lambda: cluster.controls.compact(expire_watches=True))
    else:
        cluster.controls.inject_fault("GET", r"^/api/v1/nodes$", status=fault)
    timer = cluster.when_watching("nodes", *steps)
    run = ansible([{"name": "Wait", "kubehw.devices.extended_resource_info": {
        "name": "cpu-1", "include_pods": False, "wait_allocatable": {DONGLE: 3}, "wait_timeout": 30}}])
    timer.join()
    assert run.rc == 0, run.output()
    assert run.result("Wait")["nodes"][0]["allocatable"][DONGLE] == "3"
    assert pending_faults(cluster) == []
    # the ERROR event (or the compaction) made the wait list again after its first watch
    first_watch = watches(cluster, mark, "/api/v1/nodes")[0]["time"]
    relists = [r for r in lists(cluster, mark, "/api/v1/nodes") if r["time"] > first_watch]
    assert relists and all(r["query"].get("fieldSelector") == "metadata.name=cpu-1" for r in relists), relists
    # the waits watch only the node they need
    assert all(w["query"].get("fieldSelector") == "metadata.name=cpu-1"
               for w in watches(cluster, mark, "/api/v1/nodes")), watches(cluster, mark, "/api/v1/nodes")


def test_expired_continue_token_restarts_the_list(cluster, ansible):
    cluster.require_controlled("creates 520 nodes and injects an expired continue token")
    cluster.create_nodes([{"what": "bulk", "labels": {"bulk": "yes"}, "capacity": {"cpu": "1"}}] * 520, threads=8)
    cluster.controls.inject_fault("GET", r"^/api/v1/nodes$", status="continue-expired")
    mark = cluster.mark()
    run = ansible([{"name": "Report", "kubehw.devices.extended_resource_info": {
        "label_selectors": ["bulk=yes"], "include_pods": False}}])
    assert run.rc == 0, run.output()
    assert len(run.result("Report")["nodes"]) == 520
    pages = [(r["query"].get("limit"), "continue" in r["query"], r["status"])
             for r in lists(cluster, mark, "/api/v1/nodes")]
    assert pages == [("500", False, 200), ("500", True, 410), ("500", False, 200), ("500", True, 200)], pages


# ---------------------------------------------------------------- k8s_node_extended_resource

@pytest.mark.parametrize("fault", LOST_ANSWERS)
def test_node_status_patch_whose_answer_is_lost(cluster, ansible, fault):
    cluster.require_controlled("injects a lost answer after the apiserver stored the patch")
    cluster.controls.inject_fault("PATCH", r"^/api/v1/nodes/cpu-1/status$", status=fault)
    mark = cluster.mark()
    task = {"kubehw.devices.k8s_node_extended_resource": {"name": "cpu-1", "resources": {DONGLE: 2}}}
    run = ansible([dict(task, name="Advertise"), dict(task, name="Again")])
    assert run.rc == 0, run.output()
    assert run.result("Advertise")["changed"] is True
    assert run.result("Again")["changed"] is False
    assert pending_faults(cluster) == []
    node = json.loads(cluster.core.read_node("cpu-1", _preload_content=False).data)
    assert node["status"]["capacity"][DONGLE] == "2"
    patches = [r for r in cluster.writes(mark) if r["method"] == "PATCH"]
    assert 1 <= len(patches) <= 2, patches


@pytest.mark.parametrize("fault", WATCH_ERRORS)
def test_node_wait_allocatable_survives_watch_error_events(cluster, ansible, fault):
    cluster.require_controlled("injects watch ERROR events")
    cluster.controls.inject_fault("GET", r"^/api/v1/nodes$", status=fault)
    # cpu-1's kubelet is held back until the wait watches, so the wait cannot find allocatable ready at its first
    # list and skip the watch the fault is for (a race the loaded machine lost once)
    cluster.controls.set_node_unreachable("cpu-1")
    timer = cluster.when_watching("nodes", lambda: cluster.controls.set_node_unreachable("cpu-1", False))
    run = ansible([{"name": "Advertise", "kubehw.devices.k8s_node_extended_resource": {
        "name": "cpu-1", "resources": {DONGLE: 5}, "wait": "allocatable", "wait_timeout": 30}}])
    timer.join()
    assert run.rc == 0, run.output()
    assert pending_faults(cluster) == []
    node = json.loads(cluster.core.read_node("cpu-1", _preload_content=False).data)
    assert node["status"]["allocatable"][DONGLE] == "5"


# ---------------------------------------------------------------- device_plugin_deploy

@pytest.fixture
def namespace(cluster):
    # the nvidia preset's pods name RuntimeClass nvidia; without it the apiserver refuses them
    ensure_nvidia_runtime_class(cluster)
    name = "faults-%s" % uuid.uuid4().hex[:8]
    cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    from tests.integration.conftest import grant_plugin_namespace
    grant_plugin_namespace(cluster, name)
    return name


def deploy(namespace, name="Deploy", **params):
    args = dict(preset="nvidia", namespace=namespace, wait_timeout=30)
    args.update(params)
    return {"name": name, "kubehw.devices.device_plugin_deploy": args}


@pytest.mark.parametrize("fault", LOST_ANSWERS)
def test_device_plugin_writes_whose_answer_is_lost(cluster, ansible, namespace, fault):
    cluster.require_controlled("injects lost answers after the apiserver stored the writes")
    base = r"^/apis/apps/v1/namespaces/%s/daemonsets" % namespace
    cm_base = r"^/api/v1/namespaces/%s/configmaps" % namespace
    for method, path in (("POST", base + "$"), ("POST", cm_base + "$"),
                         ("PUT", base + "/"), ("PUT", cm_base + "/")):
        cluster.controls.inject_fault(method, path, status=fault)
    added_ds = count_added(cluster, "daemonsets", "app.kubernetes.io/managed-by=kubehw.devices")
    run = ansible([deploy(namespace), deploy(namespace, name="Change", mig_strategy="single"),
                   deploy(namespace, name="Again", mig_strategy="single")])
    assert run.rc == 0, run.output()
    assert run.result("Deploy")["changed"] is True and run.result("Change")["changed"] is True
    assert run.result("Again")["changed"] is False
    assert pending_faults(cluster) == []
    assert added_ds == ["nvidia-device-plugin"]
    daemonsets = json.loads(cluster.apps.list_namespaced_daemon_set(namespace, _preload_content=False).data)
    assert [d["metadata"]["name"] for d in daemonsets["items"]] == ["nvidia-device-plugin"]
    assert daemonsets["items"][0]["metadata"]["generation"] == 2


@pytest.mark.parametrize("wait, path", [("rollout", "/apis/apps/v1/namespaces/%s/daemonsets"),
                                        ("resource", "/api/v1/nodes")])
def test_device_plugin_waits_survive_watch_error_events(cluster, ansible, namespace, wait, path):
    cluster.require_controlled("injects watch ERROR events")
    path = path % namespace if "%s" in path else path
    cluster.controls.inject_fault("GET", "^%s$" % path, status="watch-expired")
    cluster.controls.inject_fault("GET", "^%s$" % path, status="watch-too-large")
    run = ansible([deploy(namespace, wait=wait)])
    assert run.rc == 0, run.output()
    res = run.result("Deploy")
    assert res["waited_for"] == wait and res["nodes"]


# ---------------------------------------------------------------- k8s_runtime_class

@pytest.mark.parametrize("fault", LOST_ANSWERS)
def test_runtime_class_writes_whose_answer_is_lost(cluster, ansible, fault):
    cluster.require_controlled("injects lost answers after the apiserver stored the writes")
    name = "faults-%s" % uuid.uuid4().hex[:6]
    cluster.controls.inject_fault("POST", r"^/apis/node.k8s.io/v1/runtimeclasses$", status=fault)
    cluster.controls.inject_fault("PUT", r"^/apis/node.k8s.io/v1/runtimeclasses/%s$" % name, status=fault)
    task = {"kubehw.devices.k8s_runtime_class": {"name": name, "handler": "nvidia"}}
    changed = {"kubehw.devices.k8s_runtime_class": {"name": name, "handler": "nvidia",
                                                    "labels": {"example.com/changed": "yes"}}}
    run = ansible([dict(task, name="Create"), dict(changed, name="Update"), dict(changed, name="Again")])
    assert run.rc == 0, run.output()
    assert run.result("Create")["changed"] is True and run.result("Update")["changed"] is True
    assert run.result("Again")["changed"] is False
    assert pending_faults(cluster) == []


# ---------------------------------------------------------------- secrets at -vvv

def kubeconfig_with(cluster, user):
    with open(cluster.kubeconfig) as f:
        config = yaml.safe_load(f)
    config["users"] = [{"name": config["users"][0]["name"], "user": user}]
    return config


def test_no_credential_reaches_the_output_at_vvv(cluster, ansible):
    """api_key, password and every secret of a kubeconfig given as a dict stay out of -vvv output,
    whether the task works or fails (and before the client is built: a refused option)."""
    cluster.require_controlled("uses the admin token and CA of a cluster the suite controls")
    import sys
    with open(cluster.kubeconfig) as f:
        token = yaml.safe_load(f)["users"][0]["user"]["token"]
    secrets = {"password": "pw-Zq81-secret", "key": "a2V5LWRhdGEtc2VjcmV0LVpxODE=", "env": "env-Zq81-secret",
               "arg": "arg-Zq81-secret", "id": "idt-Zq81-secret", "refresh": "rt-Zq81-secret"}
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                             "status": {"token": token}})
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                          "args": ["-c", "print(%r)" % credential, "--token=" + secrets["arg"]],
                          "env": [{"name": "SOME_SECRET", "value": secrets["env"]}],
                          "interactiveMode": "Never"}}
    provider_user = {"auth-provider": {"name": "oidc", "config": {
        "id-token": secrets["id"], "refresh-token": secrets["refresh"], "client-id": "kubehw",
        "idp-issuer-url": "https://issuer.invalid"}}}
    info = {"name": "cpu-1", "include_pods": False}
    # as AWX passes credentials: variables, so the playbook text Ansible quotes around an error holds none
    extra_vars = {"kh_token": token, "kh_password": secrets["password"],
                  "kh_token_config": kubeconfig_with(cluster, {"token": token}),
                  "kh_key_config": kubeconfig_with(cluster, {"client-certificate-data": "Y2VydA==",
                                                             "client-key-data": secrets["key"]}),
                  "kh_exec_config": kubeconfig_with(cluster, exec_user),
                  "kh_provider_config": kubeconfig_with(cluster, provider_user)}
    tasks = [
        {"name": "api_key", "kubehw.devices.extended_resource_info": dict(
            info, host=cluster.controls.url, api_key="{{ kh_token }}", ca_cert=cluster.controls.ca_cert_path)},
        {"name": "password", "ignore_errors": True, "kubehw.devices.extended_resource_info": dict(
            info, host=cluster.controls.url, username="admin", password="{{ kh_password }}",
            ca_cert=cluster.controls.ca_cert_path)},
        {"name": "token", "kubehw.devices.extended_resource_info": dict(info, kubeconfig="{{ kh_token_config }}")},
        {"name": "token refused option", "ignore_errors": True, "kubehw.devices.resource_smoke_test": dict(
            resource=DONGLE, count=0, kubeconfig="{{ kh_token_config }}")},
        {"name": "client key", "ignore_errors": True, "kubehw.devices.extended_resource_info": dict(
            info, kubeconfig="{{ kh_key_config }}")},
        {"name": "exec", "kubehw.devices.extended_resource_info": dict(info, kubeconfig="{{ kh_exec_config }}")},
        {"name": "auth-provider", "ignore_errors": True, "kubehw.devices.extended_resource_info": dict(
            info, kubeconfig="{{ kh_provider_config }}")},
    ]
    run = ansible(tasks, verbosity=3, extra_vars=extra_vars, env={"K8S_AUTH_KUBECONFIG": None})
    output = run.stdout + run.stderr
    assert run.result("api_key").get("failed") is not True, run.output()
    assert run.result("token").get("failed") is not True, run.output()
    assert run.result("exec").get("failed") is not True, run.output()
    assert run.result("token refused option")["failed"] is True
    # -vvv shows the module arguments of each result: they were there to leak
    assert "module_args" in output
    for name, value in [("token", token)] + sorted(secrets.items()):
        assert value not in output, "%s leaked at -vvv: ...%s" % (name, output[max(0, output.find(value) - 600):output.find(value) + 100])
