# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.device_plugin_deploy against a cluster (the suite's own real control plane, or the cluster of KUBECONFIG).

Default nodes of the kubelet stand-in (tests/support/node_configs/default.yaml): gpu-1 (4 nvidia.com/gpu) and gpu-2 (8), both labelled
feature.node.kubernetes.io/pci-10de.present=true; dongle-1, cpu-1 and bare-1 without.
On a real cluster the tests that need the request log or fault injection are skipped;
the others need GPU nodes carrying that NFD label.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import re
import uuid

import pytest

from tests.integration.conftest import grant_plugin_namespace, least_privilege
from tests.integration.runtime_classes import ensure_nvidia_runtime_class
from tests.support.k8s_objects import read_out

MODULE = "kubehw.devices.device_plugin_deploy"
GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present=true"


def gpu_nodes(cluster):
    """Nodes the nvidia preset selects: gpu-1 and gpu-2 on the suite's own control plane."""
    resp = cluster.core.list_node(label_selector=GPU_LABEL, _preload_content=False)
    return sorted(n["metadata"]["name"] for n in json.loads(resp.data)["items"])


@pytest.fixture
def namespace(cluster):
    """A fresh namespace per test, so tests never see each other's objects; RuntimeClass nvidia, which the
    nvidia preset's pods name, exists (without it the apiserver refuses them)."""
    ensure_nvidia_runtime_class(cluster)
    name = "dp-%s" % uuid.uuid4().hex[:8]
    cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    grant_plugin_namespace(cluster, name)
    yield name
    try:
        cluster.core.delete_namespace(name)
    except Exception:  # pylint: disable=broad-except
        pass


def task(namespace, name="Deploy", **params):
    args = dict(preset="nvidia", namespace=namespace, wait_timeout=30)
    args.update(params)
    return {"name": name, MODULE: args, "register": "out"}


def read_ds(cluster, namespace, name="nvidia-device-plugin"):
    resp = cluster.apps.read_namespaced_daemon_set(name, namespace, _preload_content=False)
    return json.loads(resp.data)


def exists(fn, *args):
    from kubernetes.client.rest import ApiException
    try:
        read_out(fn(*args, _preload_content=False))
        return True
    except ApiException as err:
        if err.status == 404:
            return False
        raise


def ds_writes(cluster, since):
    return [(w["method"], w["path"]) for w in cluster.writes(since)
            if "/daemonsets" in w["path"] or "/configmaps" in w["path"] or "/pods" in w["path"]]


