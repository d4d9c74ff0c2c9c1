# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout wait both deploy modules share: refusals judged by persistence, nodes still joining waited for, the
per-node outcome, and one list of the nodes per task. The same behaviours run on the real control plane in
tests/integration/test_dra_presets.py; these pin the rules at their edges."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_wait as ds_wait
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, TaskFailed, WaitTimedOut
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline

READY = {"type": "Ready", "status": "True"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
KEY = "plugins/nvidia-device-plugin"


def node(name, ready=True, taints=None, status=None, changed=None, heartbeat=None, reason=None):
    conditions = [dict(READY, status=status or ("True" if ready else "False"))]
    if changed:
        conditions[0]["lastTransitionTime"] = changed
    if heartbeat:
        conditions[0]["lastHeartbeatTime"] = heartbeat
    if reason:
        conditions[0].update(reason=reason, message="container runtime network not ready: cni plugin not initialized")
    return {"metadata": {"name": name, "labels": {"gpu": "yes"}}, "spec": {"taints": taints or []},
            "status": {"conditions": conditions}}


def daemonset(desired=2, current=None, updated=None, available=None, generation=1):
    current = desired if current is None else current
    return {"metadata": {"name": "nvidia-device-plugin", "namespace": "plugins", "uid": "ds-1",
                         "generation": generation},
            "spec": {"selector": {"matchLabels": {"app": "p"}},
                     "template": {"spec": {"nodeSelector": {"gpu": "yes"}, "runtimeClassName": "nvidia",
                                           "priorityClassName": "system-node-critical"}}},
            "status": {"observedGeneration": generation, "desiredNumberScheduled": desired,
                       "currentNumberScheduled": current,
                       "updatedNumberScheduled": current if updated is None else updated,
                       "numberAvailable": current if available is None else available}}


def failed_create(message, first, last, count=5, uid="ds-1"):
    return {"metadata": {"name": "e-%s" % first}, "reason": "FailedCreate", "count": count, "message": message,
            "involvedObject": {"kind": "DaemonSet", "name": "nvidia-device-plugin", "uid": uid},
            "firstTimestamp": first, "lastTimestamp": last}


def pod(node_name, created="2026-01-01T00:00:00Z", ready=True, generation=1):
    return {"metadata": {"name": "p-" + node_name, "creationTimestamp": created,
                         "labels": {"pod-template-generation": str(generation)},
                         "ownerReferences": [{"kind": "DaemonSet", "uid": "ds-1", "controller": True}]},
            "spec": {"nodeName": node_name},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


QUOTA = 'pods "p" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0'


# -- the refusal rule ----------------------------------------------------------------------------------------

def test_a_refusal_counts_once_it_persists_while_pods_are_missing_and_none_was_created_since():
    short = daemonset(desired=2, current=0)
    lasting = failed_create(QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z")
    assert ds_wait.persistent_refusals([lasting], short, []) == [lasting]
    # a hiccup: reported over less than REFUSAL_PERSISTS seconds
    assert ds_wait.persistent_refusals([failed_create(QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z")],
                                       short, []) == []
    # one event per refused pod (each has a name of its own in the message): together they span the 10 s
    each = [failed_create(QUOTA, "2026-01-01T00:00:0%dZ" % s, "2026-01-01T00:00:0%dZ" % s, count=1) for s in (0, 5)]
    combined = failed_create("(combined from similar events): " + QUOTA, "2026-01-01T00:00:06Z",
                             "2026-01-01T00:00:10Z", count=2)
    assert ds_wait.persistent_refusals(each, short, []) == []
    assert ds_wait.persistent_refusals(each + [combined], short, []) == [combined, each[1], each[0]]
    assert ds_wait.refusal_text([combined] + each) == "%s (4 such event(s) since 2026-01-01T00:00:00Z)" % QUOTA
    # reported last before this run's write: a refusal of the previous template
    assert ds_wait.persistent_refusals([lasting], short, [], since="2026-01-01T00:00:11Z") == []
    # a pod was created after it: the controller got past it
    assert ds_wait.persistent_refusals([lasting], short, [pod("a", created="2026-01-01T00:00:11Z")]) == []
    # another DaemonSet's (an earlier one of the same name)
    assert ds_wait.persistent_refusals([dict(lasting, involvedObject=dict(lasting["involvedObject"], uid="x"))],
                                       short, []) == []
    assert ds_wait.lacks_pods(short) and not ds_wait.lacks_pods(daemonset(desired=2))
    assert ds_wait.lacks_pods(daemonset(desired=2, updated=1))      # new-template pods refused
    assert not ds_wait.lacks_pods(dict(short, status=dict(short["status"], observedGeneration=0)))


class Watch(object):
    """A ListWatch whose every until() call moves one step along ``states`` (the last one stays) and advances the
    clock by the time a real watch would block when nothing it waits for happens."""

    def __init__(self, clock, states):
        self.clock = clock
        self.states = list(states)
        self.objects = {}
        self.listed = False
        self.list_kwargs = {}   # no label selector: the watch holds every node
        self.calls = 0

    def relist(self):
        return self.until(lambda _objects: True, 1.0)

    def until(self, predicate, timeout):
        self.calls += 1
        self.listed = True
        self.objects = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if predicate(self.objects):
            return self.objects
        self.clock["now"] += timeout
        raise WaitTimedOut(timeout, "waiting", self.objects)


class Client(object):
    def __init__(self, clock, daemonsets, nodes, events=(), pods=(), pod_states=None):
        self.core = self.apps = self
        self.ds_watch = Watch(clock, [{KEY: ds} for ds in daemonsets])
        self.node_watch = Watch(clock, [dict((n["metadata"]["name"], n) for n in state) for state in nodes])
        self.events = list(events)
        self.pod_states = [list(pods)] if pod_states is None else list(pod_states)   # one state per read, the last stays
        self.event_reads = 0

    def list_watch(self, fn, what="watch", **kwargs):
        return self.ds_watch if fn == self.list_namespaced_daemon_set else self.node_watch

    def list_namespaced_daemon_set(self, **kwargs):
        raise AssertionError("read through list_watch")

    def list_node(self, **kwargs):
        raise AssertionError("read through list_watch")

    def list_namespaced_event(self, namespace, **kwargs):
        self.event_reads += 1
        return {"items": self.events}

    def list_namespaced_pod(self, namespace, **kwargs):
        return {"items": self.pod_states.pop(0) if len(self.pod_states) > 1 else self.pod_states[0]}

    def list_all(self, fn, *args, **kwargs):
        kwargs.pop("what", None)
        return fn(*args, **kwargs)


@pytest.fixture
def clock(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(ds_wait.time, "monotonic", lambda: clock["now"])
    return clock


def waiter(client, clock, budget=120, since=None):
    return ds_wait.RolloutWait(client, "plugins", "nvidia-device-plugin", Deadline(budget, clock=lambda: clock["now"]),
                               since=since)


def test_a_refusal_already_there_fails_a_rerun_at_the_first_look_with_its_fix(clock):
    """A re-run that writes nothing met a quota refusal the controller had reported for minutes, but waited until its
    event count grew (41-45 s on the real control plane, the controller backing off)."""
    client = Client(clock, [daemonset(desired=1, current=0)], [[node("a")]],
                    events=[failed_create(QUOTA, "2026-01-01T00:00:00Z", "2026-01-01T00:03:00Z", count=14)])
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock).wait("finish the rollout")
    assert client.ds_watch.calls == 1 and clock["now"] <= ds_wait.SLICE
    assert ("DaemonSet plugins/nvidia-device-plugin cannot create its pods: the DaemonSet controller reports "
            "FailedCreate: %s (14 such event(s) since 2026-01-01T00:00:00Z)" % QUOTA) in str(err.value)


def test_a_transient_refusal_the_controller_gets_past_does_not_stop_the_rollout(clock):
    hiccup = failed_create("Internal error occurred: failed calling webhook: context deadline exceeded",
                           "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z", count=3)
    client = Client(clock, [daemonset(desired=1, current=0), daemonset(desired=1, current=0), daemonset(desired=1)],
                    [[node("a")]], events=[hiccup], pods=[pod("a")])
    done = waiter(client, clock).wait("finish the rollout")
    assert done["status"]["currentNumberScheduled"] == 1 and client.event_reads == 2


def test_a_missing_runtime_class_names_its_fix_and_pod_security_its_label(clock):
    for message, fix in (('pod rejected: RuntimeClass "nvidia" not found', "Create RuntimeClass nvidia"),
                         ('violates PodSecurity "baseline:latest": host namespaces',
                          "Label namespace plugins pod-security.kubernetes.io/enforce=privileged")):
        client = Client(clock, [daemonset(desired=1, current=0)], [[node("a")]],
                        events=[failed_create(message, "2026-01-01T00:00:00Z", "2026-01-01T00:00:20Z")])
        with pytest.raises(TaskFailed) as err:
            waiter(client, clock).wait("finish the rollout")
        assert fix in str(err.value)


def test_a_daemonset_deleted_during_the_wait_ends_it_at_once(clock):
    """Someone deletes the DaemonSet while its pods are still being created: the watch's next look finds it gone and
    the wait fails saying so, instead of waiting out wait_timeout on the copy it had."""
    client = Client(clock, [daemonset(desired=1, current=0)], [[node("a")]])
    client.ds_watch.states = [{KEY: daemonset(desired=1, current=0)}, {}]
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock, budget=600).wait("finish the rollout")
    assert "DaemonSet plugins/nvidia-device-plugin was deleted while this task waited for it to finish the rollout" \
        in str(err.value)
    assert client.ds_watch.calls == 2 and clock["now"] <= 2 * ds_wait.SLICE


def test_an_api_gateway_timeout_while_watching_is_an_api_failure_not_a_wait_that_ran_out(clock):
    """A 504 Gateway Timeout the apiserver (or a proxy) answers carries the Status reason "Timeout", the word a wait
    once used for its own budget: the wait must fail with the API's error at once, not take it for a slice that ended
    and look again until wait_timeout."""
    client = Client(clock, [daemonset(desired=1, current=0)], [[node("a")]])
    gateway = KubeHwError("Failed to watch DaemonSet %s: 504 Gateway Timeout: the server was unable to return a "
                          "response in the time allotted" % KEY, status=504, reason="Timeout")

    def until(predicate, timeout):
        raise gateway

    client.ds_watch.until = until
    with pytest.raises(KubeHwError) as err:
        waiter(client, clock, budget=600).wait("finish the rollout")
    assert err.value is gateway and not isinstance(err.value, WaitTimedOut)
    assert clock["now"] == 0.0


def test_a_deadline_counts_from_its_start_and_words_its_timeout():
    now = {"t": 100.0}
    deadline = Deadline(30, clock=lambda: now["t"])
    assert deadline.left() == 30 and not deadline.passed()
    now["t"] = 125.5
    assert deadline.left() == 4.5 and deadline.spent() == 25.5 and not deadline.passed()
    now["t"] = 131.0
    assert deadline.left() == 0.0 and deadline.passed()
    err = deadline.timed_out("waiting for node a to be Ready", objects={"a": {}})
    assert isinstance(err, KubeHwError) and err.reason == "Timeout" and err.objects == {"a": {}}
    assert str(err) == "Timed out after 30s waiting for node a to be Ready"


@pytest.mark.parametrize("message, hint", [
    (QUOTA, "The ResourceQuota no-pods of namespace plugins leaves no room for one more pod: raise it (kubectl "
            "describe resourcequota no-pods -n plugins shows what it counts)"),
    ('admission webhook "gpu-policy.example.com" denied the request: GPU plugins go to namespace gpu-system',
     "The admission webhook gpu-policy.example.com refuses the pods for the reason above: change what it objects to "
     "(an option of this task), or have its owner exempt namespace plugins."),
    ('Internal error occurred: failed calling webhook "gpu-policy.example.com": failed to call webhook: Post '
     '"https://gpu-policy.webhooks.svc:443/validate?timeout=10s": context deadline exceeded',
     "The admission webhook gpu-policy.example.com did not answer and its failurePolicy refuses what it cannot "
     "check: bring its service back, or have its owner exempt namespace plugins."),
    ("some refusal the collection knows nothing of", ""),
])
def test_each_kind_of_refusal_the_docs_name_gets_its_fix(message, hint):
    got = ds_wait.failure_hint(message, daemonset())
    assert (hint in got) if hint else got == "", got


# -- nodes still joining ---------------------------------------------------------------------------------------

def test_a_rollout_done_on_its_ready_node_waits_for_the_one_still_joining(clock):
    """One Ready node and one joining: the controller reports 1 of 1 done at once; the wait goes on until the joining
    node is Ready and the controller counts it, reading the nodes once and then only their changes."""
    joining = node("b", ready=False, taints=[NOT_READY_TAINT])
    # the pods are read again only once the DaemonSet's status changed (the controller counted b's pod)
    client = Client(clock, [daemonset(desired=1), daemonset(desired=1), daemonset(desired=2)],
                    [[node("a"), joining], [node("a"), joining], [node("a"), node("b")]],
                    pod_states=[[pod("a")], [pod("a"), pod("b")]])
    wait = waiter(client, clock)
    done = wait.wait("finish the rollout")
    assert done["status"]["desiredNumberScheduled"] == 2 and wait.joining == {}
    assert wait.outcome(done) == {"a": "ready", "b": "ready"}


def test_a_node_that_registers_after_the_guard_listed_the_nodes_is_waited_for(clock):
    """The guard listed one node before the write; a second node of the pool registered while the first one's pod
    started. The wait judged "done" on the guard's copy of the nodes and returned without the new node. Now the first
    verdict reads the nodes anew: the new node is joining, then covered, and the outcome names both."""
    joining = node("b", ready=False, taints=[NOT_READY_TAINT])
    client = Client(clock, [daemonset(desired=1), daemonset(desired=1), daemonset(desired=2)],
                    [[node("a")], [node("a"), joining], [node("a"), node("b")]],
                    pod_states=[[pod("a")], [pod("a"), pod("b")]])
    wait = waiter(client, clock)
    assert [n["metadata"]["name"] for n in wait.nodes()] == ["a"]      # the guard's list, before the write
    done = wait.wait("finish the rollout")
    assert done["status"]["desiredNumberScheduled"] == 2 and wait.joining == {}
    assert wait.outcome(done) == {"a": "ready", "b": "ready"}


def test_the_wait_wakes_once_every_joining_node_has_joined_not_at_each_change():
    """On a large cluster nodes change many times a second, and a pool joins node by node: the wait woke at every
    change of a joining node (207 node watches in 31 s for 100 nodes joining at 5,000 nodes, benchmarks/dra_rollout).
    Now a look ends once all of them have joined or gone (or its slice is over)."""
    spec = {"nodeSelector": {"gpu": "yes"}}
    joining = node("b", ready=False, taints=[NOT_READY_TAINT])
    beat = dict(joining, status={"conditions": [dict(joining["status"]["conditions"][0],
                                                     lastHeartbeatTime="2026-01-01T00:00:04Z")]})
    joined = ds_wait.all_joined(spec, ["b", "c"])
    assert not joined({"b": joining, "c": joining})
    assert not joined({"b": beat, "c": joining, "other": node("other")})      # a heartbeat
    assert not joined({"b": node("b", taints=[NOT_READY_TAINT]), "c": joining})   # Ready, the taint not lifted yet
    assert not joined({"b": node("b"), "c": joining})                         # the first of two
    assert joined({"b": node("b"), "c": node("c")})
    assert joined({"b": node("b")})                                            # c is gone


def test_a_long_join_lists_the_pods_only_when_the_daemonset_changed(clock):
    """On a large cluster nodes change many times a second; the wait read the DaemonSet's pods at every look while a
    node joined (399 pod lists in 46 s at 5,000 nodes, benchmarks/dra_rollout). Now only after the controller changed
    the DaemonSet's status."""
    joining = node("b", ready=False, taints=[NOT_READY_TAINT])
    client = Client(clock, [daemonset(desired=1)] * 6 + [daemonset(desired=2)],
                    [[node("a"), joining]] * 6 + [[node("a"), node("b")]],
                    pod_states=[[pod("a")], [pod("a"), pod("b")]])
    reads = []
    list_pods = client.list_namespaced_pod
    client.list_namespaced_pod = lambda namespace, **kw: reads.append(1) or list_pods(namespace, **kw)
    wait = waiter(client, clock)
    done = wait.wait("finish the rollout")
    assert done["status"]["desiredNumberScheduled"] == 2
    # once while b joined, once for the DaemonSet as it ended (are all its pods ready?)
    assert len(reads) == 2, "pods listed %d times while the DaemonSet did not change" % len(reads)
    # the report after the wait reads the same pods
    assert wait.outcome(done) == wait.outcome(done) == {"a": "ready", "b": "ready"}
    assert len(reads) == 2


def test_a_rollout_the_controller_counts_done_while_a_pod_was_marked_not_ready_waits_for_the_pod(clock):
    """The controller reported 2 of 2 available; meanwhile the node lifecycle controller, whose copy of a node that had
    just joined still showed it NotReady, marked the node's new pod not ready. The task returned "done" with that node
    not-ready (seen once on the real control plane under load). Now the wait goes on until the pods agree (the
    controller's next status, the kubelet reporting the pod ready again), for at most UNCOVERED_GRACE seconds."""
    unready_b = pod("b", ready=False)
    states = [daemonset(desired=2), daemonset(desired=2, available=1), daemonset(desired=2)]
    for version, state in enumerate(states):
        state["metadata"]["resourceVersion"] = str(100 + version)
    # one read per DaemonSet state the wait judges done: the first, and the last
    client = Client(clock, states, [[node("a"), node("b")]], pod_states=[[pod("a"), unready_b], [pod("a"), pod("b")]])
    wait = waiter(client, clock)
    done = wait.wait("finish the rollout")
    assert wait.outcome(done) == {"a": "ready", "b": "ready"}
    assert client.ds_watch.calls >= 3
    # a pod that stays not ready while the controller keeps saying done: the truth after the grace, not a timeout
    client = Client(clock, [daemonset(desired=2)], [[node("a"), node("b")]], pods=[pod("a"), unready_b])
    clock["now"] = 0.0
    wait = waiter(client, clock)
    done = wait.wait("finish the rollout")
    assert wait.outcome(done) == {"a": "ready", "b": "not-ready"}
    assert ds_wait.UNCOVERED_GRACE <= clock["now"] < 60
    # nor beyond wait_timeout when that ends first: the wait did not look again without end once the budget was spent
    client = Client(clock, [daemonset(desired=2)], [[node("a"), node("b")]], pods=[pod("a"), unready_b])
    clock["now"] = 0.0
    wait = waiter(client, clock, budget=5)
    done = wait.wait("finish the rollout")
    assert wait.outcome(done) == {"a": "ready", "b": "not-ready"}
    assert clock["now"] <= 5 and client.ds_watch.calls < 10


def test_a_node_that_never_joins_fails_the_rollout_naming_it_and_a_silent_kubelet_is_not_waited_for(clock):
    client = Client(clock, [daemonset(desired=1)],
                    [[node("a"), node("b", ready=False, taints=[NOT_READY_TAINT]), node("gone", status="Unknown")]],
                    pods=[pod("a"), pod("gone", ready=False)])
    result, warnings = {}, []
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock, budget=20).rollout(daemonset(desired=1), result, "the plugin", "Label the nodes", 20,
                                                 False, warnings)
    assert ("Timed out after 20s waiting for DaemonSet plugins/nvidia-device-plugin: the nodes it selects are still "
            "joining and never became schedulable: b (node.kubernetes.io/not-ready:NoSchedule)") in str(err.value)
    assert result["node_outcome"] == {"a": "ready", "b": "joining", "gone": "not-ready"}
    # what the module knows of the pods elsewhere (dra_driver_deploy's nvidia_driver_root hint) is kept beside it
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock, budget=20).rollout(daemonset(desired=1), {}, "the plugin", "Label the nodes", 20, False,
                                                 [], timeout_hint=lambda _ds, pods: "; the hint of %d pods" % len(pods))
    assert "still joining and never became schedulable: b" in str(err.value)
    assert str(err.value).endswith("; the hint of 2 pods"), str(err.value)


def test_a_node_that_went_down_with_its_pod_is_not_waited_for_as_if_it_were_joining(clock):
    """A surge update finishes on the Ready nodes while a node that went down (its kubelet still reporting NotReady)
    keeps its old pod: that node is no joining one, so the wait returns and names it not-ready."""
    down = node("b", ready=False, taints=[NOT_READY_TAINT], changed="2026-01-01T00:05:00Z")
    client = Client(clock, [daemonset(desired=1)], [[node("a"), down]],
                    pods=[pod("a", generation=1), pod("b", generation=0, ready=False)])
    result, warnings = {}, []
    waiter(client, clock).rollout(daemonset(desired=1), result, "the plugin", "Label the nodes", 60, False, warnings)
    assert clock["now"] == 0.0 and result["node_outcome"] == {"a": "ready", "b": "not-ready"}
    assert warnings == ["DaemonSet plugins/nvidia-device-plugin: node(s) not ready, not waited for: b"]


def test_a_node_stuck_not_ready_is_named_not_waited_for_and_one_that_just_registered_is(clock):
    """A kubelet that has reported NotReady for 12 minutes (a broken network plugin) is no joining node: the rollout
    ends at once naming it and its condition's reason, where it used to wait out wait_timeout. One whose kubelet
    reported NotReady for 4 minutes is still joining (NOT_READY_GRACE is 5): the rollout waits for it."""
    stuck = node("b", ready=False, taints=[NOT_READY_TAINT], changed="2026-01-01T00:00:00Z",
                 heartbeat="2026-01-01T00:12:30Z", reason="KubeletNotReady")
    client = Client(clock, [daemonset(desired=1)], [[node("a"), stuck]], pods=[pod("a")])
    result, warnings = {}, []
    waiter(client, clock).rollout(daemonset(desired=1), result, "the plugin", "Label the nodes", 60, False, warnings)
    assert clock["now"] == 0.0 and result["node_outcome"] == {"a": "ready", "b": "not-ready"}
    assert warnings == ["DaemonSet plugins/nvidia-device-plugin: node(s) not ready, not waited for: b (Ready=False "
                        "for 12m: KubeletNotReady: container runtime network not ready: cni plugin not initialized)"]

    joining = dict(stuck, status={"conditions": [dict(stuck["status"]["conditions"][0],
                                                      lastHeartbeatTime="2026-01-01T00:04:00Z")]})
    client = Client(clock, [daemonset(desired=1)], [[node("a"), joining]], pods=[pod("a")])
    result = {}
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock, budget=20).rollout(daemonset(desired=1), result, "the plugin", "Label the nodes", 20,
                                                 False, [])
    assert "still joining and never became schedulable: b (node.kubernetes.io/not-ready:NoSchedule)" in str(err.value)
    assert result["node_outcome"] == {"a": "ready", "b": "joining"}


def test_a_joining_node_whose_pod_was_just_created_is_waited_for_until_the_copies_catch_up(clock):
    """The wait's copies of the node (still tainted) and of the DaemonSet (1 of 1 done) lag behind the pod the
    controller just created on the node that joined: the wait returned then, without that node (seen in CI)."""
    stale = node("b", ready=False, taints=[NOT_READY_TAINT], changed="2026-01-01T00:00:00Z")
    fresh_pod = pod("b", created="2026-01-01T00:00:09Z", ready=False)
    client = Client(clock, [daemonset(desired=1), daemonset(desired=1), daemonset(desired=2)],
                    [[node("a"), stale], [node("a"), stale], [node("a"), node("b")]],
                    pod_states=[[pod("a"), fresh_pod], [pod("a"), fresh_pod], [pod("a"), dict(fresh_pod, status={
                        "conditions": [{"type": "Ready", "status": "True"}]})]])
    done = waiter(client, clock).wait("finish the rollout")
    assert done["status"]["desiredNumberScheduled"] == 2


def test_selecting_no_node_fails_unless_allowed_and_then_warns(clock):
    client = Client(clock, [daemonset(desired=0)], [[node("cpu")]])
    client.node_watch.states[0]["cpu"]["metadata"]["labels"] = {}
    result, warnings = {}, []
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock).rollout(daemonset(desired=0), result, "the plugin", "Label the nodes", 60, False,
                                      warnings)
    assert "selects no node (desiredNumberScheduled is 0), so the plugin runs nowhere" in str(err.value)
    waiter(client, clock).rollout(daemonset(desired=0), result, "the plugin", "Label the nodes", 60, True, warnings)
    assert "selects no node (allow_empty_rollout)" in warnings[0] and result["node_outcome"] == {}


