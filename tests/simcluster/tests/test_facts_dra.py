# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's resource.k8s.io against the facts ("Dynamic Resource Allocation", measured on
kube-apiserver v1.36.2), row by row, over raw HTTP so the tests see exactly what the server sends.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

import pytest

from tests.simcluster.cel import compile_cel
from tests.simcluster.tests.test_api import Raw

DC = "/apis/resource.k8s.io/v1/deviceclasses"


def device_class(name="gpu.example.com", expression='device.driver == "gpu.example.com"', **spec):
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": dict({"selectors": [{"cel": {"expression": expression}}]}, **spec)}
    return body


@pytest.fixture
def raw(simcluster_factory):
    return Raw(simcluster_factory(None, controllers=False))


def test_discovery_serves_only_v1_by_default(raw):
    code, group, _h = raw.request("GET", "/apis/resource.k8s.io")
    assert code == 200
    assert [v["version"] for v in group["versions"]] == ["v1"]
    assert group["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"
    code, groups, _h = raw.request("GET", "/apis")
    entry = [g for g in groups["groups"] if g["name"] == "resource.k8s.io"]
    assert [v["version"] for v in entry[0]["versions"]] == ["v1"]
    code, resources, _h = raw.request("GET", "/apis/resource.k8s.io/v1")
    scope = dict((r["name"], r["namespaced"]) for r in resources["resources"])
    assert scope == {"deviceclasses": False, "resourceslices": False, "resourceclaims": True,
                     "resourceclaims/status": True, "resourceclaimtemplates": True}
    assert raw.request("GET", "/apis/resource.k8s.io/v1beta1")[0] == 404
    assert raw.request("GET", "/apis/resource.k8s.io/v1beta1/deviceclasses")[0] == 404


def test_discovery_is_open_to_every_authenticated_user(simcluster_factory):
    """The DRA modules find the served version with GET /apis/ as whatever identity they run as: the verb of a
    non-resource request is the lowercased method (get, not list: requestinfo.go NewRequestInfo), which the
    bootstrap ClusterRole system:discovery grants to system:authenticated on /apis and /apis/*."""
    user = "system:serviceaccount:kubehw:automation"
    sim = simcluster_factory({"tokens": [{"token": "sa-token", "user": user}]}, controllers=False)
    raw = Raw(sim, token="sa-token")
    for path in ("/apis", "/apis/", "/apis/resource.k8s.io", "/apis/resource.k8s.io/v1"):
        assert raw.request("GET", path)[0] == 200, path
    code, status, _h = raw.request("POST", "/apis/", {})
    assert code == 403 and status["message"] == 'forbidden: User "%s" cannot post path "/apis/"' % user


def test_cel_syntax_error_is_422_with_cel_gos_message(raw):
    code, status, _h = raw.request("POST", DC, device_class(name="x", expression="device.driver == "))
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith(
        'DeviceClass.resource.k8s.io "x" is invalid: spec.selectors[0].cel.expression: Invalid value: '
        '"device.driver == ": compilation failed: ERROR: <input>:1:18: Syntax error: mismatched input \'<EOF>\' '
        "expecting {")
    assert status["details"]["causes"][0]["field"] == "spec.selectors[0].cel.expression"
    assert raw.request("GET", DC + "/x")[0] == 404


def test_cel_type_error_names_the_overload(raw):
    code, status, _h = raw.request("POST", DC, device_class(name="x", expression="device.driver + 1"))
    assert code == 422
    assert ("compilation failed: ERROR: <input>:1:15: found no matching overload for '_+_' applied to "
            "'(string, int)'") in status["message"]


@pytest.mark.parametrize("expression", [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory'
    '.compareTo(quantity("40Gi")) >= 0',
    'device.driver in ["a.example.com", "b.example.com"] || !(device.attributes["x"].index > 2)',
    'has(device.attributes["gpu.example.com"].model) ? device.driver.startsWith("gpu") : false',
])
def test_valid_selectors_compile(expression):
    assert compile_cel(expression) is None


@pytest.mark.parametrize("expression, detail", [
    ("(device.driver", "1:15: Syntax error: mismatched input '<EOF>' expecting ')'"),
    ("device.driver == 'a' 'b'", "1:22: Syntax error: mismatched input ''b'' expecting <EOF>"),
    ("gpu == 1", "1:1: undeclared reference to 'gpu' (in container '')"),
    ("device.vendor == 'x'", "1:7: undefined field 'vendor'"),   # at the dot: measured on v1.36.2 (test_facts.py)
    ("device.driver && true", "1:15: found no matching overload for '_&&_' applied to '(string, bool)'"),
])
def test_compile_errors_subset(expression, detail):
    assert detail in compile_cel(expression)


def test_dry_run_create_answers_201_with_generation_1_and_stores_nothing(raw):
    code, obj, _h = raw.request("POST", DC + "?dryRun=All", device_class())
    assert code == 201
    assert obj["metadata"]["generation"] == 1 and obj["kind"] == "DeviceClass"
    assert raw.request("GET", DC + "/gpu.example.com")[0] == 404
    code, stored, _h = raw.request("POST", DC, device_class())
    assert code == 201 and stored["metadata"]["generation"] == 1
    # a dry-run update leaves the stored object as it was
    changed = dict(stored, spec={"selectors": [{"cel": {"expression": "true"}}]})
    assert raw.request("PUT", DC + "/gpu.example.com?dryRun=All", changed)[0] == 200
    assert raw.request("GET", DC + "/gpu.example.com")[1]["spec"] == stored["spec"]


@pytest.mark.parametrize("name", ["gpu", "kubernetes.io/gpu"])
def test_extended_resource_name_must_be_an_extended_resource(raw, name):
    code, status, _h = raw.request("POST", DC, device_class(extendedResourceName=name))
    assert code == 422
    assert ('spec.extendedResourceName: Invalid value: "%s": must be a valid extended resource name' % name
            in status["message"])


def test_config_driver_and_parameters_are_checked(raw):
    body = device_class(config=[{"opaque": {"driver": "GPU_example", "parameters": {"a": 1}}},
                                {"opaque": {"driver": "gpu.example.com"}}])
    code, status, _h = raw.request("POST", DC, body)
    assert code == 422
    fields = [c["field"] for c in status["details"]["causes"]]
    assert fields == ["spec.config[0].opaque.driver", "spec.config[1].opaque.parameters"]


def test_generation_follows_spec_changes_only(raw):
    code, stored, _h = raw.request("POST", DC, device_class())
    stored["metadata"]["labels"] = {"a": "b"}
    code, updated, _h = raw.request("PUT", DC + "/gpu.example.com", stored)
    assert code == 200 and updated["metadata"]["generation"] == 1
    stored = updated
    stored["spec"]["selectors"] = [{"cel": {"expression": "true"}}]
    code, updated, _h = raw.request("PUT", DC + "/gpu.example.com", stored)
    assert code == 200 and updated["metadata"]["generation"] == 2


def test_resource_slice_is_stored_in_the_v1_shape(raw):
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                                  "capacity": {"memory": {"value": "40Gi"}}}]}}
    code, stored, _h = raw.request("POST", "/apis/resource.k8s.io/v1/resourceslices", body)
    assert code == 201 and stored["spec"]["devices"] == body["spec"]["devices"]