@pytest.mark.floor
def test_create_then_noop_rerun_makes_no_write(cluster, ansible, namespace):
    mark = cluster.mark()
    run = ansible([task(namespace), dict(task(namespace, name="Again"))])
    assert run.rc == 0, run.output()
    first, second = run.result("Deploy"), run.result("Again")
    assert first["changed"] is True
    assert first["waited_for"] == "rollout"
    rollout = first["rollout"]
    assert rollout["done"] and rollout["desired"] == rollout["available"] == len(gpu_nodes(cluster)) > 0
    assert sorted(first["nodes"]) == gpu_nodes(cluster)
    assert first["generation"] == {"before": None, "after": 1}
    ds = first["daemonset"]
    assert ds["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubehw.devices"
    assert ds["metadata"]["annotations"]["devices.kubehw.io/resources"] == "nvidia.com/gpu"
    cm = first["configmap"]
    assert cm["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
    assert json.loads(cm["data"]["config.yaml"])["flags"]["migStrategy"] == "none"

    assert second["changed"] is False, second
    assert second["generation"] == {"before": 1, "after": 1}
    if cluster.controlled:
        writes = ds_writes(cluster, mark)
        # first run: ConfigMap, DaemonSet, ConfigMap ownerReference; the second run adds nothing
        assert [m for m, _path in writes] == ["POST", "POST", "PUT"], writes
        assert len(cluster.writes(mark)) == 3


@pytest.mark.floor
def test_changed_setting_rolls_out_and_reports_generations(cluster, ansible, namespace):
    mark = cluster.mark()
    run = ansible([task(namespace), task(namespace, name="Change", mig_strategy="single")])
    assert run.rc == 0, run.output()
    old_pods = set(p["pod"] for p in run.result("Deploy")["nodes"].values())
    res = run.result("Change")
    assert res["changed"] is True
    assert res["generation"] == {"before": 1, "after": 2}
    assert res["rollout"]["done"] and res["rollout"]["observed_generation"] == 2
    # the config lives in the ConfigMap; its hash in the template is what rolled the pods
    assert "/spec/template/metadata/annotations/devices.kubehw.io~1config-hash" in res["changed_paths"]
    live = read_ds(cluster, namespace)
    status = live["status"]
    assert live["metadata"]["generation"] == 2 and status["observedGeneration"] == 2
    assert status["updatedNumberScheduled"] == status["numberAvailable"] == status["desiredNumberScheduled"]
    new_pods = set(e["pod"] for e in res["nodes"].values())
    assert res["nodes"] and all(e["pod_ready"] and e["updated"] for e in res["nodes"].values())
    assert not (new_pods & old_pods)
    cm = json.loads(cluster.core.read_namespaced_config_map(
        "nvidia-device-plugin-config", namespace, _preload_content=False).data)
    assert json.loads(cm["data"]["config.yaml"])["flags"]["migStrategy"] == "single"
    if cluster.controlled:
        methods = [m for m, p in ds_writes(cluster, mark) if "/pods" not in p]
        # create: ConfigMap, DaemonSet, ConfigMap owner; change: ConfigMap, then DaemonSet
        assert methods == ["POST", "POST", "PUT", "PUT", "PUT"], methods


def test_wait_resource_only_on_gpu_nodes_and_min_count_timeout(cluster, ansible, namespace):
    run = ansible([task(namespace, wait="resource", min_count=4),
                   dict(task(namespace, name="Too many", wait="resource", min_count=6, wait_timeout=3),
                        ignore_errors=True)])
    res = run.result("Deploy")
    assert not res["failed"], run.output()
    assert res["waited_for"] == "resource"
    assert sorted(res["nodes"]) == gpu_nodes(cluster)
    for name in gpu_nodes(cluster):
        assert res["nodes"][name]["pod_ready"] and res["nodes"][name]["resource_ready"]
        assert res["nodes"][name]["capacity"]["nvidia.com/gpu"] >= 4
        assert "nvidia.com/gpu" in res["nodes"][name]["allocatable"]
    if cluster.controlled:
        assert res["nodes"]["gpu-1"]["capacity"] == {"nvidia.com/gpu": 4}
        assert res["nodes"]["gpu-2"]["capacity"] == {"nvidia.com/gpu": 8}
        for node in json.loads(cluster.core.list_node(_preload_content=False).data)["items"]:
            capacity = (node.get("status") or {}).get("capacity") or {}
            if node["metadata"]["name"] in ("gpu-1", "gpu-2"):
                assert "nvidia.com/gpu" in capacity
            else:
                assert "nvidia.com/gpu" not in capacity, node["metadata"]["name"]
        # gpu-1 has 4 GPUs, gpu-2 has 8: only gpu-1 falls short of 6
        res = run.result("Too many")
        assert res["failed"] and res["changed"] is False
        msg = res["msg"]
        assert "Timed out after 3s waiting for the resources nvidia.com/gpu" in msg, msg
        assert "nodes lacking nvidia.com/gpu >= 6 in capacity: gpu-1 (nvidia.com/gpu=4)" in msg, msg
        assert "gpu-2" not in msg.split("in capacity:")[1]


@pytest.mark.node_config({"pod_start_delay": 0.2, "nodes": [
    {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 4}},
    {"name": "gpu-2", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 8}},
    {"name": "cpu-1"},
]})
@pytest.mark.floor
def test_pod_never_ready_times_out_naming_node_and_reason(cluster, ansible, namespace):
    cluster.require_controlled("injects a pod start failure")
    cluster.controls.fail_pod_start("gpu-2", reason="ImagePullBackOff")
    run = ansible([task(namespace, wait="resource", wait_timeout=6)])
    res = run.result("Deploy")
    assert res["failed"], res
    msg = res["msg"]
    assert "Timed out after 6s waiting for the rollout of DaemonSet %s/nvidia-device-plugin" % namespace in msg, msg
    assert "nodes without a ready plugin pod: gpu-2 (pod nvidia-device-plugin-" in msg, msg
    assert "ImagePullBackOff" in msg
    assert "gpu-1" not in msg
    nodes = res["nodes"]
    assert nodes["gpu-1"]["pod_ready"] and not nodes["gpu-2"]["pod_ready"]
    assert any("ImagePullBackOff" in r for r in nodes["gpu-2"]["waiting_reasons"])
    assert res["rollout"]["desired"] == 2 and res["rollout"]["available"] == 1
    # the DaemonSet was still written: the failure is about waiting, and says so
    assert res["changed"] is True


