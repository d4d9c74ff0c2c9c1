# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.k8s_node_drain on the simulated cluster: cordon, evictions through the Eviction API
(PodDisruptionBudgets respected, 429 retried), DaemonSet and mirror pods left alone, uncordon; check mode and
re-runs write nothing. The simulated cluster's node names and pod placement are the point, so these tests
need it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from kubernetes import client

MODULE = "kubehw.devices.k8s_node_drain"
NODE = "gpu-1"
OTHER = "gpu-2"
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c8", "uid": "00000000-0000-4000-8000-000000000001",
          "controller": True, "blockOwnerDeletion": True}
DS_REF = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "00000000-0000-4000-8000-000000000002",
          "controller": True, "blockOwnerDeletion": True}


def make_pod(cluster, name, node, labels=None, owner="ReplicaSet", annotations=None, namespace="default"):
    owner = dict(RS_REF) if owner == "ReplicaSet" else owner
    meta = {"name": name, "namespace": namespace, "labels": labels or {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [owner]
    if annotations:
        meta["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "registry.example/web:1"}]}}
    cluster.core.create_namespaced_pod(namespace, pod, _preload_content=False)


def wait_ready(cluster, names, namespace="default", timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = json.loads(cluster.core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
        ready = set(p["metadata"]["name"] for p in pods
                    if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []))
        if set(names) <= ready:
            return
        time.sleep(0.1)
    raise AssertionError("pods %s not ready" % names)


def make_pdb(cluster, name, **spec):
    spec["selector"] = {"matchLabels": {"app": "web"}}
    client.PolicyV1Api(cluster.api_client).create_namespaced_pod_disruption_budget(
        "default", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
                    "spec": spec}, _preload_content=False)


def node(cluster, name=NODE):
    return json.loads(cluster.core.read_node(name, _preload_content=False).data)


def pod_names(cluster, node_name=NODE):
    pods = json.loads(cluster.core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=%s" % node_name, _preload_content=False).data)["items"]
    return sorted(p["metadata"]["name"] for p in pods)


def drain(**params):
    args = dict(name=NODE, timeout=20)
    args.update(params)
    return [{"name": "Drain", MODULE: args, "register": "out"}]


def writes(cluster, since):
    return [(w["method"], w["path"], w["status"]) for w in cluster.writes(since)]


def test_drain_skips_daemonset_and_mirror_pods_check_mode_and_rerun_write_nothing(cluster, ansible):
    cluster.require_simulated("places pods on the simulated node gpu-1")
    make_pod(cluster, "web-a", NODE)
    make_pod(cluster, "agent-x", NODE, labels={"app": "agent"}, owner=DS_REF)
    make_pod(cluster, "static-x", NODE, labels={"app": "static"}, owner=None,
             annotations={"kubernetes.io/config.mirror": "abc"})
    make_pod(cluster, "web-b", OTHER)
    wait_ready(cluster, ["web-a", "agent-x", "static-x", "web-b"])

    mark = cluster.mark()
    run = ansible(drain(), check=True, diff=True)
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["changed"] is True and out["evicted"] == ["default/web-a"]
    assert out["diff"]["before"] == {"unschedulable": False, "pods": ["default/web-a"]}
    assert writes(cluster, mark) == []

    # the drain, then the same task again: the second one finds nothing to do
    mark = cluster.mark()
    run = ansible(drain() + [dict(drain()[0], name="Drain again", register="again")])
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["changed"] is True and out["cordoned"] is False
    assert out["evicted"] == ["default/web-a"]
    assert sorted((s["pod"], s["reason"]) for s in out["left_on_node"]) == [
        ("default/agent-x", "DaemonSet"), ("default/static-x", "mirror pod")]
    assert run.result("Drain again")["changed"] is False and run.result("Drain again")["cordoned"] is True
    assert writes(cluster, mark) == [
        ("PATCH", "/api/v1/nodes/%s" % NODE, 200),
        ("POST", "/api/v1/namespaces/default/pods/web-a/eviction", 201)]
    assert pod_names(cluster) == ["agent-x", "static-x"]
    assert pod_names(cluster, OTHER) == ["web-b"]
    spec = node(cluster)["spec"]
    assert spec["unschedulable"] is True
    # the node lifecycle controller's taint follows the cordon
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in spec.get("taints") or []]

    mark = cluster.mark()
    uncordon = drain(state="uncordoned")
    run = ansible(uncordon + [dict(uncordon[0], name="Uncordon again", register="again")])
    assert run.rc == 0, run.output()
    assert run.result("Drain")["changed"] is True and run.result("Uncordon again")["changed"] is False
    assert writes(cluster, mark) == [("PATCH", "/api/v1/nodes/%s" % NODE, 200)]
    spec = node(cluster)["spec"]
    assert "unschedulable" not in spec


def test_budget_refusal_is_retried_then_times_out_naming_the_budget(cluster, ansible):
    cluster.require_simulated("places pods on the simulated nodes")
    make_pod(cluster, "web-a", NODE)
    make_pod(cluster, "web-b", OTHER)
    make_pdb(cluster, "web", minAvailable=2)
    wait_ready(cluster, ["web-a", "web-b"])

    mark = cluster.mark()
    run = ansible(drain(timeout=4))
    assert run.rc != 0
    out = run.result("Drain")
    assert 'the eviction of pod "default/web-a" was refused' in out["msg"]
    assert "The disruption budget web needs 2 healthy pods and has 2 currently" in out["msg"]
    assert "stays cordoned" in out["msg"]
    # the task gives up at its timeout (4 s: tries after 0, 1 and 3 s at most, fewer on a slow machine) instead of
    # retrying for the 45 s of the client layer; counted in the request log, not in wall time
    evictions = [w for w in writes(cluster, mark) if w[1].endswith("/eviction")]
    assert 1 <= len(evictions) <= 3 and set(w[2] for w in evictions) == {429}, evictions
    assert pod_names(cluster) == ["web-a"]
    assert node(cluster)["spec"]["unschedulable"] is True


def test_unmanaged_pod_refused_before_any_write_unless_forced(cluster, ansible):
    cluster.require_simulated("places pods on the simulated node gpu-1")
    make_pod(cluster, "bare", NODE, owner=None)
    wait_ready(cluster, ["bare"])
    mark = cluster.mark()
    run = ansible(drain())
    assert run.rc != 0
    assert "default/bare" in run.result("Drain")["msg"] and "force: true" in run.result("Drain")["msg"]
    assert writes(cluster, mark) == []
    run = ansible(drain(force=True))
    assert run.rc == 0, run.output()
    assert run.result("Drain")["evicted"] == ["default/bare"]
    assert pod_names(cluster) == []


BAD_NAMES = [("", "empty or blank"), ("  ", "empty or blank"), ("GPU_1", "not a valid node name"),
             ("gpu-1\n", "not a valid node name")]


def test_bad_node_names_refused_before_any_request(cluster, ansible):
    cluster.require_simulated("reads the request log")
    mark = cluster.mark()
    tasks = [dict(drain(name=name)[0], name="Drain %d" % i, ignore_errors=True) for i, (name, dummy) in enumerate(BAD_NAMES)]
    run = ansible(tasks)
    for i, (name, expected) in enumerate(BAD_NAMES):
        out = run.result("Drain %d" % i)
        assert out.get("failed") and expected in out["msg"], (name, out)
    assert cluster.requests(mark) == []


def test_eviction_whose_answer_is_lost_is_read_back_not_sent_again(cluster, ansible):
    """504 after the eviction was stored, and the connection dropped after it: each pod is read back (terminating:
    evicted) instead of evicted again; a budget's 429 stays the documented "retry later"."""
    cluster.require_simulated("injects lost answers after commit")
    for name in ("web-a", "web-b", "web-c"):
        make_pod(cluster, name, NODE)
    make_pod(cluster, "web-d", OTHER)
    wait_ready(cluster, ["web-a", "web-b", "web-c", "web-d"])
    cluster.sim.inject_fault("POST", r"/pods/web-a/eviction$", status="commit-504")
    cluster.sim.inject_fault("POST", r"/pods/web-b/eviction$", status="commit-drop")
    cluster.sim.inject_fault("POST", r"/pods/web-c/eviction$", status=429, retry_after=1)
    mark = cluster.mark()
    run = ansible(drain())
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["evicted"] == ["default/web-a", "default/web-b", "default/web-c"], out
    warnings = " ".join(out.get("warnings") or [])
    assert 'eviction of pod "default/web-a" was lost (504 Timeout); read back, the pod is terminating' in warnings
    assert 'eviction of pod "default/web-b" was lost (the connection dropped); read back' in warnings
    evictions = [(w[1].split("/")[-2], w[2]) for w in writes(cluster, mark) if w[1].endswith("/eviction")]
    # one POST each for the lost answers (the server stored both; the log has what the client got), two for the 429
    assert sorted(evictions) == [("web-a", 504), ("web-b", "drop"), ("web-c", 201), ("web-c", 429)], evictions
    reads = [r["path"] for r in cluster.requests(mark) if r["method"] == "GET" and "/pods/web-" in r["path"]]
    assert sorted(reads) == ["/api/v1/namespaces/default/pods/web-a", "/api/v1/namespaces/default/pods/web-b"], reads
    assert pod_names(cluster) == []
