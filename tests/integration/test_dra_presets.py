# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA driver presets against the cluster's own controllers (the suite's own real control plane, or the cluster of KUBECONFIG).

What only a real control plane shows of the presets, proved here with the real DaemonSet controller, scheduler
and authorizer when KUBECONFIG names one (../shared/k8s, no kubelet needed), and on the suite's own control plane:

- each preset's DaemonSet gets pods exactly on the nodes labelled (and tainted) as upstream expects, and on no
  other node: the DaemonSet controller decides, from nodes of the test's own that a kubelet stand-in of the test's
  own keeps Ready (cluster.kubelets);
- a DRA driver next to a device plugin serving the same GPUs on the same node is refused with nothing written;
- the example driver's own service account may do what the driver does (SubjectAccessReview for each right, the
  Kubernetes 1.36 per-node claim-status verbs included, and real requests with its TokenRequest token);
- ``wait: devices`` finishes on a mixed cluster, where only the Intel or AMD node runs the driver;
- the shared rollout wait: nodes still joining (their kubelet registered them Ready False), pods the DaemonSet
  controller cannot create, a rolling update stuck behind a node that is down.

Each test uses names of its own (nodes, namespace, driver name) and removes the driver's cluster-scoped objects,
so it runs beside other tests and on a shared cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import threading
import time

import pytest
import yaml
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.rest import ApiException

from ansible_collections.kubehw.devices.plugins.module_utils._daemonset_rollout import pod_node
from tests.integration.conftest import wait_for
from tests.support.k8s_objects import now_rfc3339, read_out
from tests.support.node_configs import NO_NODES

MODULE = "kubehw.devices.dra_driver_deploy"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NOT_READY = "node.kubernetes.io/not-ready"
# the tests make nodes of their own, with a kubelet stand-in of their own where the nodes need kubelets
pytestmark = pytest.mark.node_config(NO_NODES)


def kubelet_nodes(cluster, nodes, pod_start_delay=0.2):
    """Nodes of the test's own with a kubelet stand-in of the test's own (cluster.kubelets), which keeps them Ready and
    runs their pods. `nodes`: rows of a node configuration (name, labels, taints, inventory, starting); a starting
    node registers Ready False, as a kubelet still joining does, until standin.set_node_starting(name, False); the
    others are waited for until schedulable (the node lifecycle controller has lifted the not-ready taint a new node
    gets). Returns (stand-in, names in order)."""
    standin, names = cluster.kubelets(nodes, pod_start_delay=pod_start_delay)
    standin.wait_schedulable(timeout=60, names=[n for n, node in zip(names, nodes) if not node.get("starting")])
    return standin, names


def ready_later(standin, node, seconds):
    """The node's kubelet finishes joining after seconds: it posts Ready and runs its pods from then on."""
    timer = threading.Timer(seconds, standin.set_node_starting, (node, False))
    timer.daemon = True
    timer.start()
    return timer