@pytest.mark.floor
def test_check_mode_makes_no_write_and_shows_diff(cluster, ansible, namespace):
    mark = cluster.mark()
    check = dict(check_mode=True, diff=True)
    run = ansible([dict(task(namespace, name="Check create", wait="resource"), **check),
                   task(namespace),
                   dict(task(namespace, name="Check change", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"), **check)])
    assert run.rc == 0, run.output()
    res = run.result("Check create")
    assert res["changed"] is True
    assert res["waited_for"] == "none"
    diffs = res["diff"]
    headers = [d["after_header"] for d in diffs]
    assert headers == ["ConfigMap %s/nvidia-device-plugin-config" % namespace,
                       "DaemonSet %s/nvidia-device-plugin" % namespace]
    assert diffs[1]["before"] == {} and diffs[1]["after"]["spec"]["template"]["spec"]["containers"][0]["image"]

    res = run.result("Check change")
    assert res["changed"] is True
    assert res["generation"] == {"before": 1, "after": 2}
    diff = res["diff"][0]
    # the preset's image by tag and the digest NVIDIA published for it
    assert diff["before"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith(
        ":v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312")
    assert diff["after"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v0.17.0")
    assert read_ds(cluster, namespace)["metadata"]["generation"] == 1
    if cluster.controlled:
        # exactly the three writes of the real task in the middle: the checks wrote nothing
        assert [m for m, _path in ds_writes(cluster, mark)] == ["POST", "POST", "PUT"]
        assert len(cluster.writes(mark)) == 3


@pytest.mark.floor
def test_state_absent_deletes_daemonset_and_configmap(cluster, ansible, namespace):
    mark = cluster.mark()
    run = ansible([task(namespace, wait="none"), task(namespace, name="Remove", state="absent"),
                   task(namespace, name="Remove again", state="absent")])
    assert run.rc == 0, run.output()
    assert run.result("Remove")["changed"] is True
    assert run.result("Remove again")["changed"] is False
    assert not exists(cluster.apps.read_namespaced_daemon_set, "nvidia-device-plugin", namespace)
    assert not exists(cluster.core.read_namespaced_config_map, "nvidia-device-plugin-config", namespace)
    if cluster.controlled:
        deletes = [p for m, p in ds_writes(cluster, mark) if m == "DELETE"]
        assert [p.rsplit("/", 2)[1:] for p in deletes] == [["daemonsets", "nvidia-device-plugin"],
                                                           ["configmaps", "nvidia-device-plugin-config"]]


def test_invalid_input_fails_before_any_request(cluster, ansible, namespace):
    mark = cluster.mark()
    run = ansible([dict(task(namespace, name="Bad name", resource_names=["nvidia.com/bad name"]), ignore_errors=True),
                   dict(task(namespace, name="Bad kind", definition={"kind": "Deployment"}), ignore_errors=True)])
    res = run.result("Bad name")
    assert res["failed"]
    assert "'nvidia.com/bad name' is not a valid extended resource name" in res["msg"]
    assert "must be a DaemonSet" in run.result("Bad kind")["msg"]
    if cluster.controlled:
        assert cluster.requests(mark) == []


def test_on_delete_reports_old_pods_then_deletes_them_when_asked(cluster, ansible, namespace):
    strategy = {"type": "OnDelete"}
    run = ansible([task(namespace, update_strategy=strategy),
                   task(namespace, name="Change", update_strategy=strategy, device_id_strategy="index"),
                   task(namespace, name="Replace", update_strategy=strategy, device_id_strategy="index",
                        delete_old_pods=True)])
    assert run.rc == 0, run.output()
    res = run.result("Change")
    rollout = res["rollout"]
    assert res["changed"] and not rollout["done"] and rollout["old_pods_pending"]
    assert len(rollout["old_pods"]) == len(gpu_nodes(cluster))
    assert any("OnDelete" in w for w in res.get("warnings")), res
    res = run.result("Replace")
    assert res["changed"] is True  # no DaemonSet write, but the old pods were deleted
    assert sorted(res["deleted_pods"]) == sorted(rollout["old_pods"])
    assert res["rollout"]["done"]
    assert all(e["updated"] and e["pod_ready"] for e in res["nodes"].values())


# -- switching presets: the NVIDIA ConfigMap is no longer needed -----------------------------------------------------

SWITCHED = "gpu-plugin"
SWITCHED_CM = "gpu-plugin-config"


def generic_task(namespace, name="Switch", **params):
    """The same DaemonSet name as task(..., name=SWITCHED), now the generic plugin on the GPU nodes."""
    args = dict(preset="generic", name=SWITCHED, namespace=namespace, wait_timeout=60,
                devices=[{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]}],
                node_selector={"feature.node.kubernetes.io/pci-10de.present": "true"})
    args.update(params)
    return {"name": name, MODULE: args, "register": "out"}


def read_cm(cluster, namespace, name=SWITCHED_CM):
    return json.loads(cluster.core.read_namespaced_config_map(name, namespace, _preload_content=False).data)


def mounting_pods(cluster, namespace, cm_name=SWITCHED_CM):
    pods = json.loads(cluster.core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")
            and any((v.get("configMap") or {}).get("name") == cm_name for v in p["spec"].get("volumes") or [])]


def test_switch_from_nvidia_deletes_its_configmap_after_the_rollout(cluster, ansible, namespace):
    nvidia = task(namespace, name="NVIDIA")
    nvidia[MODULE]["name"] = SWITCHED
    run = ansible([nvidia])
    assert run.rc == 0, run.output()
    assert read_cm(cluster, namespace)["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubehw.devices"
    assert mounting_pods(cluster, namespace), "the nvidia plugin pods mount the ConfigMap"

    mark = cluster.mark()
    check = ansible([generic_task(namespace, name="Check switch")], check=True, diff=True)
    assert check.rc == 0, check.output()
    res = check.result("Check switch")
    headers = [d["after_header"] for d in res["diff"]]
    assert headers == ["DaemonSet %s/%s" % (namespace, SWITCHED), "ConfigMap %s/%s" % (namespace, SWITCHED_CM)]
    assert "config.yaml" in res["diff"][1]["before"]["data"] and res["diff"][1]["after"] == {}
    assert res["changed"] is True and res.get("deleted_configmap") == SWITCHED_CM
    assert read_cm(cluster, namespace)
    if cluster.controlled:
        assert cluster.writes(mark) == []

    mark = cluster.mark()
    run = ansible([generic_task(namespace), generic_task(namespace, name="Again")])
    assert run.rc == 0, run.output()
    res = run.result("Switch")
    assert not exists(cluster.core.read_namespaced_config_map, SWITCHED_CM, namespace)
    assert res["changed"] is True and res.get("deleted_configmap") == SWITCHED_CM
    assert res["rollout"]["done"] and res["configmap"] is None
    volumes = read_ds(cluster, namespace, SWITCHED)["spec"]["template"]["spec"]["volumes"]
    assert "plugin-config" not in [v["name"] for v in volumes]
    # no running pod was left mounting a ConfigMap that is gone
    assert mounting_pods(cluster, namespace) == []
    again = run.result("Again")
    assert again["changed"] is False and "deleted_configmap" not in again, again
    if cluster.controlled:
        writes = [(m, p.rsplit("/", 2)[1]) for m, p in ds_writes(cluster, mark) if "/pods" not in p]
        # the DaemonSet stops mounting it first; the ConfigMap goes after the rollout; the re-run writes nothing
        assert writes == [("PUT", "daemonsets"), ("DELETE", "configmaps")], writes


def test_switch_leaves_a_configmap_the_module_did_not_create(cluster, ansible, namespace):
    cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": SWITCHED_CM, "labels": {"app.kubernetes.io/name": SWITCHED}},
        "data": {"settings": "someone else's"}})
    before = read_cm(cluster, namespace)
    mark = cluster.mark()
    run = ansible([dict(generic_task(namespace, name="Check"), check_mode=True),
                   generic_task(namespace), generic_task(namespace, name="Again")])
    assert run.rc == 0, run.output()
    for name in ("Check", "Switch", "Again"):
        assert "deleted_configmap" not in run.result(name), run.result(name)
    after = read_cm(cluster, namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == {"settings": "someone else's"}
    if cluster.controlled:
        assert not [p for m, p in ds_writes(cluster, mark) if "/configmaps" in p]


# -- objects the module did not make, nodes it does not select, keys it set earlier, old pods in batches ---------------

def test_foreign_configmap_is_refused_unless_adopted_and_its_owners_are_kept(cluster, ansible, namespace):
    owner = json.loads(cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-settings"}},
        _preload_content=False).data)
    cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nvidia-device-plugin-config", "labels": {"app.kubernetes.io/managed-by": "Helm"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "team-settings",
                                          "uid": owner["metadata"]["uid"]}]},
        "data": {"config.yaml": "someone else's"}})
    before = read_cm(cluster, namespace, "nvidia-device-plugin-config")
    mark = cluster.mark()
    run = ansible([dict(task(namespace, name="Check"), check_mode=True, ignore_errors=True),
                   dict(task(namespace), ignore_errors=True)])
    for name in ("Check", "Deploy"):
        res = run.result(name)
        assert res["failed"] and res["changed"] is False, res
        assert ("ConfigMap %s/nvidia-device-plugin-config exists and was not created by this module "
                "(owned by ConfigMap team-settings)" % namespace) in res["msg"], res["msg"]
        assert "adopt_configmap: true" in res["msg"]
    assert read_cm(cluster, namespace, "nvidia-device-plugin-config") == before
    assert not exists(cluster.apps.read_namespaced_daemon_set, "nvidia-device-plugin", namespace)
    if cluster.controlled:
        assert ds_writes(cluster, mark) == []

    run = ansible([task(namespace, name="Adopt", adopt_configmap=True)])
    assert run.rc == 0, run.output()
    cm = read_cm(cluster, namespace, "nvidia-device-plugin-config")
    ds = read_ds(cluster, namespace)
    assert json.loads(cm["data"]["config.yaml"])["version"] == "v1"
    # merged, not replaced: the earlier owner stays next to the DaemonSet
    assert [(r["kind"], r["name"]) for r in cm["metadata"]["ownerReferences"]] == [
        ("ConfigMap", "team-settings"), ("DaemonSet", "nvidia-device-plugin")]
    assert cm["metadata"]["ownerReferences"][1]["uid"] == ds["metadata"]["uid"]


