# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controllers seen end to end: SimCluster over HTTPS with the official kubernetes client."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from tests.simcluster.tests.test_controllers import wait_for

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k8s_client  # noqa: E402  pylint: disable=wrong-import-position
from kubernetes import config as k8s_config  # noqa: E402  pylint: disable=wrong-import-position

CONFIG = {
    "sync_interval": 0.1,
    "pod_start_delay": 0.1,
    "nodes": [{"name": "gpu-1", "inventory": {"example.com/dongle": 4}}],
}
DONGLE = "example.com/dongle"


@pytest.fixture
def sim(simcluster_factory):
    cluster = simcluster_factory(CONFIG)
    yield cluster
    assert cluster.controllers.errors == []


@pytest.fixture
def api(sim):
    api_client = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    yield k8s_client.CoreV1Api(api_client), k8s_client.AppsV1Api(api_client)
    api_client.close()


def raw(call, *args, **kwargs):
    """The JSON the server sent, so absent fields stay absent (the models would turn them into None)."""
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def plugin_ds(name, annotations=None):
    tmeta = {"labels": {"app": name}}
    if annotations:
        tmeta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "annotations": annotations or {}},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": tmeta,
                                  "spec": {"containers": [{"name": "plugin", "image": "registry.example/%s:1" % name}]}}}}


def ds_status(apps, name):
    return raw(apps.read_namespaced_daemon_set_status, name, "kube-system").get("status") or {}