def daemonset_pods(cluster, namespace, name):
    pods = json.loads(cluster.core.list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/name=%s" % name, _preload_content=False).data)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def deploy(ansible, namespace, name, title="Deploy", **params):
    args = dict(namespace=namespace, name=name, device_classes=False, wait="none", wait_timeout=60)
    args.update(params)
    run = ansible([{"name": title, MODULE: args, "register": "out"}])
    return run, run.result(title)


def deploy_beside(action, ansible, namespace, name, **params):
    """deploy() while ``action`` runs in a thread of its own (what the cluster does meanwhile); joined after."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    try:
        return deploy(ansible, namespace, name, **params)
    finally:
        thread.join(60)


def remove(ansible, namespace, name, preset):
    run = ansible([{"name": "Remove", MODULE: dict(preset=preset, namespace=namespace, name=name, state="absent",
                                                   device_classes=False, wait="none"), "register": "out"}])
    assert not run.result("Remove")["failed"], run.output()


# -- each preset runs on the nodes upstream labels, and on no other ---------------------------------------------

# (preset, extra options, nodes: (what, labels, taints, expected to run the plugin))
SELECTION = {
    # values.yaml kubeletPlugin.affinity and tolerations of kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1
    "nvidia": ({}, [
        ("nfd-vga", {"feature.node.kubernetes.io/pci-0300_10de.present": "true"}, [GPU_TAINT], True),
        ("nfd-3d", {"feature.node.kubernetes.io/pci-0302_10de.present": "true"}, [GPU_TAINT], True),
        ("gfd", {"nvidia.com/gpu.present": "true"}, [GPU_TAINT], True),
        ("cpu", {}, [], False),
        # labelled, but tainted by someone else's key the preset does not tolerate
        ("reserved", {"nvidia.com/gpu.present": "true"}, [{"key": "team", "value": "a", "effect": "NoSchedule"}],
         False)]),
    # deployments/gpu/overlays/nfd_labeled_nodes of intel-resource-drivers-for-kubernetes gpu-v0.11.0
    "intel": ({}, [
        ("arc", {"intel.feature.node.kubernetes.io/gpu": "true"}, [], True),
        ("cpu", {}, [], False),
        ("nv", {"nvidia.com/gpu.present": "true"}, [], False)]),
    # dra-example-driver v0.4.0 runs on every node; node_selector narrows it
    "example": ({"node_selector": {"kubehw-it.example.com/dra-example": "yes"}}, [
        ("chosen", {"kubehw-it.example.com/dra-example": "yes"}, [], True),
        ("other", {}, [], False)]),
}


@pytest.mark.parametrize("preset", sorted(SELECTION))
def test_each_presets_daemonset_runs_on_the_nodes_upstream_labels_and_not_others(cluster, ansible, preset):
    options, layout = SELECTION[preset]
    rows = [{"name": what, "labels": labels, "taints": taints} for what, labels, taints, _runs in layout]
    namespace, name = cluster.namespace(), cluster.unique_name("dra-" + preset)
    _standin, nodes = kubelet_nodes(cluster, rows)
    wanted = sorted(n for n, (_w, _l, _t, runs) in zip(nodes, layout) if runs)
    # a device plugin of a real cluster may serve GPU-labelled nodes: not this test's point
    run, res = deploy(ansible, namespace, name, preset=preset, allow_device_plugin_overlap=True, **options)
    try:
        assert not res["failed"], run.output()
        # the DaemonSet controller makes one pod per selected node; give it time to reach every node
        mine = set(nodes)

        def placed():
            on = sorted(pod_node(p) for p in daemonset_pods(cluster, namespace, name) if pod_node(p) in mine)
            return on if on == wanted else None

        wait_for(placed, timeout=60, what="pods of %s on exactly %s" % (name, ", ".join(wanted)))
        time.sleep(2)   # and no more come: the nodes left out stay without a pod
        assert sorted(pod_node(p) for p in daemonset_pods(cluster, namespace, name)
                      if pod_node(p) in mine) == wanted
        ds = json.loads(cluster.apps.read_namespaced_daemon_set(name, namespace, _preload_content=False).data)
        assert ds["spec"]["template"]["spec"]["serviceAccountName"] == name
    finally:
        remove(ansible, namespace, name, preset)


# -- a DRA driver next to a serving device plugin --------------------------------------------------------------

def test_a_dra_driver_next_to_a_serving_nvidia_device_plugin_is_refused_with_nothing_written(cluster, ansible):
    namespace = cluster.namespace()
    plugin, driver = cluster.unique_name("nvdp"), cluster.unique_name("nvdra")
    label = {"kubehw-it.example.com/gpu-pool": plugin}
    rows = [{"name": "gpu", "labels": dict(label, **{"nvidia.com/gpu.present": "true"}), "taints": [GPU_TAINT]}]
    _standin, (node,) = kubelet_nodes(cluster, rows)
    run = ansible([{"name": "Plugin", "kubehw.devices.device_plugin_deploy": dict(
        preset="nvidia", namespace=namespace, name=plugin, node_selector=label, runtime_class_name="",
        wait="none"), "register": "out"}])
    assert not run.result("Plugin")["failed"], run.output()
    try:
        # running and ready: its kubelet writes it no more (which a watching observer, on another cluster, would count)
        wait_for(lambda: pods_ready_on(cluster, namespace, node), timeout=60,
                 what="the device plugin's pod running and ready on %s" % node)
        observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
        run, res = deploy(ansible, namespace, driver, preset="nvidia", node_selector=label, wait="devices")
        assert res["failed"] and not res["changed"], run.output()
        assert ("Refusing to deploy the DRA driver gpu.nvidia.com: the device plugin DaemonSet %s/%s (%s) serves "
                "nvidia.com/gpu" % (namespace, plugin, node)) in res["msg"], res["msg"]
        assert "allow_device_plugin_overlap: true" in res["msg"] and "Nothing was written" in res["msg"]
        assert observer.writes() == []
        with pytest.raises(ApiException) as err:
            read_out(cluster.apps.read_namespaced_daemon_set(driver, namespace, _preload_content=False))
        assert err.value.status == 404
    finally:
        ansible([{"name": "Plugin gone", "kubehw.devices.device_plugin_deploy": dict(
            preset="nvidia", namespace=namespace, name=plugin, state="absent", wait="none")}])


def static_manifest(namespace, name, pool):
    """NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml (the quick start's manifest) as it is, but
    for its namespace and name and a node selector that keeps it on this test's nodes: no labels on the DaemonSet,
    name: nvidia-device-plugin-ds only in its selector and pod template."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
                     "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {"name": "nvidia-device-plugin-ds"}}, "spec": {
                         "nodeSelector": pool,
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "priorityClassName": "system-node-critical",
                         "containers": [{
                             "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "name": "nvidia-device-plugin-ctr",
                             "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                             "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                             "volumeMounts": [{"name": "kubelet-device-plugins-dir",
                                               "mountPath": "/var/lib/kubelet/device-plugins"}]}],
                         "volumes": [{"name": "kubelet-device-plugins-dir", "hostPath": {
                             "path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}]}}}}


def test_nvidias_static_manifest_on_a_joining_node_is_recognised_before_any_write(cluster, ansible):
    """The quick start's device plugin carries none of the collection's labels, and the node has just been created:
    no kubelet has reported it Ready. Both DaemonSets would serve its GPUs once it joins: the driver is refused,
    naming the DaemonSet and the node, and nothing is written."""
    namespace, plugin, driver = cluster.namespace(), cluster.unique_name("nvdp-static"), cluster.unique_name("nvdra")
    # the quick start's plugin lives in a namespace of its own (kube-system upstream): the DaemonSet controller may
    # place its pod while the node's taints settle, which is not a write of the driver's task
    plugin_namespace = cluster.unique_name("plugin-ns")
    read_out(cluster.core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plugin_namespace}}, _preload_content=False))
    cluster.on_close("delete namespace %s" % plugin_namespace,
                     lambda: cluster.core.delete_namespace(plugin_namespace, _preload_content=False))
    pool = {"kubehw-it.example.com/gpu-pool": plugin}
    (node,) = cluster.create_nodes([{"what": "joining", "labels": dict(pool, **{"nvidia.com/gpu.present": "true"})}])
    # its kubelet reports it not ready yet (still installing the driver): the node keeps the not-ready taint
    read_out(cluster.core.patch_node_status(node, [{"op": "add", "path": "/status/conditions", "value": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime not ready"}]}],
        _preload_content=False))
    read_out(cluster.apps.create_namespaced_daemon_set(
        plugin_namespace, static_manifest(plugin_namespace, plugin, pool), _preload_content=False))
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver], by_watch=True)
    run, res = deploy(ansible, namespace, driver, preset="nvidia", node_selector=pool, wait="devices")
    assert res["failed"] and not res["changed"], run.output()
    assert ("Refusing to deploy the DRA driver gpu.nvidia.com: the device plugin DaemonSet %s/%s (%s) serves "
            "nvidia.com/gpu" % (plugin_namespace, plugin, node)) in res["msg"], res["msg"]
    assert observer.writes() == []


VENDOR_DAEMONSETS = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "vendor_daemonsets.yml")


def vendor_daemonset(source_prefix, namespace, name, pool):
    """A row of the vendor table (each from a published chart or manifest) as a DaemonSet of this test: its own
    namespace and name, kept on this test's nodes by a node selector, tolerating the GPU taint as upstream does."""
    with open(VENDOR_DAEMONSETS) as handle:
        (row,) = [r for r in yaml.safe_load(handle) if r["source"].startswith(source_prefix)]
    ds = copy.deepcopy(row["daemonset"])
    ds.update(apiVersion="apps/v1", kind="DaemonSet")
    ds["metadata"].update(namespace=namespace, name=name)
    pod = ds["spec"]["template"]["spec"]
    pod.update(nodeSelector=pool, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    return ds


def test_nvidias_feature_discovery_and_mps_daemon_pass_and_nvidias_own_driver_chart_is_a_second_installation(
        cluster, ansible):
    """The GPU Operator installed for NVIDIA's DRA driver (devicePlugin.enabled=false) still runs GPU feature
    discovery, and the device plugin chart runs GFD and the MPS control daemon, all from the device plugin's image:
    none hands out a GPU, so the driver is not refused for them (check mode, nothing written). NVIDIA's own DRA
    chart (nvcr.io/nvidia/k8s-dra-driver-gpu) on the same node is the same driver: refused, naming it."""
    namespace, driver = cluster.namespace(), cluster.unique_name("nvdra")
    pool = {"kubehw-it.example.com/gpu-pool": driver}
    (node,) = cluster.create_nodes([{"what": "gpu", "labels": dict(pool, **{"nvidia.com/gpu.present": "true"})}])
    helpers = [("NVIDIA/gpu-operator v26.7.0 assets/gpu-feature-discovery", "gfd-operator"),
               ("NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/templates/daemonset-gfd",
                "gfd-chart"),
               ("NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/templates/"
                "daemonset-mps-control", "mps-chart")]
    for source, name in helpers:
        read_out(cluster.apps.create_namespaced_daemon_set(
            namespace, vendor_daemonset(source, namespace, name, pool), _preload_content=False))
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
    run = ansible([{"name": "Deploy", MODULE: dict(namespace=namespace, name=driver, preset="nvidia",
                                                   node_selector=pool, device_classes=False, wait="none"),
                    "check_mode": True}])
    res = run.result("Deploy")
    assert not res.get("failed") and res["changed"], run.output()
    assert observer.writes() == []

    # NVIDIA's own chart (the table's row of nvidia-dra-driver-gpu v25.12.0 templates/kubeletplugin.yaml): its
    # kubelet plugin, in a namespace of its own
    twin_namespace = cluster.unique_name("nvidia-dra")
    twin = vendor_daemonset("NVIDIA/k8s-dra-driver-gpu v25.12.0", twin_namespace, "nvidia-dra-driver-gpu-kubelet-plugin",
                            pool)
    read_out(cluster.core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": twin_namespace}}, _preload_content=False))
    cluster.on_close("delete namespace %s" % twin_namespace,
                     lambda: cluster.core.delete_namespace(twin_namespace, _preload_content=False))
    read_out(cluster.apps.create_namespaced_daemon_set(twin_namespace, twin, _preload_content=False))
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
    run, res = deploy(ansible, namespace, driver, preset="nvidia", node_selector=pool)
    assert res["failed"] and not res["changed"], run.output()
    assert ("DaemonSet %s/nvidia-dra-driver-gpu-kubelet-plugin (%s) already runs it" % (twin_namespace, node)
            in res["msg"]), res["msg"]
    assert observer.writes() == []


# -- the example driver's service account can do what the driver does --------------------------------------------

# What dra-example-driver v0.4.0's kubelet plugin does with the API (internal, through k8s.io/dynamic-resource-
# allocation's kubeletplugin and resourceslice controller): publish and clean up its ResourceSlices, read claims
# and its node, write claim device status (1.36: per driver and node, the associated-node verbs).
DRIVER_RIGHTS = [
    ("get", "resource.k8s.io", "resourceslices", "", ""), ("list", "resource.k8s.io", "resourceslices", "", ""),
    ("watch", "resource.k8s.io", "resourceslices", "", ""), ("create", "resource.k8s.io", "resourceslices", "", ""),
    ("update", "resource.k8s.io", "resourceslices", "", ""), ("patch", "resource.k8s.io", "resourceslices", "", ""),
    ("delete", "resource.k8s.io", "resourceslices", "", ""),
    ("get", "resource.k8s.io", "resourceclaims", "", ""), ("list", "resource.k8s.io", "resourceclaims", "", ""),
    ("watch", "resource.k8s.io", "resourceclaims", "", ""),
    ("update", "resource.k8s.io", "resourceclaims", "status", ""),
    ("associated-node:update", "resource.k8s.io", "resourceclaims", "driver", "gpu.example.com"),
    ("associated-node:patch", "resource.k8s.io", "resourceclaims", "driver", "gpu.example.com"),
    ("get", "", "nodes", "", ""),
]
NOT_THE_DRIVERS = [
    # another driver's claims, claims on other nodes, and the nodes themselves are not the driver's to write
    ("associated-node:update", "resource.k8s.io", "resourceclaims", "driver", "gpu.nvidia.com"),
    ("arbitrary-node:update", "resource.k8s.io", "resourceclaims", "driver", "gpu.example.com"),
    ("update", "", "nodes", "", ""),
    ("delete", "resource.k8s.io", "deviceclasses", "", ""),
]


def access(cluster, user, groups, verb, group, resource, subresource, name, namespace):
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": user, "groups": groups, "resourceAttributes": {
            "verb": verb, "group": group, "resource": resource, "subresource": subresource, "name": name,
            "namespace": namespace if resource == "resourceclaims" else ""}}}
    answer = client.AuthorizationV1Api(cluster.api_client).create_subject_access_review(review, _preload_content=False)
    return json.loads(answer.data)["status"].get("allowed") is True


