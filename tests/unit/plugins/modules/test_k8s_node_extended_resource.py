# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module logic against an in-memory fake of the client layer (no network).

The fake applies JSON patches with the jsonpatch library and answers like the apiserver in
kube-apiserver-facts.md: a failed test op or a key-level add on a missing map is a 422 without
causes, a missing node a 404. The integration tests check the same against the suite's own control plane.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import jsonpatch
import pytest

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.modules import k8s_node_extended_resource as mod
from tests.unit.plugins.modules import module_harness

GENERIC_422 = {"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422, "details": {},
               "message": "the server rejected our request due to an error in our request"}


def make_node(name, capacity=None, labels=None, allocatable=None):
    status = {"conditions": [{"type": "Ready", "status": "True"}]}
    if capacity is not None:
        status["capacity"] = dict(capacity)
        status["allocatable"] = dict(allocatable if allocatable is not None else capacity)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "1"},
            "status": status}


class FakeCore(object):
    def __init__(self, nodes, pods=None):
        self.nodes = dict((n["metadata"]["name"], n) for n in nodes)
        self.pods = pods or []
        self.calls = []
        self.rv = 1
        self.before_patch = None  # hook: called with the node name before a patch is applied
        self.fail_patch = {}      # node name -> KubeHwError to raise on every patch

    def _bump(self, node):
        self.rv += 1
        node["metadata"]["resourceVersion"] = str(self.rv)

    def read_node(self, name, **kw):
        self.calls.append(("GET", name, None))
        if name not in self.nodes:
            raise KubeHwError('Failed to read node "%s": 404 Not Found: nodes "%s" not found' % (name, name),
                              status=404, reason="NotFound")
        return copy.deepcopy(self.nodes[name])

    def list_node(self, label_selector=None, field_selector=None, **kw):
        self.calls.append(("LIST", label_selector, field_selector))
        items = []
        for node in self.nodes.values():
            if label_selector:
                key, value = label_selector.split("=", 1)
                if node["metadata"]["labels"].get(key) != value:
                    continue
            items.append(copy.deepcopy(node))
        return {"kind": "NodeList", "metadata": {"resourceVersion": str(self.rv)}, "items": items}

    def patch_node_status(self, name, body, _content_type=None, **kw):
        self.calls.append(("PATCH", name, copy.deepcopy(body)))
        assert _content_type == "application/json-patch+json"
        assert isinstance(body, list)
        if name in self.fail_patch:
            raise self.fail_patch[name]
        if self.before_patch:
            self.before_patch(name)
        try:
            patched = jsonpatch.apply_patch(self.nodes[name], body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
            raise KubeHwError("Failed to patch: 422 Unprocessable Entity", status=422, reason="Invalid",
                              body=copy.deepcopy(GENERIC_422))
        self.nodes[name] = patched
        self._bump(patched)
        return copy.deepcopy(patched)

    def list_pod_for_all_namespaces(self, field_selector=None, **kw):
        self.calls.append(("LIST-PODS", field_selector, None))
        node = field_selector.split("=", 1)[1]
        return {"items": [p for p in self.pods if p["spec"].get("nodeName") == node]}

    def writes(self):
        return [c for c in self.calls if c[0] == "PATCH"]


class FakeClient(module_harness.FakeClient):
    pass


@pytest.fixture
def core(monkeypatch):
    fake = FakeCore([
        make_node("n1", {"cpu": "8", "pods": "110"}, labels={"dongle": "yes"}),
        make_node("n2", {"cpu": "8", "pods": "110", "example.com/dongle": "1Ki", "example.com/old": "2"},
                  labels={"dongle": "yes"}),
        make_node("bare"),
    ])
    FakeClient.api = fake
    FakeClient.constructed = 0
    monkeypatch.setattr(mod, "KubeClient", FakeClient)
    return fake


def run(capsys, args, check=False, diff=False):
    return module_harness.run_module(mod, capsys, args, check=check, diff=diff)


def test_adds_resource_with_one_key_level_op(core, capsys):
    result = run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}})
    assert result["changed"] is True
    assert core.writes() == [("PATCH", "n1", [
        {"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}])]
    node = result["nodes"][0]
    assert node["name"] == "n1" and node["changed"] is True and node["capacity"]["example.com/dongle"] == "4"
    assert node["capacity"]["cpu"] == "8"
    assert result["failed_nodes"] == [] and result["changed_nodes"] == ["n1"]


def test_second_run_makes_no_write(core, capsys):
    run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}})
    core.calls = []
    result = run(capsys, {"name": "n1", "resources": {"example.com/dongle": "4"}})
    assert result["changed"] is False
    assert core.writes() == []
    assert [c[0] for c in core.calls] == ["GET"]


def test_equal_by_value_is_not_rewritten(core, capsys):
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": 1024}})
    assert result["changed"] is False and core.writes() == []


def test_check_mode_makes_no_write_and_predicts(core, capsys):
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": 6}}, check=True, diff=True)
    assert result["changed"] is True
    assert core.writes() == []
    node = result["nodes"][0]
    assert node["capacity"]["example.com/dongle"] == "6"
    assert node["patch"][0] == {"op": "test", "path": "/status/capacity/example.com~1dongle", "value": "1Ki"}
    assert node["diff"] == {"before": {"example.com/dongle": "1Ki"}, "after": {"example.com/dongle": "6"}}
    assert result["diff"][0]["before_header"] == "node n2"


def test_node_without_capacity_gets_the_whole_map(core, capsys):
    result = run(capsys, {"name": "bare", "resources": {"example.com/dongle": 4}})
    ops = core.writes()[0][2]
    assert ops[-1] == {"op": "add", "path": "/status/capacity", "value": {"example.com/dongle": "4"}}
    assert ops[0]["path"] == "/metadata/resourceVersion"
    assert result["nodes"][0]["capacity"] == {"example.com/dongle": "4"}


def test_exact_removes_other_keys_in_domain_only(core, capsys):
    result = run(capsys, {"name": "n2", "state": "exact", "domain": "example.com",
                          "resources": {"example.com/dongle": 1024}}, diff=True)
    assert result["changed"] is True
    cap = core.nodes["n2"]["status"]["capacity"]
    assert "example.com/old" not in cap and cap["example.com/dongle"] == "1Ki" and cap["cpu"] == "8"
    assert result["nodes"][0]["diff"] == {"before": {"example.com/dongle": "1Ki", "example.com/old": "2"},
                                          "after": {"example.com/dongle": "1Ki"}}


def test_absent_accepts_list_and_missing_keys(core, capsys):
    result = run(capsys, {"names": ["n1", "n2"], "state": "absent", "resources": ["example.com/dongle"]})
    assert result["changed_nodes"] == ["n2"]
    assert "example.com/dongle" not in core.nodes["n2"]["status"]["capacity"]
    assert [w[1] for w in core.writes()] == ["n2"]


@pytest.mark.parametrize("args,fragment", [
    ({"name": "n1", "resources": {"dongle": 4}}, "'dongle'"),
    ({"name": "n1", "resources": {"kubernetes.io/x": 4}}, "reserved"),
    ({"name": "n1", "resources": {"example.com/dongle": "4.5"}}, "whole numbers"),
    ({"name": "n1", "resources": {"example.com/dongle": -1}}, "greater than or equal to 0"),
    ({"name": "n1", "resources": {"example.com/dongle": "abc"}}, "must match"),
    ({"name": "n1", "resources": {"example.com/ok": 1, "example.com/bad name": 1}}, "bad name"),
    ({"name": "n1", "state": "exact", "resources": {"example.com/d": 1}}, "needs domain or managed_prefixes"),
    ({"name": "n1", "state": "exact", "domain": "example.com", "resources": {"nvidia.com/gpu": 1}}, "outside"),
    ({"name": "n1", "domain": "example.com", "resources": {"example.com/d": 1}}, "only apply to state=exact"),
    ({"name": "n1", "parallel": 0, "resources": {"example.com/d": 1}}, "parallel"),
])
def test_invalid_input_fails_before_any_request(core, capsys, args, fragment):
    result = run(capsys, args)
    assert result["failed"] is True
    assert fragment in result["msg"]
    assert "Traceback" not in result["msg"] and "exception" not in result
    assert core.calls == []
    assert FakeClient.constructed == 0


def test_concurrent_change_is_retried_without_losing_it(core, capsys):
    changes = []

    def other_writer(name):
        if not changes:
            # another writer changes the very key between our read and our patch
            core.nodes[name]["status"]["capacity"]["example.com/dongle"] = "3"
            core.nodes[name]["status"]["capacity"]["example.com/other-writer"] = "1"
            changes.append(name)

    core.before_patch = other_writer
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": 6}})
    assert result["changed"] is True
    assert result["nodes"][0]["attempts"] == 2
    cap = core.nodes["n2"]["status"]["capacity"]
    assert cap["example.com/dongle"] == "6" and cap["example.com/other-writer"] == "1"
    second = core.writes()[1][2]
    assert second[0] == {"op": "test", "path": "/status/capacity/example.com~1dongle", "value": "3"}


def test_conflict_409_is_retried_after_rereading(core, capsys):
    conflicts = []

    def conflict_once(name):
        if not conflicts:
            conflicts.append(name)
            raise KubeHwError('Failed to patch status of node "n2": 409 Conflict: Operation cannot be fulfilled',
                              status=409, reason="Conflict")

    core.before_patch = conflict_once
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": 6}})
    assert result["changed"] is True and result["nodes"][0]["attempts"] == 2
    assert [c[0] for c in core.calls if c[0] != "LIST-PODS"] == ["GET", "PATCH", "GET", "PATCH"]


def test_validation_422_with_causes_is_not_retried(core, capsys):
    body = {"reason": "Invalid", "code": 422, "details": {"causes": [{"field": "status.capacity.example.com/dongle"}]}}
    core.fail_patch["n1"] = KubeHwError("Failed to patch: 422 Unprocessable Entity: must be an integer",
                                        status=422, reason="Invalid", body=body)
    result = run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}})
    assert result["failed"] is True and "must be an integer" in result["msg"]
    assert len(core.writes()) == 1


