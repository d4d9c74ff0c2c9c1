# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the simulated cluster answered differently from kube-apiserver v1.36.2 (found by
tests/integration/test_facts.py), checked on the simulated cluster alone: ServiceAccount admission of pods,
metadata written through /status, and the container resource-name rule.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.simcluster.tests.test_api import Raw


@pytest.fixture
def raw(simcluster_factory):
    sim = simcluster_factory({"nodes": []}, controllers=False)
    raw = Raw(sim)
    code, body, _headers = raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "ns1"}})
    assert code == 201, body
    return raw


def pod(name, **spec):
    return {"metadata": {"name": name}, "spec": dict({"containers": [{"name": "c", "image": "x"}]}, **spec)}


def test_pod_naming_a_missing_service_account_is_forbidden(raw):
    for query in ("", "?dryRun=All"):
        code, body, _headers = raw.request("POST", "/api/v1/namespaces/ns1/pods" + query,
                                           pod("p1", serviceAccountName="robot", runtimeClassName="absent"))
        assert code == 403, body
        assert body["reason"] == "Forbidden" and body["details"] == {"name": "p1", "kind": "pods"}
        # ServiceAccount admission runs before RuntimeClass admission
        assert body["message"] == ('pods "p1" is forbidden: error looking up service account ns1/robot: '
                                   'serviceaccount "robot" not found')
    assert raw.request("POST", "/api/v1/namespaces/ns1/serviceaccounts", {"metadata": {"name": "robot"}})[0] == 201
    assert raw.request("POST", "/api/v1/namespaces/ns1/pods", pod("p1", serviceAccountName="robot"))[0] == 201
    # simplified: `default` exists in every namespace (the service account controller's job)
    assert raw.request("POST", "/api/v1/namespaces/ns1/pods", pod("p2"))[0] == 201