def test_the_example_drivers_service_account_may_do_what_the_driver_does(cluster, ansible):
    namespace, name = cluster.namespace(), cluster.unique_name("dra-rbac")
    # no node carries the label: the DaemonSet runs nowhere, only its RBAC matters here
    run, res = deploy(ansible, namespace, name, preset="example",
                      node_selector={"kubehw-it.example.com/nowhere": name})
    assert not res["failed"], run.output()
    try:
        user = "system:serviceaccount:%s:%s" % (namespace, name)
        groups = ["system:serviceaccounts", "system:serviceaccounts:%s" % namespace, "system:authenticated"]
        try:
            denied = [r for r in DRIVER_RIGHTS if not access(cluster, user, groups, *r, namespace=namespace)]
            reviewed = True
        except ApiException as err:
            if err.status != 404:
                raise
            reviewed = False    # the suite's own control plane serves no SubjectAccessReview: the real requests below only
        if reviewed:
            assert denied == [], denied
            allowed = [r for r in NOT_THE_DRIVERS if access(cluster, user, groups, *r, namespace=namespace)]
            assert allowed == [], allowed

        # real requests with the account's own token (TokenRequest), as the kubelet plugin makes them
        token = cluster.request_token(name, namespace, seconds=600)
        as_driver = kube_config.new_client_from_config(config_file=cluster.token_kubeconfig(token))
        try:
            custom = client.CustomObjectsApi(as_driver)
            _standin, (node,) = kubelet_nodes(cluster, [{"name": "example-node"}])
            read_out(client.CoreV1Api(as_driver).read_node(node, _preload_content=False))
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": "%s-%s" % (node, "gpu.example.com")[:63]},
                    "spec": {"driver": "gpu.example.com", "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                             "devices": [{"name": "gpu-0"}]}}
            created = json.loads(custom.create_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", body, _preload_content=False).data)
            try:
                listed = json.loads(custom.list_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", field_selector="spec.driver=gpu.example.com",
                    _preload_content=False).data)["items"]
                assert created["metadata"]["name"] in [s["metadata"]["name"] for s in listed]
                read_out(custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims",
                                                              _preload_content=False))
            finally:
                read_out(custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices",
                                                             created["metadata"]["name"], _preload_content=False))
            with pytest.raises(ApiException) as err:
                read_out(client.CoreV1Api(as_driver).delete_node(node, _preload_content=False))
            assert err.value.status == 403
        finally:
            as_driver.close()
    finally:
        remove(ansible, namespace, name, "example")