def test_foreign_daemonset_is_refused_unless_adopted(cluster, ansible, namespace):
    """A DaemonSet of that name the module did not create (here one Helm made) is refused before any write, by
    state present and by state absent, unless adopt_daemonset: true, as a foreign ConfigMap is."""
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin"}
    read_out(cluster.apps.create_namespaced_daemon_set(namespace, {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin", "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            # a label no node carries: it runs nowhere, on any cluster
            "nodeSelector": {"kubehw-it/nowhere": cluster.unique_name("none")},
            "containers": [{"name": "plugin", "image": "registry.example/their-plugin:1"}]}}}},
        _preload_content=False))
    before = read_ds(cluster, namespace)
    mark = cluster.mark()
    run = ansible([dict(task(namespace, name="Check", wait="none"), check_mode=True, ignore_errors=True),
                   dict(task(namespace, wait="none"), ignore_errors=True),
                   dict(task(namespace, name="Remove", state="absent", wait="none"), ignore_errors=True)])
    for name, action in (("Check", "replace its pod template"), ("Deploy", "replace its pod template"),
                         ("Remove", "delete it")):
        res = run.result(name)
        assert res["failed"] and res["changed"] is False, res
        assert ("DaemonSet %s/nvidia-device-plugin exists and was not created by this module "
                "(labelled app.kubernetes.io/managed-by=Helm" % namespace) in res["msg"], res["msg"]
        assert "this task would %s" % action in res["msg"] and "adopt_daemonset: true" in res["msg"], res["msg"]
    # on any cluster: untouched (same generation, labels, annotations and spec; the DaemonSet controller writes its
    # status, and with it the resourceVersion, on its own time), and no ConfigMap made for it
    after = read_ds(cluster, namespace)
    for part in (lambda ds: ds["metadata"]["generation"], lambda ds: ds["metadata"].get("labels"),
                 lambda ds: ds["metadata"].get("annotations"), lambda ds: ds["spec"]):
        assert part(after) == part(before)
    assert not exists(cluster.core.read_namespaced_config_map, "nvidia-device-plugin-config", namespace)
    if cluster.controlled:
        assert ds_writes(cluster, mark) == []

    run = ansible([task(namespace, name="Adopt", adopt_daemonset=True, wait="none")])
    assert run.rc == 0, run.output()
    res = run.result("Adopt")
    assert res["changed"] is True
    assert any("was not created by this module; it is now managed by it" in w for w in res.get("warnings") or []), res
    assert read_ds(cluster, namespace)["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubehw.devices"


@pytest.mark.node_config({"pod_start_delay": 0.2, "nodes": [
    {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 4}},
    {"name": "cpu-1", "labels": {"example.com/pool": "cpu"}},
    {"name": "cpu-2", "labels": {"example.com/pool": "cpu"}},
]})
def test_rollout_over_zero_nodes_fails_naming_the_selection(cluster, ansible, namespace):
    # a node label no node of any cluster carries (a name of this test's own)
    selector = {"kubehw-it/pool": cluster.unique_name("none")}
    term = "kubehw-it/pool=%s" % selector["kubehw-it/pool"]
    run = ansible([
        dict(task(namespace, name="Nowhere", node_selector=selector), ignore_errors=True),
        dict(task(namespace, name="Nowhere by resource", wait="resource", node_selector=selector),
             ignore_errors=True),
        task(namespace, name="Allowed", node_selector=selector, allow_empty_rollout=True),
    ])
    # how many nodes the cluster has: the stand-in's 3 here, but other tests add and remove nodes
    counted = r"\(0 of 3 nodes\)" if cluster.controlled else r"\(0 of \d+ nodes\)"
    for name in ("Nowhere", "Nowhere by resource"):
        res = run.result(name)
        assert res["failed"], res
        assert "DaemonSet %s/nvidia-device-plugin selects no node (desiredNumberScheduled is 0)" % namespace \
            in res["msg"], res["msg"]
        assert re.search(re.escape("nodeSelector %s " % term) + counted, res["msg"]), res["msg"]
        assert "allow_empty_rollout: true" in res["msg"]
    res = run.result("Allowed")
    assert not res["failed"] and res["rollout"]["desired"] == 0
    assert any("selects no node" in w for w in res.get("warnings") or []), res