def test_v1_32_configuration_serves_v1beta1_and_converts_shapes(simcluster_factory):
    raw = Raw(simcluster_factory({"dra_versions": ["v1beta1"]}, controllers=False))
    code, group, _h = raw.request("GET", "/apis/resource.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1beta1"]
    assert raw.request("GET", DC)[0] == 404
    body = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "a100"}}}}]}}
    code, answer, _h = raw.request("POST", "/apis/resource.k8s.io/v1beta1/resourceslices", body)
    assert code == 201 and answer["apiVersion"] == "resource.k8s.io/v1beta1"
    assert answer["spec"]["devices"] == body["spec"]["devices"]
    code, listing, _h = raw.request("GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
    assert listing["apiVersion"] == "resource.k8s.io/v1beta1"
    assert listing["items"][0]["spec"]["devices"][0]["basic"]["attributes"] == {"model": {"string": "a100"}}


def test_cluster_without_dra_has_no_group(simcluster_factory):
    raw = Raw(simcluster_factory({"dra_versions": []}, controllers=False))
    assert raw.request("GET", "/apis/resource.k8s.io")[0] == 404
    assert "resource.k8s.io" not in [g["name"] for g in raw.request("GET", "/apis")[1]["groups"]]
    assert raw.request("GET", DC)[0] == 404


def start_driver_pod(raw, node, name="plugin"):
    """The DRA example driver's kubelet-plugin pod on this node (the simulated driver publishes its inventory)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kube-system"},
           "spec": {"nodeName": node, "containers": [
               {"name": "plugin", "image": "registry.k8s.io/dra-example-driver/dra-example-driver:v0.2.0"}]}}
    assert raw.request("POST", "/api/v1/namespaces/kube-system/pods", pod)[0] == 201


def create_one_gpu_template(raw):
    """ResourceClaimTemplate default/one-gpu: one device of DeviceClass gpu.example.com."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}]}}}}
    assert raw.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
                       template)[0] == 201