# -- wait: devices on a mixed cluster -------------------------------------------------------------------------------

INTEL_LABEL = {"intel.feature.node.kubernetes.io/gpu": "true"}
AMD_LABEL = {"feature.node.kubernetes.io/pci-0380_1002.present": "true", "kubernetes.io/arch": "amd64"}
# (the GPU node, where the driver publishes 2 devices; nodes left out)
MIXED_NODES = {
    "intel": ({"name": "arc-1", "labels": INTEL_LABEL, "inventory": {"gpu.intel.com/i915": 2}},
              [{"name": "cpu-1"}, {"name": "cpu-2"}, {"name": "cpu-3"}]),
    # NFD's label of an AMD accelerator (PCI class 0380, vendor 1002); an arm64 node with the same label is left out
    # as the amd device-plugin preset leaves it out
    "amd": ({"name": "mi300-1", "labels": AMD_LABEL, "inventory": {"amd.com/gpu": 2}},
            [{"name": "cpu-1"}, {"name": "arm-1", "labels": dict(AMD_LABEL, **{"kubernetes.io/arch": "arm64"})}]),
}


@pytest.mark.parametrize("preset", sorted(MIXED_NODES))
def test_wait_devices_finishes_on_a_mixed_cluster_where_only_the_gpu_node_runs_the_driver(cluster, ansible, preset):
    """With no node selection the Intel plugin ran on every node and the wait timed out on the nodes without an
    Intel GPU; the preset's NFD node selector leaves them out. AMD's chart also runs on every node; the preset selects
    NFD's AMD GPU nodes, and the devices its driver publishes (gpu.amd.com) end the wait."""
    gpu, others = MIXED_NODES[preset]
    namespace, name = cluster.namespace(), cluster.unique_name("dra-" + preset)
    standin, nodes = kubelet_nodes(cluster, [gpu] + others, pod_start_delay=0.1)
    run, res = deploy(ansible, namespace, name, preset=preset, wait="devices", min_count=2)
    try:
        assert not res["failed"], run.output()
        mine = set(nodes)
        assert [(n["name"], n["device_count"]) for n in res["nodes"] if n["name"] in mine] == [(nodes[0], 2)]
        assert sorted(pod_node(p) for p in daemonset_pods(cluster, namespace, name)
                      if pod_node(p) in mine) == [nodes[0]]
    finally:
        remove(ansible, namespace, name, preset)


# -- the shared rollout wait: pods that cannot be created, nodes still joining ------------------------------------

def test_a_rollout_started_while_its_node_is_still_joining_waits_for_it(cluster, ansible):
    """A rollout right after a matching node registered failed at once with "selects no node
    (desiredNumberScheduled is 0)": the node carried node.kubernetes.io/not-ready:NoSchedule, which the DaemonSet
    controller's own tolerations do not cover. Now the wait names it as joining and goes on until it is Ready."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-join")
    label = {"kubehw-it.example.com/joining": name}
    # registered NotReady, as a kubelet does: the apiserver adds the not-ready taint; Ready comes 4 s later
    standin, (node,) = kubelet_nodes(cluster, [{"name": "joining", "labels": label, "starting": True}])
    ready_later(standin, node, 4)
    start = time.monotonic()
    run, res = deploy(ansible, namespace, name, preset="example", node_selector=label, wait="rollout",
                      wait_timeout=90)
    try:
        assert not res["failed"], run.output()
        assert res["rollout"]["desired"] == 1 and res["rollout"]["done"], res["rollout"]
        assert time.monotonic() - start < 90
    finally:
        remove(ansible, namespace, name, "example")


def test_a_node_that_never_becomes_ready_is_named_at_the_timeout(cluster, ansible):
    namespace, name = cluster.namespace(), cluster.unique_name("dra-stuck")
    label = {"kubehw-it.example.com/stuck": name}
    _standin, (node,) = kubelet_nodes(cluster, [{"name": "stuck", "labels": label, "starting": True}])
    run, res = deploy(ansible, namespace, name, preset="example", node_selector=label, wait="rollout", wait_timeout=8)
    try:
        assert res["failed"], run.output()
        assert "the nodes it selects are still joining and never became schedulable: %s (%s:NoSchedule" % (
            node, NOT_READY) in res["msg"], res["msg"]
    finally:
        remove(ansible, namespace, name, "example")


def test_a_rollout_with_one_ready_node_and_one_joining_covers_both(cluster, ansible):
    """One matching node Ready, one registered a moment ago: the controller reported 1 of 1 pods done at once and the
    task returned without the joining node, so the smoke test that followed met half the pool. Now the wait goes on
    until the joining node runs its pod, and the result says so per node."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-half")
    label = {"kubehw-it.example.com/half": name}
    standin, (ready, joining) = kubelet_nodes(cluster, [{"name": "half-ready", "labels": label},
                                                        {"name": "half-joining", "labels": label, "starting": True}])
    start = time.monotonic()
    ready_later(standin, joining, 8)
    run, res = deploy(ansible, namespace, name, preset="example", node_selector=label, wait="rollout",
                      wait_timeout=90)
    took = time.monotonic() - start
    try:
        assert not res["failed"], run.output()
        assert res["rollout"]["desired"] == 2 and res["rollout"]["done"], res["rollout"]
        assert res["node_outcome"] == {ready: "ready", joining: "ready"}, res["node_outcome"]
        assert took >= 8, "returned after %.1f s, before the joining node could be Ready" % took
    finally:
        remove(ansible, namespace, name, "example")