def test_dropped_labels_and_annotations_are_removed_and_others_kept(cluster, ansible, namespace):
    run = ansible([task(namespace, wait="none", labels={"team": "gpu", "tier": "gold"}, annotations={"note": "a"})])
    assert run.rc == 0, run.output()
    cluster.apps.patch_namespaced_daemon_set("nvidia-device-plugin", namespace, {
        "metadata": {"labels": {"someone": "else"}, "annotations": {"other.example.com/keep": "yes"}}})
    run = ansible([task(namespace, name="Drop", wait="none", labels={"team": "gpu"}),
                   task(namespace, name="Again", wait="none", labels={"team": "gpu"})])
    assert run.rc == 0, run.output()
    res = run.result("Drop")
    assert res["changed"] is True
    assert "/metadata/labels/tier" in res["changed_paths"] and "/metadata/annotations/note" in res["changed_paths"]
    meta = read_ds(cluster, namespace)["metadata"]
    assert meta["labels"].get("team") == "gpu" and "tier" not in meta["labels"], meta["labels"]
    assert "note" not in meta["annotations"], meta["annotations"]
    assert meta["labels"]["someone"] == "else" and meta["annotations"]["other.example.com/keep"] == "yes"
    assert run.result("Again")["changed"] is False


@pytest.mark.node_config({"pod_start_delay": 0.2, "nodes": [
    {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 4}},
    {"name": "gpu-2", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 8}},
    {"name": "gpu-3", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
     "inventory": {"nvidia.com/gpu": 8}},
]})
def test_delete_old_pods_goes_in_batches_of_max_unavailable(cluster, ansible, namespace):
    cluster.require_controlled("injects a pod start failure and reads the request log")
    strategy = {"type": "OnDelete"}
    run = ansible([task(namespace, update_strategy=strategy)])
    assert run.rc == 0, run.output()
    # gpu-1's replacement never becomes ready: a batch of one must stop there
    cluster.controls.fail_pod_start("gpu-1")
    mark = cluster.mark()
    run = ansible([dict(task(namespace, name="One at a time", update_strategy=strategy, device_id_strategy="index",
                             delete_old_pods=True, wait_timeout=5), ignore_errors=True)])
    res = run.result("One at a time")
    assert res["failed"] and "Timed out after 5s" in res["msg"], res
    deleted = [p for m, p in ds_writes(cluster, mark) if m == "DELETE" and "/pods/" in p]
    assert len(deleted) == 1, deleted
    pods = json.loads(cluster.core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    old = [p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["pod-template-generation"] == "1"
           and not p["metadata"].get("deletionTimestamp")]
    assert sorted(old) == ["gpu-2", "gpu-3"], old

    cluster.controls.allow_pod_start("gpu-1")
    mark = cluster.mark()
    run = ansible([task(namespace, name="Two at a time", update_strategy=dict(strategy, max_unavailable=2),
                        device_id_strategy="index", delete_old_pods=True)])
    assert run.rc == 0, run.output()
    res = run.result("Two at a time")
    assert len(res["deleted_pods"]) == 2 and res["rollout"]["done"], res
    requests = cluster.requests(mark)
    deletes = [i for i, r in enumerate(requests) if r["method"] == "DELETE" and "/pods/" in r["path"]]
    # one batch of two: sent back to back, with no wait for a replacement between them (the request log's
    # order, not wall time, which a loaded machine stretches)
    assert len(deletes) == 2, deletes
    between = requests[deletes[0] + 1:deletes[1]]
    assert not [r for r in between if "/pods" in r["path"] or "/daemonsets" in r["path"]], between


@pytest.mark.floor
def test_missing_namespace_is_named(cluster, ansible):
    missing = "dp-missing-%s" % uuid.uuid4().hex[:6]
    mark = cluster.mark()
    run = ansible([dict(task(missing), ignore_errors=True)])
    res = run.result("Deploy")
    assert res["failed"] and res["changed"] is False
    if least_privilege():
        # RBAC answers first: the identity has no grant in a namespace that does not exist
        assert res["status"] == 403, res
        return
    assert res["msg"].startswith('Namespace "%s" does not exist: create it first, or set namespace' % missing), res
    if cluster.controlled:
        assert [w["method"] for w in cluster.writes(mark)] == ["POST"]


@pytest.mark.node_config({"pod_start_delay": 0.2, "nodes": [
    {"name": "arc-1", "labels": {"kubernetes.io/arch": "amd64", "intel.feature.node.kubernetes.io/gpu": "true"},
     "inventory": {"gpu.intel.com/xe": 1}},
    {"name": "flex-1", "labels": {"kubernetes.io/arch": "amd64", "feature.node.kubernetes.io/pci-0380_8086.present": "true"},
     "inventory": {"gpu.intel.com/i915": 2}},
    {"name": "cpu-1", "labels": {"kubernetes.io/arch": "amd64"}},
]})
def test_intel_gpu_waits_for_i915_or_xe_on_stock_nfd_labels(cluster, ansible, namespace):
    cluster.require_controlled("needs nodes with Intel GPU inventory")
    run = ansible([task(namespace, preset="intel_gpu", wait="resource", wait_timeout=30)])
    assert run.rc == 0, run.output()
    res = run.result("Deploy")
    assert res["resources"] == ["gpu.intel.com/i915", "gpu.intel.com/xe"]
    # the xe node selected by Intel's NFD rule label, the i915 one by stock NFD's class 0380 label
    assert sorted(res["nodes"]) == ["arc-1", "flex-1"]
    assert res["nodes"]["arc-1"]["capacity"]["gpu.intel.com/xe"] == 1 and res["nodes"]["arc-1"]["resource_ready"]
    assert res["nodes"]["flex-1"]["capacity"]["gpu.intel.com/i915"] == 2 and res["nodes"]["flex-1"]["resource_ready"]


def test_device_plugin_role_passes_the_runtime_class(cluster, ansible, namespace):
    """The role's device_plugin_runtime_class_name: unset takes the nvidia preset's nvidia, "" sets none."""
    def role(name, **variables):
        variables = dict(variables, device_plugin_namespace=namespace, device_plugin_wait="none")
        return {"name": name, "ansible.builtin.include_role": {"name": "kubehw.devices.device_plugin"},
                "vars": variables}

    mark = cluster.mark()
    run = ansible([role("Default"), {"name": "Show default", "ansible.builtin.debug": {"var": "device_plugin_result"}},
                   role("Emptied", device_plugin_runtime_class_name=""),
                   {"name": "Show emptied", "ansible.builtin.debug": {"var": "device_plugin_result"}}],
                  check=True)
    assert run.rc == 0, run.output()
    default = run.result("Show default")["device_plugin_result"]["daemonset"]
    emptied = run.result("Show emptied")["device_plugin_result"]["daemonset"]
    assert default["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in emptied["spec"]["template"]["spec"]
    if cluster.controlled:
        assert cluster.writes(mark) == []


def test_a_dra_driver_publishing_the_same_gpus_on_the_plugins_nodes_is_refused_before_any_write(
        cluster, ansible, namespace):
    """The other direction of dra_driver_deploy's guard: gpu.nvidia.com already publishes GPUs (a ResourceSlice, as
    its kubelet plugin writes it) on a node the NVIDIA device plugin would run on. The plugin is refused, naming the
    driver and the node, and nothing is written; a node of the same driver outside the plugin's selection does not
    count; allow_dra_overlap: true deploys it (check mode here)."""
    pool = "kubehw-it.example.com/dp-pool"
    served, elsewhere = cluster.create_nodes([
        {"what": "dra-gpu", "labels": {pool: namespace, "nvidia.com/gpu.present": "true"}},
        {"what": "dra-other", "labels": {pool: "other-" + namespace, "nvidia.com/gpu.present": "true"}}])
    from kubernetes import client
    custom = client.CustomObjectsApi(cluster.api_client)
    for node in (served, elsewhere):
        name = cluster.unique_name("slice")
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}})
        cluster.on_close("delete ResourceSlice %s" % name, functools.partial(
            custom.delete_cluster_custom_object, "resource.k8s.io", "v1", "resourceslices", name))
    mark = cluster.mark()
    run = ansible([dict(task(namespace, wait="none", node_selector={pool: namespace}), ignore_errors=True),
                   dict(task(namespace, name="Anyway", wait="none", node_selector={pool: namespace},
                             allow_dra_overlap=True), check_mode=True)])
    res = run.result("Deploy")
    assert res["failed"] and res["changed"] is False, res
    assert ("Refusing to deploy the device plugin %s/nvidia-device-plugin: the DRA driver gpu.nvidia.com publishes "
            "devices on %s (2 device(s) in 1 ResourceSlice(s)), node(s) this plugin would run on"
            % (namespace, served)) in res["msg"], res["msg"]
    assert elsewhere not in res["msg"] and "allow_dra_overlap: true" in res["msg"]
    assert not exists(cluster.apps.read_namespaced_daemon_set, "nvidia-device-plugin", namespace)
    if cluster.controlled:
        assert ds_writes(cluster, mark) == []
    anyway = run.result("Anyway")
    assert not anyway.get("failed") and anyway["changed"] is True, anyway


