# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.dra_driver_deploy against the suite's own real control plane (or the cluster of KUBECONFIG).

On a cluster of KUBECONFIG (resource.k8s.io/v1, the DRA example driver's image pullable, DRA enabled on the
kubelets) the first test deploys the example driver on the nodes that run it and checks what they publish; the exact
device counts, the request log, the timeout on a node without devices and the fault injection need the kubelet
stand-in's plugins (a real example driver publishes NUM_DEVICES on every node), so those parts run only on the
suite's own control plane. A cluster of KUBECONFIG must not run the example driver already: its DeviceClass
gpu.example.com and RBAC would be someone else's, which the module leaves alone (and the test expects to create).

The second test runs the module as the shipped least-privilege identity (marker least_privilege_identity), which
deploys with rbac: existing on the driver RBAC the administrator made (the namespace fixture). The first runs as
the administrator, because it proves rbac: create (the module making the driver's ServiceAccount, ClusterRole and
binding), which needs rights the identity must not hold; with KUBEHW_IDENTITY=least-privilege it passes as the
identity too, with rbac: existing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import create_objects, least_privilege, rbac_objects
from tests.support.k8s_objects import read_out

MODULE = "kubehw.devices.dra_driver_deploy"
DS = "dra-example-driver-kubeletplugin"
OWN_NAME = "team-a-dra-driver"
# how long the helper thread waits for the module to start watching (the play starts a Python per task)
PLAYBOOK_WAIT = 240
GPU_LABEL = {"kubehw.devices/it-dra-gpu": "true"}
NODES = {"pod_start_delay": 0.1, "nodes": [
    {"name": "gpu-1", "labels": GPU_LABEL, "inventory": {"example.com/gpu": 2}},
    {"name": "gpu-2", "labels": GPU_LABEL, "inventory": {"example.com/gpu": 4}},
]}


@pytest.fixture
def namespace(cluster):
    name = "dra-%s" % uuid.uuid4().hex[:8]
    cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if least_privilege():
        # What playbooks/rbac.yml makes for the example driver with kubehw_rbac_dra_namespace set to this namespace,
        # created by the administrator: the identity's Role there, and the driver's own ServiceAccount, ClusterRole
        # and binding, which the identity may not create (it holds no RBAC rights), so it deploys with rbac: existing.
        # The driver's ClusterRoleBinding has the DaemonSet's cluster-wide name and exists already (the run's identity
        # made it for kubehw-dra-drivers), so this namespace's account gets a binding of the test's own.
        prefix = cluster.unique_name("rbac")
        # OWN_NAME: a driver deployed under a name of its own, declared in kubehw_rbac_dra_drivers.
        docs = [d for d in rbac_objects(kubehw_rbac_name=prefix, kubehw_rbac_dra_namespace=name,
                                        kubehw_rbac_dra_presets=["example"],
                                        kubehw_rbac_dra_drivers=[{"preset": "example", "name": OWN_NAME}])
                if d["metadata"]["name"] in (prefix + "-dra-drivers", DS, OWN_NAME)]
        for doc in docs:
            if doc["kind"] == "ClusterRoleBinding":
                doc["metadata"]["name"] = "%s-%s" % (prefix, doc["metadata"]["name"])
            elif doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == OWN_NAME:
                doc["metadata"]["name"] = "%s-%s" % (prefix, OWN_NAME)
        for doc in docs:
            if doc["kind"] == "ClusterRoleBinding" and doc["roleRef"]["name"] == OWN_NAME:
                doc["roleRef"]["name"] = "%s-%s" % (prefix, OWN_NAME)
        create_objects(cluster, docs)
    yield name
    try:
        cluster.core.delete_namespace(name)
    except ApiException:
        pass


def rbac_mode():
    """The driver's own RBAC: the module creates it as the admin; the least-privilege identity, which holds no RBAC
    rights, uses what the administrator made (the namespace fixture)."""
    return "existing" if least_privilege() else "create"


