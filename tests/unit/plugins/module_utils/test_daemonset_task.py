# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DaemonSet pieces device_plugin_deploy and dra_driver_deploy share: which nodes a template
selects (the DaemonSet controller's predicates), nodes still joining, the adoption rule, and the one definition of
the devices a node published. The rollout wait has test_daemonset_wait.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError

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


def _affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize("spec, selector", [
    ({}, None),
    ({"nodeSelector": {"pool": "gpu", "a.example.com/b": "x"}}, "a.example.com/b=x,pool=gpu"),
    ({"nodeSelector": {"pool": "gpu"}, "affinity": _affinity({"matchExpressions": [
        {"key": "gen", "operator": "In", "values": ["b", "a"]}, {"key": "old", "operator": "NotIn", "values": ["1"]},
        {"key": "gpu", "operator": "Exists"}, {"key": "cordon", "operator": "DoesNotExist"}]})},
     "pool=gpu,gen in (a,b),old notin (1),gpu,!cordon"),
    # what a selector cannot say is left to node_matches(): Gt/Lt, matchFields, several terms (any of them)
    ({"nodeSelector": {"pool": "gpu"}, "affinity": _affinity(
        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["2"]}]})}, "pool=gpu"),
    ({"affinity": _affinity({"matchExpressions": [{"key": "gpu", "operator": "Exists"}],
                             "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]})}, None),
    ({"affinity": _affinity({"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                            {"matchExpressions": [{"key": "b", "operator": "Exists"}]})}, None),
])
def test_the_node_list_is_filtered_by_what_a_label_selector_can_say_of_the_selection(spec, selector):
    assert ds_rollout.node_label_selector(spec) == selector


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
    found = guard.device_plugin_daemonsets([plugin, unrelated], {"resources": ["nvidia.com/gpu"],
                                                                 "labels": [("app.kubernetes.io/name",
                                                                             "nvidia-device-plugin")]})
    assert found == [plugin]
    driver = {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    assert guard.overlapping_nodes(driver, found, [gpu, other]) == {"ops/nvdp": ["gpu-1"]}
    # the driver without the toleration does not run on the tainted node: no overlap there
    assert guard.overlapping_nodes({"nodeSelector": {"pool": "a"}}, found, [gpu, other]) == {}
