# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_device_class and the DRA module_utils (_dra, _dra_validation, _dra_device_class, _dra_report) without a
network: validation before any request, version discovery and the shapes of resource.k8s.io v1/v1beta2/v1beta1,
which writes the module sends and when none.

The fake DRA API answers as the apiserver does where the module depends on it: 404 on a missing object,
409 on a stale resourceVersion, a dry run that stores nothing, a 422 for a selector that does not compile,
and (gate_off) an apiserver that drops spec.extendedResourceName because DRAExtendedResource is off.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _dra
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_device_class
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_validation
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._rest_api import RestApi
from ansible_collections.kubehw.devices.plugins.modules import dra_device_class as mod

from tests.unit.plugins.modules.module_harness import run_module

MANAGED = {"app.kubernetes.io/managed-by": "kubehw.devices"}
GPU = 'device.driver == "gpu.example.com"'


# -- validation ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, ok", [
    ("gpu.example.com", True), ("gpu", True), ("a" * 253, True), ("a" * 254, False), ("GPU", False),
    ("gpu_example", False), ("-gpu", False), ("gpu.", False), ("", False)])
def test_device_class_name_is_a_dns_subdomain(name, ok):
    assert (_dra_validation.device_class_name_problem(name) is None) is ok


@pytest.mark.parametrize("name, ok", [
    ("gpu.nvidia.com", True), ("gpu.example.com", True), ("x" * 63, True), ("x" * 64, False),
    ("GPU.example.com", False), ("gpu_example.com", False), ("gpu..com", False), ("", False)])
def test_driver_name_is_a_dns_subdomain_of_at_most_63(name, ok):
    assert (_dra_validation.driver_name_problem(name) is None) is ok


def test_cel_checked_with_the_given_compiler_and_length_before_that():
    seen = []

    class ParseError(Exception):
        line, column = 1, 18

    def compile_fn(text):
        seen.append(text)
        if text.endswith("== "):
            raise ParseError("device.driver == \n              ^")

    assert _dra_validation.cel_problem(GPU, compile_fn) is None
    problem = _dra_validation.cel_problem("device.driver == ", compile_fn)
    assert "syntax error at line 1, column 18" in problem and "cel-python" in problem
    assert "no more than 10240" in _dra_validation.cel_problem("x" * 10241, compile_fn)
    assert _dra_validation.cel_problem("  ", compile_fn) == "must be a non-empty CEL expression"
    assert seen == [GPU, "device.driver == "]


def test_cel_without_a_library_is_left_to_the_server(monkeypatch):
    monkeypatch.setattr(_dra_validation, "HAS_CEL", False)
    assert _dra_validation.cel_problem("device.driver == ") is None


def test_parameters_need_data_within_10ki():
    assert _dra_validation.parameters_problem({"a": 1}) is None
    assert "required" in _dra_validation.parameters_problem(None)
    assert "no more than 10240 bytes" in _dra_validation.parameters_problem({"a": "x" * 10240})


@pytest.mark.parametrize("params, text", [
    (dict(name="Bad_Name"), "name 'Bad_Name' must be a lowercase RFC 1123 DNS subdomain"),
    (dict(selectors=[GPU] * 33), "selectors has 33 entries; the API allows at most 32"),
    (dict(config=[{"driver": "gpu.example.com", "parameters": {}}] * 33), "config has 33 entries"),
    (dict(config=[{"driver": "Gpu_X", "parameters": {}}]), "config[0].driver 'Gpu_X' must be a lowercase DNS"),
    (dict(config=[{"driver": "gpu.example.com", "parameters": None}]), "config[0].parameters is required"),
    (dict(extended_resource_name="gpu"), "extended_resource_name 'gpu' must contain exactly one '/'"),
    (dict(extended_resource_name="kubernetes.io/gpu"), "extended_resource_name 'kubernetes.io/gpu' domain part"),
    (dict(labels={"app.kubernetes.io/managed-by": "me"}), "labels must not set"),
    (dict(labels={"bad key!": "x"}), "labels key 'bad key!'"),
])
def test_build_refuses_bad_input_naming_it(params, text):
    args = dict(name="gpu.example.com", state="present", selectors=None, config=None, extended_resource_name=None,
                labels=None)
    args.update(params)
    with pytest.raises(InputRefused) as err:
        _dra_device_class.build_device_class(args, cel_compile=lambda text: None)
    assert text in str(err.value)


