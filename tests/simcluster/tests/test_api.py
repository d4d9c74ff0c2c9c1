# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated kube-apiserver: discovery, verbs, selectors, watch, subresources, faults, log."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import kubernetes
import pytest
import yaml
from kubernetes.dynamic import DynamicClient

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# ---------------------------------------------------------------- helpers (also used by test_facts_*)

class Raw:
    """Plain HTTPS requests with a bearer token, so tests see exactly what the server sends."""

    def __init__(self, sim, token=None):
        self.sim = sim
        self.token = sim.admin_token if token is None else token
        self.ctx = ssl.create_default_context(cafile=sim.ca_cert_path)
        parsed = urllib.parse.urlsplit(sim.url)
        self.host, self.port = parsed.hostname, parsed.port

    def connection(self, timeout=10):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(self, method, path, body=None, content_type="application/json", headers=None):
        hdrs = dict(headers or {})
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else
                                                         json.dumps(body).encode())
            hdrs["Content-Type"] = content_type
        conn = self.connection()
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode()
            return resp.status, parsed, dict(resp.getheaders())
        finally:
            conn.close()


def typed_clients(sim):
    api = kubernetes.config.new_client_from_config(sim.kubeconfig_path)
    return kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api), api


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory(None, controllers=False)


@pytest.fixture
def clients(sim):
    core, apps, api = typed_clients(sim)
    yield core, apps
    api.close()


def ds_manifest(name="plugin", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0", env=None):
    container = {"name": "plugin", "image": image}
    if env:
        container["env"] = env
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}}


def pod_manifest(name, node=None, labels=None, limits=None, requests=None):
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    spec = {"containers": [{"name": "c", "image": "busybox:1.36", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}}, "spec": spec}


def api_error(fn, *args, **kwargs):
    with pytest.raises(kubernetes.client.ApiException) as info:
        fn(*args, **kwargs)
    return info.value.status, json.loads(info.value.body)


# ---------------------------------------------------------------- discovery

@pytest.mark.parametrize("versions, release", [(["v1"], "v1.36.2"), (["v1beta2", "v1beta1"], "v1.33.0"),
                                               (["v1beta1"], "v1.32.0"), ([], "v1.32.0")])
def test_version_follows_the_dra_versions_served(simcluster_factory, versions, release):
    code, version, _h = Raw(simcluster_factory({"nodes": [], "dra_versions": versions}, controllers=False)).request(
        "GET", "/version")
    assert code == 200 and version["gitVersion"] == release + "-simcluster" and version["minor"] == release.split(".")[1]