@pytest.mark.parametrize("path, body", [
    ("/api/v1/nodes", {"metadata": {"name": "n1"}}),
    ("/api/v1/namespaces/ns1/pods", pod("p1")),
    ("/api/v1/namespaces", {"metadata": {"name": "ns2"}}),
    ("/apis/apps/v1/namespaces/ns1/daemonsets", {"metadata": {"name": "d1"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
])
def test_labels_and_annotations_written_through_status_are_stored(raw, path, body):
    code, created, _headers = raw.request("POST", path, body)
    assert code == 201, created
    url = "%s/%s/status" % (path, created["metadata"]["name"])
    code, patched, _headers = raw.request("PATCH", url, {"metadata": {"labels": {"touched": "yes"}, "annotations": {
        "an": "x"}}, "spec": {"unschedulable": True}}, content_type="application/merge-patch+json")
    assert code == 200, patched
    assert patched["metadata"]["labels"]["touched"] == "yes" and patched["metadata"]["annotations"]["an"] == "x"
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert patched["spec"] == created["spec"]   # the spec stays


def test_pod_status_keeps_owner_references(raw):
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1"}
    body = pod("p1")
    body["metadata"]["ownerReferences"] = [owner]
    assert raw.request("POST", "/api/v1/namespaces/ns1/pods", body)[0] == 201
    code, patched, _headers = raw.request("PATCH", "/api/v1/namespaces/ns1/pods/p1/status",
                                          {"metadata": {"ownerReferences": None, "labels": {"a": "b"}}},
                                          content_type="application/merge-patch+json")
    assert code == 200 and patched["metadata"]["ownerReferences"] == [owner] and patched["metadata"]["labels"] == {"a": "b"}


@pytest.mark.parametrize("name, details", [
    ("dongle", ["must be a standard resource type or fully qualified", "must be a standard resource for containers"]),
    ("pods", ["must be a standard resource for containers"]),
])
def test_container_resource_names(raw, name, details):
    code, body, _headers = raw.request("POST", "/api/v1/namespaces/ns1/pods", {"metadata": {"name": "p1"}, "spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {name: "1"}}}]}})
    assert code == 422
    expected = [("spec.containers[0].resources.%s[%s]" % (kind, name), 'Invalid value: "%s": %s' % (name, detail))
                for kind in ("limits", "requests") for detail in details]
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == expected


def bound_pod(raw, name, owner=None):
    body = pod(name, nodeName="n1")
    body["metadata"]["labels"] = {"app": "a"}
    if owner:
        body["metadata"]["ownerReferences"] = [owner]
    assert raw.request("POST", "/api/v1/namespaces/ns1/pods", body)[0] == 201
    code, _body, _headers = raw.request("PATCH", "/api/v1/namespaces/ns1/pods/%s/status" % name, {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json")
    assert code == 200


def test_bound_pod_stays_terminating_without_a_kubelet(raw):
    bound_pod(raw, "p1")
    code, body, _headers = raw.request("DELETE", "/api/v1/namespaces/ns1/pods/p1")
    assert code == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 30
    code, body, _headers = raw.request("GET", "/api/v1/namespaces/ns1/pods/p1")
    assert code == 200 and body["metadata"]["deletionTimestamp"]


def evict(raw, name):
    return raw.request("POST", "/api/v1/namespaces/ns1/pods/%s/eviction" % name, {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})


def test_max_unavailable_budget_counts_only_pods_with_a_controller(raw):
    assert raw.request("POST", "/apis/policy/v1/namespaces/ns1/poddisruptionbudgets", {
        "metadata": {"name": "b"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "a"}}}})[0] == 201
    bound_pod(raw, "p1")
    code, body, _headers = evict(raw, "p1")
    assert code == 429
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget b does not allow evicting pods currently"}]
    bound_pod(raw, "p2", owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": True})
    code, body, _headers = evict(raw, "p2")
    assert code == 201, body


def test_claim_requests_are_defaulted_exact_count(raw):
    requests = [{"name": "a", "exactly": {"deviceClassName": "c"}},
                {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "All"}},
                {"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "c", "count": 2}]}]
    code, body, _headers = raw.request("POST", "/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims", {
        "metadata": {"name": "c1"}, "spec": {"devices": {"requests": requests}}})
    assert code == 201, body
    stored = body["spec"]["devices"]["requests"]
    assert stored[0]["exactly"] == {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}
    assert stored[1]["exactly"] == {"deviceClassName": "c", "allocationMode": "All"}
    assert stored[2]["firstAvailable"] == [{"name": "s", "deviceClassName": "c", "count": 2, "allocationMode": "ExactCount"}]
    code, body, _headers = raw.request("POST", "/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaimtemplates", {
        "metadata": {"name": "t1"}, "spec": {"spec": {"devices": {"requests": requests[:1]}}}})
    assert code == 201 and body["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] == "ExactCount"


def test_device_class_too_many_and_too_long_causes(raw):
    code, body, _headers = raw.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
        "metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": "true"}}] * 33}})
    assert code == 422
    assert body["details"]["causes"] == [{"reason": "FieldValueTooMany", "field": "spec.selectors",
                                          "message": "Too many: 33: must have at most 32 items"}]
    code, body, _headers = raw.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
        "metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": "x" * 10241}}]}})
    assert code == 422 and body["details"]["causes"][0]["reason"] == "FieldValueTooLong"


@pytest.mark.parametrize("expression, detail", [
    ("device.foo == 1", "ERROR: <input>:1:7: undefined field 'foo'"),
    ("device.driver(", "ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', ')', '.', "
                       "'-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"),
])
def test_cel_errors_as_measured(expression, detail):
    from tests.simcluster import cel
    assert cel.compile_cel(expression).split("\n")[0] == "compilation failed: " + detail


@pytest.mark.parametrize("expression, type_name", [
    ("device.attributes", "map(string, map(string, google.protobuf.Any))"),
    ("device.capacity", "map(string, map(string, kubernetes.Quantity))"),
    ("device.driver", "string"), ("1", "int"), ("2u", "uint"), ("1.5", "double"), ("null", "null_type"),
])
def test_cel_non_bool_selector(expression, type_name):
    from tests.simcluster import cel
    assert cel.compile_cel(expression) == "must evaluate to bool or the unknown type, not " + type_name
    assert cel.compile_cel("'x' in device.attributes") is None   # maps still work with `in`