def test_a_node_that_registers_during_the_rollout_is_covered_before_it_is_done(cluster, ansible):
    """A pool grows while its driver rolls out: a second node registers once the DaemonSet is written, after the
    guard listed the nodes. The task judged the rollout done on the guard's copy of the nodes when the first node's
    pod was ready, and returned without the new node. Now the first verdict reads the nodes anew and the wait goes on
    until the new node has joined and runs its pod."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-grow")
    label = {"kubehw-it.example.com/grow": name}
    # the first node's pod takes 4 s to be ready; the second node is still joining then (Ready after 10 s)
    _standin, (first,) = kubelet_nodes(cluster, [{"name": "grow-first", "labels": label}], pod_start_delay=4)
    late = {}

    def register_once_written():
        try:
            wait_for(lambda: cluster.apps.list_namespaced_daemon_set(
                namespace, field_selector="metadata.name=%s" % name).items, timeout=60,
                what="DaemonSet %s/%s written" % (namespace, name))
            standin, (node,) = cluster.kubelets([{"name": "grow-late", "labels": label, "starting": True}],
                                                pod_start_delay=0.2)
            late["node"] = node
            ready_later(standin, node, 10)
        except BaseException as err:  # pytest.fail() included: reported by the assertions below
            late["error"] = err

    run, res = deploy_beside(register_once_written, ansible, namespace, name, preset="example", node_selector=label,
                             wait="rollout", wait_timeout=90)
    try:
        assert "node" in late, late.get("error")
        assert not res["failed"], run.output()
        assert res["node_outcome"] == {first: "ready", late["node"]: "ready"}, res["node_outcome"]
        assert res["rollout"]["desired"] == 2 and res["rollout"]["done"], res["rollout"]
    finally:
        remove(ansible, namespace, name, "example")


def failed_creates(cluster, namespace, name):
    events = json.loads(cluster.core.list_namespaced_event(
        namespace, field_selector="involvedObject.kind=DaemonSet,involvedObject.name=%s" % name,
        _preload_content=False).data)["items"]
    return [e for e in events if e.get("reason") == "FailedCreate"]


def no_pods_quota(cluster, namespace):
    """A ResourceQuota that allows no pod: every pod of the namespace fails admission, which the DaemonSet controller
    reports as FailedCreate and retries, backing off."""
    read_out(cluster.core.create_namespaced_resource_quota(namespace, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}},
        _preload_content=False))


def refusals_reported(cluster, namespace, name):
    """How many times the controller has reported FailedCreate for the DaemonSet (its events' counts summed)."""
    return sum(e.get("count") or 1 for e in failed_creates(cluster, namespace, name))


def test_pods_the_controller_cannot_create_fail_the_rollout_within_seconds_and_so_does_a_rerun(cluster, ansible):
    """The DaemonSet controller reported FailedCreate every few seconds while the wait ran out its whole
    wait_timeout; and a re-run that wrote nothing took 41-45 s to name a refusal the controller had been reporting
    all along (it waited for the event count to grow, and the controller backs off)."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-quota")
    no_pods_quota(cluster, namespace)
    label = {"kubehw-it.example.com/quota": name}
    _standin, (node,) = kubelet_nodes(cluster, [{"name": "quota", "labels": label}])
    try:
        start = time.monotonic()
        run, res = deploy(ansible, namespace, name, preset="example", node_selector=label, wait="rollout",
                          wait_timeout=120)
        first_run = time.monotonic() - start
        assert res["failed"], run.output()
        assert "DaemonSet %s/%s cannot create its pods: the DaemonSet controller reports FailedCreate: " % (
            namespace, name) in res["msg"] and "exceeded quota" in res["msg"], res["msg"]
        assert first_run < 40, "the first run took %.0f s of its 120" % first_run

        # right after the controller's next attempt: its backoff has doubled, so the attempt after it is 20 s or
        # more away, and a wait that needs a new event to notice the refusal (as the one before did) waits for it
        before = refusals_reported(cluster, namespace, name)

        def next_attempt():
            count = refusals_reported(cluster, namespace, name)
            return count if count > before else None

        reported = wait_for(next_attempt, timeout=60, what="the controller's next attempt")
        run, res = deploy(ansible, namespace, name, preset="example", node_selector=label, wait="rollout",
                          wait_timeout=120)
        assert res["failed"] and not res["changed"] and res["node_outcome"] == {node: "refused"}, run.output()
        # named from the events already there: the count it quotes is the one before it started
        assert "exceeded quota" in res["msg"] and "(%d such event(s) since " % reported in res["msg"], (
            reported, res["msg"])
        # the task's own time, without ansible-playbook's start (seconds more on a loaded machine)
        took = res["_returned_at"] - res["_started_at"]
        assert took < 20, "the re-run's task took %.0f s to name the refusal already there" % took
    finally:
        remove(ansible, namespace, name, "example")


def test_a_refusal_the_controller_gets_past_does_not_fail_the_rollout(cluster, ansible):
    """A refusal that lasts a few seconds (here a quota raised 4 s after the controller's first FailedCreate; in the
    field a webhook timeout or a token being renewed) failed the rollout at the first event, although the
    controller's next attempt created the pod."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-blip")
    no_pods_quota(cluster, namespace)
    label = {"kubehw-it.example.com/blip": name}
    _standin, (node,) = kubelet_nodes(cluster, [{"name": "blip", "labels": label}])

    def raise_the_quota_after_the_first_refusal():
        wait_for(lambda: failed_creates(cluster, namespace, name), timeout=60, what="a FailedCreate event")
        time.sleep(4)
        read_out(cluster.core.patch_namespaced_resource_quota("no-pods", namespace, {"spec": {"hard": {"pods": "10"}}},
                                                              _preload_content=False))

    run, res = deploy_beside(raise_the_quota_after_the_first_refusal, ansible, namespace, name, preset="example",
                             node_selector=label, wait="rollout", wait_timeout=90)
    try:
        assert failed_creates(cluster, namespace, name), "the quota never refused a pod: nothing was tested"
        assert not res["failed"], run.output()
        assert res["node_outcome"] == {node: "ready"}, res
    finally:
        remove(ansible, namespace, name, "example")


def report_not_ready(cluster, node):
    """Ready=False in the node's status, as a kubelet whose container runtime went away reports it."""
    now = now_rfc3339()
    read_out(cluster.core.patch_node_status(node, [{"op": "add", "path": "/status/conditions", "value": [{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime is down",
        "lastHeartbeatTime": now, "lastTransitionTime": now}]}], _preload_content=False))


def test_a_rolling_update_stuck_behind_a_node_that_is_down_fails_naming_it(cluster, ansible):
    """A device plugin updated with maxUnavailable 1 while one node of three is down: the node's pod is unavailable
    for good and uses up the budget, so the DaemonSet controller replaces no pod on the Ready nodes (measured on
    v1.36.2: 0 of 2 updated for the whole wait_timeout), and the task waited its wait_timeout out. Now it says so
    within seconds, naming the node and the ways out. (A surge update finishes on the Ready nodes:
    test_a_surge_update_with_a_node_down_is_never_called_a_spent_budget.)"""
    namespace, name = cluster.namespace(), cluster.unique_name("dp-budget")
    label = {"kubehw-it.example.com/budget": name}
    rows = [{"name": "budget-%d" % i, "labels": label} for i in range(3)]

    def plugin(title, **extra):
        args = dict(preset="custom", namespace=namespace, name=name, image="registry.k8s.io/pause:3.10",
                    resource_names=["example.com/budget"], node_selector=label, runtime_class_name="",
                    update_strategy={"type": "RollingUpdate", "max_unavailable": 1}, wait="rollout",
                    wait_timeout=120, **extra)
        run = ansible([{"name": title, "kubehw.devices.device_plugin_deploy": args, "register": "out",
                        "ignore_errors": True}])
        return run, run.result(title)

    standin, nodes = kubelet_nodes(cluster, rows)
    down = nodes[2]
    run, res = plugin("Deploy")
    assert not res["failed"] and res["rollout"]["desired"] == 3, run.output()
    take_down(cluster, standin, namespace, down)
    start = time.monotonic()
    run, res = plugin("Update", env={"KUBEHW_IT_GENERATION": "2"})
    took = time.monotonic() - start
    assert res["failed"], run.output()
    assert ("cannot finish its rolling update: 1 node(s) running its pods are not Ready (%s), and their "
            "pods use up the update's maxUnavailable (1)" % down in res["msg"]), res["msg"]
    assert took < 60, "named after %.0f s" % took


def take_down(cluster, standin, namespace, node):
    """The node's kubelet goes silent after reporting Ready=False and its pods not ready, as it does once the
    container runtime is gone (the node lifecycle controller marks a node's pods not ready only when its kubelet goes
    silent)."""
    standin.set_node_unreachable(node)
    report_not_ready(cluster, node)
    for pod in pods_ready_on(cluster, namespace, node):
        now = now_rfc3339()
        read_out(cluster.core.patch_namespaced_pod_status(pod["metadata"]["name"], namespace, {"status": {
            "conditions": [{"type": t, "status": "False", "lastTransitionTime": now}
                           for t in ("ContainersReady", "Ready")]}}, _preload_content=False))


@pytest.mark.parametrize("tolerate_all", [False, True])
def test_a_surge_update_with_a_node_down_is_never_called_a_spent_budget(cluster, ansible, tolerate_all):
    """maxSurge 1 while one node of three is down, on the real DaemonSet and node lifecycle controllers (v1.36.2,
    measured). With the preset's tolerations the node's not-ready NoSchedule taint takes it out of the DaemonSet: the
    controller deletes its unavailable old pod, counts it nowhere, and the update finishes on both Ready nodes, so the
    task succeeds, naming the node not-ready (it runs nothing of the DaemonSet until it is back). A DaemonSet that
    tolerates every taint, as many node agents do, still wants the node: the controller starts a new pod there beside
    the unavailable old one (without the surge budget) and deletes the old one, so nothing holds the budget and both
    Ready nodes are updated; the node's new pod never starts, and the task names it when its wait_timeout ends.
    Neither may be reported as a spent budget, which would send the operator to raise max_surge for nothing: under
    maxSurge a node holds the budget only with an old pod that is not being deleted beside a new one that is not
    ready, as the controller counts it."""
    namespace, name = cluster.namespace(), cluster.unique_name("dp-surge")
    label = {"kubehw-it.example.com/surge": name}
    rows = [{"name": "surge-%d" % i, "labels": label} for i in range(3)]

    def plugin(title, wait_timeout, **extra):
        args = dict(preset="custom", namespace=namespace, name=name, image="registry.k8s.io/pause:3.10",
                    resource_names=["example.com/surge"], node_selector=label, runtime_class_name="",
                    update_strategy={"type": "RollingUpdate", "max_surge": 1, "max_unavailable": 0},
                    wait="rollout", wait_timeout=wait_timeout, **extra)
        if tolerate_all:
            args["tolerations"] = [{"operator": "Exists"}]
        run = ansible([{"name": title, "kubehw.devices.device_plugin_deploy": args, "register": "out",
                        "ignore_errors": True}])
        return run, run.result(title)

    # Each pod starts after longer than the wait's stall window (STALL_SECONDS), as a slow image pull does: the
    # DaemonSet's status stands still while the down node still has pods, which a wrong budget rule would call spent.
    standin, nodes = kubelet_nodes(cluster, rows, pod_start_delay=12)
    down, ready = nodes[0], nodes[1:]
    run, res = plugin("Deploy", 120)
    assert not res["failed"] and res["rollout"]["desired"] == 3, run.output()
    take_down(cluster, standin, namespace, down)
    run, res = plugin("Update", 45, env={"KUBEHW_IT_GENERATION": "2"})
    generation = str(json.loads(cluster.apps.read_namespaced_daemon_set(
        name, namespace, _preload_content=False).data)["metadata"]["generation"])
    updated = sorted(pod_node(p) for p in daemonset_pods(cluster, namespace, name) if pod_node(p) in ready
                     and p["metadata"]["labels"].get("pod-template-generation") == generation)
    assert updated == ready, (updated, res.get("msg"))
    assert res["node_outcome"] == dict([(down, "not-ready")] + [(n, "ready") for n in ready]), res["node_outcome"]
    if tolerate_all:
        assert res["failed"] and "cannot finish its rolling update" not in res["msg"], res["msg"]
        assert "Timed out after 45s" in res["msg"] and down in res["msg"], res["msg"]
    else:
        assert not res["failed"] and res["rollout"]["desired"] == 2, run.output()
        # the node runs nothing of the DaemonSet until it is back, and the result says so
        assert any("not ready, not waited for: %s" % down in w for w in res.get("warnings") or []), res.get("warnings")


def pods_ready_on(cluster, namespace, node):
    pods = json.loads(cluster.core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (p.get("status") or {}).get("conditions") or [])]


