# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.k8s_node_extended_resource end to end, through ansible-playbook.

Runs on the suite's own control plane by default and on a real one with KUBECONFIG. The request-log
assertions (how many writes, which content type) need the suite's own control plane; on a real one
the state assertions still run. Every test uses its own resource domain and removes what it added.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
import time

import pytest

from tests.support.k8s_objects import read_out

MODULE = "kubehw.devices.k8s_node_extended_resource"
DOMAIN = "it.kubehw.example.com"
DONGLE = "%s/dongle" % DOMAIN
# the suite's own control plane's own nodes (with kubelets) serve the fault-injection tests and the all_nodes test; the
# tests over many nodes bring MANY Node objects of their own (pool_nodes), as they do on a real cluster
POOL = ["pool-%02d" % i for i in range(3)]
MANY = 40

SIM_CONFIG = {
    "pod_start_delay": 0.1,
    "nodes": [
        {"name": "er-1", "labels": {"kubehw-it/role": "er"}},
        {"name": "er-2", "labels": {"kubehw-it/role": "er"}},
        {"name": "er-bare", "without_capacity": True},
    ] + [{"name": n, "labels": {"kubehw-it/pool": "many"}} for n in POOL],
}

pytestmark = pytest.mark.node_config(SIM_CONFIG)


def task(title, ignore_errors=False, **params):
    entry = {"name": title, MODULE: params}
    if ignore_errors:
        entry["ignore_errors"] = True
    return entry


def node_json(cluster, name):
    return json.loads(cluster.core.read_node(name, _preload_content=False).data)


def capacity(cluster, name):
    return node_json(cluster, name).get("status", {}).get("capacity") or {}


