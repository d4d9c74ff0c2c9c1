# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client's requests without the generated API classes: the same paths, arguments and errors as the kubernetes
library's generated methods of the installed release (units run with kubernetes 37, make min-versions with 24.2.0),
and every method the plugins call is in the table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import json
import os
import re

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._rest_api import OPERATIONS, query_name

PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "plugins")
GENERATED = {"core": "CoreV1Api", "apps": "AppsV1Api", "node_api": "NodeV1Api", "rbac": "RbacAuthorizationV1Api",
             "custom": "CustomObjectsApi", "apis": "ApisApi", "version": "VersionApi"}


class Answer(object):
    """What urllib3's pool answers: status, reason, data, headers."""

    def __init__(self, status=200, data=b"{}", headers=None):
        self.status = status
        self.reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests"}.get(status, "")
        self.data = data
        self.headers = headers or {}
        self.released = False

    def release_conn(self):
        self.released = True


class Pool(object):
    """The ApiClient's pool manager, recording each request."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent = []

    def request(self, method, url, **kwargs):
        self.sent.append(dict(kwargs, method=method, url=url))
        return self.answers.pop(0) if self.answers else Answer()


@pytest.fixture
def client(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("K8S_AUTH_") or name == "KUBECONFIG":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    made = KubeClient(params={"host": "https://api.example:6443", "api_key": "s3cret"}, sleep=lambda s: None)
    made.requests.pool = Pool()
    return made


def sent(client):
    request = client.requests.pool.sent[-1]
    return request["method"], request["url"].replace("https://api.example:6443", "", 1), request


def test_a_read_names_its_path_and_sends_the_token_and_user_agent(client):
    assert client.call_json(client.core.read_namespaced_pod, "smoke-1", "gpu-tests") == {}
    method, path, request = sent(client)
    assert (method, path) == ("GET", "/api/v1/namespaces/gpu-tests/pods/smoke-1")
    assert request["headers"]["authorization"] == "Bearer s3cret"
    assert request["headers"]["User-Agent"] == "kubehw.devices/ansible"
    assert request["headers"]["Accept"] == "application/json"
    assert "body" not in request and request["preload_content"] is False


def test_names_are_quoted_and_keywords_become_query_parameters(client):
    client.call_json(client.core.list_node, label_selector="gpu=yes,zone in (a,b)", limit=500, _continue="tok/1",
                     watch=True, allow_watch_bookmarks=False, resource_version=None, timeout_seconds=7)
    method, path, _request = sent(client)
    assert method == "GET"
    assert path == ("/api/v1/nodes?continue=tok%2F1&allowWatchBookmarks=false&labelSelector=gpu%3Dyes%2Czone+in+"
                    "%28a%2Cb%29&limit=500&timeoutSeconds=7&watch=true")
    client.call_json(client.core.read_node, "a/b c")
    assert sent(client)[1] == "/api/v1/nodes/a%2Fb%20c"
    # the path's arguments may come by keyword, as the generated methods take them (the watch helpers do)
    client.call_json(client.core.list_namespaced_pod, namespace="gpu-tests", field_selector="metadata.name=p")
    assert sent(client)[1] == "/api/v1/namespaces/gpu-tests/pods?fieldSelector=metadata.name%3Dp"
    client.call_json(client.custom.list_namespaced_custom_object, group="resource.k8s.io", version="v1",
                     namespace="t1", plural="resourceclaims", label_selector="run=1")
    assert sent(client)[1] == "/apis/resource.k8s.io/v1/namespaces/t1/resourceclaims?labelSelector=run%3D1"


def test_bodies_are_json_with_the_content_type_asked_for(client):
    ops = [{"op": "add", "path": "/status/capacity/example.com~1gpu", "value": "2"}]
    client.call_json(client.core.patch_node_status, "n1", ops, _content_type="application/json-patch+json")
    method, path, request = sent(client)
    assert (method, path) == ("PATCH", "/api/v1/nodes/n1/status")
    assert json.loads(request["body"]) == ops
    assert request["headers"]["Content-Type"] == "application/json-patch+json"
    client.call_json(client.core.patch_node, "n1", {"metadata": {"labels": {"a": "b"}}},
                     _content_type="application/merge-patch+json")
    assert sent(client)[2]["headers"]["Content-Type"] == "application/merge-patch+json"
    client.call_json(client.core.delete_namespaced_config_map, "plugin", "kube-system",
                     body={"preconditions": {"uid": "u1"}})
    method, path, request = sent(client)
    assert (method, path) == ("DELETE", "/api/v1/namespaces/kube-system/configmaps/plugin")
    assert json.loads(request["body"]) == {"preconditions": {"uid": "u1"}}
    assert request["headers"]["Content-Type"] == "application/json"
    client.call_json(client.custom.create_namespaced_custom_object, "resource.k8s.io", "v1", "t1",
                     "resourceclaims", {"kind": "ResourceClaim"}, dry_run="All")
    method, path, request = sent(client)
    assert (method, path) == ("POST", "/apis/resource.k8s.io/v1/namespaces/t1/resourceclaims?dryRun=All")
    assert json.loads(request["body"]) == {"kind": "ResourceClaim"}


def test_a_log_is_read_as_text(client):
    client.requests.pool.answers.append(Answer(200, "Dev-1 \u2713\n".encode("utf-8") + b"\xff"))
    log = client.call_text(client.core.read_namespaced_pod_log, "smoke-1", "gpu-tests", what="read the log")
    assert log == "Dev-1 \u2713\n\ufffd"
    method, path, request = sent(client)
    assert (method, path) == ("GET", "/api/v1/namespaces/gpu-tests/pods/smoke-1/log")
    assert request["preload_content"] is True


def test_a_status_outside_2xx_is_the_library_s_api_exception_with_body_and_headers(client):
    body = {"kind": "Status", "code": 404, "reason": "NotFound", "message": 'nodes "n9" not found'}
    client.requests.pool.answers.append(Answer(404, json.dumps(body).encode(), {"Audit-Id": "1"}))
    with pytest.raises(ApiException) as exc:
        client.core.read_node("n9")
    assert exc.value.status == 404 and exc.value.headers == {"Audit-Id": "1"}
    assert json.loads(exc.value.body) == body
    client.requests.pool.answers.append(Answer(404, json.dumps(body).encode()))
    with pytest.raises(KubeHwError) as err:
        client.call_json(client.core.read_node, "n9", what='read node "n9"')
    assert err.value.msg == 'Failed to read node "n9": 404 Not Found: nodes "n9" not found'


def test_a_retried_request_is_sent_again(client):
    client.requests.pool.answers.extend([Answer(429, b"{}", {"Retry-After": "0"}), Answer(200, b'{"items": []}')])
    assert client.call_json(client.apps.list_namespaced_daemon_set, "kube-system") == {"items": []}
    assert [r["url"] for r in client.requests.pool.sent] == [
        "https://api.example:6443/apis/apps/v1/namespaces/kube-system/daemonsets"] * 2


def test_a_token_refreshed_by_the_kubeconfig_hook_is_sent(client):
    def refresh(configuration):
        configuration.api_key = {"authorization": "Bearer fresh", "BearerToken": "Bearer fresh"}
    client.configuration.refresh_api_key_hook = refresh
    client.call_json(client.core.read_node, "n1")
    assert sent(client)[2]["headers"]["authorization"] == "Bearer fresh"


def test_a_method_outside_the_table_is_an_attribute_error(client):
    assert getattr(client.core, "list_namespaced_secret", None) is None
    with pytest.raises(TypeError):
        client.core.read_namespaced_pod("only-a-name")


def test_query_names_are_the_api_s():
    assert [query_name(k) for k in ("label_selector", "_continue", "allow_watch_bookmarks", "limit")] == [
        "labelSelector", "continue", "allowWatchBookmarks", "limit"]


def called_methods():
    """(api, method) of every ``<api>.<verb>_...`` the plugins name."""
    pattern = re.compile(r"\b(%s)\.((?:list|read|create|replace|patch|delete|get)_\w+)" % "|".join(GENERATED))
    found = set()
    for folder, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as handle:
                    found.update(pattern.findall(handle.read()))
    return sorted(found)


def test_every_method_the_plugins_call_is_in_the_table():
    called = called_methods()
    assert len(called) > 40, called
    assert [c for c in called if c[1] not in OPERATIONS[c[0]]] == []


@pytest.mark.parametrize("api, method", sorted((api, method) for api in OPERATIONS for method in OPERATIONS[api]))
def test_the_table_matches_the_generated_method_of_the_installed_library(api, method):
    """Path, HTTP method and positional arguments as the installed kubernetes release's generated method has them
    (24.2.0 names them in <method>_with_http_info, 37 in _<method>_serialize)."""
    generated = getattr(kubernetes.client, GENERATED[api])
    http_method, template, params = OPERATIONS[api][method]
    required = tuple(name for name, p in inspect.signature(getattr(generated, method)).parameters.items()
                     if name != "self" and p.default is inspect.Parameter.empty
                     and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
    assert required == params
    source = "".join(inspect.getsource(getattr(generated, name)) for name in
                     (method + "_with_http_info", "_%s_serialize" % method) if hasattr(generated, name))
    assert "'%s'" % template in source
    assert re.search(r"(method=)?'%s'" % http_method, source)