def test_gives_up_after_bounded_attempts(core, capsys):
    def always_changing(name):
        cap = core.nodes[name]["status"]["capacity"]
        cap["example.com/dongle"] = str(int(cap.get("example.com/dongle", "0").replace("Ki", "")) + 1)

    core.before_patch = always_changing
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": 6}})
    assert result["failed"] is True
    assert len(core.writes()) == mod.MAX_ATTEMPTS
    assert "gave up after 5 attempts" in result["msg"]


def test_forbidden_names_the_missing_permission(core, capsys):
    core.fail_patch["n1"] = KubeHwError(
        'Failed to patch status of node "n1": 403 Forbidden: nodes "n1" is forbidden', status=403, reason="Forbidden")
    result = run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}})
    assert result["failed"] is True
    assert "'patch' on 'nodes/status'" in result["msg"] and "n1" in result["msg"]


def test_partial_failure_keeps_successes_and_lists_failures(core, capsys):
    result = run(capsys, {"names": ["n1", "missing", "n2"], "resources": {"example.com/dongle": 4}, "parallel": 3})
    assert result["failed"] is True
    assert result["failed_nodes"] == ["missing"]
    assert result["changed_nodes"] == ["n1", "n2"]
    assert [n["name"] for n in result["nodes"]] == ["n1", "missing", "n2"]
    assert 'nodes "missing" not found' in result["msg"]
    assert core.nodes["n1"]["status"]["capacity"]["example.com/dongle"] == "4"
    assert core.nodes["n2"]["status"]["capacity"]["example.com/dongle"] == "4"