def first_node(cluster):
    """A Node object of this test's own (no kubelet): on a real cluster no other test, xdist worker or run writes
    to it, and the cluster's own nodes are never touched; the same on the suite's own control plane, so that path is the
    one proven here."""
    return cluster.create_nodes([{"what": "er", "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}])[0]


def writes(cluster, since):
    return cluster.writes(since) if cluster.controlled else None


def ok(run, name):
    result = run.result(name)
    assert result["_outcome"] == "ok", run.output()
    return result


def seed(cluster, nodes, values):
    """Set capacity keys directly through the API (not through the module under test)."""
    for name in nodes:
        ops = [{"op": "add", "path": "/status/capacity/%s" % k.replace("~", "~0").replace("/", "~1"), "value": v}
               for k, v in sorted(values.items())]
        read_out(cluster.core.patch_node_status(name, ops, _preload_content=False))


def cleanup(cluster, ansible, nodes, keys):
    """Each suite's own control plane lives for one test; only a real cluster needs our keys removed."""
    if cluster.controlled:
        return
    run = ansible([task("Clean up", names=nodes, state="absent", resources=keys, wait="none")])
    assert run.rc == 0, run.output()


@pytest.mark.floor
def test_add_update_remove_and_idempotence(cluster, ansible):
    node = first_node(cluster)
    before_other = dict((k, v) for k, v in capacity(cluster, node).items() if k != DONGLE)
    mark = cluster.mark()
    run = ansible([
        task("Add", name=node, resources={DONGLE: 4}),
        task("Add again", name=node, resources={DONGLE: "4"}),
        task("Same value other spelling", name=node, resources={DONGLE: "4000m"}),
        task("Update", name=node, resources={DONGLE: 6}),
        task("Remove", name=node, state="absent", resources=[DONGLE]),
        task("Remove again", name=node, state="absent", resources=[DONGLE]),
    ])
    assert run.rc == 0, run.output()
    added = ok(run, "Add")
    assert added["changed"] is True
    entry = added["nodes"][0]
    assert entry["name"] == node and entry["changed"] is True and entry["capacity"][DONGLE] == "4"
    assert entry["patch"] == [{"op": "add", "path": "/status/capacity/%s~1dongle" % DOMAIN, "value": "4"}]
    assert ok(run, "Add again")["changed"] is False
    assert ok(run, "Same value other spelling")["changed"] is False
    update = ok(run, "Update")
    assert update["changed"] is True
    assert update["nodes"][0]["patch"] == [
        {"op": "test", "path": "/status/capacity/%s~1dongle" % DOMAIN, "value": "4"},
        {"op": "replace", "path": "/status/capacity/%s~1dongle" % DOMAIN, "value": "6"}]
    assert update["nodes"][0]["capacity"][DONGLE] == "6"
    removed = ok(run, "Remove")
    assert removed["changed"] is True and DONGLE not in removed["nodes"][0]["capacity"]
    assert ok(run, "Remove again")["changed"] is False
    after = capacity(cluster, node)
    assert DONGLE not in after
    assert dict((k, v) for k, v in after.items() if k != DONGLE) == before_other
    if cluster.controlled:
        log = writes(cluster, mark)
        # three writes for six tasks, each to the status subresource as a JSON patch of the ops reported
        assert [(w["method"], w["path"], w["content_type"]) for w in log] == [
            ("PATCH", "/api/v1/nodes/%s/status" % node, "application/json-patch+json")] * 3
        assert [json.loads(w["body"]) for w in log] == [
            entry["patch"], update["nodes"][0]["patch"], removed["nodes"][0]["patch"]]


def test_exact_only_touches_its_domain(cluster, ansible):
    node = first_node(cluster)
    other = "other-%s/keep" % DOMAIN
    seed(cluster, [node], {DONGLE: "1", "%s/stale" % DOMAIN: "2", "%s/stale2" % DOMAIN: "3", other: "5"})
    run = ansible([
        task("Exact", name=node, state="exact", domain=DOMAIN, resources={DONGLE: 2}),
        task("Exact again", name=node, state="exact", domain=[DOMAIN], resources={DONGLE: "2"}),
    ], diff=True)
    try:
        assert run.rc == 0, run.output()
        exact = ok(run, "Exact")
        assert exact["changed"] is True
        assert exact["nodes"][0]["diff"] == {
            "before": {DONGLE: "1", "%s/stale" % DOMAIN: "2", "%s/stale2" % DOMAIN: "3"},
            "after": {DONGLE: "2"}}
        assert ok(run, "Exact again")["changed"] is False
        cap = capacity(cluster, node)
        assert cap[DONGLE] == "2" and cap[other] == "5"
        assert "%s/stale" % DOMAIN not in cap and "%s/stale2" % DOMAIN not in cap
        assert "cpu" in cap and "pods" in cap
    finally:
        cleanup(cluster, ansible, [node], [DONGLE, other])


def test_node_without_capacity_map(cluster, ansible):
    bare = "er-bare" if cluster.controlled else cluster.create_nodes([{"what": "bare"}])[0]
    assert "capacity" not in node_json(cluster, bare)["status"]
    mark = cluster.mark()
    run = ansible([task("Bare", name=bare, resources={DONGLE: "1Ki"}),
                   task("Bare again", name=bare, resources={DONGLE: 1024})])
    assert run.rc == 0, run.output()
    assert ok(run, "Bare")["changed"] is True and ok(run, "Bare again")["changed"] is False
    assert capacity(cluster, bare) == {DONGLE: "1024"}
    if cluster.controlled:
        log = writes(cluster, mark)
        assert len(log) == 1
        ops = json.loads(log[0]["body"])
        assert ops[-1] == {"op": "add", "path": "/status/capacity", "value": {DONGLE: "1024"}}


@pytest.mark.floor
def test_check_mode_and_diff_make_no_write(cluster, ansible):
    node = first_node(cluster)
    seed(cluster, [node], {DONGLE: "4", "%s/gone" % DOMAIN: "1"})
    try:
        mark = cluster.mark()
        run = ansible([
            task("Check add", name=node, resources={"%s/new" % DOMAIN: 2}),
            task("Check change", name=node, resources={DONGLE: 8}),
            task("Check remove", name=node, state="absent", resources=[DONGLE]),
            task("Check exact", name=node, state="exact", domain=DOMAIN, resources={DONGLE: 4}),
            task("Check no-op", name=node, resources={DONGLE: 4}),
        ], check=True, diff=True)
        assert run.rc == 0, run.output()
        for name in ("Check add", "Check change", "Check remove", "Check exact"):
            assert ok(run, name)["changed"] is True, name
        assert ok(run, "Check no-op")["changed"] is False
        change = ok(run, "Check change")
        assert change["diff"] == [{"before_header": "node %s" % node, "after_header": "node %s" % node,
                                   "before": {DONGLE: "4"}, "after": {DONGLE: "8"}}]
        assert change["nodes"][0]["capacity"][DONGLE] == "8"  # predicted
        assert ok(run, "Check exact")["nodes"][0]["diff"]["after"] == {DONGLE: "4"}
        if cluster.controlled:
            assert writes(cluster, mark) == []
        assert capacity(cluster, node)[DONGLE] == "4"
        assert "node %s" % node in run.stdout and '-    "%s": "4"' % DONGLE in run.stdout
    finally:
        cleanup(cluster, ansible, [node], [DONGLE, "%s/gone" % DOMAIN])


def pool_nodes(cluster, count=MANY):
    """(names, label selector) of `count` Node objects of this test's own, labelled kubehw-it/pool=<unique>: a
    selector no other test, worker or run on the same cluster matches."""
    value = cluster.unique_name("pool")
    names = cluster.create_nodes([{"what": "pool", "labels": {"kubehw-it/pool": value},
                                   "capacity": {"pods": "110"}}] * count)
    return sorted(names), "kubehw-it/pool=%s" % value


@pytest.mark.floor
def test_selectors_over_many_nodes(cluster, ansible):
    pool, selector = pool_nodes(cluster)
    other = first_node(cluster)
    mark = cluster.mark()
    run = ansible([
        task("Pool", label_selectors=[selector], resources={DONGLE: 2}, parallel=8),
    ])
    assert run.rc == 0, run.output()
    result = ok(run, "Pool")
    assert result["changed_nodes"] == pool and result["failed_nodes"] == []
    if cluster.controlled:
        log = cluster.requests(mark)
        assert [r for r in log if r["method"] == "GET" and "/nodes/" in r["path"]] == []  # read once, by the list
        lists = [r for r in log if r["method"] == "GET" and r["path"] == "/api/v1/nodes"]
        assert len(lists) == 1 and lists[0]["query"]["labelSelector"] == selector
        assert sorted(w["path"] for w in writes(cluster, mark)) == ["/api/v1/nodes/%s/status" % n for n in pool]
    assert all(capacity(cluster, n)[DONGLE] == "2" for n in pool[::13])
    assert DONGLE not in capacity(cluster, other)

    mark = cluster.mark()
    run = ansible([
        task("Pool again", label_selectors=[selector], resources={DONGLE: 2}),
        task("Field selector", field_selectors=["metadata.name=" + pool[7]], resources={DONGLE: 3}),
        task("Both selectors", label_selectors=[selector], field_selectors=["metadata.name=" + pool[8]],
             resources={DONGLE: 3}),
        task("No match", label_selectors=["kubehw-it/pool=none"], resources={DONGLE: 1}),
        task("No match required", ignore_errors=True, label_selectors=["kubehw-it/pool=none"], require_match=True,
             resources={DONGLE: 1}),
    ])
    assert ok(run, "Pool again")["changed"] is False
    assert ok(run, "Field selector")["changed_nodes"] == [pool[7]]
    assert ok(run, "Both selectors")["changed_nodes"] == [pool[8]]
    no_match = ok(run, "No match")
    assert no_match["changed"] is False and no_match["nodes"] == []
    required = run.result("No match required")
    assert required["failed"] is True and "kubehw-it/pool=none" in required["msg"]
    if cluster.controlled:
        assert sorted(w["path"] for w in writes(cluster, mark)) == [
            "/api/v1/nodes/%s/status" % pool[7], "/api/v1/nodes/%s/status" % pool[8]]


@pytest.mark.floor
def test_wait_allocatable_then_a_pod_is_scheduled(cluster, ansible, kubelet_node):
    node = kubelet_node
    # a node with a kubelet is the cluster's own on a real cluster: a resource name, namespace and pod name of this
    # test's own, so no other test, worker or run advertises or uses the same
    dongle = "%s/%s" % (DOMAIN, cluster.unique_name("dongle"))
    run = ansible([task("Advertise", name=node, resources={dongle: 4}, wait="allocatable", wait_timeout=30)])
    namespace = cluster.namespace()
    pod_name = cluster.unique_name("dongle-user")
    try:
        assert run.rc == 0, run.output()
        result = ok(run, "Advertise")
        assert result["waited_for"] == "allocatable"
        assert result["nodes"][0]["allocatable"][dongle] == "4"
        assert node_json(cluster, node)["status"]["allocatable"][dongle] == "4"
        if cluster.controlled:
            # waited by watching, no polling loop: after the status patch, one node list and at most one watch
            # (none when the kubelet had copied the value before that list: on a loaded machine it may have)
            log = cluster.requests()
            patched = max(i for i, r in enumerate(log) if r["method"] == "PATCH" and r["path"].endswith("/status"))
            # (older clients send watch=True; the apiserver reads any case)
            reads = ["watch" if (r["query"].get("watch") or "").lower() == "true" else r["method"]
                     for r in log[patched + 1:] if r["path"] == "/api/v1/nodes"]
            assert reads in (["GET"], ["GET", "watch"]), log[patched + 1:]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
               "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                        "resources": {"limits": {dongle: "3"}}}]}}
        cluster.core.create_namespaced_pod(namespace, pod)
        deadline = time.time() + 30
        bound = None
        while time.time() < deadline:
            bound = json.loads(cluster.core.read_namespaced_pod(pod_name, namespace, _preload_content=False).data)
            if bound["spec"].get("nodeName"):
                break
            time.sleep(0.2)
        assert bound["spec"].get("nodeName") == node, bound.get("status")
    finally:
        try:
            cluster.core.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0)
        except Exception:
            pass
        cleanup(cluster, ansible, [node], [dongle])


def test_wait_allocatable_times_out_when_no_kubelet_copies(cluster, ansible):
    # a node object without a kubelet (allocatable defaulted once from capacity, never again)
    node = cluster.create_nodes([{"what": "nokubelet", "capacity": {"pods": "10"}}])[0]
    run = ansible([task("No kubelet", ignore_errors=True, name=node, resources={DONGLE: 1}, wait="allocatable",
                        wait_timeout=2)])
    result = run.result("No kubelet")
    assert result["failed"] is True
    assert "status.allocatable of node %s" % node in result["msg"] and "kubelet" in result["msg"]
    assert result["changed"] is True and result["failed_nodes"] == [node]
    assert capacity(cluster, node)[DONGLE] == "1"


def test_concurrent_writer_loses_nothing(cluster, ansible):
    pool, selector = pool_nodes(cluster)
    stop = threading.Event()
    written = {}
    errors = []

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            name = pool[i % len(pool)]
            body = [{"op": "add", "path": "/status/capacity/writer.example.com~1n", "value": str(i)},
                    {"op": "add", "path": "/status/conditions/-", "value": {
                        "type": "Writer%d" % i, "status": "True"}}]
            try:
                read_out(cluster.core.patch_node_status(name, body, _preload_content=False))
                written[name] = (str(i), "Writer%d" % i)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
            time.sleep(0.002)

    seed(cluster, pool, {DONGLE: "1"})
    for name in pool:   # a node without a kubelet has no conditions yet (the writer appends to them); an empty
        # list would not do: kube-apiserver drops it on storage, and the writer's "/status/conditions/-" then fails
        read_out(cluster.core.patch_node_status(name, [{"op": "add", "path": "/status/conditions", "value": [
            {"type": "Seeded", "status": "True"}]}], _preload_content=False))
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        run = ansible([task("Update under load", label_selectors=[selector],
                            resources={DONGLE: 5, "%s/extra" % DOMAIN: 1}, parallel=10)])
    finally:
        stop.set()
        thread.join()
    assert run.rc == 0, run.output()
    assert errors == []
    assert len(written) > 5
    assert ok(run, "Update under load")["changed_nodes"] == pool
    for name in pool:
        status = node_json(cluster, name)["status"]
        assert status["capacity"][DONGLE] == "5" and status["capacity"]["%s/extra" % DOMAIN] == "1"
        if name in written:
            value, condition = written[name]
            assert status["capacity"]["writer.example.com/n"] == value
            assert condition in [c["type"] for c in status["conditions"]]


@pytest.mark.floor
def test_lost_update_is_detected_and_retried(cluster, ansible):
    """Another writer changes our very key between our read and our patch: the test op fails, we re-read."""
    cluster.require_controlled("injects 429s with Retry-After to open a window")
    seed(cluster, ["er-2"], {DONGLE: "4"})
    # our PATCHes are answered 429 until the other writer has written (by PUT, which the fault leaves alone) and
    # cleared the fault: the window stays open however slowly either side runs
    cluster.controls.inject_fault("PATCH", r"^/api/v1/nodes/er-2/status$", status=429, count=1000, retry_after=1)
    mark = cluster.mark()

    played = threading.Event()

    def other_writer():
        # until the play is over, however long ansible-playbook takes to start on a loaded machine (it was once more
        # than 40 s, and the module then gave up against the 429s no one cleared)
        while not played.is_set():
            if any(r["status"] == 429 for r in cluster.requests(mark)):
                node = json.loads(cluster.core.read_node_status("er-2", _preload_content=False).data)
                node["status"]["capacity"].update({DONGLE: "7", "%s/theirs" % DOMAIN: "1"})
                read_out(cluster.core.replace_node_status("er-2", node, _preload_content=False))
                cluster.controls.clear_faults()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        run = ansible([task("Update", name="er-2", resources={DONGLE: 6}, wait="none")])
    finally:
        played.set()
        thread.join()
    assert run.rc == 0, run.output()
    result = ok(run, "Update")
    assert result["nodes"][0]["attempts"] == 2
    statuses = [(r["method"], r["status"]) for r in cluster.requests(mark) if r["path"] == "/api/v1/nodes/er-2/status"
                and r["method"] in ("PATCH", "PUT")]
    # ours (429 until theirs is in), theirs (PUT 200), ours retried with the stale test (422), ours after re-reading
    theirs = statuses.index(("PUT", 200))
    assert theirs >= 1 and set(statuses[:theirs]) == {("PATCH", 429)}, statuses
    assert [s for s in statuses[theirs + 1:] if s != ("PATCH", 429)] == [("PATCH", 422), ("PATCH", 200)], statuses
    last = json.loads([r for r in cluster.requests(mark) if r["method"] == "PATCH"][-1]["body"])
    assert last[0] == {"op": "test", "path": "/status/capacity/%s~1dongle" % DOMAIN, "value": "7"}
    cap = capacity(cluster, "er-2")
    assert cap[DONGLE] == "6" and cap["%s/theirs" % DOMAIN] == "1"


FAULTS = [("er-1", 429), ("pool-00", 500), ("pool-01", 503), ("pool-02", "drop")]


@pytest.mark.floor
def test_injected_faults_are_retried(cluster, ansible):
    cluster.require_controlled("injects faults")
    for node, fault in FAULTS:
        cluster.controls.inject_fault("PATCH", r"^/api/v1/nodes/%s/status$" % node, status=fault, count=2,
                                      retry_after=0 if fault == 429 else None)
        cluster.controls.inject_fault("GET", r"^/api/v1/nodes/%s$" % node, status=500 if fault != "drop" else "drop",
                                      count=1)
    mark = cluster.mark()
    run = ansible([task("Through %s" % fault, name=node, resources={DONGLE: 3}, wait="none") for node, fault in FAULTS])
    assert run.rc == 0, run.output()
    for node, fault in FAULTS:
        assert ok(run, "Through %s" % fault)["changed"] is True
        log = [r for r in cluster.requests(mark) if r["path"].startswith("/api/v1/nodes/%s" % node)]
        patches = [r["status"] for r in log if r["method"] == "PATCH"]
        gets = [r["status"] for r in log if r["method"] == "GET"]
        assert len(patches) == 3 and patches[-1] == 200, (fault, patches)
        assert len(gets) == 2 and gets[-1] == 200, (fault, gets)
        assert capacity(cluster, node)[DONGLE] == "3"


@pytest.mark.floor
def test_injected_conflict_rereads_the_node_and_patches_again(cluster, ansible):
    """A 409 (another writer won) is not blindly resent: the node is read again and the patch rebuilt."""
    cluster.require_controlled("injects a 409")
    node = first_node(cluster)
    cluster.controls.inject_fault("PATCH", r"^/api/v1/nodes/%s/status$" % node, status=409, count=1)
    mark = cluster.mark()
    run = ansible([task("Through 409", name=node, resources={DONGLE: 5}, wait="none")])
    assert run.rc == 0, run.output()
    result = ok(run, "Through 409")
    assert result["changed"] is True and result["nodes"][0]["attempts"] == 2
    log = [(r["method"], r["status"]) for r in cluster.requests(mark) if r["path"].startswith("/api/v1/nodes/%s" % node)]
    assert log == [("GET", 200), ("PATCH", 409), ("GET", 200), ("PATCH", 200)], log
    assert capacity(cluster, node)[DONGLE] == "5"


def test_all_nodes_is_the_explicit_way_to_target_every_node(cluster, ansible):
    cluster.require_controlled("writes to every node of the cluster")
    every = cluster.node_names()
    mark = cluster.mark()
    run = ansible([
        # an AWX survey answers with strings: "yes" is true
        task("Every node", all_nodes="yes", resources={DONGLE: 1}, wait="none", parallel=16),
        task("Every node again", all_nodes=True, resources={DONGLE: 1}, wait="none"),
    ])
    assert run.rc == 0, run.output()
    assert ok(run, "Every node")["changed_nodes"] == every
    assert ok(run, "Every node again")["changed"] is False
    log = cluster.requests(mark)
    lists = [r for r in log if r["method"] == "GET" and r["path"] == "/api/v1/nodes"]
    assert lists and all("labelSelector" not in r["query"] and "fieldSelector" not in r["query"] for r in lists)
    assert sorted(w["path"] for w in cluster.writes(mark)) == sorted("/api/v1/nodes/%s/status" % n for n in every)


@pytest.mark.floor
def test_missing_node_partial_failure_keeps_the_rest(cluster, ansible):
    one, two = ["er-1", "er-2"] if cluster.controlled else cluster.create_nodes([{"capacity": {"pods": "10"}}] * 2)
    run = ansible([task("Some missing", ignore_errors=True, names=[one, "ghost-node", two],
                        resources={DONGLE: 2})])
    result = run.result("Some missing")
    assert result["failed"] is True
    assert result["failed_nodes"] == ["ghost-node"] and result["changed_nodes"] == sorted([one, two])
    assert 'nodes "ghost-node" not found' in result["msg"]
    assert capacity(cluster, one)[DONGLE] == "2" and capacity(cluster, two)[DONGLE] == "2"


@pytest.mark.floor
def test_rbac_denial_names_the_permission(cluster, ansible):
    node = first_node(cluster)
    _user, token = cluster.service_account("node-reader")
    cluster.bind([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}],
                 [{"kind": "ServiceAccount", "name": "node-reader", "namespace": cluster.namespace()}])
    mark = cluster.mark()
    run = ansible([task("Denied", ignore_errors=True, name=node, api_key=token, resources={DONGLE: 1})],
                  env={"K8S_AUTH_KUBECONFIG": cluster.token_kubeconfig(token)})
    result = run.result("Denied")
    assert result["failed"] is True
    assert "403" in result["msg"] and "'patch' on 'nodes/status'" in result["msg"] and node in result["msg"]
    if cluster.controlled:
        assert [(r["method"], r["status"]) for r in cluster.requests(mark)] == [("GET", 200), ("PATCH", 403)]
    assert DONGLE not in capacity(cluster, node)


def test_warns_when_a_device_plugin_serves_the_resource(cluster, ansible):
    # a node of the test's own with a running plugin pod bound to it (its status written as its kubelet would)
    node = first_node(cluster)
    seed(cluster, [node], {DONGLE: "2"})
    plugin = cluster.create_pod(cluster.unique_name("dongle-plugin"), node,
                                annotations={"devices.kubehw.io/resources": DONGLE}, phase="Running", ready=True)
    plugin_key = "%s/%s" % (cluster.namespace(), plugin["metadata"]["name"])
    mark = cluster.mark()
    run = ansible([task("Add more", name=node, resources={"%s/unrelated" % DOMAIN: 1}, wait="none"),
                   task("Remove", name=node, state="absent", resources=[DONGLE], wait="none")])
    assert run.rc == 0, run.output()
    assert "warnings" not in ok(run, "Add more") or not ok(run, "Add more")["warnings"]
    warnings = json.dumps(ok(run, "Remove").get("warnings"))
    assert plugin_key in warnings and DONGLE in warnings
    if cluster.controlled:
        # only that node's pods are listed, once
        pod_lists = [r for r in cluster.requests(mark) if r["path"] == "/api/v1/pods"]
        assert len(pod_lists) == 1 and pod_lists[0]["query"]["fieldSelector"] == "spec.nodeName=%s" % node