# -- versions ------------------------------------------------------------------------------------------

def test_not_served_message_names_group_versions_and_the_cluster():
    msg = _dra.not_served_message("v1.33.4", ["v1beta2", "v1beta1"])
    assert "resource.k8s.io/v1 is not served (this cluster runs v1.33.4)" in msg
    assert "only resource.k8s.io/v1beta2, resource.k8s.io/v1beta1" in msg and "Kubernetes 1.34 or later" in msg
    assert "Nothing was written" in msg
    assert "no resource.k8s.io API at all" in _dra.not_served_message(None, [])


# -- DraApi over a client ------------------------------------------------------------------------------

class RecordingClient(object):
    def __init__(self, answers):
        self.answers = answers
        self.calls = []
        self.api_client = None
        # the client's APIs, never sent through: call_json answers by the method's name
        self.custom, self.apis, self.version = (RestApi(None, api) for api in ("custom", "apis", "version"))

    def call_json(self, fn, *args, **kwargs):
        self.calls.append((fn.__name__, args, kwargs))
        answer = self.answers.get(fn.__name__)
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer)

    def create_json(self, fn, *args, **kwargs):
        self.finds = kwargs.pop("find")
        return self.call_json(fn, *args, via="create_json", **kwargs)

    def replace_json(self, fn, *args, **kwargs):
        self.finds = kwargs.pop("find")
        return self.call_json(fn, *args, via="replace_json", **kwargs)

    def finder(self, fn, *args, **kwargs):
        return lambda: self.call_json(fn, *args, **kwargs)


def test_writes_go_through_the_lost_answer_safe_calls_and_find_by_name():
    client = RecordingClient({"create_cluster_custom_object": {}, "replace_cluster_custom_object": {},
                              "get_cluster_custom_object": {"metadata": {"name": "gpu.example.com"}}})
    api = _dra.DraApi(client, version="v1")
    api.create("deviceclasses", {"metadata": {"name": "gpu.example.com"}}, what="create")
    assert client.calls[-1][2]["via"] == "create_json" and "dry_run" not in client.calls[-1][2]
    assert client.finds() == {"metadata": {"name": "gpu.example.com"}}
    assert client.calls[-1][:2] == (
        "get_cluster_custom_object", ("resource.k8s.io", "v1", "deviceclasses", "gpu.example.com"))
    api.replace("deviceclasses", "gpu.example.com", {"metadata": {"name": "gpu.example.com"}}, what="replace")
    assert client.calls[-1][2]["via"] == "replace_json"
    client.finds()
    assert client.calls[-1][1][-1] == "gpu.example.com"
    # a dry run stores nothing: a plain call, which the client may repeat
    api.create("deviceclasses", {"metadata": {"name": "gpu.example.com"}}, what="validate", dry_run=True)
    assert "via" not in client.calls[-1][2] and client.calls[-1][2]["dry_run"] == "All"