def task(namespace, title="Deploy", **params):
    args = dict(preset="example", namespace=namespace, wait_timeout=60, rbac=rbac_mode())
    args.update(params)
    return {"name": title, MODULE: args, "register": "out"}


def exists(fn, *args):
    try:
        read_out(fn(*args, _preload_content=False))
        return True
    except ApiException as err:
        if err.status == 404:
            return False
        raise


def device_class_exists(cluster, name):
    return exists(client.CustomObjectsApi(cluster.api_client).get_cluster_custom_object,
                  "resource.k8s.io", "v1", "deviceclasses", name)


@pytest.mark.node_config(NODES)
@pytest.mark.floor
def test_rollout_waits_for_devices_rerun_and_check_mode_write_nothing_absent_twice(cluster, ansible, namespace):
    run = ansible([task(namespace, min_count=2)])
    res = run.result("Deploy")
    assert not res["failed"], run.output()
    assert res["changed"] and res["waited_for"] == "devices"
    assert res["driver"] == "gpu.example.com" and res["device_classes"] == ["gpu.example.com"]
    driver_rbac = ["ServiceAccount/" + DS, "ClusterRole/" + DS, "ClusterRoleBinding/" + DS]
    created_rbac = driver_rbac if rbac_mode() == "create" else []
    assert set(res["changed_objects"]) == set(created_rbac + ["DeviceClass/gpu.example.com", "DaemonSet/" + DS])
    assert res["nodes"], "no node runs the kubelet plugin"
    for node in res["nodes"]:
        assert node["driver"] == "gpu.example.com"
        assert node["device_count"] == len(node["devices"]) >= 2
        assert node["pools"] == [node["name"]]      # one pool per node, named after it
    assert device_class_exists(cluster, "gpu.example.com")
    account = json.loads(cluster.core.read_namespaced_service_account(DS, namespace, _preload_content=False).data)
    assert account["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubehw.devices"
    if rbac_mode() == "create":
        binding = json.loads(cluster.rbac.read_cluster_role_binding(DS, _preload_content=False).data)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": DS, "namespace": namespace}]
    if cluster.controlled:
        assert [(n["name"], n["devices"]) for n in res["nodes"]] == [
            ("gpu-1", ["gpu-0", "gpu-1"]), ("gpu-2", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])]
        # ResourceSlices are read with the driver's field selector: one list, then (if needed) a watch, no polling
        slices = [r for r in cluster.requests() if r["path"].endswith("/resourceslices")]
        assert all(r["query"].get("fieldSelector") == "spec.driver=gpu.example.com" for r in slices), slices
        assert len([r for r in slices if not r["query"].get("watch")]) == 1, slices

    mark = cluster.mark()
    run = ansible([task(namespace, "Again", min_count=2),
                   dict(task(namespace, "Predict", env={"NUM_DEVICES": "2"}), check_mode=True)], diff=True)
    again, predict = run.result("Again"), run.result("Predict")
    assert not again["failed"] and not again["changed"], run.output()
    assert again["changed_objects"] == [] and "diff" not in again
    assert len(again["nodes"]) == len(res["nodes"])
    assert not predict["failed"] and predict["changed"], run.output()
    assert predict["changed_objects"] == ["DaemonSet/" + DS] and predict["waited_for"] == "none"
    assert "/spec/template/spec/containers/0/env/7/value" in predict["changed_paths"]  # NUM_DEVICES
    after = predict["diff"][0]["after"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "NUM_DEVICES", "value": "2"} in after
    if cluster.controlled:
        assert cluster.writes(mark) == []

    # a real kubelet removes a stopped plugin's slices only after the plugin's pod has ended: the removal waits for it
    mark = cluster.mark()
    run = ansible([task(namespace, "Remove", state="absent", wait_timeout=180),
                   task(namespace, "Remove again", state="absent")])
    first, second = run.result("Remove"), run.result("Remove again")
    assert first["changed"] and not first["failed"], run.output()
    assert first["waited_for"] == "devices" and second["waited_for"] == "none"
    assert not second["changed"] and not second.get("warnings"), run.output()     # no node publishes any more
    if cluster.controlled:
        slices = [r for r in cluster.requests(mark) if r["path"].endswith("/resourceslices")]
        # the removal: one list, then a watch while a node still publishes; the rerun, which deletes nothing: one
        # list, to warn if one did. No polling.
        assert len([r for r in slices if not r["query"].get("watch")]) == 2, slices
    # when the removal returns, the nodes its pods ran on publish nothing of the driver any more
    left = json.loads(client.CustomObjectsApi(cluster.api_client).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector="spec.driver=gpu.example.com",
        _preload_content=False).data)["items"]
    assert [s for s in left if s["spec"].get("nodeName") in [n["name"] for n in res["nodes"]]] == []
    assert set(first["changed_objects"]) == set(["DaemonSet/" + DS, "DeviceClass/gpu.example.com"] + created_rbac)
    assert not second["changed"] and not second["failed"] and second["changed_objects"] == []
    assert not exists(cluster.apps.read_namespaced_daemon_set, DS, namespace)
    # the module removes the driver's RBAC it made (rbac: create), and leaves the administrator's (existing) alone
    made = rbac_mode() == "create"
    assert exists(cluster.rbac.read_cluster_role, DS) is not made
    assert exists(cluster.rbac.read_cluster_role_binding, DS) is not made
    assert exists(cluster.core.read_namespaced_service_account, DS, namespace) is not made
    assert not device_class_exists(cluster, "gpu.example.com")