def test_daemonset_status_and_plugin_over_http(sim, api):
    core, apps = api
    sim.fail_pod_start("gpu-1", "ImagePullBackOff")
    apps.create_namespaced_daemon_set("kube-system", plugin_ds("dongle", {"devices.kubehw.io/resources": DONGLE}))
    never_started = {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0,
                     "numberUnavailable": 1, "updatedNumberScheduled": 1, "observedGeneration": 1,
                     "numberMisscheduled": 0}
    wait_for(lambda: ds_status(apps, "dongle") == never_started, what="never-started status")
    pods = raw(core.list_namespaced_pod, "kube-system", label_selector="app=dongle")["items"]
    assert len(pods) == 1
    assert pods[0]["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert DONGLE not in raw(core.read_node, "gpu-1")["status"]["capacity"]

    # the pod runs: counts as the facts file says, and the plugin advertises the inventory
    sim.controllers.allow_pod_start("gpu-1")
    wait_for(lambda: ds_status(apps, "dongle").get("numberAvailable") == 1, what="available")
    status = ds_status(apps, "dongle")
    assert status["numberReady"] == 1 and "numberUnavailable" not in status
    wait_for(lambda: raw(core.read_node, "gpu-1")["status"]["capacity"].get(DONGLE) == "4", what="capacity")
    wait_for(lambda: raw(core.read_node, "gpu-1")["status"]["allocatable"].get(DONGLE) == "4", what="allocatable")

    # unreachable node: nothing desired, the pod misscheduled, updatedNumberScheduled gone
    sim.set_node_unreachable("gpu-1", True)
    wait_for(lambda: ds_status(apps, "dongle") == {
        "desiredNumberScheduled": 0, "currentNumberScheduled": 0, "numberMisscheduled": 1, "numberReady": 0,
        "observedGeneration": 1}, what="unreachable status")
    sim.set_node_unreachable("gpu-1", False)
    wait_for(lambda: ds_status(apps, "dongle").get("numberAvailable") == 1, what="recovered")

    # deleting the DaemonSet through the API removes its pods and unregisters the resource
    apps.delete_namespaced_daemon_set("dongle", "kube-system")
    wait_for(lambda: not raw(core.list_namespaced_pod, "kube-system", label_selector="app=dongle")["items"],
             what="pods gone")
    wait_for(lambda: raw(core.read_node, "gpu-1")["status"]["allocatable"].get(DONGLE) == "0", what="zeroed")


def test_scheduler_over_http(sim, api):
    core, _apps = api
    core.patch_node_status("gpu-1", [{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}])
    wait_for(lambda: raw(core.read_node, "gpu-1")["status"]["allocatable"].get(DONGLE) == "4", what="allocatable")

    def make(name, count):
        core.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {DONGLE: str(count)}}}]}})

    def events(name):
        return raw(core.list_namespaced_event, "default", field_selector="involvedObject.name=%s" % name)["items"]

    make("three", 3)
    wait_for(lambda: raw(core.read_namespaced_pod, "three", "default")["status"].get("phase") == "Running",
             what="three running")
    expected = ("0/1 nodes are available: 1 Insufficient example.com/dongle. no new claims to deallocate, preemption: 0/1 nodes are "
                "available: 1 No preemption victims found for incoming pod.")
    # five is above gpu-1's whole allocatable, which no preemption can help (NodeResourcesFit: unresolvable)
    above_allocatable = expected.replace("No preemption victims found for incoming pod",
                                         "Preemption is not helpful for scheduling")
    for name, count, message in (("five", 5, above_allocatable), ("two", 2, expected)):
        make(name, count)
        wait_for(lambda name=name: [e for e in events(name) if e["reason"] == "FailedScheduling"], what=name)
        (event,) = [e for e in events(name) if e["reason"] == "FailedScheduling"]
        assert event["type"] == "Warning" and event["message"] == message
        pod = raw(core.read_namespaced_pod, name, "default")
        assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")

    # a node whose allocatable lacks `pods` fits no pod at all
    core.delete_namespaced_pod("three", "default")
    core.patch_node_status("gpu-1", [{"op": "remove", "path": "/status/allocatable/pods"}])
    make("one", 1)
    wait_for(lambda: [e for e in events("one") if e["reason"] == "FailedScheduling"], what="one")
    assert events("one")[0]["message"] == (
        "0/1 nodes are available: 1 Too many pods. no new claims to deallocate, preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def test_pod_delete_grace_period_as_the_pod_strategy_decides(sim, api):
    """kube-apiserver's CheckGracefulDelete (pkg/registry/core/pod/strategy.go): a bound, running pod deleted
    with gracePeriodSeconds 0, or whose spec says 0, or that already Succeeded, is removed at once; the reply
    is the removed pod with deletionTimestamp and deletionGracePeriodSeconds 0, and a watch sees MODIFIED
    (deletionTimestamp set) then DELETED. Without a grace period in the request a running bound pod gets its
    spec's and stays Terminating until its kubelet is done."""
    core, _apps = api

    def bound_pod(name, **spec):
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": dict({"nodeName": "gpu-1", "containers": [{"name": "c", "image": "registry.example/x:1"}]},
                             **spec)}
        core.create_namespaced_pod("default", body)
        wait_for(lambda: (raw(core.read_namespaced_pod, name, "default").get("status") or {}).get("phase")
                 == "Running", what="%s running" % name)
        return raw(core.read_namespaced_pod, name, "default")["metadata"]["resourceVersion"]

    def gone(name):
        try:
            core.read_namespaced_pod(name, "default")
            return False
        except k8s_client.ApiException as err:
            return err.status == 404

    rv = bound_pod("zero-grace")
    reply = raw(core.delete_namespaced_pod, "zero-grace", "default", grace_period_seconds=0)
    assert reply["kind"] == "Pod" and reply["metadata"]["deletionGracePeriodSeconds"] == 0, reply
    assert reply["metadata"].get("deletionTimestamp"), reply
    assert gone("zero-grace")
    events = [(e["type"], bool(e["object"]["metadata"].get("deletionTimestamp"))) for e in json.loads(
        "[%s]" % ",".join(core.list_namespaced_pod("default", watch=True, resource_version=rv, timeout_seconds=1,
                                                   field_selector="metadata.name=zero-grace",
                                                   _preload_content=False).data.decode().split("\n")[:-1]))]
    assert events == [("MODIFIED", True), ("DELETED", True)], events

    bound_pod("spec-zero", terminationGracePeriodSeconds=0)
    core.delete_namespaced_pod("spec-zero", "default")
    assert gone("spec-zero")

    bound_pod("graceful", terminationGracePeriodSeconds=30)
    reply = raw(core.delete_namespaced_pod, "graceful", "default")
    assert reply["metadata"]["deletionGracePeriodSeconds"] == 30 and not gone("graceful"), reply
