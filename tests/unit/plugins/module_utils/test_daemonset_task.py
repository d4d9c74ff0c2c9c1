# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DaemonSet pieces device_plugin_deploy and dra_driver_deploy share: which nodes a template
selects (the DaemonSet controller's predicates), nodes still joining, the FailedCreate fail-fast of the rollout
wait, and the one definition of the devices a node published."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import TaskFailed

READY = {"type": "Ready", "status": "True"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def node(name, labels=None, taints=None, ready=True):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []},
            "status": {"conditions": [READY] if ready else []}}


# -- node selection --------------------------------------------------------------------------------------------

def test_selection_follows_selector_affinity_and_taints_with_the_controllers_own_tolerations():
    spec = {"nodeSelector": {"pool": "gpu"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["2"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["pinned"]}]}]}}}}
    nodes = [node("new", {"pool": "gpu", "gen": "3"}), node("old", {"pool": "gpu", "gen": "1"}),
             node("pinned", {"pool": "gpu"}), node("cpu", {"gen": "5"}),
             # the DaemonSet controller tolerates unschedulable and the pressure taints itself
             node("cordoned", {"pool": "gpu", "gen": "4"},
                  [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
             node("tainted", {"pool": "gpu", "gen": "4"}, [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
             node("prefer", {"pool": "gpu", "gen": "4"}, [{"key": "gpu", "effect": "PreferNoSchedule"}])]
    assert ds_rollout.selected_nodes(spec, nodes) == ["cordoned", "new", "pinned", "prefer"]
    assert ds_rollout.excluded_by_taints(spec, nodes) == {"tainted": "gpu=x:NoSchedule"}
    tolerated = dict(spec, tolerations=[{"key": "gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule"}])
    assert "tainted" in ds_rollout.selected_nodes(tolerated, nodes)


def test_a_node_still_joining_is_told_from_one_that_does_not_match():
    """A node created right before the rollout carries node.kubernetes.io/not-ready:NoSchedule (the
    DaemonSet controller's own tolerations cover not-ready only for NoExecute) until the node lifecycle controller
    sees it Ready."""
    spec = {"nodeSelector": {"acc4-norc": "y"}}
    nodes = [node("joining", {"acc4-norc": "y"}, [NOT_READY_TAINT], ready=False),
             node("quiet", {"acc4-norc": "y"}, ready=False), node("other")]
    assert ds_rollout.selected_nodes(spec, nodes) == ["quiet"]    # the controller counts it; its pod waits
    assert ds_rollout.joining_nodes(spec, nodes) == {"joining": "node.kubernetes.io/not-ready:NoSchedule",
                                                     "quiet": "not Ready"}
    assert ds_rollout.joining_nodes(spec, [node("other")]) == {}


# -- FailedCreate fails the wait fast ------------------------------------------------------------------------

DS = {"metadata": {"name": "nvidia-device-plugin", "namespace": "plugins", "uid": "ds-1", "generation": 1},
      "spec": {"template": {"spec": {"runtimeClassName": "nvidia", "priorityClassName": "system-node-critical"}}},
      "status": {"observedGeneration": 1, "desiredNumberScheduled": 2}}


def failed_create(name, count, message, last="2026-01-01T00:00:10Z", uid="ds-1"):
    return {"metadata": {"name": name}, "reason": "FailedCreate", "count": count, "message": message,
            "involvedObject": {"kind": "DaemonSet", "name": "nvidia-device-plugin", "uid": uid},
            "lastTimestamp": last}


class StuckClient(object):
    """A DaemonSet that never finishes, and the controller's events, which change between reads."""

    def __init__(self, event_lists):
        self.event_lists = list(event_lists)
        self.watches = 0
        self.core = self
        self.apps = self

    def list_namespaced_daemon_set(self, **kwargs):
        return {"items": [DS]}

    def list_namespaced_event(self, namespace, **kwargs):
        return {"items": self.event_lists.pop(0) if len(self.event_lists) > 1 else self.event_lists[0]}

    def list_all(self, fn, *args, **kwargs):
        kwargs.pop("what", None)
        return fn(*args, **kwargs)

    def watch(self, list_fn, predicate, timeout, what="watch", **kwargs):
        self.watches += 1
        objects = {"plugins/nvidia-device-plugin": DS}
        if predicate(objects):
            return objects
        err = KubeHwError("Timed out", reason="Timeout")
        err.objects = objects
        raise err


def remaining_for(seconds):
    clock = {"left": seconds}

    def remaining():
        clock["left"] -= ds_task.EVENT_CHECK_INTERVAL
        return max(0.0, clock["left"])
    return remaining


def test_the_rollout_wait_fails_fast_when_the_controller_cannot_create_pods():
    """The controller reports FailedCreate every few seconds; the wait stops at the next look with
    that reason instead of waiting out the whole wait_timeout (120 s measured)."""
    message = 'pods "nvidia-device-plugin-" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    old = failed_create("e1", 3, message)
    client = StuckClient([[old], [dict(old, count=4)]])
    waiter = ds_task.RolloutWait(client, "plugins", "nvidia-device-plugin", remaining_for(120))
    with pytest.raises(TaskFailed) as err:
        waiter.wait(ds_rollout.rollout_done, "finish the rollout")
    assert client.watches == 2    # one slice to take the baseline, one to see the count go up
    assert ("DaemonSet plugins/nvidia-device-plugin cannot create its pods: the DaemonSet controller reports "
            "FailedCreate: %s" % message) in str(err.value)
    assert "Create RuntimeClass nvidia" in str(err.value)


def test_an_event_since_this_runs_write_fails_at_the_first_look_and_old_ones_do_not():
    quota = ('pods "p" is forbidden: insufficient quota to match these scopes: [{PriorityClass In '
             '[system-node-critical system-cluster-critical]}]')
    client = StuckClient([[failed_create("e1", 1, quota, last="2026-01-01T00:00:10Z")]])
    waiter = ds_task.RolloutWait(client, "plugins", "nvidia-device-plugin", remaining_for(120),
                                 since="2026-01-01T00:00:09Z")
    with pytest.raises(TaskFailed) as err:
        waiter.wait(ds_rollout.rollout_done, "finish the rollout")
    assert client.watches == 1 and "insufficient quota" in str(err.value)
    assert "need a ResourceQuota in plugins whose scopeSelector allows that class" in str(err.value)
    # an event from before this run's write, never counted up again, and another DaemonSet's: the wait times out
    stale = [failed_create("e1", 1, quota, last="2026-01-01T00:00:01Z"),
             failed_create("e2", 1, quota, uid="someone-else")]
    client = StuckClient([stale, [stale[0], dict(stale[1], count=9)]])
    waiter = ds_task.RolloutWait(client, "plugins", "nvidia-device-plugin", remaining_for(8),
                                 since="2026-01-01T00:00:09Z")
    with pytest.raises(KubeHwError) as err:
        waiter.wait(ds_rollout.rollout_done, "finish the rollout")
    assert err.value.reason == "Timeout"


def test_events_that_cannot_be_read_leave_the_wait_as_it_was():
    class Forbidden(StuckClient):
        def list_namespaced_event(self, namespace, **kwargs):
            raise KubeHwError("forbidden", status=403, reason="Forbidden")

    client = Forbidden([[]])
    waiter = ds_task.RolloutWait(client, "plugins", "nvidia-device-plugin", remaining_for(6))
    with pytest.raises(KubeHwError) as err:
        waiter.wait(ds_rollout.rollout_done, "finish the rollout")
    assert err.value.reason == "Timeout" and not waiter.events_readable


# -- adoption --------------------------------------------------------------------------------------------------

def test_one_adoption_rule():
    ours = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "kubehw.devices"}}}
    theirs = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}}}
    assert ds_task.foreign_daemonset_refusal(ours, "ns", "x", False, "delete it") is None
    assert ds_task.foreign_daemonset_refusal(None, "ns", "x", False, "delete it") is None
    assert ds_task.foreign_daemonset_refusal(theirs, "ns", "x", True, "delete it") is None
    assert "set adopt_daemonset: true" in ds_task.foreign_daemonset_refusal(theirs, "ns", "x", False, "delete it")


