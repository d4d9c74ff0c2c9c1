# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Server-side field validation and the /openapi/v3 documents kubectl 1.32 reads before it sends
`?fieldValidation=Strict` (tests/simcluster/openapi.py). The raw-HTTP tests send what kubectl sends;
the kubectl test runs the real binary where one is installed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import urllib.parse

import pytest

from tests.simcluster.tests.test_api import Raw

BAD_CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "typo", "namespace": "default", "app": "x"},
                 "data": {"a": "1"}, "spec": {"foo": 1}}
STRICT_MESSAGE = ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
                  'unknown field "metadata.app", unknown field "spec"')


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory({"nodes": []}, controllers=False)


def send(raw, method, path, body, content_type="application/json"):
    """Like Raw.request, but keeps repeated headers (one Warning header per unknown field)."""
    conn = raw.connection()
    try:
        conn.request(method, path, body=json.dumps(body).encode(), headers={
            "Authorization": "Bearer " + raw.token, "Content-Type": content_type})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read()), [v for k, v in resp.getheaders() if k.lower() == "warning"]
    finally:
        conn.close()


def test_openapi_v3_tells_kubectl_the_server_validates_fields(sim):
    raw = Raw(sim)
    code, root, _headers = raw.request("GET", "/openapi/v3")
    assert code == 200
    assert {"api/v1", "apis/apps/v1", "apis/rbac.authorization.k8s.io/v1", "apis/node.k8s.io/v1"} <= set(root["paths"])
    code, doc, _headers = raw.request("GET", root["paths"]["apis/apps/v1"]["serverRelativeURL"])
    assert code == 200 and doc["openapi"].startswith("3.")
    # what kubectl looks for: a PATCH of this kind with a fieldValidation query parameter
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "DaemonSet"}
    assert {"name": "fieldValidation", "in": "query"}.items() <= [
        p for p in patch["parameters"] if p["name"] == "fieldValidation"][0].items()
    assert raw.request("GET", "/openapi/v3/apis/nothing.example.com/v1")[0] == 404


def test_strict_refuses_every_unknown_field_and_stores_nothing(sim):
    raw = Raw(sim)
    code, body, _headers = send(raw, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", BAD_CONFIGMAP)
    assert code == 400 and body["reason"] == "BadRequest" and body["message"] == STRICT_MESSAGE, body
    assert sim.store.get("configmaps", "default", "typo") is None


def test_warn_is_the_default_and_unknown_fields_are_dropped(sim):
    raw = Raw(sim)
    code, body, warnings = send(raw, "POST", "/api/v1/namespaces/default/configmaps", BAD_CONFIGMAP)
    assert code == 201, body
    assert warnings == ['299 - "unknown field \\"metadata.app\\""', '299 - "unknown field \\"spec\\""']
    stored = sim.store.get("configmaps", "default", "typo")
    assert "spec" not in stored and "app" not in stored["metadata"] and stored["data"] == {"a": "1"}


def test_ignore_drops_silently(sim):
    code, body, warnings = send(Raw(sim), "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Ignore",
                                BAD_CONFIGMAP)
    assert code == 201 and warnings == [] and "spec" not in body


def test_patch_and_update_results_are_checked_down_to_containers(sim):
    raw = Raw(sim)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "p", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "p"}}, "template": {
              "metadata": {"labels": {"app": "p"}},
              "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}
    assert send(raw, "POST", "/apis/apps/v1/namespaces/default/daemonsets?fieldValidation=Strict", ds)[0] == 201
    code, body, _headers = send(
        raw, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/p?fieldValidation=Strict",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "imag": "x"}]}}}},
        "application/strategic-merge-patch+json")
    assert code == 400, body
    assert body["message"].endswith('strict decoding error: unknown field "spec.template.spec.containers[0].imag"')
    stored = sim.store.get("daemonsets", "default", "p")
    stored["spec"]["minReadySecond"] = 5
    code, body, warnings = send(raw, "PUT", "/apis/apps/v1/namespaces/default/daemonsets/p", stored)
    assert code == 200 and warnings == ['299 - "unknown field \\"spec.minReadySecond\\""']
    assert "minReadySecond" not in sim.store.get("daemonsets", "default", "p")["spec"]


def test_kubectl_create_validates_on_the_server(sim, tmp_path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed; the raw-HTTP tests above send what it sends")
    good = dict(BAD_CONFIGMAP, metadata={"name": "good", "namespace": "default"})
    del good["spec"]
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps(BAD_CONFIGMAP))
    env = dict(os.environ, KUBECONFIG=sim.kubeconfig_path, HOME=str(tmp_path))
    ok = subprocess.run([kubectl, "create", "-f", str(tmp_path / "good.json")], env=env, capture_output=True,
                        text=True, timeout=60, check=False)
    assert ok.returncode == 0 and "configmap/good created" in ok.stdout, ok.stderr
    bad = subprocess.run([kubectl, "create", "-f", str(tmp_path / "bad.json")], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert bad.returncode != 0 and STRICT_MESSAGE in bad.stderr, bad.stderr
    creates = [r for r in sim.requests if r["method"] == "POST"]
    assert [urllib.parse.parse_qs(r["query"] if isinstance(r["query"], str) else urllib.parse.urlencode(
        r["query"], doseq=True)).get("fieldValidation") for r in creates] == [["Strict"], ["Strict"]]