def test_the_node_list_filtered_by_the_templates_label_selector_keeps_every_node_the_template_selects(cluster):
    """The deploy modules list (and watch) only the nodes a label selector made from the template picks
    (ds_rollout.node_label_selector()); the real apiserver parses and applies it. Against nodes of this test's own, for
    each kind of selection: every node node_matches() selects is in the filtered list, and where the selector says
    the whole selection (no Gt, several terms or matchFields) the list is exactly those nodes."""
    from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout

    run = cluster.unique_name("sel")
    key = "kubehw-it.example.com/%s" % run
    rows = [{"what": "sel", "labels": dict({key: "gpu"}, **extra)} for extra in (
        {}, {"gen": "3"}, {"gen": "1", "cordon": "y"}, {"gpu.example.com/family": "a"},
        {"gpu.example.com/family": "b", "gen": "4"})] + [{"what": "sel", "labels": {key: "cpu", "gen": "5"}}]
    names = cluster.create_nodes(rows)
    stored = [cluster.core.read_node(name).to_dict() for name in names]
    nodes = [{"metadata": {"name": n["metadata"]["name"], "labels": n["metadata"]["labels"]}} for n in stored]

    def affinity(*exprs):
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": list(exprs)}]}}}
    specs = [
        ({"nodeSelector": {key: "gpu"}}, True),
        ({"nodeSelector": {key: "gpu"}, "affinity": affinity(
            {"key": "gpu.example.com/family", "operator": "In", "values": ["a", "b"]},
            {"key": "cordon", "operator": "DoesNotExist"})}, True),
        ({"affinity": affinity({"key": key, "operator": "NotIn", "values": ["cpu"]},
                               {"key": key, "operator": "Exists"})}, True),
        ({"nodeSelector": {key: "gpu"}, "affinity": affinity({"key": "gen", "operator": "Gt", "values": ["2"]})},
         False),
    ]
    mine = set(names)
    for spec, whole in specs:
        selector = ds_rollout.node_label_selector(spec)
        listed = set(n.metadata.name for n in cluster.core.list_node(label_selector=selector).items) & mine
        selected = set(n["metadata"]["name"] for n in nodes if ds_rollout.node_matches(spec, n))
        assert selected and selected <= listed, (selector, selected, listed)
        if whole:
            assert listed == selected, (selector, selected, listed)
        else:
            assert len(listed) > len(selected), (selector, selected, listed)