def test_discovery_reads_the_group_list_and_refuses_a_cluster_without_v1_naming_the_server_version():
    client = RecordingClient({"get_api_versions": {"groups": [
        {"name": "apps", "versions": [{"version": "v1"}]},
        {"name": "resource.k8s.io", "versions": [{"version": "v1"}, {"version": "v1beta2"}]}]}})
    assert _dra.DraApi(client).discover() == "v1"
    # a 1.33 cluster with the beta switched on: served, but not in the version the modules speak
    client = RecordingClient({"get_api_versions": {"groups": [
        {"name": "resource.k8s.io", "versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]}]},
        "get_code": {"gitVersion": "v1.33.4"}})
    with pytest.raises(KubeHwError) as err:
        _dra.DraApi(client).discover()
    assert err.value.reason == "NotServed" and "this cluster runs v1.33.4" in err.value.msg
    assert "only resource.k8s.io/v1beta2, resource.k8s.io/v1beta1" in err.value.msg
    assert [c[0] for c in client.calls] == ["get_api_versions", "get_code"]


def test_requests_use_the_discovered_version_dry_run_and_uid_precondition():
    client = RecordingClient({"get_cluster_custom_object": KubeHwError("not found", status=404),
                              "create_cluster_custom_object": {"ok": 1}, "delete_cluster_custom_object": {}})
    api = _dra.DraApi(client, version="v1")
    assert api.get("deviceclasses", "x", what="read") is None
    api.create("deviceclasses", {"a": 1}, what="create", dry_run=True)
    assert api.delete("deviceclasses", "x", "uid-1", what="delete") is True
    (_n, create_args, create_kw), (_d, delete_args, delete_kw) = client.calls[1:]
    assert create_args == ("resource.k8s.io", "v1", "deviceclasses", {"a": 1}) and create_kw["dry_run"] == "All"
    assert delete_args == ("resource.k8s.io", "v1", "deviceclasses", "x")
    assert delete_kw["body"] == {"preconditions": {"uid": "uid-1"}}


# -- the module against a fake API ---------------------------------------------------------------------

class FakeDra(object):
    instance = None

    def __init__(self, client=None, version=None):
        self.version = None
        self.served = ["v1"]
        self.objects = {}
        self.calls = []
        self.rv = 10
        self.gate_off = False
        self.conflicts = 0
        self.invalid = {}   # expression -> the apiserver's detail
        FakeDra.instance = self

    def writes(self):
        return [(c[0], c[1]) for c in self.calls if c[0] not in ("DISCOVER", "GET")]

    def discover(self):
        self.calls.append(("DISCOVER", None))
        if "v1" not in self.served:
            raise KubeHwError(_dra.not_served_message("v1.33.0", self.served), status=404, reason="NotServed")
        self.version = "v1"
        return self.version

    def _answer(self, body, old=None, store=True):
        obj = copy.deepcopy(body)
        assert obj["apiVersion"] == "resource.k8s.io/%s" % self.version
        for index, sel in enumerate(obj["spec"].get("selectors") or []):
            detail = self.invalid.get(sel["cel"]["expression"])
            if detail:
                raise KubeHwError('Failed: 422 Unprocessable Entity: DeviceClass.resource.k8s.io "%s" is invalid: '
                                  'spec.selectors[%d].cel.expression: Invalid value: %s' % (
                                      obj["metadata"]["name"], index, detail), status=422, reason="Invalid")
        if self.gate_off:
            obj["spec"].pop("extendedResourceName", None)
        meta = obj["metadata"]
        if old is not None and meta.get("resourceVersion") != old["metadata"]["resourceVersion"]:
            raise KubeHwError("the object has been modified", status=409, reason="Conflict")
        if store:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            meta["uid"] = (old or {}).get("metadata", {}).get("uid") or "uid-%d" % self.rv
            self.objects[meta["name"]] = obj
        return copy.deepcopy(obj)

    def get(self, plural, name, what):
        self.calls.append(("GET", name))
        return copy.deepcopy(self.objects.get(name))

    def create(self, plural, body, what, dry_run=False):
        self.calls.append(("POST" + (" dry" if dry_run else ""), body["metadata"]["name"], copy.deepcopy(body)))
        return self._answer(body, store=not dry_run)

    def replace(self, plural, name, body, what, dry_run=False):
        self.calls.append(("PUT" + (" dry" if dry_run else ""), name, copy.deepcopy(body)))
        old = self.objects[name]
        if self.conflicts and not dry_run:
            self.conflicts -= 1
            self.rv += 1
            old["metadata"]["resourceVersion"] = str(self.rv)
        return self._answer(body, old, store=not dry_run)

    def delete(self, plural, name, uid, what):
        self.calls.append(("DELETE", name, uid))
        return self.objects.pop(name, None) is not None


@pytest.fixture
def dra(monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", lambda module: None)
    # no library here: neither cel_problem nor the task's cel_validation (both read _dra_validation.HAS_CEL)
    monkeypatch.setattr(_dra_validation, "HAS_CEL", False)
    fake = FakeDra()
    monkeypatch.setattr(mod, "DraApi", lambda client: fake)
    return fake


def run(capsys, args, check=False, diff=False):
    return run_module(mod, capsys, args, check=check, diff=diff)


CLASS = {"name": "gpu.example.com", "selectors": [GPU],
         "config": [{"driver": "gpu.example.com", "parameters": {"kind": "GpuConfig", "sharing": {"a": 1}}}]}


def test_create_then_second_run_writes_nothing(dra, capsys):
    result = run(capsys, CLASS)
    assert result["changed"] is True and result["action"] == "created"
    assert result["api_version"] == "resource.k8s.io/v1"
    assert dra.writes() == [("POST", "gpu.example.com")]
    assert dra.calls[-1][2] == {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com", "labels": MANAGED},
        "spec": {"selectors": [{"cel": {"expression": GPU}}],
                 "config": [{"opaque": {"driver": "gpu.example.com",
                                        "parameters": {"kind": "GpuConfig", "sharing": {"a": 1}}}}]}}
    dra.calls = []
    result = run(capsys, CLASS)
    assert result["changed"] is False and result["action"] == "none" and dra.writes() == []


def test_update_is_one_put_keeping_others_labels(dra, capsys):
    run(capsys, CLASS)
    dra.objects["gpu.example.com"]["metadata"]["labels"]["other"] = "kept"
    dra.calls = []
    result = run(capsys, dict(CLASS, selectors=[GPU, "device.attributes[\"gpu.example.com\"].model == \"a100\""],
                              config=None), diff=True)
    assert result["action"] == "updated" and result["changed_paths"] == ["/spec/selectors", "/spec/config"]
    assert dra.writes() == [("PUT", "gpu.example.com")]
    body = dra.calls[-1][2]
    assert body["metadata"]["labels"] == dict(MANAGED, other="kept")
    assert "config" not in body["spec"] and len(body["spec"]["selectors"]) == 2
    assert body["metadata"]["resourceVersion"] == "11"
    assert result["diff"]["before"]["spec"]["config"] and "config" not in result["diff"]["after"]["spec"]


def test_check_mode_sends_only_a_dry_run_and_reports_its_answer(dra, capsys):
    result = run(capsys, CLASS, check=True)
    assert result["changed"] is True and result["action"] == "created"
    assert dra.writes() == [("POST dry", "gpu.example.com")] and dra.objects == {}
    assert result["device_class"]["spec"]["selectors"] == [{"cel": {"expression": GPU}}]
    assert result["cel_validation"] == "server dry run"


def test_check_mode_invalid_cel_fails_with_the_servers_message(dra, capsys):
    dra.invalid["device.driver + 1"] = ("\"device.driver + 1\": compilation failed: ERROR: <input>:1:15: found no "
                                        "matching overload for '_+_' applied to '(string, int)'")
    result = run(capsys, dict(CLASS, selectors=["device.driver + 1"]), check=True)
    assert result["failed"] is True and result["status"] == 422
    assert "spec.selectors[0].cel.expression" in result["msg"] and "found no matching overload" in result["msg"]
    assert dra.objects == {} and result["changed"] is False


def test_local_cel_error_stops_before_any_request(dra, capsys, monkeypatch):
    class ParseError(Exception):
        line, column = 1, 18

    class Environment(object):
        def compile(self, text):
            raise ParseError("mismatched input")

    # cel-python importable: its parser refuses the expression on the controller
    monkeypatch.setattr(_dra_validation, "HAS_CEL", True)
    monkeypatch.setattr(_dra_validation, "celpy", type("celpy", (), {"Environment": Environment}), raising=False)
    result = run(capsys, dict(CLASS, selectors=["device.driver == "]))
    assert result["failed"] is True
    assert "selectors[0] 'device.driver == ' is not valid CEL: syntax error at line 1, column 18" in result["msg"]
    assert "Nothing was sent" in result["msg"] and dra.calls == []


def test_extended_resource_name_dropped_by_the_server_fails_before_storing(dra, capsys):
    dra.gate_off = True
    result = run(capsys, dict(CLASS, extended_resource_name="example.com/gpu"))
    assert result["failed"] is True and "DRAExtendedResource" in result["msg"]
    assert dra.writes() == [("POST dry", "gpu.example.com")] and dra.objects == {}
    dra.gate_off = False
    dra.calls = []
    result = run(capsys, dict(CLASS, extended_resource_name="example.com/gpu"))
    assert result["action"] == "created"
    assert dra.writes() == [("POST dry", "gpu.example.com"), ("POST", "gpu.example.com")]
    assert dra.objects["gpu.example.com"]["spec"]["extendedResourceName"] == "example.com/gpu"


@pytest.mark.parametrize("served", [["v1beta2", "v1beta1"], ["v1beta1"], ["v1alpha3"], []])
def test_a_cluster_without_v1_is_refused_naming_the_group_before_any_write(dra, capsys, served):
    """Kubernetes 1.32 and 1.33 (betas switched on, or none): refused with one line, not even a dry run sent."""
    dra.served = served
    for params in (CLASS, dict(CLASS, extended_resource_name="example.com/gpu")):
        result = run(capsys, params)
        assert result["failed"] is True and result["reason"] == "NotServed" and not result.get("changed")
        assert "resource.k8s.io/v1 is not served" in result["msg"] and "Kubernetes 1.34 or later" in result["msg"]
        assert "\n" not in result["msg"] and dra.writes() == []


def test_conflict_rereads_and_writes_again(dra, capsys):
    run(capsys, CLASS)
    dra.conflicts = 1
    dra.calls = []
    result = run(capsys, dict(CLASS, config=None))
    assert result["action"] == "updated"
    assert dra.writes() == [("PUT", "gpu.example.com"), ("PUT", "gpu.example.com")]
    assert "config" not in dra.objects["gpu.example.com"]["spec"]


def test_absent_twice_and_check_mode_delete_sends_nothing(dra, capsys):
    run(capsys, CLASS)
    dra.calls = []
    result = run(capsys, {"name": "gpu.example.com", "state": "absent"}, check=True)
    assert result["changed"] is True and result["action"] == "deleted" and dra.writes() == []
    result = run(capsys, {"name": "gpu.example.com", "state": "absent"})
    assert result["action"] == "deleted" and dra.writes() == [("DELETE", "gpu.example.com")]
    assert dra.calls[-1][2] == "uid-11"
    result = run(capsys, {"name": "gpu.example.com", "state": "absent"})
    assert result["changed"] is False and result["action"] == "none"


def test_foreign_class_is_skipped_unless_adopted(dra, capsys):
    dra.version = "v1"
    dra.objects["gpu.example.com"] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                      "metadata": {"name": "gpu.example.com", "resourceVersion": "5", "uid": "u"},
                                      "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    result = run(capsys, CLASS)
    assert result["action"] == "skipped" and dra.writes() == []
    assert "/spec/selectors" in json.dumps(result["warnings"])
    result = run(capsys, dict(CLASS, adopt=True))
    assert result["action"] == "updated" and dra.objects["gpu.example.com"]["metadata"]["labels"] == MANAGED


# -- reporting (extended_resource_info include_dra) ----------------------------------------------------

def slice_(node, pool, generation, devices, version="v1"):
    spec = {"driver": "gpu.example.com", "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1}, "devices": devices}
    return {"apiVersion": "resource.k8s.io/%s" % version, "kind": "ResourceSlice",
            "metadata": {"name": "%s-%d" % (pool, generation)}, "spec": spec}


A100 = {"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
        "capacity": {"memory": {"value": "40Gi"}}}


def test_published_devices_flattens_values_and_ignores_stale_pool_generations():
    slices = [slice_("n1", "n1", 1, [{"name": "old-0"}]), slice_("n1", "n1", 2, [A100, {"name": "gpu-1"}]),
              slice_(None, "shared", 1, [{"name": "fabric-0"}])]
    nodes = _dra_report.published_devices(slices)
    assert nodes["n1"] == [
        {"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0", "attributes": {"model": "a100", "index": 0},
         "capacity": {"memory": "40Gi"}},
        {"driver": "gpu.example.com", "pool": "n1", "device": "gpu-1", "attributes": {}, "capacity": {}}]
    assert [d["device"] for d in nodes[None]] == ["fabric-0"]


def test_claims_are_placed_by_node_selector_or_by_their_devices():
    devices = {"n1": [{"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}
    by_selector = {"metadata": {"namespace": "default", "name": "a"}, "status": {
        "allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]},
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-9"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    by_device = {"metadata": {"namespace": "default", "name": "b"}, "status": {"allocation": {"devices": {
        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}}}}
    pending = {"metadata": {"namespace": "ml", "name": "c"},
               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}}}
    allocated, waiting = _dra_report.claim_report([by_selector, by_device, pending], devices)
    assert allocated["n2"] == [{"namespace": "default", "name": "a", "reserved_for": ["pods/p"],
                                "devices": ["gpu.example.com/n2/gpu-9"], "node": "n2"}]
    assert [(c["name"], c["node"]) for c in allocated["n1"]] == [("b", "n1")]
    # no pods given: nobody is known to wait for it
    assert waiting == [{"namespace": "ml", "name": "c", "reserved_for": [], "requests": ["gpu"], "pods": []}]


def test_report_without_the_group_is_not_an_error():
    client = RecordingClient({"get_api_versions": {"groups": []}})
    assert _dra_report.report(_dra.DraApi(client), ["n1"]) == {"served": False}
    assert [c[0] for c in client.calls] == ["get_api_versions"]


def test_another_module_manages_a_device_class_through_module_utils(monkeypatch):
    """dra_driver_deploy and others call _dra_device_class.manage_device_class with dra_device_class's options: the same
    validation, idempotence, adoption rule and check mode as the module."""
    monkeypatch.setattr(_dra_validation, "HAS_CEL", False)
    fake = FakeDra()
    params = {"name": "gpu.example.com", "selectors": [GPU], "extended_resource_name": "example.com/gpu"}
    planned = _dra_device_class.manage_device_class(fake, params, check_mode=True)
    assert planned.result["action"] == "created" and fake.objects == {}
    assert [c[0] for c in fake.calls] == ["DISCOVER", "GET", "POST dry"]
    made = _dra_device_class.manage_device_class(fake, params)
    assert made.result["changed"] is True and made.result["api_version"] == "resource.k8s.io/v1"
    assert fake.objects["gpu.example.com"]["spec"]["extendedResourceName"] == "example.com/gpu"
    fake.calls = []
    again = _dra_device_class.manage_device_class(fake, params)
    assert again.result["changed"] is False and fake.writes() == []
    with pytest.raises(InputRefused):
        _dra_device_class.manage_device_class(fake, dict(params, name="GPU"))
    fake.objects["other.example.com"] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                         "metadata": {"name": "other.example.com", "resourceVersion": "1"},
                                         "spec": {}}
    gone = _dra_device_class.manage_device_class(fake, {"name": "other.example.com", "state": "absent"})
    assert gone.result["action"] == "skipped" and "adopt: true" in gone.warnings[0]
    assert "other.example.com" in fake.objects