# -- one definition of "devices published by a node" ----------------------------------------------------------

def rs(node_name, pool, generation, count, names, driver="gpu.example.com"):
    return {"metadata": {"name": "%s-%d-%s" % (pool, generation, names[0] if names else "none")},
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                     "devices": [{"name": n} for n in names]}}


def test_both_aggregators_agree_a_pool_counts_only_when_all_its_newest_slices_are_there():
    """_dra_report.published_devices (extended_resource_info, the smoke test) counted the devices of an
    incomplete pool, dra_driver_deploy's aggregator did not."""
    slices = [rs("n1", "n1", 2, 2, ["gpu-0"]), rs("n1", "n1", 2, 2, ["gpu-1"]),    # complete
              rs("n2", "n2", 1, 2, ["gpu-0"]),                                     # 1 of 2 slices
              rs("n3", "n3", 1, 1, ["old"]), rs("n3", "n3", 2, 2, ["new-0"])]      # newest generation incomplete
    devices = _dra_report.published_devices(slices)
    by_node = _dra_report.published_by_node(slices, "gpu.example.com")
    assert sorted(devices) == ["n1"]
    assert [d["device"] for d in devices["n1"]] == by_node["n1"]["devices"] == ["gpu-0", "gpu-1"]
    assert by_node["n2"]["devices"] == [] and by_node["n3"]["devices"] == []
    assert _dra_report.current_pools(slices)[("gpu.example.com", "n3")]["generation"] == 2


