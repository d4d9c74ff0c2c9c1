# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Scheduling extended resources (the scheduler of each cluster)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.rows import create_pod, pod_body, row


# -- Scheduling extended resources (the scheduler of each cluster)

def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _ready_node(t, capacity):
    """A node reporting Ready with capacity (as a kubelet would), once nothing taints it."""
    stamp = _now()
    name = t.node(status={"capacity": capacity, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]})
    deadline = time.time() + 20
    while t.get("/api/v1/nodes/" + name)["spec"].get("taints"):   # the node lifecycle controller lifts not-ready
        assert time.time() < deadline, "%s: node %s still tainted after 20 s" % (t.kind, name)
        time.sleep(0.1)
    return name


def _wait_scheduled(t, pod, seconds=20):
    """('bound', node) or ('unschedulable', message) as the pod's PodScheduled condition says."""
    deadline = time.time() + seconds
    while True:
        body = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))
        if body["spec"].get("nodeName"):
            return "bound", body["spec"]["nodeName"]
        for cond in (body.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
                return cond.get("reason"), cond["message"]
        assert time.time() < deadline, "%s: pod %s neither bound nor unschedulable after %d s" % (t.kind, pod, seconds)
        time.sleep(0.1)


# reasons other nodes of a shared cluster give (they do not match the probe's node selector, or are tainted)
_OTHER_NODES = re.compile(r"node\(s\) didn't match Pod's node affinity/selector|had untolerated taint|"
                          r"Preemption is not helpful for scheduling|node\(s\) were unschedulable")


def _histogram(text, keep_all=False):
    """'1 A, 2 B' -> {A: 1, B: 2}, without the reasons of nodes that are not the probe's."""
    out = {}
    for part in text.split(", "):
        count, _sep, reason = part.partition(" ")
        if keep_all or not _OTHER_NODES.search(reason):
            out[reason] = int(count)
    return out


def _schedule_message(message):
    """FitError text -> {filter: histogram, post_filter: what PostFilter plugins added, preemption: histogram},
    keeping only what the probe's node says (the preemption verdict of the probe's node is the one that is not
    'not helpful' unless the row is about that verdict: see keep_all)."""
    found = re.match(r"^0/\d+ nodes are available: (.*?)\. (?:(.*), )?preemption: 0/\d+ nodes are available: (.*)\.$",
                     message.strip())
    if not found:
        return message
    preemption = _histogram(found.group(3), keep_all=True)
    others = int(re.match(r"^0/(\d+)", message).group(1)) - 1   # every other node: its filter was unresolvable
    unhelpful = preemption.pop("Preemption is not helpful for scheduling", 0) - others
    if unhelpful:
        preemption["Preemption is not helpful for scheduling"] = unhelpful
    reasons = found.group(1)   # a PreFilter refusal stands instead of the nodes' histogram
    return {"filter": _histogram(reasons) if reasons[:1].isdigit() else reasons, "post_filter": found.group(2),
            "preemption": preemption}


# the scheduler may still see the node's not-ready taint a moment after the node lifecycle controller lifted it
NOT_READY_TOLERATION = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]


def _schedule(t, node, limits):
    pod = t.name("pod")
    body = pod_body(pod, {"limits": limits}, nodeSelector={"kubernetes.io/hostname": node}, tolerations=NOT_READY_TOLERATION)
    code, created = create_pod(t, body)
    assert code == 201, created
    return _wait_scheduled(t, pod)


def _scheduled(result, node):
    state, detail = result
    if state == "bound":
        return "bound to the node" if detail == node else "bound elsewhere"
    return {state: _schedule_message(detail)}


def _unschedulable(reason, verdict="No preemption victims found for incoming pod"):
    return {"Unschedulable": {"filter": {reason: 1}, "post_filter": "no new claims to deallocate",
                              "preemption": {verdict: 1}}}


def _dongle_node(t, capacity=None):
    node = _ready_node(t, capacity or {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/dongle": "4"})
    t.ok("PATCH", "/api/v1/nodes/" + node, {"metadata": {"labels": {"kubernetes.io/hostname": node}}}, MERGE_PATCH)
    return node


@row("scheduler-extended-resource-fit-and-usage", {"3 of 4": "bound to the node", "2 more of 4": _unschedulable(
    "Insufficient example.com/dongle")}, controllers=True)
def probe_scheduler_extended_resource_fit_and_usage(t):
    node = _dongle_node(t)
    return {"3 of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "3"}), node),
            "2 more of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "2"}), node)}


@row("scheduler-request-above-allocatable-unresolvable", {
    "5 of 4": _unschedulable("Insufficient example.com/dongle", "Preemption is not helpful for scheduling"),
    "cpu 5 of 4": _unschedulable("Insufficient cpu", "Preemption is not helpful for scheduling"),
    "absent resource": _unschedulable("Insufficient example.com/other", "Preemption is not helpful for scheduling")},
    controllers=True)
def probe_scheduler_request_above_allocatable_unresolvable(t):
    node = _dongle_node(t)
    return {"5 of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "5"}), node),
            "cpu 5 of 4": _scheduled(_schedule(t, node, {"cpu": "5"}), node),
            "absent resource": _scheduled(_schedule(t, node, {"example.com/other": "1"}), node)}


@row("scheduler-node-without-pods-allocatable", _unschedulable("Too many pods"), controllers=True)
def probe_scheduler_node_without_pods_allocatable(t):
    node = _dongle_node(t, {"cpu": "4", "memory": "8Gi", "example.com/dongle": "4"})
    return _scheduled(_schedule(t, node, {"example.com/dongle": "1"}), node)
