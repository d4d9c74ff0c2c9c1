# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Nodes and DaemonSets (the controllers of each cluster)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from tests.integration.facts.api import _service_account
from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.rows import row
from tests.integration.facts.scheduling import _dongle_node, _now, _ready_node


# -- Nodes and DaemonSets (the controllers of each cluster)

def _taints(t, node):
    return sorted((x.get("key"), x.get("effect")) for x in t.get("/api/v1/nodes/" + node)["spec"].get("taints") or [])


def _taints_become(t, node, wanted, seconds=15):
    deadline = time.time() + seconds
    while _taints(t, node) != wanted and time.time() < deadline:
        time.sleep(0.1)
    return _taints(t, node)


def _created_node(t):
    """A node created without a status: its name, and the taints the create stored. They are read from the
    create's answer: a read after it races the node lifecycle controller, which takes the taint off a node that
    reports no conditions at all (node-without-conditions-loses-not-ready-taint)."""
    node = t.name("node")
    answer = t.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    t.later("DELETE", "/api/v1/nodes/" + node)
    return node, sorted((x.get("key"), x.get("effect")) for x in answer["spec"].get("taints") or [])


@row("node-not-ready-taint-until-ready", {"created": [("node.kubernetes.io/not-ready", "NoSchedule")],
                                          "after_ready": []}, controllers=True)
def probe_node_not_ready_taint_until_ready(t):
    node, created = _created_node(t)
    stamp = _now()
    t.ok("PATCH", "/api/v1/nodes/%s/status" % node, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": stamp,
         "lastTransitionTime": stamp}]}}, MERGE_PATCH)
    return {"created": created, "after_ready": _taints_become(t, node, [], seconds=5)}


@row("node-without-conditions-loses-not-ready-taint", {"created": [("node.kubernetes.io/not-ready", "NoSchedule")],
                                                       "later": []}, controllers=True)
def probe_node_without_conditions_loses_not_ready_taint(t):
    # the node lifecycle controller's NoSchedule tainting pass derives the condition taints from the conditions a node
    # reports: none at all, no condition taint (the unreachable verdict comes only after the 60 s startup grace)
    node, created = _created_node(t)
    return {"created": created, "later": _taints_become(t, node, [], seconds=10)}


@row("node-ready-false-taints", {"not_ready": [("node.kubernetes.io/not-ready", "NoSchedule")], "ready_again": []},
     controllers=True)
def probe_node_ready_false_taints(t):
    # a kubelet that reports Ready=False: not-ready for scheduling (the NoSchedule pass), gone once it reports Ready
    # again. Only NoSchedule is compared: the NoExecute pass (taint-based eviction) stops in a zone whose nodes are all
    # not ready, as a probe's node often is alone, and adds not-ready:NoExecute otherwise
    node = _ready_node(t, {"cpu": "1", "memory": "1Gi", "pods": "10"})

    def report(ready):
        stamp = _now()
        t.ok("PATCH", "/api/v1/nodes/%s/status" % node, {"status": {"conditions": [
            {"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
             "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}, MERGE_PATCH)

    def no_schedule_taints_become(wanted):
        deadline = time.time() + 15
        while True:
            taints = [x for x in _taints(t, node) if x[1] == "NoSchedule"]
            if taints == wanted or time.time() > deadline:
                return taints
            time.sleep(0.1)
    report("False")
    not_ready = no_schedule_taints_become([("node.kubernetes.io/not-ready", "NoSchedule")])
    report("True")
    return {"not_ready": not_ready, "ready_again": _taints_become(t, node, [])}


@row("node-cordon-taint", {"cordoned": [("node.kubernetes.io/unschedulable", "NoSchedule")], "uncordoned": []},
     controllers=True)
def probe_node_cordon_taint(t):
    node = _ready_node(t, {"cpu": "1", "memory": "1Gi", "pods": "10"})
    t.ok("PATCH", "/api/v1/nodes/" + node, {"spec": {"unschedulable": True}}, MERGE_PATCH)
    cordoned = _taints_become(t, node, [("node.kubernetes.io/unschedulable", "NoSchedule")])
    t.ok("PATCH", "/api/v1/nodes/" + node, {"spec": {"unschedulable": None}}, MERGE_PATCH)
    return {"cordoned": cordoned, "uncordoned": _taints_become(t, node, [])}


def _daemonset(t, node, **pod_spec):
    name = t.name("ds")
    labels = {"app": name}
    t.ok("POST", "/apis/apps/v1/namespaces/%s/daemonsets" % t.namespace, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": dict({
                "nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.example/pause:1"}]}, **pod_spec)}}})
    t.later("DELETE", "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (t.namespace, name))
    return name


def _ds_pods(t, name):
    return [p for p in t.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3D%s" % (t.namespace, name))["items"]
            if not p["metadata"].get("deletionTimestamp")]


_DS_COUNTS = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "numberAvailable",
              "numberUnavailable", "updatedNumberScheduled", "numberMisscheduled", "observedGeneration")


@row("daemonset-status-pod-never-starts", {"pods": 1, "bound": True, "phase": "Pending", "status": {
    "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0, "numberUnavailable": 1,
    "updatedNumberScheduled": 1, "numberMisscheduled": 0, "observedGeneration": 1}}, controllers=True)
def probe_daemonset_status_pod_never_starts(t):
    node = _dongle_node(t)
    name = _daemonset(t, node)
    deadline = time.time() + 30
    while True:
        status = t.get("/apis/apps/v1/namespaces/%s/daemonsets/%s" % (t.namespace, name)).get("status") or {}
        pods = _ds_pods(t, name)
        if (status.get("updatedNumberScheduled") == 1 and pods and pods[0]["spec"].get("nodeName")) \
                or time.time() > deadline:
            break
        time.sleep(0.2)
    for pod in pods:
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod["metadata"]["name"]))
    return {"pods": len(pods), "bound": bool(pods and pods[0]["spec"].get("nodeName") == node),
            "phase": pods[0]["status"].get("phase") if pods else None,
            "status": dict((k, status[k]) for k in _DS_COUNTS if k in status)}


def _pods_appear_once(t, name, create_missing, seconds=30):
    time.sleep(2)
    before = len(_ds_pods(t, name))
    create_missing()
    deadline = time.time() + seconds
    while not _ds_pods(t, name) and time.time() < deadline:
        time.sleep(0.2)
    pods = _ds_pods(t, name)
    for pod in pods:
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod["metadata"]["name"]))
    return {"pods_before": before, "pods_after": len(pods)}


@row("daemonset-waits-for-its-service-account", {"pods_before": 0, "pods_after": 1}, controllers=True)
def probe_daemonset_waits_for_its_service_account(t):
    node = _dongle_node(t)
    account = t.name("sa")
    name = _daemonset(t, node, serviceAccountName=account)
    return _pods_appear_once(t, name, lambda: _service_account(t, account))


@row("daemonset-waits-for-its-runtime-class", {"pods_before": 0, "pods_after": 1}, controllers=True)
def probe_daemonset_waits_for_its_runtime_class(t):
    node = _dongle_node(t)
    handler = t.name("rc")
    name = _daemonset(t, node, runtimeClassName=handler)

    def create():
        t.ok("POST", "/apis/node.k8s.io/v1/runtimeclasses", {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                                             "metadata": {"name": handler}, "handler": "runc"})
        t.later("DELETE", "/apis/node.k8s.io/v1/runtimeclasses/" + handler)
    return _pods_appear_once(t, name, create)