@pytest.mark.node_config({"pod_start_delay": 0.1, "nodes": [
    {"name": "gpu-1", "labels": GPU_LABEL, "inventory": {"example.com/gpu": 2}},
    {"name": "cpu-1"},
]})
@pytest.mark.least_privilege_identity
@pytest.mark.floor
def test_error_event_mid_wait_then_timeout_names_each_node_and_what_is_missing(cluster, ansible, namespace):
    cluster.require_controlled("changes a node's devices under its plugin, injects a watch ERROR event, and runs the "
                               "plugin on a node without devices")
    sim = cluster.controls
    watches_path = "/apis/resource.k8s.io/v1/resourceslices"

    def watches():
        return [r for r in list(sim.requests) if r["path"] == watches_path and r["query"].get("watch")]

    # The first watch on ResourceSlices answers one ERROR event (410 Expired). gpu-1 publishes 2 devices and the
    # task wants 3: once the wait relisted and watches again, gpu-1 gets a third GPU, which its plugin publishes
    # as generation 2 of its pool; the wait must see that through the new watch.
    sim.inject_fault("GET", watches_path + "$", status="watch-expired")

    def add_a_gpu():
        deadline = time.monotonic() + PLAYBOOK_WAIT
        while len(watches()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        sim.set_inventory("gpu-1", "example.com/gpu", 3)

    helper = threading.Thread(target=add_a_gpu, daemon=True)
    helper.start()
    run = ansible([
        dict(task(namespace, "Missing account", rbac="existing", name="no-such-driver"), ignore_errors=True),
        task(namespace, "GPU nodes", node_selector=GPU_LABEL, min_count=3),
        # the rollout to every node first, with the usual margin (on a loaded machine it may take longer than the
        # timeout below); then the same DaemonSet, already rolled out, so the 5 s are the devices wait alone
        task(namespace, "Roll out to all nodes", wait="rollout"),
        dict(task(namespace, "All nodes", min_count=4, wait_timeout=5), ignore_errors=True),
        task(namespace, "Remove", state="absent"),
        # a driver under a name of its own: the shipped RBAC grants it when kubehw_rbac_dra_drivers declares it
        task(namespace, "Own name", name=OWN_NAME, wait="none", device_classes=False),
        task(namespace, "Own name removed", name=OWN_NAME, state="absent", device_classes=False),
    ])
    helper.join(5)
    missing = run.result("Missing account")
    assert missing["failed"] and not missing["changed"], run.output()
    if least_privilege():
        # the shipped RBAC names only the presets' DaemonSets and accounts: a driver of another name is refused
        assert 'serviceaccounts "no-such-driver" is forbidden' in missing["msg"], missing["msg"]
    else:
        assert 'ServiceAccount "%s/no-such-driver" does not exist, and rbac is existing' % namespace in missing["msg"]
    assert not exists(cluster.apps.read_namespaced_daemon_set, "no-such-driver", namespace)

    gpu = run.result("GPU nodes")
    assert not gpu["failed"], run.output()
    assert [(n["name"], n["devices"]) for n in gpu["nodes"]] == [("gpu-1", ["gpu-0", "gpu-1", "gpu-2"])]
    seen = watches()
    assert len(seen) >= 2, seen     # the one answered with the ERROR event, and the one after the relist
    assert all(r["query"].get("fieldSelector") == "spec.driver=gpu.example.com" for r in seen)

    assert run.result("Roll out to all nodes")["changed"], run.output()
    timed_out = run.result("All nodes")
    assert not timed_out["changed"], run.output()
    assert timed_out["failed"], run.output()
    msg = timed_out["msg"]
    assert ("Timed out after 5s waiting for the nodes running DaemonSet %s/%s to publish ResourceSlices of driver "
            "gpu.example.com with at least 4 device(s) each" % (namespace, DS)) in msg, msg
    assert "nodes without enough devices: cpu-1 (no ResourceSlice), gpu-1 (3 of 4 devices)" in msg, msg
    assert [(n["name"], n["device_count"]) for n in timed_out["nodes"]] == [("cpu-1", 0), ("gpu-1", 3)]
    assert run.result("Remove")["changed"]
    own = run.result("Own name")
    assert own["changed"] and not own.get("failed"), run.output()
    assert run.result("Own name removed")["changed"], run.output()
    assert not exists(cluster.apps.read_namespaced_daemon_set, OWN_NAME, namespace)


@pytest.mark.node_config(NODES)
def test_absent_with_a_kubelet_down_deletes_everything_times_out_naming_the_node_that_still_publishes_and_a_rerun_warns(
        cluster, ansible, namespace):
    cluster.require_controlled("stops a node's kubelet, which then leaves its ResourceSlices as they are")
    run = ansible([task(namespace)])
    assert not run.result("Deploy")["failed"], run.output()
    cluster.controls.set_node_unreachable("gpu-2")
    try:
        run = ansible([dict(task(namespace, "Remove", state="absent", wait_timeout=5), ignore_errors=True),
                       task(namespace, "Remove again", state="absent", wait_timeout=5),
                       task(namespace, "Remove without waiting for devices", state="absent", wait="rollout")])
    finally:
        cluster.controls.set_node_unreachable("gpu-2", False)
    removed = run.result("Remove")
    assert removed["failed"] and removed["changed"], run.output()
    assert removed["msg"].startswith(
        "Timed out after 5s waiting for the nodes that ran DaemonSet %s/%s to stop publishing ResourceSlices of driver "
        "gpu.example.com: gpu-2 (4 device(s) in 1 ResourceSlice(s)). " % (namespace, DS)), removed["msg"]
    # gpu-1's kubelet removed its slice; everything was deleted before the wait
    assert not exists(cluster.apps.read_namespaced_daemon_set, DS, namespace)
    assert not device_class_exists(cluster, "gpu.example.com")
    # a rerun finds nothing to delete and so waits for nothing, but names the node that still publishes
    again = run.result("Remove again")
    assert not again["failed"] and not again["changed"] and again["waited_for"] == "none", run.output()
    assert again.get("warnings") == [
        "No DaemonSet %s/%s was left to delete, so nothing was waited for, but nodes still publish ResourceSlices of "
        "driver gpu.example.com: gpu-2 (4 device(s) in 1 ResourceSlice(s)). A node's kubelet removes them once the "
        "driver's plugin there has stopped (a node whose kubelet was down keeps them until it runs again); another "
        "deployment of the driver publishes its own" % (namespace, DS)], run.output()
    again = run.result("Remove without waiting for devices")
    assert not again["failed"] and not again["changed"] and again["waited_for"] == "none", run.output()
    assert not again.get("warnings"), run.output()