def test_discovery_documents(sim):
    raw = Raw(sim)
    code, version, _h = raw.request("GET", "/version")
    assert code == 200 and version["major"] == "1" and version["minor"] == "36" and version["gitVersion"] == "v1.36.2-simcluster"
    code, api, _h = raw.request("GET", "/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    code, groups, _h = raw.request("GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert {"apps", "rbac.authorization.k8s.io", "node.k8s.io"} <= set(names)
    code, v1, _h = raw.request("GET", "/api/v1")
    by_name = dict((r["name"], r) for r in v1["resources"])
    assert by_name["nodes"]["namespaced"] is False and by_name["nodes"]["kind"] == "Node"
    assert by_name["pods"]["namespaced"] is True
    assert by_name["nodes/status"]["verbs"] == ["get", "patch", "update"]
    code, apps, _h = raw.request("GET", "/apis/apps/v1")
    assert apps["groupVersion"] == "apps/v1"
    assert "daemonsets/status" in [r["name"] for r in apps["resources"]]
    code, node_k8s, _h = raw.request("GET", "/apis/node.k8s.io/v1")
    assert [r["kind"] for r in node_k8s["resources"]] == ["RuntimeClass"]
    code, body, _h = raw.request("GET", "/apis/nonexistent.io/v1")
    assert code == 404 and body["message"] == "the server could not find the requested resource"


def test_typed_clients_work(sim, clients):
    core, apps = clients
    assert sorted(n.metadata.name for n in core.list_node().items) == ["bare-1", "cpu-1", "dongle-1", "gpu-1", "gpu-2"]
    assert {"default", "kube-system"} <= set(n.metadata.name for n in core.list_namespace().items)
    gpu = core.read_node("gpu-1")
    assert gpu.metadata.labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    created = apps.create_namespaced_daemon_set("kube-system", ds_manifest())
    assert created.metadata.generation == 1
    assert created.status.desired_number_scheduled == 0
    assert [d.metadata.name for d in apps.list_namespaced_daemon_set("kube-system").items] == ["plugin"]
    assert kubernetes.client.VersionApi(core.api_client).get_code().minor == "36"


def test_dynamic_client_works(sim):
    api = kubernetes.config.new_client_from_config(sim.kubeconfig_path)
    try:
        dyn = DynamicClient(api)
        nodes = dyn.resources.get(api_version="v1", kind="Node")
        listed = nodes.get()
        assert listed.kind == "NodeList"
        assert "gpu-2" in [n.metadata.name for n in listed.items]
        cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
        cms.create(body={"metadata": {"name": "dyn"}, "data": {"a": "1"}}, namespace="default")
        assert cms.get(name="dyn", namespace="default").data.a == "1"
        ds = dyn.resources.get(api_version="apps/v1", kind="DaemonSet")
        ds.create(body=ds_manifest(), namespace="kube-system")
        assert ds.get(namespace="kube-system").items[0].metadata.name == "plugin"
        rc = dyn.resources.get(api_version="node.k8s.io/v1", kind="RuntimeClass")
        rc.create(body={"metadata": {"name": "nvidia"}, "handler": "nvidia"})
        assert rc.get(name="nvidia").handler == "nvidia"
        status = dyn.resources.get(api_version="v1", kind="Node").subresources["status"]
        patched = status.patch(name="gpu-1", body=[{"op": "add", "path": "/status/capacity/example.com~1x",
                                                    "value": "1"}],
                               content_type="application/json-patch+json")
        assert patched.status.capacity["example.com/x"] == "1"
    finally:
        api.close()


# ---------------------------------------------------------------- create / get / replace / delete

def test_configmap_lifecycle_and_resource_versions(sim, clients):
    core, _apps = clients
    a = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    b = core.create_namespaced_config_map("default", {"metadata": {"name": "b"}, "data": {"k": "1"}})
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    assert a.metadata.uid and a.metadata.creation_timestamp

    code, body = api_error(core.create_namespaced_config_map, "default", {"metadata": {"name": "a"}})
    assert code == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "a" already exists'

    stale = a.metadata.resource_version
    a.data = {"k": "2"}
    updated = core.replace_namespaced_config_map("a", "default", a)
    assert updated.data == {"k": "2"}
    assert int(updated.metadata.resource_version) > int(b.metadata.resource_version)
    a.metadata.resource_version = stale
    a.data = {"k": "3"}
    code, body = api_error(core.replace_namespaced_config_map, "a", "default", a)
    assert code == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "a": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert core.read_namespaced_config_map("a", "default").data == {"k": "2"}

    listed = Raw(sim).request("GET", "/api/v1/namespaces/default/configmaps")[1]
    assert listed["kind"] == "ConfigMapList" and listed["apiVersion"] == "v1"
    assert int(listed["metadata"]["resourceVersion"]) >= int(updated.metadata.resource_version)

    code, status, _h = Raw(sim).request("DELETE", "/api/v1/namespaces/default/configmaps/a")
    assert code == 200 and status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"]["name"] == "a" and status["details"]["kind"] == "configmaps"
    code, body = api_error(core.read_namespaced_config_map, "a", "default")
    assert code == 404 and body["message"] == 'configmaps "a" not found'


def test_create_in_missing_namespace_is_404(sim, clients):
    core, _apps = clients
    code, body = api_error(core.create_namespaced_config_map, "nope", {"metadata": {"name": "a"}})
    assert code == 404 and body["message"] == 'namespaces "nope" not found'


def test_unchanged_write_does_not_bump_resource_version(sim, clients):
    core, _apps = clients
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    again = core.patch_namespaced_config_map("a", "default", {"data": {"k": "1"}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_daemonset_defaults_and_generation(sim, clients):
    _core, apps = clients
    ds = apps.create_namespaced_daemon_set("kube-system", ds_manifest())
    raw = sim.store.get("daemonsets", "kube-system", "plugin")
    assert raw["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert raw["spec"]["revisionHistoryLimit"] == 10
    container = raw["spec"]["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert raw["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"

    ds.spec.template.spec.containers[0].image = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
    ds2 = apps.replace_namespaced_daemon_set("plugin", "kube-system", ds)
    assert ds2.metadata.generation == 2
    assert ds2.metadata.annotations["deprecated.daemonset.template.generation"] == "2"
    # metadata-only change: generation stays
    ds3 = apps.patch_namespaced_daemon_set("plugin", "kube-system", {"metadata": {"labels": {"x": "y"}}})
    assert ds3.metadata.generation == 2


def test_daemonset_validation(sim, clients):
    _core, apps = clients
    bad = ds_manifest()
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    code, body = api_error(apps.create_namespaced_daemon_set, "kube-system", bad)
    assert code == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('DaemonSet.apps "plugin" is invalid: spec.template.metadata.labels: ')
    assert body["details"]["group"] == "apps"


# ---------------------------------------------------------------- status subresource

def test_daemonset_status_separation(sim, clients):
    _core, apps = clients
    apps.create_namespaced_daemon_set("kube-system", ds_manifest())
    raw = Raw(sim)
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/plugin"
    code, body, _h = raw.request("PATCH", path, {"status": {"numberReady": 5}, "metadata": {"labels": {"a": "b"}}},
                                 content_type="application/merge-patch+json")
    assert code == 200
    assert body["status"]["numberReady"] == 0 and body["metadata"]["labels"] == {"a": "b"}
    code, body, _h = raw.request("PATCH", path + "/status",
                                 {"status": {"numberReady": 5, "observedGeneration": 1},
                                  "spec": {"minReadySeconds": 30}},
                                 content_type="application/merge-patch+json")
    assert code == 200
    assert body["status"]["numberReady"] == 5
    assert "minReadySeconds" not in body["spec"]
    assert body["metadata"]["generation"] == 1
    stored = sim.store.get("daemonsets", "kube-system", "plugin")
    assert stored["status"]["numberReady"] == 5 and "minReadySeconds" not in stored["spec"]


def test_pod_status_separation_via_put(sim, clients):
    core, _apps = clients
    pod = core.create_namespaced_pod("default", pod_manifest("p1", node="gpu-1"))
    assert pod.status.phase == "Pending"
    pod.status.phase = "Running"
    replaced = core.replace_namespaced_pod("p1", "default", pod)
    assert replaced.status.phase == "Pending"
    replaced.status.phase = "Running"
    replaced.spec.active_deadline_seconds = 99
    via_status = core.replace_namespaced_pod_status("p1", "default", replaced)
    assert via_status.status.phase == "Running"
    assert via_status.spec.active_deadline_seconds is None


# ---------------------------------------------------------------- patch flavours

def test_strategic_merge_patch_merges_containers_and_env_by_name(sim, clients):
    _core, apps = clients
    apps.create_namespaced_daemon_set("kube-system", ds_manifest(env=[{"name": "A", "value": "1"},
                                                                      {"name": "B", "value": "2"}]))
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "plugin", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}]}}}}
    code, body, _h = Raw(sim).request("PATCH", "/apis/apps/v1/namespaces/kube-system/daemonsets/plugin", patch,
                                      content_type="application/strategic-merge-patch+json")
    assert code == 200
    container = body["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
    assert container["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    # a merge patch replaces the list wholesale, so the container loses its image
    code, body, _h = Raw(sim).request("PATCH", "/apis/apps/v1/namespaces/kube-system/daemonsets/plugin",
                                      patch, content_type="application/merge-patch+json")
    assert code == 422
    assert "spec.template.spec.containers[0].image: Required value" in body["message"]


def test_strategic_merge_delete_directive_and_null(sim, clients):
    _core, apps = clients
    apps.create_namespaced_daemon_set("kube-system", ds_manifest(env=[{"name": "A", "value": "1"},
                                                                      {"name": "B", "value": "2"}]))
    patch = {"metadata": {"labels": {"x": None}},
             "spec": {"template": {"spec": {"containers": [
                 {"name": "plugin", "env": [{"name": "A", "$patch": "delete"}]}]}}}}
    code, body, _h = Raw(sim).request("PATCH", "/apis/apps/v1/namespaces/kube-system/daemonsets/plugin", patch,
                                      content_type="application/strategic-merge-patch+json")
    assert code == 200
    assert body["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}]


def test_apply_patch_is_415(sim):
    code, body, _h = Raw(sim).request("PATCH", "/api/v1/nodes/gpu-1", "metadata: {}",
                                      content_type="application/apply-patch+yaml")
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


def test_merge_patch_with_stale_resource_version_is_409(sim, clients):
    core, _apps = clients
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
    code, body, _h = Raw(sim).request("PATCH", "/api/v1/namespaces/default/configmaps/a",
                                      {"metadata": {"resourceVersion": cm.metadata.resource_version},
                                       "data": {"k": "3"}}, content_type="application/merge-patch+json")
    assert code == 409 and body["reason"] == "Conflict"


# ---------------------------------------------------------------- selectors

@pytest.mark.parametrize("selector, expected", [
    ("app=a", ["p1", "p2"]),
    ("app==a", ["p1", "p2"]),
    ("app!=a", ["p3", "p4"]),
    ("app in (a,b)", ["p1", "p2", "p3"]),
    ("app notin (a)", ["p3", "p4"]),
    ("tier", ["p1", "p3"]),
    ("!tier", ["p2", "p4"]),
    ("app=a,tier=x", ["p1"]),
])
def test_label_selectors(sim, clients, selector, expected):
    core, _apps = clients
    for name, labels in (("p1", {"app": "a", "tier": "x"}), ("p2", {"app": "a"}), ("p3", {"app": "b", "tier": "y"}),
                         ("p4", {})):
        core.create_namespaced_pod("default", pod_manifest(name, labels=labels))
    got = sorted(p.metadata.name for p in core.list_namespaced_pod("default", label_selector=selector).items)
    assert got == expected


def test_field_selectors(sim, clients):
    core, _apps = clients
    core.create_namespaced_pod("default", pod_manifest("on-gpu", node="gpu-1"))
    core.create_namespaced_pod("default", pod_manifest("on-cpu", node="cpu-1"))
    core.create_namespaced_pod("default", pod_manifest("unbound"))

    def names(items):
        return sorted(p.metadata.name for p in items)

    assert names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-1").items) == ["on-gpu"]
    assert names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=").items) == ["unbound"]
    assert names(core.list_namespaced_pod("default", field_selector="metadata.name=on-cpu").items) == ["on-cpu"]
    both = "metadata.namespace=default,spec.nodeName!=gpu-1"
    assert names(core.list_pod_for_all_namespaces(field_selector=both).items) == ["on-cpu", "unbound"]
    assert len(core.list_pod_for_all_namespaces(field_selector="status.phase=Pending").items) == 3
    assert [n.metadata.name for n in core.list_node(field_selector="metadata.name=gpu-2").items] == ["gpu-2"]


# ---------------------------------------------------------------- watch

def test_watch_delivers_added_modified_deleted(sim, clients):
    core, _apps = clients
    start_rv = core.list_namespaced_config_map("default").metadata.resource_version
    events = []

    def consume():
        w = kubernetes.watch.Watch()
        for ev in w.stream(core.list_namespaced_config_map, "default", resource_version=start_rv,
                           timeout_seconds=5):
            events.append((ev["type"], ev["object"].metadata.name, ev["object"].data))
            if ev["type"] == "DELETED":
                w.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    core.create_namespaced_config_map("default", {"metadata": {"name": "w"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("w", "default", {"data": {"k": "2"}})
    core.delete_namespaced_config_map("w", "default")
    thread.join(10)
    assert events == [("ADDED", "w", {"k": "1"}), ("MODIFIED", "w", {"k": "2"}), ("DELETED", "w", {"k": "2"})]
    # streamed and flushed: the events arrived long before the 5 s timeout
    assert time.monotonic() - t0 < 3


def test_watch_replays_from_resource_version_and_filters(sim, clients):
    core, _apps = clients
    core.create_namespaced_config_map("default", {"metadata": {"name": "a", "labels": {"w": "yes"}}})
    rv = core.read_namespaced_config_map("a", "default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "b", "labels": {"w": "yes"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    w = kubernetes.watch.Watch()
    seen = [(ev["type"], ev["object"].metadata.name)
            for ev in w.stream(core.list_namespaced_config_map, "default", resource_version=rv,
                               label_selector="w=yes", timeout_seconds=1)]
    assert seen == [("ADDED", "b")]


def test_watch_without_resource_version_starts_with_current_objects(sim):
    code, body, _h = Raw(sim).request("GET", "/api/v1/nodes?watch=true&timeoutSeconds=1")
    assert code == 200
    lines = [json.loads(x) for x in body.strip().split("\n")] if isinstance(body, str) else [body]
    assert sorted(e["object"]["metadata"]["name"] for e in lines) == ["bare-1", "cpu-1", "dongle-1", "gpu-1", "gpu-2"]
    assert set(e["type"] for e in lines) == {"ADDED"}
    assert all(e["object"]["kind"] == "Node" for e in lines)


def test_watch_too_old_resource_version_is_410(sim, clients):
    core, _apps = clients
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    sim.store.compact()
    code, body, _h = Raw(sim).request("GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s" % rv)
    assert code == 200
    assert body["type"] == "ERROR"
    assert body["object"]["code"] == 410 and body["object"]["reason"] == "Expired"
    assert body["object"]["message"].startswith("too old resource version: %s (" % rv)
    w = kubernetes.watch.Watch()
    with pytest.raises(kubernetes.client.ApiException) as info:
        list(w.stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1))
    assert info.value.status == 410


def test_watch_bookmarks_when_allowed(simcluster_factory):
    sim = simcluster_factory({"bookmark_interval": 0.2}, controllers=False)
    code, body, _h = Raw(sim).request(
        "GET", "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=1&"
               "resourceVersion=%s" % sim.store.resource_version)
    events = [json.loads(x) for x in body.strip().split("\n")]
    assert events and set(e["type"] for e in events) == {"BOOKMARK"}
    assert events[0]["object"]["metadata"]["resourceVersion"] == sim.store.resource_version


# ---------------------------------------------------------------- delete

def test_deleting_daemonset_deletes_its_pods_unless_orphaned(sim, clients):
    core, apps = clients
    for ds_name, policy in (("gc", None), ("keep", "Orphan")):
        ds = apps.create_namespaced_daemon_set("kube-system", ds_manifest(ds_name))
        pod = pod_manifest(ds_name + "-pod")
        pod["metadata"]["namespace"] = "kube-system"
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds_name,
                                               "uid": ds.metadata.uid, "controller": True}]
        core.create_namespaced_pod("kube-system", pod)
        apps.delete_namespaced_daemon_set(ds_name, "kube-system", propagation_policy=policy)
    names = [p.metadata.name for p in core.list_namespaced_pod("kube-system").items]
    assert names == ["keep-pod"]


def test_delete_pod_returns_object_and_404_after(sim, clients):
    core, _apps = clients
    core.create_namespaced_pod("default", pod_manifest("p1"))
    code, body, _h = Raw(sim).request("DELETE", "/api/v1/namespaces/default/pods/p1")
    assert code == 200 and body["kind"] == "Pod" and body["metadata"]["name"] == "p1"
    code, body, _h = Raw(sim).request("DELETE", "/api/v1/namespaces/default/pods/p1")
    assert code == 404 and body["message"] == 'pods "p1" not found'


# ---------------------------------------------------------------- authentication, authorization

def test_unknown_token_is_401(sim):
    code, body, _h = Raw(sim, token="nope").request("GET", "/api/v1/nodes")
    assert code == 401 and body["reason"] == "Unauthorized" and body["message"] == "Unauthorized"


def test_forbidden_message_names_user_verb_and_subresource(simcluster_factory):
    user = "system:serviceaccount:kubehw:automation"
    sim = simcluster_factory({"tokens": [{"token": "sa-token", "user": user}], "nodes": [{"name": "n1"}]},
                             controllers=False)
    code, body, _h = Raw(sim, token="sa-token").request(
        "PATCH", "/api/v1/nodes/n1/status", [{"op": "add", "path": "/status/capacity/a.com~1b", "value": "1"}],
        content_type="application/json-patch+json")
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('nodes "n1" is forbidden: User "%s" cannot patch resource "nodes/status" '
                               'in API group "" at the cluster scope' % user)
    assert sim.requests[-1]["user"] == user and sim.requests[-1]["status"] == 403


# ---------------------------------------------------------------- faults and request log

def test_request_log_records_writes(sim, clients):
    core, _apps = clients
    sim.clear_requests()
    core.patch_node_status("gpu-1", [{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}])
    entry = sim.requests[-1]
    assert entry["method"] == "PATCH"
    assert entry["path"] == "/api/v1/nodes/gpu-1/status"
    assert entry["content_type"] == "application/json-patch+json"
    assert json.loads(entry["body"]) == [{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}]
    assert entry["status"] == 200 and entry["user"] == "kubernetes-admin"
    core.list_node(label_selector="a=b")
    assert sim.requests[-1]["query"] == {"labelSelector": "a=b"}
    sim.clear_requests()
    assert sim.requests == []


@pytest.mark.parametrize("status, reason", [(429, "TooManyRequests"), (500, "InternalError"),
                                            (503, "ServiceUnavailable")])
def test_injected_status_faults(sim, status, reason):
    sim.inject_fault("GET", r"^/api/v1/nodes/gpu-1$", status=status, count=2, retry_after=3)
    raw = Raw(sim)
    for _attempt in range(2):
        code, body, headers = raw.request("GET", "/api/v1/nodes/gpu-1")
        assert code == status and body["reason"] == reason and body["code"] == status
        assert headers["Retry-After"] == "3"
    assert raw.request("GET", "/api/v1/nodes/gpu-2")[0] == 200
    assert raw.request("GET", "/api/v1/nodes/gpu-1")[0] == 200
    assert [r["status"] for r in sim.requests[-4:]] == [status, status, 200, 200]


def test_fault_matches_method(sim):
    sim.inject_fault("PATCH", r"/nodes/", status=500)
    assert Raw(sim).request("GET", "/api/v1/nodes/gpu-1")[0] == 200
    code, _b, _h = Raw(sim).request("PATCH", "/api/v1/nodes/gpu-1", {}, content_type="application/merge-patch+json")
    assert code == 500


def test_drop_fault_closes_connection(sim, clients):
    core, _apps = clients
    sim.inject_fault("GET", r"^/api/v1/nodes/gpu-1$", status="drop", count=1)
    conn = Raw(sim).connection()
    conn.request("GET", "/api/v1/nodes/gpu-1", headers={"Authorization": "Bearer " + sim.admin_token})
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, ssl.SSLError)):
        conn.getresponse()
    conn.close()
    assert core.read_node("gpu-1").metadata.name == "gpu-1"


def test_admin_endpoints_over_http(sim):
    raw = Raw(sim)
    assert Raw(sim, token="nope").request("GET", "/simcluster/requests")[0] == 401
    code, _b, _h = raw.request("POST", "/simcluster/faults",
                               {"method": "GET", "path_regex": "^/api/v1/nodes$", "status": 503, "count": 1})
    assert code == 201
    assert raw.request("GET", "/api/v1/nodes")[0] == 503
    code, body, _h = raw.request("GET", "/simcluster/requests")
    assert code == 200 and body["requests"][-1]["status"] == 503
    assert not any(r["path"].startswith("/simcluster") for r in body["requests"])
    assert raw.request("DELETE", "/simcluster/requests")[0] == 200
    assert raw.request("GET", "/simcluster/requests")[1]["requests"] == []
    code, body, _h = raw.request("POST", "/simcluster/faults", {"status": 418, "path_regex": "x"})
    assert code == 400


# ---------------------------------------------------------------- pods: extended resource validation (facts)

def test_pod_limits_alone_copy_to_requests(sim, clients):
    core, _apps = clients
    pod = core.create_namespaced_pod("default", pod_manifest("p", limits={"example.com/dongle": "3"}))
    assert pod.spec.containers[0].resources.requests == {"example.com/dongle": "3"}


@pytest.mark.parametrize("limits, requests, message", [
    ({"example.com/dongle": "2"}, {"example.com/dongle": "1"},
     'spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/dongle limit of 2'),
    (None, {"example.com/dongle": "1"},
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ({"example.com/dongle": "1.5"}, None,
     'spec.containers[0].resources.limits[example.com/dongle]: Invalid value: "1500m": must be an integer'),
    ({"dongle": "1"}, None,
     'spec.containers[0].resources.limits[dongle]: Invalid value: "dongle": '
     'must be a standard resource type or fully qualified'),
])
def test_pod_extended_resource_validation(sim, clients, limits, requests, message):
    core, _apps = clients
    code, body = api_error(core.create_namespaced_pod, "default",
                           pod_manifest("p", limits=limits, requests=requests))
    assert code == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Pod "p" is invalid: ')
    assert message in body["message"]


# ---------------------------------------------------------------- process entry point

def test_python_dash_m_serves_until_sigterm(tmp_path):
    kubeconfig = tmp_path / "kc"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "tests.simcluster", "--config",
                             os.path.join(REPO_ROOT, "tests/simcluster/examples/demo.yaml"),
                             "--write-kubeconfig", str(kubeconfig), "--no-controllers"],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("https://127.0.0.1:")
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        api = kubernetes.config.new_client_from_config(str(kubeconfig))
        names = sorted(n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_node().items)
        api.close()
        assert names == ["dongle-node-1", "gpu-node-1", "gpu-node-2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
    assert rc == 0


# ---------------------------------------------------------------- with the controllers (default fixture)

def _ready(sim, node):
    conds = sim.store.get("nodes", None, node)["status"]["conditions"]
    return [c["status"] for c in conds if c["type"] == "Ready"][0]


def test_admin_node_endpoints_reach_the_controllers(simcluster):
    raw = Raw(simcluster)
    assert _ready(simcluster, "gpu-2") == "True"
    code, _b, _h = raw.request("POST", "/simcluster/nodes/gpu-2/unreachable", {})
    assert code == 200
    assert _ready(simcluster, "gpu-2") == "Unknown"
    code, _b, _h = raw.request("POST", "/simcluster/nodes/gpu-2/unreachable", {"unreachable": False})
    assert code == 200
    deadline = time.monotonic() + 5
    while _ready(simcluster, "gpu-2") != "True" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ready(simcluster, "gpu-2") == "True"
    code, _b, _h = raw.request("POST", "/simcluster/nodes/cpu-1/fail-pods", {"reason": "ErrImagePull"})
    assert code == 200
    pod = pod_manifest("p", node="cpu-1")
    assert raw.request("POST", "/api/v1/namespaces/default/pods", pod)[0] == 201
    deadline = time.monotonic() + 5
    reason = None
    while reason is None and time.monotonic() < deadline:
        statuses = (simcluster.store.get("pods", "default", "p").get("status") or {}).get("containerStatuses") or []
        reason = ((statuses[0].get("state") or {}).get("waiting") or {}).get("reason") if statuses else None
        time.sleep(0.05)
    assert reason == "ErrImagePull"


def test_status_patch_with_controllers_running(simcluster):
    core, _apps, api = typed_clients(simcluster)
    try:
        node = core.patch_node_status("dongle-1", [{"op": "add", "path": "/status/capacity/example.com~1dongle",
                                                    "value": "2"}])
        assert node.status.capacity["example.com/dongle"] == "2"
        code, body = api_error(core.patch_node_status, "bare-1",
                               [{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "2"}])
        assert code == 422 and body["message"] == "the server rejected our request due to an error in our request"
    finally:
        api.close()


def test_pod_spec_is_immutable_but_labels_and_image_are_not(sim, clients):
    core, _apps = clients
    # a pod as a controller writes it, straight into the store, without API defaulting
    sim.store.create("pods", {"metadata": {"name": "raw", "namespace": "default"},
                              "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    pod = core.patch_namespaced_pod("raw", "default", {"metadata": {"labels": {"a": "b"}}})
    assert pod.metadata.labels == {"a": "b"}
    pod = core.patch_namespaced_pod("raw", "default", {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}})
    assert pod.spec.containers[0].image == "busybox:1.37"
    code, body = api_error(core.patch_namespaced_pod, "raw", "default", {"spec": {"nodeName": "gpu-2"}})
    assert code == 422 and body["message"].startswith('Pod "raw" is invalid: spec: Forbidden: pod updates may not')


@pytest.mark.parametrize("given, canonical", [
    ("1000", "1k"), ("1500", "1500"), ("0.5Gi", "512Mi"), ("1.5", "1500m"), ("1e3", "1e3"), ("32Gi", "32Gi"),
    (4, "4"), (4.0, "4"), ("0.5Ki", "512"), ("2048Ki", "2Mi"), ("0.1", "100m"), ("+3", "3"),
])
def test_quantities_are_stored_in_canonical_form(given, canonical):
    from tests.simcluster.quantity import canonical_quantity
    assert canonical_quantity(given) == canonical


# ---------------------------------------------------------------- pods/log

def test_pod_log_of_a_container_that_never_started_is_400(sim, clients):
    core = clients[0]
    core.create_namespaced_pod("default", pod_manifest("waiting"))
    status, body = api_error(core.read_namespaced_pod_log, "waiting", "default")
    assert status == 400
    assert body["message"] == 'container "c" in pod "waiting" is waiting to start: ContainerCreating'
    status, body = api_error(core.read_namespaced_pod_log, "nope", "default")
    assert status == 404 and body["message"] == 'pods "nope" not found'


def test_pod_log_of_a_started_container_is_plain_text(sim, clients):
    core = clients[0]
    core.create_namespaced_pod("default", pod_manifest("ran"))
    pod = core.read_namespaced_pod("ran", "default", _preload_content=False)
    body = json.loads(pod.data)
    body["status"]["containerStatuses"] = [{"name": "c", "ready": False, "restartCount": 0, "image": "busybox:1.36",
                                            "imageID": "", "state": {"terminated": {"exitCode": 0}}}]
    core.replace_namespaced_pod_status("ran", "default", body, _preload_content=False)
    resp = core.read_namespaced_pod_log("ran", "default", _preload_content=False)
    assert resp.status == 200 and resp.data == b""
    assert resp.headers["Content-Type"].startswith("text/plain")


# ---------------------------------------------------------------- runtimeclasses (node.k8s.io/v1)

def runtime_class(name="nvidia", handler="nvidia", **fields):
    return dict({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                 "handler": handler}, **fields)


def test_runtime_class_handler_is_immutable(sim, clients):
    raw = Raw(sim)
    path = "/apis/node.k8s.io/v1/runtimeclasses"
    code, created, _h = raw.request("POST", path, runtime_class())
    assert code == 201 and created["handler"] == "nvidia"
    # scheduling and overhead may change
    changed = dict(created, scheduling={"nodeSelector": {"gpu": "true"}})
    code, updated, _h = raw.request("PUT", path + "/nvidia", changed)
    assert code == 200 and updated["scheduling"] == {"nodeSelector": {"gpu": "true"}}
    expected = ('RuntimeClass.node.k8s.io "nvidia" is invalid: handler: Invalid value: "runc": '
                'field is immutable')
    code, body, _h = raw.request("PUT", path + "/nvidia", dict(updated, handler="runc"))
    assert code == 422 and body["reason"] == "Invalid" and body["message"] == expected, body
    assert body["details"] == {"name": "nvidia", "group": "node.k8s.io", "kind": "RuntimeClass", "causes": [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "runc": field is immutable', "field": "handler"}]}
    code, body, _h = raw.request("PATCH", path + "/nvidia", {"handler": "runc"},
                                 content_type="application/merge-patch+json")
    assert code == 422 and body["message"] == expected
    code, stored, _h = raw.request("GET", path + "/nvidia")
    assert stored["handler"] == "nvidia" and stored["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


@pytest.mark.parametrize("handler", ["NVIDIA", "nvidia_runtime", "-nvidia", "", "a.b"])
def test_runtime_class_handler_must_be_a_dns_label(sim, handler):
    code, body, _h = Raw(sim).request("POST", "/apis/node.k8s.io/v1/runtimeclasses", runtime_class(handler=handler))
    assert code == 422 and body["reason"] == "Invalid", body
    assert body["message"] == (
        'RuntimeClass.node.k8s.io "nvidia" is invalid: handler: Invalid value: %s: a lowercase RFC 1123 label must '
        "consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        % json.dumps(handler))


def test_runtime_class_overhead_is_stored_in_canonical_form_and_validated(sim):
    raw = Raw(sim)
    path = "/apis/node.k8s.io/v1/runtimeclasses"
    code, created, _h = raw.request("POST", path, runtime_class(overhead={"podFixed": {"cpu": "0.25", "memory": 1048576}}))
    assert code == 201 and created["overhead"] == {"podFixed": {"cpu": "250m", "memory": "1048576"}}
    code, body, _h = raw.request("POST", path, runtime_class("neg", overhead={"podFixed": {"cpu": "-1"}}))
    assert code == 422 and body["message"] == (
        'RuntimeClass.node.k8s.io "neg" is invalid: overhead.limits[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0")
    code, body, _h = raw.request("POST", path, runtime_class("odd", overhead={"podFixed": {"gpu": "1"}}))
    assert code == 422 and "overhead.limits[gpu]: Invalid value: \"gpu\": must be a standard resource type" in body["message"]