def one_gpu_pod(name):
    """A pod in default whose container uses a claim made from the template one-gpu."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}


def _wait(fn, timeout=15.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    return fn()


def test_driver_pod_publishes_the_nodes_inventory_and_takes_it_back(simcluster_factory):
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "gpu-1", "inventory": {"example.com/gpu": 2}}, {"name": "cpu-1"}]})
    raw = Raw(sim)
    slices = "/apis/resource.k8s.io/v1/resourceslices"
    for node in ("gpu-1", "cpu-1"):
        start_driver_pod(raw, node, "plugin-" + node)
    published = _wait(lambda: raw.request("GET", slices)[1]["items"])
    assert [s["spec"]["nodeName"] for s in published] == ["gpu-1"]
    spec = published[0]["spec"]
    assert spec["driver"] == "gpu.example.com"
    assert spec["pool"] == {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    assert spec["devices"][1]["attributes"]["index"] == {"int": 1}
    assert published[0]["metadata"]["ownerReferences"][0]["kind"] == "Node"
    raw.request("DELETE", "/api/v1/namespaces/kube-system/pods/plugin-gpu-1?gracePeriodSeconds=0")
    assert _wait(lambda: raw.request("GET", slices)[1]["items"] == [])


def test_claims_from_templates_are_allocated_by_the_scheduler_and_go_with_their_pod(simcluster_factory):
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "gpu-1", "inventory": {"example.com/gpu": 2}}, {"name": "cpu-1"}]})
    raw = Raw(sim)
    pods = "/api/v1/namespaces/default/pods"
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    start_driver_pod(raw, "gpu-1")
    assert raw.request("POST", DC, device_class())[0] == 201
    create_one_gpu_template(raw)
    assert _wait(lambda: raw.request("GET", "/apis/resource.k8s.io/v1/resourceslices")[1]["items"])
    for name in ("a", "b", "c"):
        assert raw.request("POST", pods, one_gpu_pod(name))[0] == 201

    def bound():
        items = dict((p["metadata"]["name"], p) for p in raw.request("GET", pods)[1]["items"])
        done = [n for n in ("a", "b") if items[n]["spec"].get("nodeName")]
        return items if len(done) == 2 else None

    items = _wait(bound)
    assert items and items["a"]["spec"]["nodeName"] == items["b"]["spec"]["nodeName"] == "gpu-1"
    by_pod = {}
    for claim in raw.request("GET", claims)[1]["items"]:
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        by_pod[claim["metadata"]["ownerReferences"][0]["name"]] = claim
    assert by_pod["a"]["metadata"]["name"].startswith("a-gpu-")
    assert items["a"]["status"]["resourceClaimStatuses"] == [{"name": "gpu",
                                                              "resourceClaimName": by_pod["a"]["metadata"]["name"]}]
    devices = sorted(by_pod[n]["status"]["allocation"]["devices"]["results"][0]["device"] for n in ("a", "b"))
    assert devices == ["gpu-0", "gpu-1"]
    assert by_pod["a"]["status"]["reservedFor"] == [{"resource": "pods", "name": "a",
                                                     "uid": items["a"]["metadata"]["uid"]}]
    assert by_pod["a"]["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"] == ["gpu-1"]
    # no device left for c: unschedulable, with the scheduler's DynamicResources reason
    waiting = _wait(lambda: [c for c in (raw.request("GET", pods + "/c")[1]["status"].get("conditions") or [])
                             if c.get("reason") == "Unschedulable"])
    # DynamicResources' refusal is unresolvable, and its PostFilter speaks before DefaultPreemption
    # (dynamicresources.go statusUnschedulable and PostFilter; the text a v1.34 cluster printed, FACTS.md)
    assert waiting[0]["message"] == (
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.")
    # a pod whose template does not exist has no claim: held back before any node is tried, no condition
    orphan = one_gpu_pod("orphan")
    orphan["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "no-such-template"
    assert raw.request("POST", pods, orphan)[0] == 201
    time.sleep(1.0)
    assert raw.request("GET", pods + "/orphan")[1].get("status", {}).get("conditions") in (None, [])
    # the scheduler protects an allocated claim: deleted while its pod runs, it stays until the pod is gone
    assert by_pod["b"]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    claim_b = claims + "/" + by_pod["b"]["metadata"]["name"]
    assert raw.request("DELETE", claim_b)[0] == 200
    time.sleep(0.6)
    kept = raw.request("GET", claim_b)[1]
    assert kept["metadata"].get("deletionTimestamp") and kept["status"]["reservedFor"][0]["name"] == "b"
    raw.request("DELETE", pods + "/b?gracePeriodSeconds=0")
    assert _wait(lambda: raw.request("GET", claim_b)[0] == 404)
    # deleting a pod deletes its generated claim, and c gets the freed device
    raw.request("DELETE", pods + "/a?gracePeriodSeconds=0")
    assert _wait(lambda: by_pod["a"]["metadata"]["name"] not in
                 [c["metadata"]["name"] for c in raw.request("GET", claims)[1]["items"]])
    assert _wait(lambda: raw.request("GET", pods + "/c")[1]["spec"].get("nodeName") == "gpu-1")


def test_a_claim_naming_a_missing_device_class_is_refused_by_prefilter_until_the_class_exists(simcluster_factory):
    """The apiserver stores a template and claim naming a DeviceClass that does not exist (validation checks the
    name's form only); kube-scheduler's DynamicResources PreFilter refuses the pod for every node with
    "request <request>: device class <name> does not exist" (validateDeviceClass), its PostFilter finds no claims
    in the cycle state ("no new claims to deallocate"), and the pod is scheduled once the class is created
    (kubernetes 1.34 dynamicresources.go; FACTS.md)."""
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "gpu-1", "inventory": {"example.com/gpu": 1}}, {"name": "cpu-1"}]})
    raw = Raw(sim)
    pods = "/api/v1/namespaces/default/pods"
    start_driver_pod(raw, "gpu-1")
    create_one_gpu_template(raw)
    assert raw.request("POST", pods, one_gpu_pod("p"))[0] == 201
    waiting = _wait(lambda: [c for c in (raw.request("GET", pods + "/p")[1]["status"].get("conditions") or [])
                             if c.get("reason") == "Unschedulable"])
    assert waiting[0]["message"] == (
        "0/2 nodes are available: request gpu: device class gpu.example.com does not exist. no new claims to "
        "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert raw.request("POST", DC, device_class())[0] == 201
    assert _wait(lambda: raw.request("GET", pods + "/p")[1]["spec"].get("nodeName") == "gpu-1")


def test_extended_resource_is_served_by_dra_only_where_no_device_plugin_advertises_it(simcluster_factory):
    """KEP-5004 (extendeddynamicresources.go): a DeviceClass's extendedResourceName serves a pod's request on a
    node whose allocatable has none of it, through a claim the scheduler makes for the pod; a node whose device
    plugin advertises the resource serves it as before, with no claim."""
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "gpu-1", "inventory": {"example.com/gpu": 1}},
        {"name": "dp-1", "capacity": {"example.com/gpu": "1"}}]})
    raw = Raw(sim)
    pods = "/api/v1/namespaces/default/pods"
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    start_driver_pod(raw, "gpu-1")
    assert raw.request("POST", DC, device_class(extendedResourceName="example.com/gpu"))[0] == 201
    assert _wait(lambda: raw.request("GET", "/apis/resource.k8s.io/v1/resourceslices")[1]["items"])

    def pod(name, node):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [
                    {"name": "c", "image": "busybox", "resources": {"limits": {"example.com/gpu": "1"}}}]}}

    for name, node in (("dp", "dp-1"), ("dra", "gpu-1"), ("late", "gpu-1")):
        assert raw.request("POST", pods, pod(name, node))[0] == 201

    def bound():
        items = dict((p["metadata"]["name"], p) for p in raw.request("GET", pods)[1]["items"])
        return items if items["dp"]["spec"].get("nodeName") and items["dra"]["spec"].get("nodeName") else None

    items = _wait(bound)
    assert items, "pods not bound"
    assert "extendedResourceClaimStatus" not in items["dp"].get("status", {})
    status = items["dra"]["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "c", "resourceName": "example.com/gpu",
                                          "requestName": "container-0-request-0"}]
    made = raw.request("GET", claims)[1]["items"]
    assert [c["metadata"]["name"] for c in made] == [status["resourceClaimName"]]
    assert made[0]["metadata"]["generateName"] == "dra-extended-resources-"
    assert made[0]["status"]["allocation"]["devices"]["results"] == [
        {"request": "container-0-request-0", "driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]
    waiting = _wait(lambda: [c for c in (raw.request("GET", pods + "/late")[1]["status"].get("conditions") or [])
                             if c.get("reason") == "Unschedulable"])
    assert "cannot allocate all claims" in waiting[0]["message"]
    # the claim goes with its pod, and the waiting pod gets the device
    raw.request("DELETE", pods + "/dra?gracePeriodSeconds=0")
    assert _wait(lambda: raw.request("GET", pods + "/late")[1]["spec"].get("nodeName") == "gpu-1")
    assert status["resourceClaimName"] not in [c["metadata"]["name"] for c in raw.request("GET", claims)[1]["items"]]


def test_the_later_class_serves_an_extended_resource_two_classes_name():
    """DeviceClassSpec.extendedResourceName (resource/v1/types.go): the class created later is picked; created at
    the same time, the first by name. Every class also maps deviceclass.resource.kubernetes.io/<its name>."""
    from tests.simcluster.dra_allocation import extended_resource_classes

    class Store:
        @staticmethod
        def list(_resource):
            return [{"metadata": {"name": name, "creationTimestamp": "2026-11-23T10:00:0%dZ" % second},
                     "spec": {"extendedResourceName": "example.com/gpu"}}
                    for name, second in (("b", 2), ("a", 1), ("c", 2))], "1"
    mapping = extended_resource_classes(Store())
    assert mapping["example.com/gpu"] == "b"
    assert mapping["deviceclass.resource.kubernetes.io/a"] == "a"


@pytest.mark.parametrize("expression, matches", [
    ('device.driver == "gpu.example.com"', True),
    ('device.driver == "other.example.com"', False),
    ('device.attributes["gpu.example.com"].model == "a100" && device.attributes["gpu.example.com"].index >= 1', True),
    ('device.attributes["gpu.example.com"]["index"] < 1 || !(device.driver == "gpu.example.com")', False),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) > 0', False),   # beyond the subset
])
def test_selector_subset_evaluates_against_a_device(expression, matches):
    from tests.simcluster.cel import selector_matches

    device = {"driver": "gpu.example.com", "name": "gpu-1",
              "attributes": {"model": {"string": "a100"}, "index": {"int": 1}}}
    assert selector_matches(expression, device) is matches