# -- a missing RuntimeClass before any write ----------------------------------------------------------------------

class RuntimeClasses(object):
    def __init__(self, status=None):
        self.status = status
        self.node_api = self

    def read_runtime_class(self, name):
        if self.status:
            raise KubeHwError("no", status=self.status, reason="x")
        return {"metadata": {"name": name}}

    def call_json(self, fn, *args, **kwargs):
        kwargs.pop("what", None)
        return fn(*args, **kwargs)


def test_a_missing_runtime_class_is_found_before_any_write_and_an_unreadable_one_is_not_guessed():
    spec = {"runtimeClassName": "nvidia"}
    assert ds_task.missing_runtime_class(RuntimeClasses(404), spec) == "nvidia"
    assert ds_task.missing_runtime_class(RuntimeClasses(), spec) is None
    assert ds_task.missing_runtime_class(RuntimeClasses(403), spec) is None     # the identity may not read them
    assert ds_task.missing_runtime_class(RuntimeClasses(404), {}) is None
    with pytest.raises(KubeHwError):
        ds_task.missing_runtime_class(RuntimeClasses(500), spec)


def test_the_device_plugin_overlap_counts_only_shared_nodes_the_controller_would_use():
    gpu = {"metadata": {"name": "gpu-1", "labels": {"pool": "a"}},
           "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}
    other = {"metadata": {"name": "gpu-2", "labels": {"pool": "b"}}}
    plugin = {"metadata": {"namespace": "ops", "name": "nvdp", "labels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
              "spec": {"template": {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}}}
    unrelated = {"metadata": {"namespace": "kube-system", "name": "kube-proxy", "labels": {"k8s-app": "kube-proxy"}},
                 "spec": {"template": {"spec": {}}}}
    found = ds_task.device_plugin_daemonsets([plugin, unrelated], {"resources": ["nvidia.com/gpu"],
                                                                   "labels": [("app.kubernetes.io/name",
                                                                               "nvidia-device-plugin")]})
    assert found == [plugin]
    driver = {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    assert ds_task.overlapping_nodes(driver, found, [gpu, other]) == {"ops/nvdp": ["gpu-1"]}
    # the driver without the toleration does not run on the tainted node: no overlap there
    assert ds_task.overlapping_nodes({"nodeSelector": {"pool": "a"}}, found, [gpu, other]) == {}
