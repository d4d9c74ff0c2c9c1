# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated kubelets, node lifecycle, DaemonSet controller and scheduler, driven on a bare Store.

Small intervals keep these fast; every expectation about counts and messages comes from
tests/simcluster/FACTS.md and the behaviour of kube-controller-manager/kube-scheduler 1.32.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import threading
import time

import pytest

from tests.simcluster.controllers import Controllers, is_extended_resource, parse_quantity
from tests.simcluster.store import Store, now_rfc3339

FAST = {"sync_interval": 0.05, "pod_start_delay": 0.05, "heartbeat_interval": 10.0}
# kube-scheduler's verdict on preemption: a request above what is left could fit once a victim went (resolvable); one
# above the node's whole allocatable never fits (NodeResourcesFit: UnschedulableAndUnresolvable)
DONGLE_MSG = ("0/1 nodes are available: 1 Insufficient example.com/dongle. no new claims to deallocate, "
              "preemption: 0/1 nodes are "
              "available: 1 No preemption victims found for incoming pod.")
DONGLE_ABOVE_ALLOCATABLE_MSG = DONGLE_MSG.replace("No preemption victims found for incoming pod",
                                                  "Preemption is not helpful for scheduling")


def wait_for(fn, timeout=5.0, interval=0.01, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s; last value %r" % (what, last))


@pytest.fixture
def cluster():
    started = []

    def make(nodes, **overrides):
        config = dict(FAST, nodes=nodes)
        config.update(overrides)
        store = Store()
        ctl = Controllers(store, config)
        ctl.start()
        started.append(ctl)
        return store, ctl

    yield make
    for ctl in started:
        ctl.stop()
        assert ctl.errors == [], "controller raised: %r" % ctl.errors


def daemonset(name, image="registry.example/plugin:1", ns="kube-system", strategy=None, annotations=None,
              node_selector=None, tolerations=None, affinity=None):
    spec = {"containers": [{"name": "plugin", "image": image}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    tmeta = {"labels": {"app": name}}
    if annotations:
        tmeta["annotations"] = annotations
    obj = {"metadata": {"name": name, "namespace": ns},
           "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": tmeta, "spec": spec}}}
    if strategy:
        obj["spec"]["updateStrategy"] = strategy
    return obj


def ds_status(store, name, ns="kube-system"):
    obj = store.get("daemonsets", ns, name)
    return obj.get("status") or {}


def ds_pods(store, name, ns="kube-system"):
    return store.list("pods", ns, label_selector="app=%s" % name)[0]


def pod(name, limits=None, ns="default", **spec_extra):
    container = {"name": "c", "image": "busybox"}
    if limits:
        container["resources"] = {"limits": dict(limits)}
    spec = {"containers": [container]}
    spec.update(spec_extra)
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def set_extended(store, node, name, value, allocatable=True):
    def fn(obj):
        obj["status"].setdefault("capacity", {})[name] = value
        if allocatable:
            obj["status"].setdefault("allocatable", {})[name] = value
    store.mutate("nodes", None, node, fn)


def scheduled_condition(p):
    return [c for c in p["status"].get("conditions") or [] if c["type"] == "PodScheduled"][0]


def events_for(store, name):
    return [e for e in store.list("events", "default")[0] if e["involvedObject"]["name"] == name]


# ---------------------------------------------------------------- helpers

def test_quantities_and_extended_names():
    assert parse_quantity("500m") * 1000 == 500
    assert parse_quantity("32Gi") == 32 * 2 ** 30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity(4) == 4
    assert is_extended_resource("example.com/dongle")
    assert is_extended_resource("nvidia.com/gpu")
    for name in ("dongle", "kubernetes.io/foo", "sub.kubernetes.io/x", "a/b/c", "example.com/", "cpu"):
        assert not is_extended_resource(name), name


# ---------------------------------------------------------------- nodes

def test_nodes_are_bootstrapped_from_config(cluster):
    store, _ctl = cluster([
        {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
         "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        {"name": "bare", "without_capacity": True},
    ])
    node = store.get("nodes", None, "gpu-1")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "gpu-1"
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert node["status"]["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert node["status"]["allocatable"] == node["status"]["capacity"]
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]
    assert ready["status"] == "True" and ready["lastHeartbeatTime"]
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.36.")
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert {a["type"] for a in node["status"]["addresses"]} == {"InternalIP", "Hostname"}
    bare = store.get("nodes", None, "bare")
    assert "capacity" not in bare["status"] and "allocatable" not in bare["status"]
    for ns in ("default", "kube-system"):
        assert store.get("namespaces", None, ns) is not None


def test_kubelet_copies_extended_resources_to_allocatable(cluster):
    store, _ctl = cluster([{"name": "n1"}], sync_interval=1.0)

    def advertise(obj):
        obj["status"]["capacity"].update({"example.com/dongle": "4", "dongle": "2", "kubernetes.io/foo": "2"})
    store.mutate("nodes", None, "n1", advertise)
    # advertised is not yet schedulable: the copy waits for the next status sync
    assert "example.com/dongle" not in store.get("nodes", None, "n1")["status"]["allocatable"]
    wait_for(lambda: store.get("nodes", None, "n1")["status"]["allocatable"].get("example.com/dongle") == "4",
             what="allocatable copy")
    alloc = store.get("nodes", None, "n1")["status"]["allocatable"]
    assert "dongle" not in alloc and "kubernetes.io/foo" not in alloc
    assert alloc["cpu"] == "8" and alloc["pods"] == "110"

    def drop(obj):
        del obj["status"]["capacity"]["example.com/dongle"]
    store.mutate("nodes", None, "n1", drop)
    wait_for(lambda: "example.com/dongle" not in store.get("nodes", None, "n1")["status"]["allocatable"],
             what="allocatable removal")


def test_kubelet_never_loses_concurrent_writes_and_stays_quiet(cluster):
    store, _ctl = cluster([{"name": "n1"}])
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            store.mutate("nodes", None, "n1",
                         lambda o, i=i: o["metadata"]["labels"].__setitem__("writer", str(i)))
            set_extended(store, "n1", "example.com/w%d" % (i % 3), str(i), allocatable=False)
            time.sleep(0.002)
        return i

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.4)
    stop.set()
    t.join()
    node = store.get("nodes", None, "n1")
    assert node["metadata"]["labels"]["writer"]
    wait_for(lambda: all(store.get("nodes", None, "n1")["status"]["allocatable"].get(k) == v
                         for k, v in store.get("nodes", None, "n1")["status"]["capacity"].items()),
             what="allocatable catching up")
    # nothing changes now: with a 10 s heartbeat the kubelet must not write at each 50 ms sync
    rv = store.get("nodes", None, "n1")["metadata"]["resourceVersion"]
    time.sleep(0.4)
    assert store.get("nodes", None, "n1")["metadata"]["resourceVersion"] == rv


def test_heartbeat_advances(cluster):
    store, _ctl = cluster([{"name": "n1"}], heartbeat_interval=1.0)

    def beat():
        return [c for c in store.get("nodes", None, "n1")["status"]["conditions"] if c["type"] == "Ready"][0][
            "lastHeartbeatTime"]
    first = beat()
    wait_for(lambda: beat() != first, timeout=4, what="a new heartbeat")


def test_unreachable_node(cluster):
    store, ctl = cluster([{"name": "n1"}], heartbeat_interval=0.1)
    ctl.set_node_unreachable("n1", True)
    node = store.get("nodes", None, "n1")
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]
    assert ready["status"] == "Unknown" and ready["reason"] == "NodeStatusUnknown"
    taints = {(t["key"], t["effect"]) for t in node["spec"]["taints"]}
    assert taints == {("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
    # no heartbeat while unreachable
    rv = node["metadata"]["resourceVersion"]
    time.sleep(0.3)
    assert store.get("nodes", None, "n1")["metadata"]["resourceVersion"] == rv
    ctl.set_node_unreachable("n1", False)
    node = store.get("nodes", None, "n1")
    assert [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]["status"] == "True"
    assert not node["spec"].get("taints")


def test_node_configured_unreachable_starts_so(cluster):
    store, _ctl = cluster([{"name": "n1", "unreachable": True}, {"name": "n2"}])
    store.create("daemonsets", daemonset("plugin"))
    wait_for(lambda: [p["spec"]["nodeName"] for p in ds_pods(store, "plugin")] == ["n2"], what="pod on n2 only")
    node = store.get("nodes", None, "n1")
    assert [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]["status"] == "Unknown"
    assert {t["key"] for t in node["spec"]["taints"]} == {"node.kubernetes.io/unreachable"}


def test_node_taints_follow_its_ready_condition(cluster):
    store, _ctl = cluster([])
    # as NodeTaint admission stores a new node; with no conditions reported, the tainting pass takes the taint off
    store.create("nodes", {"metadata": {"name": "api-node"}, "status": {},
                           "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                               {"key": "example.com/own", "effect": "NoSchedule"}]}})

    def taints():
        return [(t["key"], t["effect"]) for t in store.get("nodes", None, "api-node")["spec"].get("taints") or []]
    assert taints() == [("example.com/own", "NoSchedule")]
    for ready, expected in (("False", [("example.com/own", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoSchedule")]),
                            ("Unknown", [("example.com/own", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoSchedule"),
                                         ("node.kubernetes.io/unreachable", "NoExecute")]),
                            ("True", [("example.com/own", "NoSchedule")])):
        store.mutate("nodes", None, "api-node", lambda node, ready=ready: node["status"].update(
            conditions=[{"type": "Ready", "status": ready}]))
        assert taints() == expected, ready
    store.mutate("nodes", None, "api-node", lambda node: node["spec"].update(unschedulable=True))
    assert taints() == [("example.com/own", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]


# ---------------------------------------------------------------- DaemonSets

def test_daemonset_pod_never_starts_status_matches_facts(cluster):
    store, ctl = cluster([{"name": "n1"}])
    ctl.fail_pod_start("n1", "ImagePullBackOff")
    store.create("daemonsets", daemonset("plugin"))
    expected = {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0,
                "numberUnavailable": 1, "updatedNumberScheduled": 1, "observedGeneration": 1,
                "numberMisscheduled": 0}
    wait_for(lambda: ds_status(store, "plugin") == expected, what="facts status")
    time.sleep(0.2)     # and it stays so: the pod never becomes ready
    assert ds_status(store, "plugin") == expected
    (p,) = ds_pods(store, "plugin")
    assert p["status"]["phase"] == "Pending"
    waiting = p["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ImagePullBackOff"
    assert not [c for c in p["status"]["conditions"] if c["type"] == "Ready" and c["status"] == "True"]


def test_daemonset_pod_running(cluster):
    store, _ctl = cluster([{"name": "n1"}])
    ds = store.create("daemonsets", daemonset("plugin", strategy={"type": "RollingUpdate"}))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 1, what="available")
    assert ds_status(store, "plugin") == {"desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                                          "numberReady": 1, "numberAvailable": 1, "updatedNumberScheduled": 1,
                                          "observedGeneration": 1, "numberMisscheduled": 0}
    (p,) = ds_pods(store, "plugin")
    assert re.match(r"^plugin-[bcdfghjklmnpqrstvwxz2456789]{5}$", p["metadata"]["name"])
    ref = p["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "DaemonSet" and ref["uid"] == ds["metadata"]["uid"] and ref["controller"] is True
    assert p["metadata"]["labels"]["pod-template-generation"] == "1"
    assert p["metadata"]["labels"]["controller-revision-hash"]
    assert p["spec"]["nodeName"] == "n1"
    assert p["status"]["phase"] == "Running"
    assert p["status"]["containerStatuses"][0]["ready"] is True
    keys = {(t["key"], t["effect"]) for t in p["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in keys
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys


def test_host_network_daemonset_tolerates_network_unavailable(cluster):
    store, _ctl = cluster([{"name": "n1"}])
    # a node whose network is not set up yet (the route controller or the network plugin reports it): the node
    # lifecycle's tainting pass taints it network-unavailable
    stamp = now_rfc3339()

    def network_unavailable(node):
        node["status"]["conditions"].append({"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated",
                                             "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
    store.mutate("nodes", None, "n1", network_unavailable)
    assert {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"} in \
        store.get("nodes", None, "n1")["spec"]["taints"]
    store.create("daemonsets", daemonset("plain"))
    host = daemonset("host")
    host["spec"]["template"]["spec"]["hostNetwork"] = True
    store.create("daemonsets", host)
    wait_for(lambda: ds_status(store, "host").get("numberAvailable") == 1, what="hostNetwork pod runs")
    (p,) = ds_pods(store, "host")
    assert p["status"]["podIP"] == p["status"]["hostIP"]
    assert ds_pods(store, "plain") == []
    assert ds_status(store, "plain")["desiredNumberScheduled"] == 0


def test_daemonset_on_unreachable_node_matches_facts(cluster):
    store, ctl = cluster([{"name": "n1"}])
    store.create("daemonsets", daemonset("plugin"))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 1, what="available")
    ctl.set_node_unreachable("n1", True)
    expected = {"desiredNumberScheduled": 0, "currentNumberScheduled": 0, "numberMisscheduled": 1,
                "numberReady": 0, "observedGeneration": 1}
    wait_for(lambda: ds_status(store, "plugin") == expected, what="unreachable status")
    assert "updatedNumberScheduled" not in ds_status(store, "plugin")
    (p,) = ds_pods(store, "plugin")
    assert [c for c in p["status"]["conditions"] if c["type"] == "Ready"][0]["status"] == "False"
    ctl.set_node_unreachable("n1", False)
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 1, what="recovery")


def test_daemonset_node_eligibility(cluster):
    store, _ctl = cluster([
        {"name": "a", "labels": {"gpu": "nvidia", "zone": "z1"}},
        {"name": "b", "labels": {"gpu": "nvidia", "zone": "z2"}},
        {"name": "c", "labels": {"gpu": "nvidia"}, "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
        {"name": "d", "labels": {"gpu": "amd"}},
        {"name": "e", "labels": {"gpu": "nvidia"}, "taints": [{"key": "node.kubernetes.io/unschedulable",
                                                               "effect": "NoSchedule"}]},
    ])
    store.create("daemonsets", daemonset("sel", node_selector={"gpu": "nvidia"}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z2"]},
                              {"key": "zone", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["amd"]}]}]}}}
    store.create("daemonsets", daemonset("aff", affinity=affinity))
    store.create("daemonsets", daemonset("tol", node_selector={"gpu": "nvidia"},
                                         tolerations=[{"key": "dedicated", "operator": "Equal", "value": "x",
                                                       "effect": "NoSchedule"}]))
    store.create("daemonsets", daemonset("nokey", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}]}}}))

    def nodes_of(name):
        return sorted(p["spec"]["nodeName"] for p in ds_pods(store, name))
    # c has an untolerated NoSchedule taint; e's unschedulable taint is tolerated automatically
    wait_for(lambda: nodes_of("sel") == ["a", "b", "e"], what="nodeSelector pods")
    wait_for(lambda: nodes_of("aff") == ["a", "d"], what="affinity pods")
    wait_for(lambda: nodes_of("tol") == ["a", "b", "c", "e"], what="toleration pods")
    wait_for(lambda: nodes_of("nokey") == ["d", "e"], what="DoesNotExist pods")
    wait_for(lambda: ds_status(store, "sel").get("desiredNumberScheduled") == 3, what="sel status")

    # a node losing its label loses the pod (its selector no longer matches)
    store.mutate("nodes", None, "b", lambda o: o["metadata"]["labels"].__setitem__("gpu", "none"))
    wait_for(lambda: nodes_of("sel") == ["a", "e"], what="pod removed after relabel")


def test_rolling_update_replaces_one_at_a_time(cluster):
    store, _ctl = cluster([{"name": "n%d" % i} for i in range(4)])
    store.create("daemonsets", daemonset("plugin", image="img:1"))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 4, what="4 available")

    worst = [0]

    def observe(_event, resource, _obj):
        if resource != "pods":
            return
        available = set()
        for p in store.list("pods", "kube-system")[0]:
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            if ready and not p["metadata"].get("deletionTimestamp"):
                available.add(p["spec"]["nodeName"])
        worst[0] = max(worst[0], 4 - len(available))
    store.subscribe(observe)

    def new_image(obj):
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    store.mutate("daemonsets", "kube-system", "plugin", new_image)
    assert store.get("daemonsets", "kube-system", "plugin")["metadata"]["generation"] == 2

    def done():
        st = ds_status(store, "plugin")
        return st.get("observedGeneration") == 2 and st.get("updatedNumberScheduled") == 4 and \
            st.get("numberAvailable") == 4
    wait_for(done, timeout=10, what="rollout done")
    store.unsubscribe(observe)
    pods = ds_pods(store, "plugin")
    assert len(pods) == 4
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"img:2"}
    assert {p["metadata"]["labels"]["pod-template-generation"] for p in pods} == {"2"}
    assert worst[0] == 1, "maxUnavailable 1 was not honoured: %d nodes unavailable at once" % worst[0]


def test_rolling_update_max_unavailable_percent(cluster):
    store, _ctl = cluster([{"name": "n%d" % i} for i in range(4)])
    store.create("daemonsets", daemonset("plugin", image="img:1", strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 4, what="4 available")
    terminating = [0]

    def observe(_event, resource, _obj):
        if resource == "pods":
            n = sum(1 for p in store.list("pods", "kube-system")[0] if p["metadata"].get("deletionTimestamp"))
            terminating[0] = max(terminating[0], n)
    store.subscribe(observe)
    store.mutate("daemonsets", "kube-system", "plugin",
                 lambda o: o["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "img:2"))
    wait_for(lambda: ds_status(store, "plugin").get("observedGeneration") == 2 and
             ds_status(store, "plugin").get("updatedNumberScheduled") == 4 and
             ds_status(store, "plugin").get("numberAvailable") == 4, timeout=10, what="rollout")
    store.unsubscribe(observe)
    assert terminating[0] == 2


def test_on_delete_keeps_old_pods_until_deleted(cluster):
    store, _ctl = cluster([{"name": "n1"}, {"name": "n2"}])
    store.create("daemonsets", daemonset("plugin", image="img:1", strategy={"type": "OnDelete"}))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 2, what="2 available")
    before = sorted(p["metadata"]["name"] for p in ds_pods(store, "plugin"))
    store.mutate("daemonsets", "kube-system", "plugin",
                 lambda o: o["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "img:2"))
    wait_for(lambda: ds_status(store, "plugin").get("observedGeneration") == 2, what="observed")
    time.sleep(0.3)
    assert sorted(p["metadata"]["name"] for p in ds_pods(store, "plugin")) == before
    st = ds_status(store, "plugin")
    assert "updatedNumberScheduled" not in st and st["desiredNumberScheduled"] == 2
    victim = ds_pods(store, "plugin")[0]
    store.mark_deleting("pods", "kube-system", victim["metadata"]["name"], 30)   # as DELETE does for a bound pod
    wait_for(lambda: ds_status(store, "plugin").get("updatedNumberScheduled") == 1 and
             ds_status(store, "plugin").get("numberAvailable") == 2, what="one replaced")
    images = sorted((p["spec"]["nodeName"], p["spec"]["containers"][0]["image"]) for p in ds_pods(store, "plugin"))
    other = [n for n in ("n1", "n2") if n != victim["spec"]["nodeName"]][0]
    assert images == sorted([(victim["spec"]["nodeName"], "img:2"), (other, "img:1")])


def test_rollout_stalls_on_terminating_pod_of_dead_node(cluster):
    store, ctl = cluster([{"name": "n1"}, {"name": "n2"}, {"name": "n3"}])
    store.create("daemonsets", daemonset("plugin", image="img:1"))
    wait_for(lambda: ds_status(store, "plugin").get("numberAvailable") == 3, what="3 available")
    ctl.set_node_unreachable("n3", True)
    wait_for(lambda: ds_status(store, "plugin").get("numberMisscheduled") == 1, what="misscheduled")
    store.mutate("daemonsets", "kube-system", "plugin",
                 lambda o: o["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "img:2"))
    wait_for(lambda: ds_status(store, "plugin").get("observedGeneration") == 2 and
             ds_status(store, "plugin").get("updatedNumberScheduled") == 1 and
             ds_status(store, "plugin").get("numberAvailable") == 2, what="first node replaced")
    time.sleep(0.4)
    st = ds_status(store, "plugin")
    # observedGeneration reached 2, the counts did not: the old pod on n3 is stuck Terminating and
    # counts against maxUnavailable, so only one of n1/n2 was replaced
    assert st["observedGeneration"] == 2 and st["desiredNumberScheduled"] == 2
    assert st["updatedNumberScheduled"] == 1 and st["numberAvailable"] == 2
    stuck = [p for p in ds_pods(store, "plugin") if p["spec"]["nodeName"] == "n3"]
    assert len(stuck) == 1 and stuck[0]["metadata"].get("deletionTimestamp")
    ctl.set_node_unreachable("n3", False)
    wait_for(lambda: ds_status(store, "plugin").get("updatedNumberScheduled") == 3 and
             ds_status(store, "plugin").get("numberAvailable") == 3, timeout=10, what="rollout resumes")


def test_deleting_daemonset_collects_its_pods(cluster):
    store, _ctl = cluster([{"name": "n1"}, {"name": "n2"}])
    store.create("daemonsets", daemonset("plugin"))
    wait_for(lambda: len(ds_pods(store, "plugin")) == 2, what="pods")
    store.create("pods", pod("bystander", ns="kube-system", nodeName="n1"))
    store.delete("daemonsets", "kube-system", "plugin")
    wait_for(lambda: ds_pods(store, "plugin") == [], what="pods collected")
    assert store.get("pods", "kube-system", "bystander") is not None


# ---------------------------------------------------------------- device plugins

def test_plugin_pod_advertises_inventory_then_zero_when_gone(cluster):
    store, _ctl = cluster([{"name": "gpu-1", "inventory": {"nvidia.com/gpu": 4, "example.com/dongle": 2}},
                           {"name": "cpu-1"}], sync_interval=0.2)
    store.create("daemonsets", daemonset("nvidia", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"))
    store.create("daemonsets", daemonset("dongle", image="registry.example/dongle:1",
                                         annotations={"devices.kubehw.io/resources": "example.com/dongle"}))

    def status(node):
        return store.get("nodes", None, node)["status"]
    wait_for(lambda: status("gpu-1")["capacity"].get("nvidia.com/gpu") == "4", what="gpu capacity")
    wait_for(lambda: status("gpu-1")["allocatable"].get("nvidia.com/gpu") == "4", what="gpu allocatable")
    wait_for(lambda: status("gpu-1")["allocatable"].get("example.com/dongle") == "2", what="dongle allocatable")
    # a node without the hardware advertises nothing even though the plugin runs there
    assert len(ds_pods(store, "nvidia")) == 2
    assert "nvidia.com/gpu" not in status("cpu-1")["capacity"]
    store.delete("daemonsets", "kube-system", "nvidia")
    wait_for(lambda: status("gpu-1")["capacity"].get("nvidia.com/gpu") == "0" and
             status("gpu-1")["allocatable"].get("nvidia.com/gpu") == "0", what="unregistered plugin")
    assert status("gpu-1")["allocatable"]["example.com/dongle"] == "2"


def test_plugin_that_never_starts_registers_nothing(cluster):
    store, ctl = cluster([{"name": "gpu-1", "inventory": {"nvidia.com/gpu": 4}}])
    ctl.fail_pod_start("gpu-1", "CrashLoopBackOff")
    store.create("daemonsets", daemonset("nvidia", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"))
    wait_for(lambda: [p for p in ds_pods(store, "nvidia")
                      if (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("waiting", {})
                      .get("reason") == "CrashLoopBackOff"], what="crash loop")
    (p,) = ds_pods(store, "nvidia")
    assert p["status"]["phase"] == "Running" and p["status"]["containerStatuses"][0]["restartCount"] >= 1
    time.sleep(0.2)
    assert "nvidia.com/gpu" not in store.get("nodes", None, "gpu-1")["status"]["capacity"]
    ctl.allow_pod_start("gpu-1")
    wait_for(lambda: store.get("nodes", None, "gpu-1")["status"]["capacity"].get("nvidia.com/gpu") == "4",
             what="registered after recovery")


# ---------------------------------------------------------------- scheduler

def test_scheduler_fits_extended_resources_and_counts_usage(cluster):
    store, _ctl = cluster([{"name": "n1"}])
    set_extended(store, "n1", "example.com/dongle", "4")
    store.create("pods", pod("three", {"example.com/dongle": "3"}))
    wait_for(lambda: (store.get("pods", "default", "three").get("status") or {}).get("phase") == "Running", what="bound+running")
    p = store.get("pods", "default", "three")
    assert p["spec"]["nodeName"] == "n1" and scheduled_condition(p)["status"] == "True"

    store.create("pods", pod("five", {"example.com/dongle": "5"}))
    store.create("pods", pod("two", {"example.com/dongle": "2"}))
    for name, message in (("five", DONGLE_ABOVE_ALLOCATABLE_MSG), ("two", DONGLE_MSG)):
        wait_for(lambda name=name: (store.get("pods", "default", name).get("status") or {}).get("conditions"),
                 what=name)
        p = store.get("pods", "default", name)
        cond = scheduled_condition(p)
        assert "nodeName" not in p["spec"] and p["status"]["phase"] == "Pending"
        assert cond["reason"] == "Unschedulable" and cond["message"] == message
        wait_for(lambda name=name: events_for(store, name), what="event")
        (event,) = events_for(store, name)
        assert (event["reason"], event["type"], event["message"]) == ("FailedScheduling", "Warning", message)
        assert event["involvedObject"]["kind"] == "Pod"
        assert event["involvedObject"]["uid"] == p["metadata"]["uid"]

    # freeing the dongles lets the pending pod of 2 in; retries do not repeat the event
    store.delete("pods", "default", "three")
    wait_for(lambda: store.get("pods", "default", "two")["spec"].get("nodeName") == "n1", what="retry binds")
    assert len([e for e in events_for(store, "two") if e["reason"] == "FailedScheduling"]) == 1
    assert store.get("pods", "default", "five")["spec"].get("nodeName") is None


def test_scheduler_node_without_pods_fits_nothing(cluster):
    store, _ctl = cluster([{"name": "n1"}])

    def drop(obj):
        del obj["status"]["allocatable"]["pods"]
    store.mutate("nodes", None, "n1", drop)
    store.create("pods", pod("any"))
    wait_for(lambda: events_for(store, "any"), what="event")
    assert events_for(store, "any")[0]["message"] == (
        "0/1 nodes are available: 1 Too many pods. no new claims to deallocate, preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def test_scheduler_mixed_reasons_message(cluster):
    store, ctl = cluster([
        {"name": "a", "capacity": {"cpu": "1"}},
        {"name": "b", "labels": {"gpu": "nvidia"}, "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
        {"name": "c", "labels": {"gpu": "nvidia"}},
        {"name": "d", "labels": {"gpu": "nvidia"}, "capacity": {"cpu": "1"}},
        {"name": "e", "labels": {"gpu": "nvidia"}},
    ])
    ctl.set_node_unreachable("e", True)
    store.create("pods", pod("big", {"cpu": "2", "example.com/dongle": "1"}, nodeSelector={"gpu": "nvidia"}))
    wait_for(lambda: events_for(store, "big"), what="event")
    assert events_for(store, "big")[0]["message"] == (
        "0/5 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: ml}, 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 2 Insufficient example.com/dongle. "
        "no new claims to deallocate, preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.")
    # a node that gains the resource takes the pod
    set_extended(store, "c", "example.com/dongle", "1")
    wait_for(lambda: store.get("pods", "default", "big")["spec"].get("nodeName") == "c", what="bound to c")


def test_scheduler_respects_other_schedulers_and_requests(cluster):
    store, _ctl = cluster([{"name": "n1", "capacity": {"cpu": "2", "memory": "1Gi"}}])
    store.create("pods", pod("mine", schedulerName="other-scheduler"))
    store.create("pods", pod("half", {"cpu": "1500m", "memory": "512Mi"}))
    wait_for(lambda: store.get("pods", "default", "half")["spec"].get("nodeName"), what="half bound")
    store.create("pods", pod("more", {"cpu": "600m", "memory": "600Mi"}))
    wait_for(lambda: events_for(store, "more"), what="event")
    assert events_for(store, "more")[0]["message"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. no new claims to deallocate, preemption:")
    time.sleep(0.1)
    assert store.get("pods", "default", "mine")["spec"].get("nodeName") is None
    assert not events_for(store, "mine")


def test_run_to_completion_pod_succeeds(cluster):
    store, _ctl = cluster([{"name": "n1"}])
    job = pod("smoke", restartPolicy="Never")
    job["spec"]["containers"][0]["command"] = ["true"]
    store.create("pods", job)
    wait_for(lambda: (store.get("pods", "default", "smoke").get("status") or {}).get("phase") == "Succeeded", what="Succeeded")
    state = store.get("pods", "default", "smoke")["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == 0


def test_terminating_pod_removed_by_kubelet_but_not_on_dead_node(cluster):
    store, ctl = cluster([{"name": "n1"}, {"name": "n2"}])
    for name, node in (("alive", "n1"), ("dead", "n2")):
        store.create("pods", pod(name, nodeName=node))
    wait_for(lambda: all((store.get("pods", "default", n).get("status") or {}).get("phase") == "Running" for n in ("alive", "dead")),
             what="running")
    ctl.set_node_unreachable("n2", True)
    store.mark_deleting("pods", "default", "alive", 30)
    store.mark_deleting("pods", "default", "dead", 30)
    wait_for(lambda: store.get("pods", "default", "alive") is None, what="kubelet removal")
    time.sleep(0.2)
    assert store.get("pods", "default", "dead")["metadata"]["deletionTimestamp"]
    ctl.set_node_unreachable("n2", False)
    wait_for(lambda: store.get("pods", "default", "dead") is None, what="removal after recovery")


def test_many_nodes_stay_cheap(cluster):
    """500 nodes at a 1 s sync must leave the CPU mostly idle (benchmarks run that many)."""
    store, _ctl = cluster([{"name": "n%03d" % i} for i in range(500)], sync_interval=1.0)
    time.sleep(0.5)
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(2.5)
    used = (time.process_time() - cpu0) / (time.monotonic() - wall0)
    assert used < 0.25, "controllers used %.0f%% of a core with 500 idle nodes" % (used * 100)