def test_the_outcome_of_each_node():
    nodes = [node("a"), node("b"), node("c", ready=False, taints=[NOT_READY_TAINT]), node("d"), node("e"),
             node("f", status="Unknown")]
    pods = [pod("a"), pod("b", generation=0), pod("d", ready=False)]
    outcome = ds_wait.node_outcome(daemonset(desired=4, generation=1), nodes, pods, joining={"c": "not Ready"})
    assert outcome == {"a": "ready", "b": "outdated", "c": "joining", "d": "not-ready", "e": "pending",
                       "f": "not-ready"}
    assert ds_wait.node_outcome(daemonset(desired=4), nodes, pods, refused=True)["e"] == "refused"


def test_a_node_that_is_down_with_its_pod_being_deleted_is_named_not_ready():
    # the controller deleted the pod of a node that went down (its kubelet never confirms it) and its not-ready taint
    # takes it out of the selection; a Ready node replacing its pod mid-update is not named for that
    deleted = dict(pod("g"), metadata=dict(pod("g")["metadata"], deletionTimestamp="2026-12-02T14:00:00Z"))
    replaced = dict(pod("a"), metadata=dict(pod("a")["metadata"], name="a-old", deletionTimestamp="2026-12-02T14:00:00Z"))
    nodes = [node("a"), node("g", ready=False, taints=[dict(NOT_READY_TAINT)])]
    outcome = ds_wait.node_outcome(daemonset(desired=1, generation=1), nodes, [pod("a"), replaced, deleted])
    assert outcome == {"a": "ready", "g": "not-ready"}
    assert ds_wait.node_outcome(daemonset(desired=1, generation=1), nodes, [pod("a")]) == {"a": "ready"}


