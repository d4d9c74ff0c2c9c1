# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module against an in-memory API (no network): which writes it sends, and when none.

The fake stores what it is sent with the apiserver's defaults applied, bumps resourceVersion on
every write and generation on spec changes, answers 404/409 like the apiserver, and has an optional
"controller" that marks a rollout complete at once. Timing and watches are covered by the
integration tests on the suite's own control plane.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_manifest as manifest
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.modules import device_plugin_deploy as mod
from tests.unit.plugins.modules import module_harness

NS = "kubehw-device-plugins"


def not_found(kind, name):
    return KubeHwError('%s "%s" not found' % (kind, name), status=404, reason="NotFound")


class FakeApi(object):
    def __init__(self):
        self.objects = {}   # (kind, name) -> object
        self.calls = []
        self.rv = 100
        self.uid = 0
        self.conflicts = 0  # how many replace calls answer 409 first
        self.rollout = "done"  # "done", "stuck" or "ondelete"
        self.nodes = {"gpu-1": {"metadata": {"name": "gpu-1"},
                                "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"},
                                           "conditions": [{"type": "Ready", "status": "True"}]}}}
        self.pods = []
        self.missing_namespace = False
        self.slices = []            # ResourceSlices of DRA drivers
        self.slices_error = None    # what listing them answers instead (404: no resource.k8s.io/v1; 403)

    def writes(self):
        return [(c[0], c[1], c[2]) for c in self.calls if c[0] in ("POST", "PUT", "DELETE")]

    def _store(self, kind, body, old=None):
        obj = copy.deepcopy(body)
        if kind == "DaemonSet":
            obj = compare.apply_defaults(obj)
        meta = obj["metadata"]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        if old is None:
            self.uid += 1
            meta["uid"] = "uid-%d" % self.uid
            meta["generation"] = 1
        else:
            meta["uid"] = old["metadata"]["uid"]
            meta["generation"] = old["metadata"]["generation"] + (0 if obj.get("spec") == old.get("spec") else 1)
        if kind == "DaemonSet":
            self._status(obj)
        self.objects[(kind, meta["name"])] = obj
        return copy.deepcopy(obj)

    def _status(self, ds):
        gen = ds["metadata"]["generation"]
        if self.rollout == "done":
            ds["status"] = {"observedGeneration": gen, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                            "updatedNumberScheduled": 1, "numberReady": 1, "numberAvailable": 1}
        elif self.rollout == "ondelete":
            ds["status"] = {"observedGeneration": gen, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                            "numberReady": 1, "numberAvailable": 1}
        else:
            ds["status"] = {"observedGeneration": gen, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                            "updatedNumberScheduled": 1, "numberUnavailable": 1}

    def _read(self, kind, name):
        self.calls.append(("GET", kind, name))
        if (kind, name) not in self.objects:
            raise not_found(kind, name)
        return copy.deepcopy(self.objects[(kind, name)])

    def _create(self, kind, body):
        name = body["metadata"]["name"]
        self.calls.append(("POST", kind, name, copy.deepcopy(body)))
        if self.missing_namespace:
            raise KubeHwError('Failed to create %s: 404 Not Found: namespaces "%s" not found' % (kind, NS),
                              status=404, reason="NotFound",
                              body={"kind": "Status", "reason": "NotFound", "code": 404,
                                    "details": {"name": NS, "kind": "namespaces"}})
        if (kind, name) in self.objects:
            raise KubeHwError("already exists", status=409, reason="AlreadyExists")
        return self._store(kind, body)

    def _replace(self, kind, name, body):
        self.calls.append(("PUT", kind, name, copy.deepcopy(body)))
        old = self.objects.get((kind, name))
        if old is None:
            raise not_found(kind, name)
        if self.conflicts:
            self.conflicts -= 1
            self.rv += 1
            old["metadata"]["resourceVersion"] = str(self.rv)
            raise KubeHwError("the object has been modified", status=409, reason="Conflict")
        if body["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
            raise KubeHwError("the object has been modified", status=409, reason="Conflict")
        return self._store(kind, body, old)

    def _delete(self, kind, name, **kw):
        self.calls.append(("DELETE", kind, name, kw))
        if (kind, name) not in self.objects:
            raise not_found(kind, name)
        uid = ((kw.get("body") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != self.objects[(kind, name)]["metadata"]["uid"]:
            raise KubeHwError("Precondition failed: UID in precondition: %s" % uid, status=409, reason="Conflict")
        del self.objects[(kind, name)]
        return {}

    # the generated API's names
    def read_namespaced_daemon_set(self, name, namespace, **kw):
        return self._read("DaemonSet", name)

    def create_namespaced_daemon_set(self, namespace, body, **kw):
        return self._create("DaemonSet", body)

    def replace_namespaced_daemon_set(self, name, namespace, body, **kw):
        return self._replace("DaemonSet", name, body)

    def delete_namespaced_daemon_set(self, name, namespace, **kw):
        return self._delete("DaemonSet", name, **kw)

    def list_namespaced_daemon_set(self, namespace, field_selector=None, **kw):
        return {"items": [copy.deepcopy(o) for (k, _name), o in self.objects.items() if k == "DaemonSet"]}

    def read_namespaced_config_map(self, name, namespace, **kw):
        return self._read("ConfigMap", name)

    def create_namespaced_config_map(self, namespace, body, **kw):
        return self._create("ConfigMap", body)

    def replace_namespaced_config_map(self, name, namespace, body, **kw):
        return self._replace("ConfigMap", name, body)

    def delete_namespaced_config_map(self, name, namespace, **kw):
        return self._delete("ConfigMap", name, **kw)

    def list_namespaced_pod(self, namespace, label_selector=None, **kw):
        # the pods belong to whichever DaemonSet is stored (its uid is only known once it is created)
        items = copy.deepcopy(self.pods)
        for ds in [o for (k, _name), o in self.objects.items() if k == "DaemonSet"]:
            for pod in items:
                pod["metadata"]["ownerReferences"][0]["uid"] = ds["metadata"]["uid"]
        return {"items": items}

    def delete_namespaced_pod(self, name, namespace, **kw):
        self.calls.append(("DELETE", "Pod", name, kw))
        self.pods = [p for p in self.pods if p["metadata"]["name"] != name]
        return {}

    def list_node(self, **kw):
        return {"items": copy.deepcopy(list(self.nodes.values()))}

    def list_cluster_custom_object(self, group, version, plural, field_selector=None, **kw):
        self.calls.append(("GET", plural, field_selector))
        if self.slices_error is not None:
            raise self.slices_error
        driver = field_selector.split("=", 1)[1]
        return {"items": [s for s in self.slices if s["spec"]["driver"] == driver]}


class FakeClient(module_harness.FakeClient):
    pass


@pytest.fixture
def api(monkeypatch):
    FakeClient.api = FakeApi()
    FakeClient.constructed = 0
    monkeypatch.setattr(mod, "KubeClient", FakeClient)
    return FakeClient.api


def run(capsys, args, check=False, diff=False):
    return module_harness.run_module(mod, capsys, args, check=check, diff=diff)


def plugin_pod(name, node, generation, ready=True, waiting=None):
    pod = {"metadata": {"name": name, "namespace": NS, "creationTimestamp": "2025-01-01T00:00:00Z",
                        "labels": {"pod-template-generation": str(generation)},
                        "ownerReferences": [{"kind": "DaemonSet", "uid": "uid-1"}]},
           "spec": {"nodeName": node},
           "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if waiting:
        pod["status"]["containerStatuses"] = [{"name": "nvidia-device-plugin", "ready": False,
                                               "state": {"waiting": {"reason": waiting}}}]
    return pod


def test_create_writes_configmap_daemonset_then_owner(api, capsys):
    api.pods = [plugin_pod("p1", "gpu-1", 1)]
    result = run(capsys, {"preset": "nvidia", "wait": "resource"})
    assert result["changed"] is True
    assert [w[:3] for w in api.writes()] == [("POST", "ConfigMap", "nvidia-device-plugin-config"),
                                             ("POST", "DaemonSet", "nvidia-device-plugin"),
                                             ("PUT", "ConfigMap", "nvidia-device-plugin-config")]
    owner = api.objects[("ConfigMap", "nvidia-device-plugin-config")]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == api.objects[("DaemonSet", "nvidia-device-plugin")]["metadata"]["uid"]
    assert result["generation"] == {"before": None, "after": 1}
    assert result["waited_for"] == "resource" and result["rollout"]["done"]
    assert result["nodes"]["gpu-1"]["capacity"] == {"nvidia.com/gpu": 4}
    assert result["resources"] == ["nvidia.com/gpu"]


def test_second_run_sends_no_write(api, capsys):
    run(capsys, {"preset": "nvidia", "wait": "none"})
    before = len(api.writes())
    result = run(capsys, {"preset": "nvidia"})
    assert result["changed"] is False
    assert len(api.writes()) == before
    assert result["generation"] == {"before": 1, "after": 1}


def test_change_is_a_put_with_resource_version_and_new_generation(api, capsys):
    run(capsys, {"preset": "nvidia", "wait": "none"})
    rv = api.objects[("DaemonSet", "nvidia-device-plugin")]["metadata"]["resourceVersion"]
    api.calls = []
    result = run(capsys, {"preset": "nvidia", "image_registry": "mirror.local"})
    assert result["changed"] is True
    puts = [c for c in api.calls if c[0] == "PUT"]
    assert [(c[1], c[2]) for c in puts] == [("DaemonSet", "nvidia-device-plugin")]
    assert puts[0][3]["metadata"]["resourceVersion"] == rv
    assert result["generation"] == {"before": 1, "after": 2}
    assert "/spec/template/spec/containers/0/image" in result["changed_paths"]


def test_conflict_is_retried_after_reading_again(api, capsys):
    run(capsys, {"preset": "amd", "wait": "none"})
    api.conflicts = 1
    api.calls = []
    result = run(capsys, {"preset": "amd", "resource_naming_strategy": "mixed", "resource_names": ["amd.com/cpx"]})
    assert result["changed"] is True
    assert [c[0] for c in api.calls if c[0] in ("GET", "PUT") and c[1] == "DaemonSet"] == ["GET", "PUT", "GET", "PUT"]
    stored = api.objects[("DaemonSet", "amdgpu-device-plugin")]
    assert stored["spec"]["template"]["spec"]["containers"][0]["args"] == ["-resource_naming_strategy=mixed"]


def test_check_mode_sends_no_write_and_predicts(api, capsys):
    result = run(capsys, {"preset": "nvidia"}, check=True, diff=True)
    assert result["changed"] is True and api.writes() == []
    assert result["waited_for"] == "none"
    assert [x["after_header"] for x in result["diff"]] == ["ConfigMap kubehw-device-plugins/nvidia-device-plugin-config",
                                                           "DaemonSet kubehw-device-plugins/nvidia-device-plugin"]
    run(capsys, {"preset": "nvidia", "wait": "none"})
    api.calls = []
    result = run(capsys, {"preset": "nvidia", "mig_strategy": "single"}, check=True, diff=True)
    assert result["changed"] is True and api.writes() == []
    assert result["generation"] == {"before": 1, "after": 2}
    cm_diff = result["diff"][0]
    assert json.loads(cm_diff["before"]["data"]["config.yaml"])["flags"]["migStrategy"] == "none"
    assert json.loads(cm_diff["after"]["data"]["config.yaml"])["flags"]["migStrategy"] == "single"


def test_missing_namespace_is_named_with_the_playbook_that_creates_it(api, capsys):
    # the default namespace is the dedicated one, not kube-system
    api.missing_namespace = True
    result = run(capsys, {"preset": "nvidia"})
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith('Namespace "kubehw-device-plugins" does not exist: create it first '
                                    '(playbooks/rbac.yml with kubehw_rbac_plugin_namespace: '
                                    'kubehw-device-plugins creates it'), result["msg"]
    assert result.get("exception") is None
    assert [w[0] for w in api.writes()] == ["POST"]


def test_invalid_input_fails_before_connecting(api, capsys):
    result = run(capsys, {"preset": "nvidia", "resource_names": ["gpu"]})
    assert result["failed"] and "exactly one '/'" in result["msg"]
    assert FakeClient.constructed == 0 and api.calls == []


def test_selector_conflict_fails_without_write(api, capsys):
    ds, _cm, _res = manifest.build({"preset": "custom", "namespace": NS, "name": "dp", "image": "a:1", "resource_names": ["a.com/b"]})
    ds["spec"]["selector"] = {"matchLabels": {"name": "vendor-ds"}}
    api.objects[("DaemonSet", "dp")] = dict(ds, metadata=dict(ds["metadata"], uid="u", generation=1,
                                                              resourceVersion="5", labels={}))
    result = run(capsys, {"preset": "custom", "name": "dp", "image": "a:1", "resource_names": ["a.com/b"]})
    assert result["failed"] and "immutable" in result["msg"]
    assert api.writes() == []


def test_rollout_timeout_names_node_and_reason(api, capsys):
    api.rollout = "stuck"
    api.pods = [plugin_pod("p1", "gpu-1", 1, ready=False, waiting="CrashLoopBackOff")]
    result = run(capsys, {"preset": "nvidia", "wait_timeout": 5})
    assert result["failed"] and result["changed"] is True
    assert "Timed out after 5s waiting for the rollout of DaemonSet kubehw-device-plugins/nvidia-device-plugin" in result["msg"]
    assert "gpu-1 (pod p1: nvidia-device-plugin: CrashLoopBackOff)" in result["msg"]
    assert result["nodes"]["gpu-1"]["pod_ready"] is False


def test_resource_timeout_names_nodes_lacking_it(api, capsys):
    api.pods = [plugin_pod("p1", "gpu-1", 1)]
    result = run(capsys, {"preset": "nvidia", "wait": "resource", "min_count": 8, "wait_timeout": 3})
    assert result["failed"]
    assert "nodes lacking nvidia.com/gpu >= 8 in capacity: gpu-1 (nvidia.com/gpu=4)" in result["msg"]


def test_on_delete_reports_then_deletes_old_pods(api, capsys):
    args = {"preset": "nvidia", "update_strategy": {"type": "OnDelete"}}
    run(capsys, args)
    api.rollout = "ondelete"
    api.pods = [plugin_pod("old-1", "gpu-1", 1)]
    result = run(capsys, dict(args, mig_strategy="single"))
    assert result["rollout"]["old_pods_pending"] and result["rollout"]["old_pods"] == ["old-1"]
    assert any("OnDelete" in json.dumps(w) for w in result["warnings"]), result.get("warnings")
    assert not [c for c in api.calls if c[1] == "Pod"]
    # check mode: the DaemonSet is as wanted, but deleting the old pods would be a change
    api.calls = []
    result = run(capsys, dict(args, mig_strategy="single", delete_old_pods=True), check=True)
    assert result["changed"] is True and api.writes() == []
    api.rollout = "done"
    # gpu-1's pod is from generation 1; the change below makes generation 3
    result = run(capsys, dict(args, mig_strategy="mixed", delete_old_pods=True))
    assert result["deleted_pods"] == ["old-1"] and result["changed"] is True
    assert [c[2] for c in api.calls if c[0] == "DELETE"] == ["old-1"]


def test_absent_deletes_ours_keeps_foreign_configmap(api, capsys):
    run(capsys, {"preset": "nvidia", "wait": "none"})
    api.calls = []
    result = run(capsys, {"preset": "nvidia", "state": "absent"})
    assert result["changed"] is True
    assert sorted((c[1], c[2]) for c in api.writes()) == [
        ("ConfigMap", "nvidia-device-plugin-config"), ("DaemonSet", "nvidia-device-plugin")]
    assert [c[3] for c in api.calls if c[0] == "DELETE"][0] == {"propagation_policy": "Background"}
    api.calls = []
    result = run(capsys, {"preset": "nvidia", "state": "absent"})
    assert result["changed"] is False and api.writes() == []

    api.objects[("ConfigMap", "nvidia-device-plugin-config")] = {
        "metadata": {"name": "nvidia-device-plugin-config", "labels": {"owner": "someone-else"}}, "data": {}}
    result = run(capsys, {"preset": "nvidia", "state": "absent"})
    assert result["changed"] is False and api.writes() == []


# -- a ConfigMap left over from an earlier preset ------------------------------------------------------------------

GENERIC = {"preset": "generic", "name": "gpu-plugin",
           "devices": [{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]}]}
NVIDIA = {"preset": "nvidia", "name": "gpu-plugin"}
CM = ("ConfigMap", "gpu-plugin-config")


def warned(result, text):
    return any(text in json.dumps(w) for w in result.get("warnings") or [])


def mounting_pod(name, terminating=False, phase="Running"):
    pod = plugin_pod(name, "gpu-1", 1)
    pod["spec"]["volumes"] = [{"name": "plugin-config", "configMap": {"name": "gpu-plugin-config"}}]
    pod["status"]["phase"] = phase
    if terminating:
        pod["metadata"]["deletionTimestamp"] = "2025-01-01T00:01:00Z"
    return pod


def test_switch_to_another_preset_deletes_its_configmap_after_the_daemonset(api, capsys):
    run(capsys, dict(NVIDIA, wait="none"))
    assert CM in api.objects
    uid = api.objects[CM]["metadata"]["uid"]
    api.calls = []
    result = run(capsys, GENERIC)
    assert result["changed"] is True
    assert result["deleted_configmap"] == "gpu-plugin-config"
    assert result["configmap"] is None
    # the DaemonSet stops mounting it first; only then is it deleted, guarded by its uid
    assert [w[:3] for w in api.writes()] == [("PUT", "DaemonSet", "gpu-plugin"), ("DELETE", "ConfigMap", "gpu-plugin-config")]
    delete = [c for c in api.calls if c[0] == "DELETE"][0]
    assert delete[3]["body"] == {"preconditions": {"uid": uid}}
    assert CM not in api.objects
    volumes = api.objects[("DaemonSet", "gpu-plugin")]["spec"]["template"]["spec"]["volumes"]
    assert "plugin-config" not in [v["name"] for v in volumes]

    api.calls = []
    result = run(capsys, GENERIC)
    assert result["changed"] is False and api.writes() == []
    assert "deleted_configmap" not in result


def test_configmap_kept_while_a_pod_mounts_it_and_deleted_once_replaced(api, capsys):
    run(capsys, dict(NVIDIA, wait="none"))
    api.pods = [mounting_pod("old-1")]
    api.calls = []
    result = run(capsys, dict(GENERIC, wait="none"))
    assert result["changed"] is True  # the DaemonSet was written
    assert [w[:3] for w in api.writes()] == [("PUT", "DaemonSet", "gpu-plugin")]
    assert CM in api.objects and "deleted_configmap" not in result
    assert warned(result, "pods still mount it (old-1)"), result.get("warnings")

    # terminating or finished pods never start a container again: they do not keep it
    api.pods = [mounting_pod("old-1", terminating=True), mounting_pod("job-1", phase="Succeeded"),
                plugin_pod("new-1", "gpu-1", 2)]
    api.calls = []
    result = run(capsys, dict(GENERIC, wait="none"))
    assert result["changed"] is True and result["deleted_configmap"] == "gpu-plugin-config"
    assert [w[:3] for w in api.writes()] == [("DELETE", "ConfigMap", "gpu-plugin-config")]


def test_check_mode_predicts_the_configmap_deletion_without_writing(api, capsys):
    run(capsys, dict(NVIDIA, wait="none"))
    api.pods = [mounting_pod("old-1")]
    api.calls = []
    result = run(capsys, GENERIC, check=True, diff=True)
    assert result["changed"] is True and api.writes() == []
    assert result["deleted_configmap"] == "gpu-plugin-config"
    assert [x["after_header"] for x in result["diff"]] == ["DaemonSet kubehw-device-plugins/gpu-plugin",
                                                           "ConfigMap kubehw-device-plugins/gpu-plugin-config"]
    cm_diff = result["diff"][1]
    assert "config.yaml" in cm_diff["before"]["data"] and cm_diff["after"] == {}
    assert CM in api.objects

    # without a rollout to replace the pod that mounts it, the real run would keep it: so does the prediction
    result = run(capsys, dict(GENERIC, wait="none"), check=True, diff=True)
    assert "deleted_configmap" not in result
    assert [x["after_header"] for x in result["diff"]] == ["DaemonSet kubehw-device-plugins/gpu-plugin"]
    assert warned(result, "pods still mount it")
    assert api.writes() == []


@pytest.mark.parametrize("metadata", [
    {"labels": {"owner": "someone-else"}},
    # our managed-by label, but made for another DaemonSet
    {"labels": {"app.kubernetes.io/managed-by": "kubehw.devices", "app.kubernetes.io/name": "other-plugin"}},
    {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-plugin", "uid": "not-this-one"}]},
])
def test_configmap_someone_else_made_is_never_deleted(api, capsys, metadata):
    run(capsys, dict(GENERIC, wait="none"))
    api.objects[CM] = {"metadata": dict(metadata, name="gpu-plugin-config", uid="foreign", resourceVersion="1"),
                       "data": {"x": "y"}}
    api.calls = []
    for check in (True, False):
        result = run(capsys, GENERIC, check=check, diff=True)
        assert result["changed"] is False and "deleted_configmap" not in result
    assert api.writes() == [] and api.objects[CM]["data"] == {"x": "y"}


def test_configmap_owned_by_the_daemonset_is_ours_without_labels(api, capsys):
    run(capsys, dict(NVIDIA, wait="none"))
    api.objects[CM]["metadata"].pop("labels")
    api.calls = []
    result = run(capsys, GENERIC)
    assert result["deleted_configmap"] == "gpu-plugin-config" and CM not in api.objects


def test_configmap_replaced_since_read_is_left_alone(api, capsys):
    run(capsys, dict(NVIDIA, wait="none"))
    list_pods = api.list_namespaced_pod

    def replace_configmap_then_list(namespace, **kw):
        # someone deletes ours and makes their own between the module's read and its delete
        api.objects[CM]["metadata"]["uid"] = "theirs"
        return list_pods(namespace, **kw)

    api.list_namespaced_pod = replace_configmap_then_list
    api.calls = []
    result = run(capsys, GENERIC)
    assert CM in api.objects and "deleted_configmap" not in result
    assert [w[:3] for w in api.writes()][-1] == ("DELETE", "ConfigMap", "gpu-plugin-config")
    assert warned(result, "was replaced since it was read; left alone")


def test_configmap_owner_references_are_merged_not_replaced(api, capsys):
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "team-settings", "uid": "uid-other"}
    api._store("ConfigMap", {"metadata": {"name": "nvidia-device-plugin-config", "ownerReferences": [other],
                                          "labels": {"app.kubernetes.io/name": "nvidia-device-plugin",
                                                     "app.kubernetes.io/managed-by": "kubehw.devices"}},
                             "data": {}})
    result = run(capsys, {"preset": "nvidia"})
    assert not result.get("failed"), result
    refs = api.objects[("ConfigMap", "nvidia-device-plugin-config")]["metadata"]["ownerReferences"]
    ds_uid = api.objects[("DaemonSet", "nvidia-device-plugin")]["metadata"]["uid"]
    assert [(r["kind"], r["uid"]) for r in refs] == [("ConfigMap", "uid-other"), ("DaemonSet", ds_uid)]


def test_foreign_configmap_is_refused_before_any_write(api, capsys):
    api._store("ConfigMap", {"metadata": {"name": "nvidia-device-plugin-config",
                                          "managedFields": [{"manager": "kubectl-create", "operation": "Update"}]},
                             "data": {"config.yaml": "theirs"}})
    result = run(capsys, {"preset": "nvidia"})
    assert result["failed"] and api.writes() == []
    assert "(written by field manager 'kubectl-create')" in result["msg"], result["msg"]
    result = run(capsys, {"preset": "nvidia", "adopt_configmap": True})
    assert not result.get("failed"), result
    assert "theirs" not in api.objects[("ConfigMap", "nvidia-device-plugin-config")]["data"]["config.yaml"]


def test_validate_runs_once_per_call(api, capsys, monkeypatch):
    calls = []
    real = manifest.validate
    monkeypatch.setattr(manifest, "validate", lambda params: calls.append(1) or real(params))
    run(capsys, {"preset": "nvidia"})
    assert calls == [1]


def resource_slice(driver, node, devices=2):
    return {"metadata": {"name": "%s-%s" % (node, driver)},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-%d" % i} for i in range(devices)]}}


def test_a_dra_driver_publishing_the_same_devices_on_the_plugins_node_is_refused_before_any_write(api, capsys):
    """The other direction of dra_driver_deploy's guard: gpu.nvidia.com already publishes GPUs on gpu-1, where the
    NVIDIA device plugin would run; another driver's slices, and gpu.nvidia.com on a node the plugin does not
    select, do not count."""
    api.slices = [resource_slice("gpu.nvidia.com", "gpu-1"), resource_slice("gpu.example.com", "gpu-1"),
                  resource_slice("gpu.nvidia.com", "cpu-9")]
    api.nodes["gpu-1"]["metadata"]["labels"] = {"pool": "gpu"}
    api.nodes["cpu-9"] = {"metadata": {"name": "cpu-9", "labels": {"pool": "cpu"}},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    result = run(capsys, {"preset": "nvidia", "node_selector": {"pool": "gpu"}, "wait": "none"})
    assert result.get("failed") and not result["changed"], result
    assert ("Refusing to deploy the device plugin %s/nvidia-device-plugin: the DRA driver gpu.nvidia.com publishes "
            "devices on gpu-1 (2 device(s) in 1 ResourceSlice(s)), node(s) this plugin would run on" % NS) in result["msg"]
    assert "cpu-9" not in result["msg"] and "allow_dra_overlap: true" in result["msg"]
    assert api.writes() == []
    assert ("GET", "resourceslices", "spec.driver=gpu.nvidia.com") in api.calls


def test_allow_dra_overlap_deploys_the_plugin_anyway(api, capsys):
    api.slices = [resource_slice("gpu.nvidia.com", "gpu-1")]
    result = run(capsys, {"preset": "nvidia", "wait": "none", "allow_dra_overlap": True})
    assert not result.get("failed") and result["changed"], result
    assert not [c for c in api.calls if c[1] == "resourceslices"]


@pytest.mark.parametrize("status, warned", [(404, False), (403, True)])
def test_a_cluster_without_dra_or_an_identity_that_may_not_list_slices_has_nothing_to_check(api, capsys, status,
                                                                                            warned):
    api.slices_error = KubeHwError("no", status=status, reason="NotFound" if status == 404 else "Forbidden")
    result = run(capsys, {"preset": "nvidia", "wait": "none"})
    assert not result.get("failed") and result["changed"], result
    warnings = [w for w in result.get("warnings") or [] if "gpu.nvidia.com" in str(w)]
    assert bool(warnings) is warned, result.get("warnings")


def test_a_plugin_of_devices_no_dra_driver_serves_lists_no_slice(api, capsys):
    result = run(capsys, {"preset": "custom", "name": "dp", "image": "a:1", "resource_names": ["a.com/b"],
                          "wait": "none"})
    assert not result.get("failed"), result
    assert not [c for c in api.calls if c[1] == "resourceslices"]