def test_selector_reads_once_and_patches_matches(core, capsys):
    result = run(capsys, {"label_selectors": ["dongle=yes"], "resources": {"example.com/dongle": 4}})
    assert [c for c in core.calls if c[0] in ("LIST", "GET")] == [("LIST", "dongle=yes", None)]
    assert sorted(w[1] for w in core.writes()) == ["n1", "n2"]
    assert [n["name"] for n in result["nodes"]] == ["n1", "n2"]


def test_selector_without_match(core, capsys):
    result = run(capsys, {"label_selectors": ["dongle=no"], "resources": {"example.com/dongle": 4}})
    assert result["changed"] is False and result["nodes"] == [] and "failed" not in result
    result = run(capsys, {"label_selectors": ["dongle=no"], "require_match": True,
                          "resources": {"example.com/dongle": 4}})
    assert result["failed"] is True and "dongle=no" in result["msg"]


def test_wait_allocatable_times_out_naming_node(core, capsys):
    # no kubelet in the fake: allocatable never follows capacity
    result = run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}, "wait": "allocatable",
                          "wait_timeout": 1})
    assert result["failed"] is True
    assert "status.allocatable of node n1" in result["msg"] and "example.com/dongle=4" in result["msg"]
    assert result["changed_nodes"] == ["n1"]


def test_wait_allocatable_returns_when_it_holds(core, capsys):
    core.nodes["n2"]["status"]["allocatable"]["example.com/dongle"] = "1024"
    result = run(capsys, {"name": "n2", "resources": {"example.com/dongle": "1Ki"}, "wait": "allocatable"})
    assert result["changed"] is False and result["waited_for"] == "allocatable"


def test_warns_when_a_device_plugin_serves_the_removed_resource(core, capsys):
    core.nodes["n2"]["status"]["capacity"]["nvidia.com/gpu"] = "2"
    core.pods = [
        {"metadata": {"namespace": "kube-system", "name": "nvidia-plugin-x"},
         "spec": {"nodeName": "n2", "containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]},
         "status": {"phase": "Running"}},
        {"metadata": {"namespace": "hw", "name": "dongle-plugin",
                      "annotations": {"devices.kubehw.io/resources": "example.com/dongle, example.com/x"}},
         "spec": {"nodeName": "n2", "containers": [{"image": "example/dongle"}]},
         "status": {"phase": "Running"}},
    ]
    result = run(capsys, {"name": "n2", "state": "absent", "resources": ["nvidia.com/gpu", "example.com/dongle"]})
    warnings = json.dumps(result.get("warnings", []))
    assert "nvidia.com/gpu" in warnings and "kube-system/nvidia-plugin-x" in warnings
    assert "example.com/dongle" in warnings and "hw/dongle-plugin" in warnings
    assert result["changed"] is True


def test_pods_are_not_read_when_only_adding(core, capsys):
    run(capsys, {"name": "n1", "resources": {"example.com/dongle": 4}})
    assert not [c for c in core.calls if c[0] == "LIST-PODS"]