def test_rbac_ymls_namespace_label_lets_the_privileged_pods_in_where_baseline_refuses_them(cluster, ansible):
    """A cluster whose namespaces default to Pod Security's baseline level refuses the DRA driver's privileged pods
    (the DaemonSet controller reports FailedCreate, which the rollout names within seconds). rbac.yml's driver
    namespace carries the label that admits them, rendered from the shipped template here and applied by the real
    apiserver's Pod Security admission."""
    from tests.integration.conftest import own_rbac_names, rbac_objects

    names = own_rbac_names(cluster)
    shipped = [d for d in rbac_objects(**names) if d["kind"] == "Namespace"
               and d["metadata"]["name"] == names["kubehw_rbac_dra_namespace"]][0]
    label = {"kubehw-it.example.com/psa": names["kubehw_rbac_dra_namespace"]}
    kubelet_nodes(cluster, [{"name": "psa", "labels": label}])
    results = {}
    # the cluster's default level, as a namespace label: what an AdmissionConfiguration default of baseline means
    default = {"pod-security.kubernetes.io/enforce": "baseline"}
    shipped_labels = dict(default, **(shipped["metadata"].get("labels") or {}))
    for level, labels in (("baseline", default), ("rbac.yml", shipped_labels)):
        namespace = cluster.unique_name("psa")
        read_out(cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": namespace, "labels": labels}},
                                               _preload_content=False))
        cluster.on_close("delete namespace %s" % namespace,
                         lambda n=namespace: cluster.core.delete_namespace(n, _preload_content=False))
        name = cluster.unique_name("psa-driver")
        try:
            # the node has no kubelet to run the pod: what counts is whether admission lets the controller
            # create it (the rollout wait of the baseline namespace names the refusal)
            results[level] = deploy(ansible, namespace, name, preset="example", node_selector=label,
                                    wait="rollout" if level == "baseline" else "none", wait_timeout=90)[1]
            if level == "rbac.yml":
                results["admitted"] = wait_for(lambda: daemonset_pods(cluster, namespace, name), timeout=60,
                                               what="the driver's pod in the namespace rbac.yml labels")
        finally:
            remove(ansible, namespace, name, "example")
    refused = results["baseline"]
    assert refused["failed"] and "violates PodSecurity \"baseline:latest\"" in refused["msg"], refused["msg"]
    assert not results["rbac.yml"].get("failed"), results["rbac.yml"]["msg"]
    assert results["admitted"]


