# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.k8s_node_drain: cordon, evictions through the Eviction API (PodDisruptionBudgets respected, 429
retried), DaemonSet and mirror pods left alone, uncordon; check mode and re-runs write nothing.

On any cluster: the tests bring two Node objects of their own (no kubelet) and bind their pods to them by
spec.nodeName in a namespace of their own; each pod's controller is an object that exists (the garbage collector
deletes a pod whose owner is absent), and where a kubelet would report a pod Running and Ready, or a node Ready,
the test writes that status itself. The request-log checks and the lost-answer test need the suite's own control plane.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from kubernetes import client

from tests.integration.conftest import wait_for
from tests.support.k8s_objects import read_out

MODULE = "kubehw.devices.k8s_node_drain"
NODE = "gpu-1"
OTHER = "gpu-2"
DS_REF = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "00000000-0000-4000-8000-000000000002",
          "controller": True, "blockOwnerDeletion": True}


def existing_owner(cluster, namespace="default"):
    """A controller reference to an object that exists (a ConfigMap of the namespace, removed after the test): the
    garbage collector of a real control plane deletes a pod whose owner is absent, as one of a made-up ReplicaSet."""
    name = cluster.unique_name("owner")
    made = json.loads(cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}, _preload_content=False).data)
    cluster.on_close("delete configmap %s" % name,
                     lambda: cluster.core.delete_namespaced_config_map(name, namespace, _preload_content=False))
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": made["metadata"]["uid"], "controller": True}


