# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_runtime_class against an in-memory node.k8s.io API (no network): validation, which writes
it sends and when none, the immutable handler, RuntimeClasses someone else made.

The fake answers as the apiserver does where the module depends on it: 404 on a missing object,
409 on a stale resourceVersion or a uid precondition that does not hold, 422 on a changed handler,
and it stores podFixed quantities in canonical form (0.25 -> 250m) and drops empty toleration fields.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.modules import k8s_runtime_class as mod
from tests.unit.plugins.modules import module_harness

MANAGED = {"app.kubernetes.io/managed-by": "kubehw.devices"}
CANONICAL = {"0.25": "250m", "0.5Gi": "512Mi", "100m": "100m", "64Mi": "64Mi", "1": "1"}


class FakeNodeApi(object):
    def __init__(self):
        self.objects = {}
        self.calls = []
        self.rv = 10
        self.uid = 0
        self.create_errors = []     # KubeHwErrors the next creates raise
        self.conflicts = 0          # how many replaces answer 409 first

    def writes(self):
        return [(c[0], c[1]) for c in self.calls if c[0] != "GET"]

    def _store(self, body, old=None):
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        if old is None:
            self.uid += 1
            meta["uid"] = "uid-%d" % self.uid
            meta["creationTimestamp"] = "2025-01-01T00:00:00Z"
        else:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"].get("creationTimestamp")
        pod_fixed = (obj.get("overhead") or {}).get("podFixed") or {}
        for key, value in pod_fixed.items():
            pod_fixed[key] = CANONICAL.get(str(value), str(value))
        for tol in (obj.get("scheduling") or {}).get("tolerations") or []:
            for key in [k for k, v in tol.items() if v == ""]:
                del tol[key]
        self.objects[meta["name"]] = obj
        return copy.deepcopy(obj)

    def read_runtime_class(self, name, **kw):
        self.calls.append(("GET", name))
        if name not in self.objects:
            raise KubeHwError('runtimeclasses.node.k8s.io "%s" not found' % name, status=404, reason="NotFound")
        return copy.deepcopy(self.objects[name])

    def create_runtime_class(self, body, **kw):
        name = body["metadata"]["name"]
        self.calls.append(("POST", name, copy.deepcopy(body)))
        if self.create_errors:
            raise self.create_errors.pop(0)
        if name in self.objects:
            raise KubeHwError("already exists", status=409, reason="AlreadyExists")
        return self._store(body)

    def replace_runtime_class(self, name, body, **kw):
        self.calls.append(("PUT", name, copy.deepcopy(body)))
        old = self.objects[name]
        if self.conflicts:
            self.conflicts -= 1
            self.rv += 1
            old["metadata"]["resourceVersion"] = str(self.rv)
            raise KubeHwError("the object has been modified", status=409, reason="Conflict")
        if body["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
            raise KubeHwError("the object has been modified", status=409, reason="Conflict")
        if body.get("handler") != old.get("handler"):
            raise KubeHwError('Failed to replace RuntimeClass "%s": 422 Unprocessable Entity: field is immutable'
                              % name, status=422, reason="Invalid")
        return self._store(body, old)

    def delete_runtime_class(self, name, **kw):
        self.calls.append(("DELETE", name, kw))
        if name not in self.objects:
            raise KubeHwError("not found", status=404, reason="NotFound")
        uid = ((kw.get("body") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != self.objects[name]["metadata"]["uid"]:
            raise KubeHwError("Precondition failed: UID in precondition", status=409, reason="Conflict")
        del self.objects[name]
        return {}


class FakeClient(module_harness.FakeClient):
    word_errors = True


@pytest.fixture
def api(monkeypatch):
    FakeClient.api = FakeNodeApi()
    FakeClient.constructed = 0
    monkeypatch.setattr(mod, "KubeClient", FakeClient)
    return FakeClient.api


def run(capsys, args, check=False, diff=False):
    return module_harness.run_module(mod, capsys, args, check=check, diff=diff)


def warned(result, text):
    return any(text in json.dumps(w) for w in result.get("warnings") or [])


NVIDIA = {"name": "nvidia", "handler": "nvidia"}
FULL = dict(NVIDIA, node_selector={"feature.node.kubernetes.io/pci-10de.present": True},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                         {"key": "example.com/maintenance", "value": "", "effect": "NoExecute",
                          "tolerationSeconds": 60}],
            overhead={"cpu": "0.25", "memory": "64Mi"}, labels={"team": "gpu"})


# -- create, no-op, update --------------------------------------------------------------------------

def test_create_then_second_run_writes_nothing(api, capsys):
    result = run(capsys, NVIDIA)
    assert result["changed"] is True and result["action"] == "created"
    assert api.writes() == [("POST", "nvidia")]
    body = api.calls[-1][2]
    assert body == {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": "nvidia",
                    "metadata": {"name": "nvidia", "labels": MANAGED}}
    assert result["runtime_class"]["metadata"]["uid"] == "uid-1"
    api.calls = []
    result = run(capsys, NVIDIA)
    assert result["changed"] is False and result["action"] == "none"
    assert api.writes() == [] and api.calls == [("GET", "nvidia")]
    assert "changed_paths" not in result


def test_full_spec_is_idempotent_against_what_the_server_stores(api, capsys):
    result = run(capsys, FULL)
    assert result["action"] == "created"
    body = api.calls[-1][2]
    assert body["scheduling"] == {
        "nodeSelector": {"feature.node.kubernetes.io/pci-10de.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "example.com/maintenance", "effect": "NoExecute", "tolerationSeconds": 60}]}
    assert body["overhead"] == {"podFixed": {"cpu": "0.25", "memory": "64Mi"}}
    assert body["metadata"]["labels"] == dict(MANAGED, team="gpu")
    # stored as 250m: equal by value, so no write
    assert api.objects["nvidia"]["overhead"]["podFixed"]["cpu"] == "250m"
    api.calls = []
    result = run(capsys, FULL)
    assert result["changed"] is False and api.writes() == []


def test_change_is_a_put_that_keeps_what_others_added(api, capsys):
    run(capsys, FULL)
    stored = api.objects["nvidia"]
    stored["metadata"]["labels"]["other"] = "kept"
    stored["metadata"]["annotations"] = {"note": "kept"}
    rv = stored["metadata"]["resourceVersion"]
    api.calls = []
    # node_selector and overhead left out: they go; the rest stays
    args = dict(FULL, overhead=None, node_selector=None)
    result = run(capsys, args, diff=True)
    assert result["changed"] is True and result["action"] == "updated"
    assert result["changed_paths"] == ["/scheduling/nodeSelector", "/overhead/podFixed"]
    assert api.writes() == [("PUT", "nvidia")]
    body = api.calls[-1][2]
    assert body["metadata"]["resourceVersion"] == rv
    assert body["metadata"]["labels"] == dict(MANAGED, team="gpu", other="kept")
    assert body["metadata"]["annotations"] == {"note": "kept"}
    assert "overhead" not in body and "nodeSelector" not in body["scheduling"]
    diff = result["diff"]
    assert diff["before"]["overhead"] == {"podFixed": {"cpu": "250m", "memory": "64Mi"}}
    assert "overhead" not in diff["after"]
    assert "resourceVersion" not in diff["before"]["metadata"] and "uid" not in diff["after"]["metadata"]
    api.calls = []
    assert run(capsys, args)["changed"] is False and api.writes() == []


def test_conflict_is_retried_after_reading_again(api, capsys):
    run(capsys, NVIDIA)
    api.conflicts = 1
    api.calls = []
    result = run(capsys, dict(NVIDIA, labels={"team": "gpu"}))
    assert result["changed"] is True and result["action"] == "updated"
    assert [c[0] for c in api.calls] == ["GET", "PUT", "GET", "PUT"]
    assert api.objects["nvidia"]["metadata"]["labels"]["team"] == "gpu"


# -- check mode and diff ---------------------------------------------------------------------------

def test_check_mode_predicts_and_sends_no_write(api, capsys):
    result = run(capsys, FULL, check=True, diff=True)
    assert result["changed"] is True and result["action"] == "created"
    assert api.writes() == [] and api.objects == {}
    assert result["diff"]["before"] == {} and result["diff"]["after"]["handler"] == "nvidia"
    assert result["runtime_class"]["overhead"] == {"podFixed": {"cpu": "0.25", "memory": "64Mi"}}
    run(capsys, FULL)
    api.calls = []
    for args, action in ((dict(FULL, labels={"team": "ml"}), "updated"),
                         (dict(FULL, handler="nvidia-cdi", recreate=True), "recreated"),
                         (dict(name="nvidia", state="absent"), "deleted"),
                         (FULL, "none")):
        result = run(capsys, args, check=True, diff=True)
        assert result["action"] == action, (args, result)
        assert result["changed"] is (action != "none")
    assert api.writes() == []
    assert result.get("diff") is None


# -- the immutable handler ---------------------------------------------------------------------------

def test_changed_handler_fails_before_any_write(api, capsys):
    run(capsys, NVIDIA)
    api.calls = []
    for check in (False, True):
        result = run(capsys, dict(NVIDIA, handler="nvidia-cdi"), check=check)
        assert result["failed"] and result["changed"] is False
        assert ('RuntimeClass "nvidia" has handler \'nvidia\' and the task asks for handler \'nvidia-cdi\', but '
                'handler is immutable') in result["msg"]
        assert "recreate: true" in result["msg"]
    assert api.writes() == []
    assert api.objects["nvidia"]["handler"] == "nvidia"


def test_recreate_deletes_with_uid_precondition_then_creates(api, capsys):
    run(capsys, NVIDIA)
    uid = api.objects["nvidia"]["metadata"]["uid"]
    api.calls = []
    result = run(capsys, dict(NVIDIA, handler="nvidia-cdi", recreate=True))
    assert result["changed"] is True and result["action"] == "recreated"
    assert api.writes() == [("DELETE", "nvidia"), ("POST", "nvidia")]
    assert api.calls[1][2]["body"] == {"preconditions": {"uid": uid}}
    assert api.objects["nvidia"]["handler"] == "nvidia-cdi"
    assert result["runtime_class"]["metadata"]["uid"] != uid
    api.calls = []
    assert run(capsys, dict(NVIDIA, handler="nvidia-cdi", recreate=True))["changed"] is False
    assert api.writes() == []


def test_recreate_whose_create_fails_reports_the_delete(api, capsys):
    run(capsys, NVIDIA)
    api.create_errors.append(KubeHwError("Forbidden: runtimeclasses.node.k8s.io is forbidden", status=403,
                                         reason="Forbidden"))
    result = run(capsys, dict(NVIDIA, handler="nvidia-cdi", recreate=True))
    assert result["failed"] and result["changed"] is True
    assert result["status"] == 403 and result["reason"] == "Forbidden"
    assert result["msg"].startswith('Failed to create RuntimeClass "nvidia" again (it was deleted for the new handler)')
    assert "nvidia" not in api.objects


# -- a RuntimeClass someone else made ----------------------------------------------------------------

def foreign(api, handler="nvidia", labels=None):
    api.objects["nvidia"] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": handler,
                             "metadata": {"name": "nvidia", "uid": "theirs", "resourceVersion": "5",
                                          "labels": labels or {"app.kubernetes.io/managed-by": "gpu-operator"}}}


def test_foreign_runtime_class_is_left_alone_with_a_warning(api, capsys):
    foreign(api, handler="nvidia-legacy")
    for args in (NVIDIA, dict(NVIDIA, recreate=True), {"name": "nvidia", "state": "absent"}):
        for check in (True, False):
            result = run(capsys, args, check=check)
            assert result["changed"] is False and result["action"] == "skipped", result
            assert result["runtime_class"]["metadata"]["uid"] == "theirs"
            assert warned(result, 'RuntimeClass \\"nvidia\\" exists but was not created by kubehw.devices'), result
            assert warned(result, "Set adopt: true to manage it"), result
            # what differs is said where the task asks for a RuntimeClass, not where it removes one
            assert warned(result, "it differs from the task in /handler") is (args.get("state") != "absent"), result
    assert api.writes() == []


def test_adopt_takes_over_a_foreign_runtime_class(api, capsys):
    foreign(api)
    result = run(capsys, dict(NVIDIA, adopt=True))
    assert result["changed"] is True and result["action"] == "updated"
    assert result["changed_paths"] == ["/metadata/labels/app.kubernetes.io~1managed-by"]
    assert api.objects["nvidia"]["metadata"]["labels"] == MANAGED
    assert warned(result, "adopt: true makes it managed by it")
    api.calls = []
    assert run(capsys, NVIDIA)["changed"] is False and api.writes() == []
    foreign(api)
    result = run(capsys, {"name": "nvidia", "state": "absent", "adopt": True})
    assert result["action"] == "deleted" and "nvidia" not in api.objects


# -- absent ----------------------------------------------------------------------------------------

def test_absent_deletes_ours_once(api, capsys):
    run(capsys, NVIDIA)
    api.calls = []
    result = run(capsys, {"name": "nvidia", "state": "absent"}, diff=True)
    assert result["changed"] is True and result["action"] == "deleted"
    assert result["runtime_class"] is None and result["diff"]["after"] == {}
    assert api.writes() == [("DELETE", "nvidia")]
    api.calls = []
    result = run(capsys, {"name": "nvidia", "state": "absent"})
    assert result["changed"] is False and result["action"] == "none" and api.writes() == []


# -- validation, and API errors turned into messages --------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ({"name": "nvidia", "handler": "NVIDIA"}, "handler 'NVIDIA' must be a lowercase RFC 1123 DNS label"),
    ({"name": "nvidia", "handler": "nvidia.runtime"}, "handler 'nvidia.runtime' must be a lowercase RFC 1123 DNS label"),
    ({"name": "nvidia", "handler": "h" * 64}, "at most 63 characters"),
    ({"name": "Nvidia", "handler": "nvidia"}, "name 'Nvidia' must be a lowercase RFC 1123 DNS subdomain"),
    (dict(NVIDIA, labels={"app.kubernetes.io/managed-by": "me"}), "labels must not set 'app.kubernetes.io/managed-by'"),
    (dict(NVIDIA, labels={"bad key!": "x"}), "labels key 'bad key!': name part 'bad key!' must be 1-63 characters"),
    (dict(NVIDIA, node_selector={"gpu": "yes please"}), "node_selector value 'yes please' of 'gpu' must be empty or"),
    (dict(NVIDIA, node_selector={"Example.com/gpu": "1"}), "prefix 'Example.com' must be a lowercase DNS subdomain"),
    (dict(NVIDIA, tolerations=[{"effect": "NoSchedule"}]), "tolerations[0]: operator must be Exists when key is empty"),
    (dict(NVIDIA, tolerations=[{"key": "a", "operator": "Exists", "value": "b"}]),
     "tolerations[0] value 'b': value must be empty when operator is Exists"),
    (dict(NVIDIA, tolerations=[{"key": "a", "effect": "NoSchedule", "toleration_seconds": 5}]),
     "tolerations[0]: toleration_seconds 5 needs effect NoExecute, not NoSchedule"),
    (dict(NVIDIA, tolerations=[{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]),
     "tolerations[1] repeats tolerations[0] (same key, operator and effect)"),
    (dict(NVIDIA, overhead={"cpu": "-100m"}), "overhead cpu '-100m' must be greater than or equal to 0"),
    (dict(NVIDIA, overhead={"cpu": "lots"}), "overhead cpu: 'lots' is not a Kubernetes quantity"),
    (dict(NVIDIA, overhead={"gpu": "1"}), "overhead resource 'gpu' must be cpu, memory, ephemeral-storage"),
    (dict(NVIDIA, overhead={"example.com/dongle": "0.5"}), "overhead example.com/dongle '0.5' must be a whole number"),
    (dict(NVIDIA, overhead={"memory": True}), "overhead memory True must be a quantity"),
])
def test_invalid_input_fails_before_connecting(api, capsys, args, message):
    result = run(capsys, args)
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("Invalid input: ") and message in result["msg"], result["msg"]
    assert FakeClient.constructed == 0 and api.calls == []


def test_handler_required_when_present(api, capsys):
    result = run(capsys, {"name": "nvidia"})
    assert result["failed"] and "handler" in result["msg"]
    assert FakeClient.constructed == 0


def test_api_error_names_the_object_status_and_reason(api, capsys):
    api.create_errors.append(KubeHwError(
        'Forbidden: runtimeclasses.node.k8s.io is forbidden: User "bob" cannot create resource "runtimeclasses"',
        status=403, reason="Forbidden"))
    result = run(capsys, NVIDIA)
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith('Failed to create RuntimeClass "nvidia": 403 Forbidden')
    assert result["status"] == 403 and result["reason"] == "Forbidden"
    assert result.get("exception") is None


def test_differences_compare_quantities_by_value_and_ignore_empty_toleration_fields():
    params = dict(FULL, state="present", tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "example.com/maintenance", "effect": "NoExecute", "toleration_seconds": 60}])
    desired = mod.build(params)
    live = copy.deepcopy(desired)
    live["overhead"]["podFixed"] = {"cpu": "250m", "memory": "67108864"}
    live["scheduling"]["tolerations"][0]["value"] = ""
    live["metadata"]["labels"]["extra"] = "theirs"
    assert mod.differences(desired, live) == []
    live["overhead"]["podFixed"]["cpu"] = "251m"
    live["scheduling"]["tolerations"].reverse()
    assert mod.differences(desired, live) == ["/scheduling/tolerations", "/overhead/podFixed"]