# -- a rolling update whose budget the nodes that are down use up ---------------------------------------------

def test_a_rolling_update_stuck_behind_nodes_that_are_not_ready_fails_naming_them_and_the_way_out(clock):
    """maxUnavailable 1 and a node that is down: its pod counts as unavailable for good, so the controller replaces
    no pod on the Ready nodes and the task waited out its whole wait_timeout."""
    stuck = daemonset(desired=3, updated=1, available=2, generation=2)
    pods = [pod("a", generation=2), pod("b", generation=1, ready=False), pod("c", generation=1)]
    nodes = [node("a"), node("b", status="Unknown"), node("c")]
    client = Client(clock, [stuck], [nodes], pods=pods)
    with pytest.raises(TaskFailed) as err:
        waiter(client, clock).wait("finish the rollout")
    assert ds_wait.STALL_SECONDS <= clock["now"] <= ds_wait.STALL_SECONDS + 2 * ds_wait.SLICE
    assert ("DaemonSet plugins/nvidia-device-plugin cannot finish its rolling update: 1 node(s) running its pods are "
            "not Ready (b), and their pods use up the update's maxUnavailable (1), so the DaemonSet controller "
            "replaces no pod on the Ready nodes (1 old pod(s) left there: p-c)") in str(err.value)
    # a budget of 2 leaves room: the wait goes on (here until its timeout)
    roomy = dict(stuck, spec=dict(stuck["spec"], updateStrategy={"rollingUpdate": {"maxUnavailable": "50%"}}))
    assert ds_wait.rolling_budget(roomy) == (2, "maxUnavailable")
    clock["now"] = 0.0
    with pytest.raises(KubeHwError) as err:
        waiter(Client(clock, [roomy], [nodes], pods=pods), clock, budget=30).wait("finish the rollout")
    assert err.value.reason == "Timeout"
    assert ds_wait.rolling_budget(dict(stuck, spec=dict(stuck["spec"], updateStrategy={"type": "OnDelete"}))) is None
    # a surge update (the DRA example driver's maxSurge 1) counts its surge
    surging = {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    surge = dict(stuck, spec=dict(stuck["spec"], updateStrategy=surging))
    assert ds_wait.rolling_budget(surge) == (1, "maxSurge")


def test_under_max_surge_only_a_node_holding_a_new_pod_beside_an_old_one_uses_the_budget(clock):
    """maxSurge 1: the controller counts a node against the surge only while it runs a new pod that is not available
    beside an old one. A NotReady node whose only pod is old and terminating (or old: it gets its replacement without
    the budget) does not stop the update, even through a 10 s stall of a slow image pull; one with a surged pod that
    cannot become ready does."""
    surging = {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    stalled = daemonset(desired=3, updated=1, available=2, generation=2)
    stalled = dict(stalled, spec=dict(stalled["spec"], updateStrategy=surging))
    terminating = pod("b", generation=1, ready=False)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    nodes = {"a": node("a"), "b": node("b", status="Unknown"), "c": node("c")}
    assert ds_wait.stalled_rollout(stalled, [pod("a", generation=2), terminating, pod("c", generation=1)], nodes,
                                   surge=True) == ([], ["p-c"])
    assert ds_wait.stalled_rollout(stalled, [pod("a", generation=2), terminating, pod("c", generation=1)], nodes) == (
        ["b"], ["p-c"])
    surged = pod("b", generation=2, ready=False)
    surged["metadata"]["name"] = "p-b-new"
    holding = [pod("a", generation=2), pod("b", generation=1), surged, pod("c", generation=1)]
    assert ds_wait.stalled_rollout(stalled, holding, nodes, surge=True) == (["b"], ["p-c"])

    client = Client(clock, [stalled], [list(nodes.values())], pods=[pod("a", generation=2), terminating,
                                                                    pod("c", generation=1)])
    with pytest.raises(KubeHwError) as err:
        waiter(client, clock, budget=30).wait("finish the rollout")
    assert err.value.reason == "Timeout"     # waited on, not reported as a spent budget
    clock["now"] = 0.0
    with pytest.raises(TaskFailed) as err:
        waiter(Client(clock, [stalled], [list(nodes.values())], pods=holding), clock).wait("finish the rollout")
    assert "use up the update's maxSurge (1)" in str(err.value) and "update_strategy.max_surge" in str(err.value)