def make_pod(cluster, name, node, labels=None, owner=None, annotations=None, namespace="default"):
    """A pod on a node the suite's kubelet runs pods on (the kubelet stand-in), managed by a controller that
    exists (owner: a controller reference, else existing_owner()): the lost-answer test."""
    owner = owner or existing_owner(cluster, namespace)
    meta = {"name": name, "namespace": namespace, "labels": labels or {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [owner]
    if annotations:
        meta["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "registry.example/web:1"}]}}
    read_out(cluster.core.create_namespaced_pod(namespace, pod, _preload_content=False))


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


# on the node to drain: keeps the DaemonSet controller from starting pods of its own there (owner_object)
NO_DAEMONS = {"key": "kubehw-it/no-new-daemons", "value": "yes", "effect": "NoSchedule"}


def own_nodes(cluster):
    """Two Node objects of the test's own: (the node to drain, another)."""
    return tuple(cluster.create_nodes([{"what": "drain", "taints": [NO_DAEMONS]}, {"what": "other"}]))


def make_pdb(cluster, name, **spec):
    spec["selector"] = {"matchLabels": {"app": "web"}}
    read_out(client.PolicyV1Api(cluster.api_client).create_namespaced_pod_disruption_budget(
        cluster.namespace(), {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
                              "spec": spec}, _preload_content=False))


def pdb_status(cluster, name):
    return json.loads(client.PolicyV1Api(cluster.api_client).read_namespaced_pod_disruption_budget(
        name, cluster.namespace(), _preload_content=False).data)


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


def dry_runs(cluster, since):
    """The write requests since the mark, each of which must be a server-side dry run (check mode's evictions)."""
    found = cluster.writes(since)
    assert all(w["query"].get("dryRun") == "All" for w in found), found
    return [(w["method"], w["path"], w["status"]) for w in found]


def test_drain_skips_daemonset_and_mirror_pods_check_mode_and_rerun_write_nothing(cluster, ansible):
    target, other = own_nodes(cluster)
    ns = cluster.namespace()
    cluster.create_pod("web-a", target, labels={"app": "web"}, owner=cluster.owner_object())
    daemonset = cluster.owner_object("DaemonSet", node=target)
    cluster.create_pod("agent-x", target, labels={"kubehw-it/owner": daemonset["name"]}, owner=daemonset)
    cluster.create_pod("static-x", target, labels={"app": "static"}, annotations={"kubernetes.io/config.mirror": "abc"})
    cluster.create_pod("web-b", other, labels={"app": "web"}, owner=cluster.owner_object())

    mark = cluster.mark()
    run = ansible(drain(name=target), check=True, diff=True)
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["changed"] is True and out["evicted"] == ["%s/web-a" % ns] and out["blocked"] == []
    assert out["diff"]["before"] == {"unschedulable": False, "pods": ["%s/web-a" % ns]}
    if cluster.controlled:
        # the one eviction it would send, as a dry run
        assert dry_runs(cluster, mark) == [("POST", "/api/v1/namespaces/%s/pods/web-a/eviction" % ns, 201)]
    # on any cluster: nothing cordoned, nothing evicted
    assert not node(cluster, target)["spec"].get("unschedulable")
    assert pod_names(cluster, target) == ["agent-x", "static-x", "web-a"]

    # the drain, then the same task again: the second one finds nothing to do
    mark = cluster.mark()
    run = ansible(drain(name=target) + [dict(drain(name=target)[0], name="Drain again", register="again")])
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["changed"] is True and out["cordoned"] is False
    assert out["evicted"] == ["%s/web-a" % ns]
    assert sorted((s["pod"], s["reason"]) for s in out["left_on_node"]) == [
        ("%s/agent-x" % ns, "DaemonSet"), ("%s/static-x" % ns, "mirror pod")]
    assert run.result("Drain again")["changed"] is False and run.result("Drain again")["cordoned"] is True
    # the cordon is marked as this module's, with its time: a rollout that stopped here lifts it when run again
    assert out["own_cordon"] is False and run.result("Drain again")["own_cordon"] is True
    stamp = node(cluster, target)["metadata"]["annotations"]["kubehw.devices/cordoned"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp
    if cluster.controlled:
        assert writes(cluster, mark) == [
            ("PATCH", "/api/v1/nodes/%s" % target, 200),
            ("POST", "/api/v1/namespaces/%s/pods/web-a/eviction" % ns, 201)]
    assert pod_names(cluster, target) == ["agent-x", "static-x"]
    assert pod_names(cluster, other) == ["web-b"]
    assert node(cluster, target)["spec"]["unschedulable"] is True
    # the node lifecycle controller's taint follows the cordon (asynchronously, as on a real cluster)
    wait_for(lambda: {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in node(cluster, target)["spec"].get("taints") or []],
        what="the unschedulable taint on node %s" % target)

    # the node comes back Ready (its kubelet would report it), then uncordon, and again
    cluster.report_ready(target)
    mark = cluster.mark()
    uncordon = drain(name=target, state="uncordoned")
    run = ansible(uncordon + [dict(uncordon[0], name="Uncordon again", register="again")])
    assert run.rc == 0, run.output()
    assert run.result("Drain")["changed"] is True and run.result("Uncordon again")["changed"] is False
    if cluster.controlled:
        assert writes(cluster, mark) == [("PATCH", "/api/v1/nodes/%s" % target, 200)]
    assert "unschedulable" not in node(cluster, target)["spec"]
    assert "kubehw.devices/cordoned" not in (node(cluster, target)["metadata"].get("annotations") or {})

    # cordoned by someone else (kubectl cordon): the drain says so, leaves it unmarked, and writes no cordon
    read_out(cluster.core.patch_node(target, {"spec": {"unschedulable": True}}, _preload_content=False))
    run = ansible(drain(name=target))
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert out["cordoned"] is True and out["own_cordon"] is False and out["changed"] is False, out
    assert "kubehw.devices/cordoned" not in (node(cluster, target)["metadata"].get("annotations") or {})


def test_only_own_cordon_lifts_the_cordon_the_module_made_and_keeps_anyone_elses(cluster, ansible):
    """What a rollout that resumes runs on each node: one uncordon that lifts the cordon it left and keeps an
    administrator's. A node with nothing of ours to lift is not waited for, Ready or not (neither node here has a
    kubelet, so neither is Ready: a wait would fail after its 3 seconds)."""
    target, other = own_nodes(cluster)
    read_out(cluster.core.patch_node(other, {"spec": {"unschedulable": True}}, _preload_content=False))

    def lift(name, label):
        return [dict(drain(name=name, state="uncordoned", only_own_cordon=True, timeout=3)[0], name=label)]

    mark = cluster.mark()
    run = ansible(lift(other, "Someone else's") + lift(target, "Not cordoned"))
    assert run.rc == 0, run.output()
    for label, cordoned in (("Someone else's", True), ("Not cordoned", False)):
        out = run.result(label)
        assert (out["changed"], out["cordoned"], out["own_cordon"]) == (False, cordoned, False), (label, out)
    assert node(cluster, other)["spec"]["unschedulable"] is True
    if cluster.controlled:
        assert writes(cluster, mark) == []

    # the module's own cordon: waited for until the node is Ready, as without the option, then lifted
    run = ansible(drain(name=target))
    assert run.rc == 0 and run.result("Drain")["changed"] is True, run.output()
    run = ansible(lift(target, "Own, not Ready"))
    assert run.rc != 0 and "did not report Ready=True within 3s" in run.result("Own, not Ready")["msg"], run.output()
    assert node(cluster, target)["spec"]["unschedulable"] is True
    cluster.report_ready(target)
    mark = cluster.mark()
    run = ansible(lift(target, "Own") + lift(other, "Still someone else's"))
    assert run.rc == 0, run.output()
    out = run.result("Own")
    assert (out["changed"], out["cordoned"], out["own_cordon"]) == (True, True, True), out
    assert "unschedulable" not in node(cluster, target)["spec"]
    assert "kubehw.devices/cordoned" not in (node(cluster, target)["metadata"].get("annotations") or {})
    assert run.result("Still someone else's")["changed"] is False
    assert node(cluster, other)["spec"]["unschedulable"] is True
    if cluster.controlled:
        assert writes(cluster, mark) == [("PATCH", "/api/v1/nodes/%s" % target, 200)]


def test_a_drains_evictions_share_one_connection(cluster, ansible):
    """Each eviction's answer is read whole, so the next eviction goes on the same kept-alive connection instead of
    opening a TLS connection of its own (a node with many pods: one handshake, not one per pod)."""
    cluster.require_controlled("reads the connection of each request from the fault proxy's log")
    target, _other = own_nodes(cluster)
    for name in ("web-a", "web-b", "web-c"):
        cluster.create_pod(name, target, labels={"app": "web"}, owner=cluster.owner_object())
    mark = cluster.mark()
    run = ansible(drain(name=target))
    assert run.rc == 0, run.output()
    evictions = [w for w in cluster.writes(mark) if w["path"].endswith("/eviction")]
    assert [w["status"] for w in evictions] == [201, 201, 201], evictions
    assert len(set(w["connection"] for w in evictions)) == 1, [(w["path"], w["connection"]) for w in evictions]


def test_budget_refusal_is_retried_then_times_out_naming_the_budget(cluster, ansible):
    target, other = own_nodes(cluster)
    # Running and Ready pods (as their kubelets would report them): only those count for the budget; a Pending
    # pod is evicted without a budget check
    cluster.create_pod("web-a", target, labels={"app": "web"}, owner=cluster.owner_object(), phase="Running",
                       ready=True)
    cluster.create_pod("web-b", other, labels={"app": "web"}, owner=cluster.owner_object(), phase="Running",
                       ready=True)
    make_pdb(cluster, "web", minAvailable=2)
    if not cluster.controlled:
        # the disruption controller writes the budget's status asynchronously; until it has, every eviction is
        # refused with "still being processed" (the suite's own control plane computes the status at each eviction)
        def counted():
            budget = pdb_status(cluster, "web")
            status = budget.get("status") or {}
            return status.get("observedGeneration") == budget["metadata"].get("generation") and \
                status.get("currentHealthy") == 2
        wait_for(counted, what="the disruption controller to count 2 healthy pods for budget web")

    # check mode names the pod the budget holds on the node now, and changes nothing
    mark = cluster.mark()
    run = ansible(drain(name=target, timeout=4), check=True)
    assert run.rc == 0, run.output()
    out = run.result("Drain")
    assert [b["pod"] for b in out["blocked"]] == ["%s/web-a" % cluster.namespace()], out
    assert "The disruption budget web needs 2 healthy pods and has 2 currently" in out["blocked"][0]["message"]
    if cluster.controlled:
        assert dry_runs(cluster, mark) == [
            ("POST", "/api/v1/namespaces/%s/pods/web-a/eviction" % cluster.namespace(), 429)]
    assert pod_names(cluster, target) == ["web-a"] and not node(cluster, target)["spec"].get("unschedulable")

    mark = cluster.mark()
    run = ansible(drain(name=target, timeout=4))
    assert run.rc != 0
    out = run.result("Drain")
    assert 'the eviction of pod "%s/web-a" was refused' % cluster.namespace() in out["msg"]
    assert "The disruption budget web needs 2 healthy pods and has 2 currently" in out["msg"]
    assert "stays cordoned" in out["msg"]
    if cluster.controlled:
        # the task gives up at its timeout (4 s: tries after 0, 1 and 3 s at most, fewer on a slow machine) instead
        # of retrying for the 45 s of the client layer; counted in the request log, not in wall time
        evictions = [w for w in writes(cluster, mark) if w[1].endswith("/eviction")]
        assert 1 <= len(evictions) <= 3 and set(w[2] for w in evictions) == {429}, evictions
    assert pod_names(cluster, target) == ["web-a"]
    assert node(cluster, target)["spec"]["unschedulable"] is True


def test_unmanaged_pod_refused_before_any_write_unless_forced(cluster, ansible):
    target, _other = own_nodes(cluster)
    cluster.create_pod("bare", target, labels={"app": "bare"})
    mark = cluster.mark()
    run = ansible(drain(name=target))
    assert run.rc != 0
    assert "%s/bare" % cluster.namespace() in run.result("Drain")["msg"]
    assert "force: true" in run.result("Drain")["msg"]
    if cluster.controlled:
        assert writes(cluster, mark) == []
    assert not node(cluster, target)["spec"].get("unschedulable") and pod_names(cluster, target) == ["bare"]
    run = ansible(drain(name=target, force=True))
    assert run.rc == 0, run.output()
    assert run.result("Drain")["evicted"] == ["%s/bare" % cluster.namespace()]
    assert pod_names(cluster, target) == []


BAD_NAMES = [("", "empty or blank"), ("  ", "empty or blank"), ("GPU_1", "not a valid node name"),
             ("gpu-1\n", "not a valid node name")]


def test_bad_node_names_refused_before_any_request(cluster, ansible):
    mark = cluster.mark()
    tasks = [dict(drain(name=name)[0], name="Drain %d" % i, ignore_errors=True) for i, (name, dummy) in enumerate(BAD_NAMES)]
    run = ansible(tasks)
    for i, (name, expected) in enumerate(BAD_NAMES):
        out = run.result("Drain %d" % i)
        assert out.get("failed") and expected in out["msg"], (name, out)
    if cluster.controlled:
        assert cluster.requests(mark) == []


def test_eviction_whose_answer_is_lost_is_read_back_not_sent_again(cluster, ansible):
    """504 after the eviction was stored, and the connection dropped after it: each pod is read back (terminating:
    evicted) instead of evicted again; a budget's 429 stays the documented "retry later"."""
    cluster.require_controlled("injects lost answers after commit")
    for name in ("web-a", "web-b", "web-c"):
        make_pod(cluster, name, NODE)
    make_pod(cluster, "web-d", OTHER)
    wait_ready(cluster, ["web-a", "web-b", "web-c", "web-d"])
    cluster.controls.inject_fault("POST", r"/pods/web-a/eviction$", status="commit-504")
    cluster.controls.inject_fault("POST", r"/pods/web-b/eviction$", status="commit-drop")
    cluster.controls.inject_fault("POST", r"/pods/web-c/eviction$", status=429, retry_after=1)
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