def test_device_plugin_deploy_refuses_a_missing_runtime_class_before_any_write(cluster, ansible):
    namespace, plugin = cluster.namespace(), cluster.unique_name("nvdp-rc")
    missing = cluster.unique_name("no-runtime")
    observer = cluster.observe_writes(namespaces=[namespace], names=[plugin], by_watch=True)
    run = ansible([{"name": "Plugin", "kubehw.devices.device_plugin_deploy": dict(
        preset="nvidia", namespace=namespace, name=plugin, runtime_class_name=missing, wait="rollout",
        wait_timeout=120), "register": "out"}])
    res = run.result("Plugin")
    assert res["failed"], run.output()
    assert ("RuntimeClass %s, which the nvidia preset's pods name (runtime_class_name), does not exist" % missing
            in res["msg"]) and "Nothing was written" in res["msg"], res["msg"]
    assert observer.writes() == []


def test_the_example_driver_writes_device_status_of_a_claim_on_its_node_with_its_pod_bound_token(cluster, ansible):
    """Kubernetes 1.36 authorizes a driver's claim status writes per driver and node
    (DRAResourceClaimGranularStatusAuthorization): the driver's token must be bound to a pod on the claim's node
    (associated-node) unless it may write claims of any node (arbitrary-node, which the driver is not given). The
    example driver writes device status (cmd/dra-example-kubeletplugin/state.go updateDeviceStatus, v0.4.0); here
    its account does so with a token bound to its own kubelet-plugin pod, and is refused with an unbound one."""
    namespace, name = cluster.namespace(), cluster.unique_name("dra-status")
    label = {"kubehw-it.example.com/dra-status": name}
    custom = client.CustomObjectsApi(cluster.api_client)
    group, version = "resource.k8s.io", "v1"
    _standin, (node,) = kubelet_nodes(cluster, [{"name": "status", "labels": label}])
    run, res = deploy(ansible, namespace, name, preset="example", node_selector=label)
    try:
        assert not res["failed"], run.output()
        plugin = wait_for(lambda: [p for p in daemonset_pods(cluster, namespace, name)
                                   if (p.get("spec") or {}).get("nodeName") == node],
                          timeout=60, what="the kubelet-plugin pod bound to %s" % node)[0]
        device_class = cluster.unique_name("gpu.example.com")
        read_out(custom.create_cluster_custom_object(group, version, "deviceclasses", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}},
            _preload_content=False))
        cluster.on_close("delete deviceclass %s" % device_class, lambda: custom.delete_cluster_custom_object(
            group, version, "deviceclasses", device_class, _preload_content=False))
        slice_name = cluster.unique_name("slice")
        read_out(custom.create_cluster_custom_object(group, version, "resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": slice_name},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}]}}, _preload_content=False))
        cluster.on_close("delete resourceslice %s" % slice_name, lambda: custom.delete_cluster_custom_object(
            group, version, "resourceslices", slice_name, _preload_content=False))
        read_out(custom.create_namespaced_custom_object(group, version, namespace, "resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}},
            _preload_content=False))
        read_out(cluster.core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "workload"},
            "spec": {"nodeSelector": label, "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                     "containers": [{"name": "c", "image": "registry.example/kubehw-it:1",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}, _preload_content=False))

        def allocated():
            claim = json.loads(custom.get_namespaced_custom_object(
                group, version, namespace, "resourceclaims", "gpu", _preload_content=False).data)
            return claim if (claim.get("status") or {}).get("allocation") else None

        claim = wait_for(allocated, timeout=60, what="the scheduler to allocate gpu-0 of %s" % node)
        now = now_rfc3339()
        status = dict(claim["status"], devices=[{
            "driver": "gpu.example.com", "pool": node, "device": "gpu-0",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Healthy", "message": "kubehw-it",
                            "lastTransitionTime": now}]}])

        def write_status(bound_pod):
            token = cluster.request_token(name, namespace, seconds=600, bound_pod=bound_pod)
            as_driver = kube_config.new_client_from_config(config_file=cluster.token_kubeconfig(token))
            try:
                current = json.loads(client.CustomObjectsApi(as_driver).get_namespaced_custom_object(
                    group, version, namespace, "resourceclaims", "gpu", _preload_content=False).data)
                body = dict(current, status=status)
                return json.loads(client.CustomObjectsApi(as_driver).replace_namespaced_custom_object_status(
                    group, version, namespace, "resourceclaims", "gpu", body, _preload_content=False).data)
            finally:
                as_driver.close()

        # a token not bound to a pod names no node: that is arbitrary-node, which the driver is not granted
        # (v1.36.2 answers 422 FieldValueForbidden on status.devices, naming the permission it checked)
        with pytest.raises(ApiException) as err:
            write_status(None)
        assert err.value.status == 422, err.value.body
        assert 'changing status.devices requires resource=\\"resourceclaims/driver\\", ' \
            'verb=\\"[arbitrary-node:update]\\"' in (err.value.body or ""), err.value.body
        written = write_status(plugin)
        assert written["status"]["devices"][0]["conditions"][0]["reason"] == "Healthy"
    finally:
        try:
            read_out(cluster.core.delete_namespaced_pod("workload", namespace, grace_period_seconds=0,
                                                        _preload_content=False))
        except ApiException:
            pass
        remove(ansible, namespace, name, "example")


