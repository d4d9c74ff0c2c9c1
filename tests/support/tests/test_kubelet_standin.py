# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet stand-in on a real control plane: what it does for its nodes, and that without it nothing happens
there (the real stage depends on it: nodes are not kept alive, pods do not run, rollouts do not finish)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time
import uuid

import pytest

from tests.support.cluster import wait_for
from tests.support.fault_proxy import FaultProxy
from tests.support.kubelet import STANDIN_LABEL, KubeletStandIn

PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
DRA_IMAGE = "registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0"


@pytest.fixture
def api(kubeconfigs):
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kubeconfigs[0])
    yield {"core": client.CoreV1Api(api_client), "apps": client.AppsV1Api(api_client),
           "coordination": client.CoordinationV1Api(api_client), "custom": client.CustomObjectsApi(api_client)}
    api_client.close()


@pytest.fixture
def namespace(api):
    name = "standin-%s" % uuid.uuid4().hex[:8]
    api["core"].create_namespace({"metadata": {"name": name}})
    yield name
    api["core"].delete_namespace(name)


def node_config(tag):
    return {"pod_start_delay": 0.2, "nodes": [{
        "name": "standin-%s" % tag, "labels": {"standin-test": tag},
        "inventory": {"nvidia.com/gpu": 2, "example.com/gpu": 3}}]}


def two_nodes():
    """(first, second, configuration): two plain nodes of run-unique names, in that order."""
    tag = uuid.uuid4().hex[:8]
    first, second = "standin-%s-a" % tag, "standin-%s-b" % tag
    return first, second, {"pod_start_delay": 0.2, "nodes": [{"name": first}, {"name": second}]}


def daemonset(name, tag, image):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"standin-test": tag}, "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": image}]}}}}


def read(fn, *args):
    return json.loads(fn(*args, _preload_content=False).data)