def test_the_gpu_operators_driver_container_gives_the_driver_root_and_half_a_pool_is_refused(cluster, ansible):
    """The GPU Operator's driver DaemonSet (the vendor table's row, from its published asset) on the pool's nodes: the
    nvidia preset without nvidia_driver_root looks where that container installs the driver (check mode, nothing
    written); a pool whose other node has no such container is refused, naming both."""
    namespace, driver = cluster.namespace(), cluster.unique_name("nvroot")
    pool = {"kubehw-it.example.com/gpu-pool": driver}
    (covered,) = cluster.create_nodes([{"what": "opdrv", "labels": dict(pool, **{"kubehw-it.example.com/opdrv": driver})}])
    read_out(cluster.apps.create_namespaced_daemon_set(namespace, vendor_daemonset(
        "NVIDIA/gpu-operator v26.7.0 assets/state-driver", namespace, "nvidia-driver-daemonset",
        {"kubehw-it.example.com/opdrv": driver}), _preload_content=False))
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
    run = ansible([{"name": "Deploy", MODULE: dict(namespace=namespace, name=driver, preset="nvidia",
                                                   node_selector=pool, device_classes=False, wait="none"),
                    "check_mode": True}])
    res = run.result("Deploy")
    assert not res.get("failed") and res["nvidia_driver_root"] == "/run/nvidia/driver", run.output()
    env = [e for c in res["daemonset"]["spec"]["template"]["spec"]["containers"] for e in c.get("env") or []
           if e["name"] == "NVIDIA_DRIVER_ROOT"]
    assert env and set(e["value"] for e in env) == {"/run/nvidia/driver"}, env
    assert observer.writes() == []
    (other,) = cluster.create_nodes([{"what": "hostdrv", "labels": pool}])
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
    run, res = deploy(ansible, namespace, driver, preset="nvidia", node_selector=pool)
    assert res["failed"] and not res["changed"], run.output()
    assert ("installs the NVIDIA driver under /run/nvidia/driver on %s, but not on %s" % (covered, other)
            in res["msg"]), res["msg"]
    assert observer.writes() == []


def test_update_strategy_reaches_the_daemonset_and_a_rerun_writes_nothing(cluster, ansible):
    """The option the budget message recommends, on dra_driver_deploy too: AWX's string "2" stored as the number the
    real apiserver validates, the preset's maxSurge replaced, and a second run with the same input writes nothing."""
    namespace, driver = cluster.namespace(), cluster.unique_name("strategy")
    strategy = {"max_unavailable": "2"}
    run, res = deploy(ansible, namespace, driver, preset="example", update_strategy=strategy)
    assert not res.get("failed") and res["changed"], run.output()
    stored = json.loads(cluster.apps.read_namespaced_daemon_set(driver, namespace, _preload_content=False).data)
    rolling = {"maxUnavailable": 2, "maxSurge": 0}       # maxSurge defaulted by the apiserver
    assert stored["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": rolling}, stored
    observer = cluster.observe_writes(namespaces=[namespace], names=[driver])
    run, res = deploy(ansible, namespace, driver, title="Again", preset="example", update_strategy=strategy)
    assert not res.get("failed") and not res["changed"], run.output()
    assert observer.writes() == []
    remove(ansible, namespace, driver, "example")