def test_standin_keeps_its_node_ready_runs_pods_registers_plugins_and_publishes_slices(kubeconfigs, api, namespace):
    tag = uuid.uuid4().hex[:8]
    node = "standin-%s" % tag
    standin = KubeletStandIn(kubeconfigs[1], node_config(tag)).start()
    try:
        registered = read(api["core"].read_node, node)
        assert registered["metadata"]["labels"][STANDIN_LABEL] == "true"
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in registered["status"]["conditions"])
        # the node lifecycle controller lifts the not-ready taint it got at registration once it sees Ready
        wait_for(lambda: not [
            t for t in read(api["core"].read_node, node)["spec"].get("taints") or []
            if t["key"] == "node.kubernetes.io/not-ready"], what="the not-ready taint to go")
        lease = read(api["coordination"].read_namespaced_lease, node, "kube-node-lease")
        assert lease["spec"]["holderIdentity"] == node and lease["spec"]["renewTime"]

        api["apps"].create_namespaced_daemon_set(namespace, daemonset("plugin", tag, PLUGIN_IMAGE))
        api["apps"].create_namespaced_daemon_set(namespace, daemonset("dra", tag, DRA_IMAGE))

        def rolled_out(name):
            status = read(api["apps"].read_namespaced_daemon_set, name, namespace).get("status") or {}
            return status.get("desiredNumberScheduled") == 1 and status.get("numberReady") == 1

        wait_for(lambda: rolled_out("plugin"), what="the plugin DaemonSet's pod to be ready")
        wait_for(lambda: rolled_out("dra"), what="the DRA driver DaemonSet's pod to be ready")
        pod = read(api["core"].list_namespaced_pod, namespace)["items"][0]
        assert pod["status"]["phase"] == "Running"
        assert all(cs["ready"] and "running" in cs["state"] for cs in pod["status"]["containerStatuses"])

        def registered():
            """The plugin's resource registered into capacity, and allocatable following it."""
            status = read(api["core"].read_node, node)["status"]
            capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
            return status if capacity.get("nvidia.com/gpu") == allocatable.get("nvidia.com/gpu") == "2" else None

        status = wait_for(registered, what="nvidia.com/gpu in capacity and allocatable")
        assert "example.com/gpu" not in status["capacity"]    # the DRA driver publishes slices, not capacity

        def slices():
            found = read(lambda **kw: api["custom"].list_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", **kw))["items"]
            return [s for s in found if s["spec"].get("nodeName") == node]

        published = wait_for(slices, what="the example driver's ResourceSlice")
        assert [s["spec"]["driver"] for s in published] == ["gpu.example.com"]
        assert len(published[0]["spec"]["devices"]) == 3

        # the driver goes: its slice goes too; a deleted pod is confirmed gone (grace period 0), not left Terminating
        api["apps"].delete_namespaced_daemon_set("dra", namespace)
        wait_for(lambda: not slices(), what="the slice to go with its driver")
        victim = [p for p in read(api["core"].list_namespaced_pod, namespace)["items"]
                  if p["metadata"]["labels"]["app"] == "plugin"][0]["metadata"]["name"]
        api["core"].delete_namespaced_pod(victim, namespace)
        wait_for(lambda: victim not in [
            p["metadata"]["name"] for p in read(api["core"].list_namespaced_pod, namespace)["items"]], what="the deleted pod to be gone")
        assert standin.errors == []
    finally:
        standin.stop()
    assert node not in [n["metadata"]["name"] for n in read(api["core"].list_node)["items"]]


def test_without_the_standin_pods_never_run_and_the_lease_is_not_renewed(kubeconfigs, api, namespace):
    """The stage depends on the stand-in: stopped (its node left behind), the node's Lease stays as it was, and a
    DaemonSet's pod on the node is created by the real controller but never starts, so the rollout never finishes."""
    tag = uuid.uuid4().hex[:8]
    node = "standin-%s" % tag
    standin = KubeletStandIn(kubeconfigs[1], node_config(tag), heartbeat_interval=1.0).start()
    try:
        wait_for(lambda: not [
            t for t in read(api["core"].read_node, node)["spec"].get("taints") or []
            if t["key"] == "node.kubernetes.io/not-ready"], what="the not-ready taint to go")
        renewed = read(api["coordination"].read_namespaced_lease, node, "kube-node-lease")["spec"]["renewTime"]
        wait_for(lambda: read(
            api["coordination"].read_namespaced_lease, node, "kube-node-lease")["spec"]["renewTime"] != renewed, what="a lease renewal while the stand-in runs")
        standin.stop(delete_nodes=False)
        stopped = read(api["coordination"].read_namespaced_lease, node, "kube-node-lease")["spec"]["renewTime"]
        api["apps"].create_namespaced_daemon_set(namespace, daemonset("plugin", tag, PLUGIN_IMAGE))
        pod = wait_for(lambda: read(
            api["core"].list_namespaced_pod, namespace)["items"], what="the DaemonSet controller's pod")[0]
        assert pod["spec"].get("nodeName") == node or pod["spec"].get("affinity")
        time.sleep(4)
        pod = read(api["core"].read_namespaced_pod, pod["metadata"]["name"], namespace)
        assert pod["status"].get("phase") == "Pending" and not pod["status"].get("containerStatuses"), pod["status"]
        status = read(api["apps"].read_namespaced_daemon_set, "plugin", namespace)["status"]
        assert status.get("numberReady", 0) == 0
        assert "nvidia.com/gpu" not in (read(api["core"].read_node, node)["status"].get("capacity") or {})
        assert read(api["coordination"].read_namespaced_lease, node, "kube-node-lease")["spec"]["renewTime"] == stopped
    finally:
        cleanup = KubeletStandIn(kubeconfigs[1], node_config(tag))
        cleanup.stop()      # removes the node, its lease and its pods


def test_a_starting_node_posts_not_ready_is_tainted_runs_no_pod_and_joins_when_let(kubeconfigs, api, namespace):
    """set_node_starting: the kubelet is up (heartbeats, Lease) but posts Ready False, as a node whose network plugin
    has not started; the real node lifecycle controller taints it not-ready, the DaemonSet controller leaves it out.
    Let go, it turns Ready, the taint goes and the DaemonSet's pod runs there."""
    tag = uuid.uuid4().hex[:8]
    node = "standin-%s" % tag
    standin = KubeletStandIn(kubeconfigs[1], node_config(tag)).start()
    try:
        def not_ready_taint():
            return [t for t in read(api["core"].read_node, node)["spec"].get("taints") or []
                    if t["key"] == "node.kubernetes.io/not-ready"]

        def ready_condition():
            return [c for c in read(api["core"].read_node, node)["status"]["conditions"] if c["type"] == "Ready"][0]

        wait_for(lambda: not not_ready_taint(), what="the registration's not-ready taint to go")
        standin.set_node_starting(node)
        ready = wait_for(lambda: ready_condition()["status"] == "False" and ready_condition(),
                         what="Ready False from the starting kubelet")
        assert ready["reason"] == "KubeletNotReady", ready
        wait_for(not_ready_taint, what="the node lifecycle controller's not-ready taint on the starting node")
        api["apps"].create_namespaced_daemon_set(namespace, daemonset("plugin", tag, PLUGIN_IMAGE))
        time.sleep(3)
        status = read(api["apps"].read_namespaced_daemon_set, "plugin", namespace).get("status") or {}
        assert status.get("desiredNumberScheduled", 0) == 0, status

        standin.set_node_starting(node, False)
        wait_for(lambda: not not_ready_taint(), what="the not-ready taint to go once the node is Ready")
        wait_for(lambda: (read(api["apps"].read_namespaced_daemon_set, "plugin", namespace).get("status") or {})
                 .get("numberReady") == 1, what="the DaemonSet's pod ready on the node that joined")
        assert standin.errors == []
    finally:
        standin.stop()


def test_a_node_configured_starting_registers_not_ready_and_joins_when_let(kubeconfigs, api):
    """``starting: true`` in the node configuration: the kubelet registers the node with Ready False, as a kubelet that
    is still joining does, so the node never shows Ready (and never loses the not-ready taint it gets at the create)
    before the test lets it join."""
    from tests.support.kubelet_core import KUBELET_VERSION, KubeletCore

    tag = uuid.uuid4().hex[:8]
    node = "standin-%s" % tag
    config = node_config(tag)
    config["nodes"][0]["starting"] = True
    registered = KubeletCore(config).node(node, KUBELET_VERSION)
    assert [(c["status"], c["reason"]) for c in registered["status"]["conditions"] if c["type"] == "Ready"] == \
        [("False", "KubeletNotReady")]

    def not_ready_taint():
        return [t for t in read(api["core"].read_node, node)["spec"].get("taints") or []
                if t["key"] == "node.kubernetes.io/not-ready"]

    standin = KubeletStandIn(kubeconfigs[1], config).start()
    try:
        assert not_ready_taint()
        time.sleep(3)   # the node lifecycle controller looks every second: the taint stays, the node is not Ready
        assert not_ready_taint()
        assert [c["status"] for c in read(api["core"].read_node, node)["status"]["conditions"]
                if c["type"] == "Ready"] == ["False"]
        standin.set_node_starting(node, False)
        wait_for(lambda: not not_ready_taint(), what="the not-ready taint to go once the node joined")
        assert standin.errors == []
    finally:
        standin.stop()


def test_one_nodes_failing_kubelet_does_not_hold_back_the_other_nodes_heartbeats(kubeconfigs, api, tmp_path):
    """Each node has a kubelet of its own: while every Lease renewal of the first node fails (500, from the fault
    proxy), the second node's Lease is still renewed (else the node lifecycle controller would mark a node Unknown for
    a fault of another), and the failures are recorded."""
    first, second, config = two_nodes()

    def renewed(node):
        return read(api["coordination"].read_namespaced_lease, node, "kube-node-lease")["spec"]["renewTime"]

    with FaultProxy(kubeconfigs[1]) as proxy:
        standin = KubeletStandIn(proxy.write_kubeconfig(str(tmp_path / "agent.kubeconfig")), config,
                                 heartbeat_interval=0.5).start()
        try:
            proxy.inject_fault("PATCH", "/leases/%s$" % re.escape(first), status=500, count=1000000)
            failing, other = renewed(first), renewed(second)
            # renewTime has a resolution of a second; the heartbeat comes every half second
            wait_for(lambda: renewed(second) != other, timeout=10, what="the second node's Lease to be renewed")
            time.sleep(1.5)
            assert renewed(first) == failing
            assert any("(HTTP 500)" in e for e in standin.errors), standin.errors
        finally:
            proxy.clear_faults()
            standin.stop()


def test_a_standin_that_fails_to_start_leaves_no_node_behind(kubeconfigs, api, tmp_path):
    """The second node's registration fails (its status write answered 500 by the fault proxy): start() raises,
    and the first node, already registered, is removed again."""
    from kubernetes.client.rest import ApiException

    first, second, config = two_nodes()
    with FaultProxy(kubeconfigs[1]) as proxy:
        proxy.inject_fault("PATCH", "/nodes/%s/status$" % re.escape(second), status=500, count=1)
        standin = KubeletStandIn(proxy.write_kubeconfig(str(tmp_path / "agent.kubeconfig")), config)
        with pytest.raises(ApiException) as failed:
            standin.start()
        assert failed.value.status == 500
        assert [r["path"] for r in proxy.requests if r["method"] == "DELETE" and r["path"].endswith("/nodes/" + first)]
    names = [n["metadata"]["name"] for n in read(api["core"].list_node)["items"]]
    assert first not in names and second not in names
