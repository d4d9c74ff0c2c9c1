# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.dra_device_class against a cluster (the suite's own real control plane, or the cluster of KUBECONFIG).

Written to pass unchanged on a real cluster serving resource.k8s.io/v1 (Kubernetes 1.34+); the request-log
checks run only on the suite's own control plane. DeviceClasses are cluster-scoped: each test uses its own name and
deletes it afterwards.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import create_objects, least_privilege, rbac_objects, wait_for
from tests.support.node_configs import NO_NODES

# The modules run as the shipped least-privilege identity (playbooks/templates/rbac.yaml.j2). What the tests name
# of their own (DeviceClasses, a smoke-test namespace) is granted to it as an inventory naming them would grant it,
# by grant_identity, as the administrator.
pytestmark = pytest.mark.least_privilege_identity
# the DeviceClass tests need no node of the stand-in (DeviceClasses are cluster-scoped)
CLASSES_ONLY = pytest.mark.node_config(NO_NODES)

MODULE = "kubehw.devices.dra_device_class"
GROUP = "resource.k8s.io"
MANAGED_BY = "app.kubernetes.io/managed-by"


def grant_identity(cluster, roles, **variables):
    """In least-privilege runs: the roles (name suffixes: ``nodes``, ``smoke-test``) of the shipped RBAC rendered
    with ``variables`` (kubehw_rbac_dra_device_classes, kubehw_rbac_smoke_test_namespace) under a prefix of this
    test's own, bound to the run's identity and created by the administrator. Of the cluster-wide ``nodes`` role
    only the rules naming objects (resourceNames) are kept: the rest the identity holds already."""
    if not least_privilege():
        return
    prefix = cluster.unique_name("rbac")
    names = ["%s-%s" % (prefix, role) for role in roles]
    docs = [d for d in rbac_objects(kubehw_rbac_name=prefix, **variables)
            if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding") and d["metadata"]["name"] in names]
    for doc in docs:
        if doc["kind"] == "ClusterRole":
            doc["rules"] = [r for r in doc["rules"] if r.get("resourceNames")]
    assert len(docs) == 2 * len(roles), docs
    create_objects(cluster, docs)


def read_class(cluster, name, version="v1"):
    api = client.CustomObjectsApi(cluster.api_client)
    try:
        return json.loads(api.get_cluster_custom_object(GROUP, version, "deviceclasses", name,
                                                        _preload_content=False).data)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


@pytest.fixture
def dc_name(cluster):
    name = "dc-%s.example.com" % uuid.uuid4().hex[:8]
    # as kubehw_rbac_dra_device_classes in the inventory: the identity may change and delete this class
    grant_identity(cluster, ["nodes"], kubehw_rbac_dra_device_classes=[name])
    yield name
    try:
        client.CustomObjectsApi(cluster.api_client).delete_cluster_custom_object(GROUP, "v1", "deviceclasses", name)
    except ApiException:
        pass


def task(name, title="DeviceClass", **params):
    args = dict(name=name)
    args.update(params)
    return {"name": title, MODULE: args, "register": "out"}


def writes(cluster, since):
    return [(w["method"], w["path"], w["query"].get("dryRun")) for w in cluster.writes(since)]


@CLASSES_ONLY
@pytest.mark.floor
def test_create_rerun_update_remove_twice(cluster, ansible, dc_name):
    selectors = ['device.driver == "gpu.example.com"']
    config = [{"driver": "gpu.example.com", "parameters": {"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig",
                                                           "sharing": {"strategy": "TimeSlicing"}}}]
    create = ansible([task(dc_name, selectors=selectors, config=config)])
    assert create.rc == 0, create.output()
    out = create.result("DeviceClass")
    assert out["changed"] is True and out["action"] == "created", out
    assert out["api_version"] == "resource.k8s.io/v1"
    stored = read_class(cluster, dc_name)
    assert stored["spec"]["selectors"] == [{"cel": {"expression": selectors[0]}}]
    assert stored["spec"]["config"][0]["opaque"]["parameters"]["sharing"] == {"strategy": "TimeSlicing"}
    assert stored["metadata"]["labels"][MANAGED_BY] == "kubehw.devices"

    mark = cluster.mark()
    # the same input in another key order: parameters are data, so nothing to do
    again = ansible([task(dc_name, selectors=selectors, config=[{"parameters": {
        "sharing": {"strategy": "TimeSlicing"}, "kind": "GpuConfig", "apiVersion": "gpu.example.com/v1"},
        "driver": "gpu.example.com"}])])
    assert again.rc == 0, again.output()
    assert again.result("DeviceClass")["changed"] is False
    assert again.result("DeviceClass")["action"] == "none"
    if cluster.controlled:
        assert writes(cluster, mark) == []
    assert read_class(cluster, dc_name)["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

    mark = cluster.mark()
    newer = ['device.driver == "gpu.example.com"', 'device.attributes["gpu.example.com"].model == "a100"']
    update = ansible([task(dc_name, selectors=newer)], diff=True)
    assert update.rc == 0, update.output()
    out = update.result("DeviceClass")
    assert out["changed"] is True and out["action"] == "updated", out
    assert out["changed_paths"] == ["/spec/selectors", "/spec/config"]
    assert out["diff"]["before"]["spec"]["config"] and "config" not in out["diff"]["after"]["spec"]
    stored = read_class(cluster, dc_name)
    assert [s["cel"]["expression"] for s in stored["spec"]["selectors"]] == newer
    assert "config" not in stored["spec"]
    if cluster.controlled:
        assert [(m, dry) for m, _p, dry in writes(cluster, mark)] == [("PUT", None)]

    remove = ansible([task(dc_name, state="absent"), task(dc_name, title="Again", state="absent")])
    assert remove.rc == 0, remove.output()
    assert remove.result("DeviceClass")["action"] == "deleted" and remove.result("DeviceClass")["changed"] is True
    assert remove.result("Again")["action"] == "none" and remove.result("Again")["changed"] is False
    assert read_class(cluster, dc_name) is None


@CLASSES_ONLY
@pytest.mark.floor
def test_writes_whose_answer_is_lost_neither_fail_nor_repeat(cluster, ansible, dc_name):
    fault = "commit-504"  # the connection-dropped variant goes through the same client path (test_faults.py)
    cluster.require_controlled("injects a lost answer after the apiserver stored the write")
    path = "^/apis/resource.k8s.io/v1/deviceclasses"
    cluster.controls.inject_fault("POST", path + "$", status=fault)
    cluster.controls.inject_fault("PUT", path + "/%s$" % dc_name.replace(".", r"\."), status=fault)
    added = cluster.watch_added("deviceclasses", None)
    mark = cluster.mark()
    run = ansible([task(dc_name, selectors=['device.driver == "gpu.example.com"']),
                   task(dc_name, title="Change", selectors=['device.driver == "other.example.com"'])])
    assert run.rc == 0, run.output()
    # the lost answers are no reason to report nothing done: the first task created, the second updated
    assert (run.result("DeviceClass")["action"], run.result("DeviceClass")["changed"]) == ("created", True)
    assert (run.result("Change")["action"], run.result("Change")["changed"]) == ("updated", True)
    assert cluster.controls.faults == []
    assert added == [dc_name]
    # one POST: after the lost answer the class was read back by name, not created again
    assert [m for m, _p, _d in writes(cluster, mark)].count("POST") == 1
    assert read_class(cluster, dc_name)["spec"]["selectors"][0]["cel"]["expression"] == \
        'device.driver == "other.example.com"'


@CLASSES_ONLY
@pytest.mark.floor
def test_check_mode_validates_by_dry_run_and_stores_nothing(cluster, ansible, dc_name):
    mark = cluster.mark()
    run = ansible([
        # a type error: no local syntax check can see it, so the server's dry run must
        dict(task(dc_name, title="Type error", selectors=["device.driver + 1"]), ignore_errors=True),
        # cel-python finds this one on the controller; without it, the apiserver's dry run does
        dict(task(dc_name, title="Syntax error", selectors=["device.driver == "]), ignore_errors=True),
        task(dc_name, title="Valid", selectors=['device.driver == "gpu.example.com"']),
    ], check=True, diff=True)
    assert run.rc == 0, run.output()
    out = run.result("Type error")
    assert out["failed"] is True and out["status"] == 422, out
    assert "compilation failed" in out["msg"], out["msg"]
    assert "found no matching overload for '_+_' applied to '(string, int)'" in out["msg"], out["msg"]
    assert "spec.selectors[0].cel.expression" in out["msg"], out["msg"]
    out = run.result("Syntax error")
    assert out["failed"] is True and "syntax error" in out["msg"].lower(), out["msg"]
    out = run.result("Valid")
    assert out["changed"] is True and out["action"] == "created"
    # the dry run's answer: the object as the apiserver would have stored it
    assert out["device_class"]["spec"]["selectors"][0]["cel"]["expression"] == 'device.driver == "gpu.example.com"'
    assert out["diff"]["before"] == {} and out["diff"]["after"]["metadata"]["name"] == dc_name
    assert read_class(cluster, dc_name) is None
    if cluster.controlled:
        sent = writes(cluster, mark)
        assert len(sent) in (2, 3) and all(m == "POST" and dry == "All" for m, _p, dry in sent), sent


@CLASSES_ONLY
def test_bad_input_fails_before_any_request(cluster, ansible, dc_name):
    mark = cluster.mark()
    run = ansible([
        dict(task(dc_name, title="Driver", config=[{"driver": "GPU_Example", "parameters": {"a": 1}}]),
             ignore_errors=True),
        dict(task(dc_name, title="Extended", selectors=['device.driver == "gpu.example.com"'],
                  extended_resource_name="kubernetes.io/gpu"), ignore_errors=True),
    ])
    assert run.rc == 0, run.output()
    msg = run.result("Driver")["msg"]
    assert "config[0].driver 'GPU_Example'" in msg and "DNS subdomain" in msg, msg
    msg = run.result("Extended")["msg"]
    assert "extended_resource_name 'kubernetes.io/gpu'" in msg and "Nothing was sent" in msg, msg
    if cluster.controlled:
        assert cluster.requests(mark) == []
    assert read_class(cluster, dc_name) is None


@CLASSES_ONLY
def test_extended_resource_name_is_stored_once(cluster, ansible, dc_name):
    # not example.com/gpu: test_extended_resource_served_through_dra maps that one, maybe at the same time
    run = ansible([task(dc_name, selectors=['device.driver == "gpu.example.com"'],
                        extended_resource_name="example.com/gpu-stored")])
    assert run.rc == 0, run.output()
    assert read_class(cluster, dc_name)["spec"]["extendedResourceName"] == "example.com/gpu-stored"
    mark = cluster.mark()
    again = ansible([task(dc_name, selectors=['device.driver == "gpu.example.com"'],
                          extended_resource_name="example.com/gpu-stored")])
    assert again.result("DeviceClass")["changed"] is False
    if cluster.controlled:
        assert writes(cluster, mark) == []


@CLASSES_ONLY
def test_foreign_class_left_alone_without_adopt(cluster, ansible, dc_name):
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": dc_name},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "other.example.com"'}}]}}
    client.CustomObjectsApi(cluster.api_client).create_cluster_custom_object(GROUP, "v1", "deviceclasses", body)
    mark = cluster.mark()
    run = ansible([task(dc_name, selectors=['device.driver == "gpu.example.com"']),
                   task(dc_name, title="Remove", state="absent")])
    assert run.rc == 0, run.output()
    assert run.result("DeviceClass")["action"] == "skipped" and run.result("Remove")["action"] == "skipped"
    assert "/spec/selectors" in json.dumps(run.result("DeviceClass").get("warnings")), run.results
    assert read_class(cluster, dc_name)["spec"]["selectors"][0]["cel"]["expression"] == \
        'device.driver == "other.example.com"'
    if cluster.controlled:
        assert writes(cluster, mark) == []


def discovery_of_an_older_cluster(cluster, versions):
    """The apiserver's /apis as a cluster answers it that serves these resource.k8s.io versions (none: no group)."""
    groups = json.loads(client.ApisApi(cluster.api_client).get_api_versions(_preload_content=False).data)
    groups["groups"] = [g for g in groups["groups"] if g["name"] != "resource.k8s.io"]
    if versions:
        entries = [{"groupVersion": "resource.k8s.io/%s" % v, "version": v} for v in versions]
        groups["groups"].append({"name": "resource.k8s.io", "versions": entries, "preferredVersion": entries[0]})
    return groups


@CLASSES_ONLY
@pytest.mark.parametrize("release, versions", [("v1.33.5", ["v1beta2", "v1beta1"]), ("v1.33.5", [])],
                         ids=["betas-only", "no-group"])
def test_a_cluster_without_resource_k8s_io_v1_is_refused_in_one_line_before_any_write(
        cluster, ansible, dc_name, release, versions):
    """Kubernetes 1.33 with the betas switched on, or without DRA: answered by the fault proxy, since a v1.36.2
    apiserver without resource.k8s.io/v1 never turns ready. Both DRA modules refuse before any write."""
    cluster.require_controlled("answers discovery and /version as an older cluster (through the fault proxy)")
    version = dict(json.loads(client.VersionApi(cluster.api_client).get_code(_preload_content=False).data),
                   gitVersion=release, minor="33")
    namespace = cluster.namespace()
    # every discovery and /version of the run (the identity's own set-up reads discovery too)
    cluster.controls.inject_answer("GET", "^/apis/?$", 200, discovery_of_an_older_cluster(cluster, versions), count=50)
    cluster.controls.inject_answer("GET", "^/version/?$", 200, version, count=50)
    mark = cluster.mark()
    run = ansible([dict(task(dc_name, selectors=['device.driver == "gpu.example.com"']), ignore_errors=True),
                   {"name": "Driver", "kubehw.devices.dra_driver_deploy": {
                       "preset": "example", "namespace": namespace, "wait": "none"},
                    "ignore_errors": True}])
    for name in ("DeviceClass", "Driver"):
        out = run.result(name)
        assert out.get("failed") and out["reason"] == "NotServed", out
        assert "resource.k8s.io/v1 is not served (this cluster runs v1.33.5)" in out["msg"], out["msg"]
        assert "Kubernetes 1.34 or later" in out["msg"] and "Nothing was written" in out["msg"]
        assert ("only resource.k8s.io/v1beta2, resource.k8s.io/v1beta1" if versions
                else "no resource.k8s.io API at all") in out["msg"]
        assert "\n" not in out["msg"]
    assert writes(cluster, mark) == []
    cluster.controls.clear_faults()


def schedulable_node(cluster):
    for node in json.loads(cluster.core.list_node(_preload_content=False).data)["items"]:
        if (node.get("status") or {}).get("allocatable", {}).get("pods") not in (None, "0") and \
                not (node.get("spec") or {}).get("unschedulable"):
            return node["metadata"]["name"]
    pytest.skip("no schedulable node")


@pytest.fixture
def published(cluster):
    """ResourceSlices of a test driver on a node (a stale generation too), a DeviceClass for it, a pod whose claim
    the scheduler allocates from them, and a claim no pod uses; deleted afterwards. On a real cluster the pod never
    starts (no kubelet plugin serves the test driver), but its claim is allocated and reserved all the same."""
    api = client.CustomObjectsApi(cluster.api_client)
    node = schedulable_node(cluster)
    suffix = uuid.uuid4().hex[:6]
    driver, pool = "test-%s.kubehw.example.com" % suffix, "%s-%s" % (node, suffix)
    made = []

    def make(plural, body, namespace=None):
        if namespace:
            api.create_namespaced_custom_object(GROUP, "v1", namespace, plural, body)
        else:
            api.create_cluster_custom_object(GROUP, "v1", plural, body)
        made.append((plural, namespace, body["metadata"]["name"]))

    for generation, devices in ((1, [{"name": "old-0"}]), (2, [
            {"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
             "capacity": {"memory": {"value": "40Gi"}}}])):
        make("resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                "metadata": {"name": "%s-%d" % (pool, generation)},
                                "spec": {"driver": driver, "nodeName": node, "devices": devices,
                                         "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1}}})
    make("deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
                           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % driver}}]}})
    for name, device_class in (("held", driver), ("waiting", "no-such-class.example.com")):
        make("resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                "metadata": {"name": "%s-%s" % (name, suffix)},
                                "spec": {"devices": {"requests": [
                                    {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}, "default")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user-" + suffix, "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "held-" + suffix}],
                    "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"claims": [{"name": "gpu"}]}}]}}
    cluster.core.create_namespaced_pod("default", pod)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        held = api.get_namespaced_custom_object(GROUP, "v1", "default", "resourceclaims", "held-" + suffix)
        if (held.get("status") or {}).get("reservedFor"):
            break
        time.sleep(0.5)
    try:
        yield dict(node=node, driver=driver, pool=pool, suffix=suffix)
    finally:
        try:
            cluster.core.delete_namespaced_pod("user-" + suffix, "default", grace_period_seconds=0)
        except ApiException:
            pass
        for plural, namespace, name in reversed(made):
            try:
                if namespace:
                    api.delete_namespaced_custom_object(GROUP, "v1", namespace, plural, name)
                else:
                    api.delete_cluster_custom_object(GROUP, "v1", plural, name)
            except ApiException:
                pass


def test_extended_resource_info_reports_published_devices_and_claims(cluster, ansible, published):
    node, driver, pool, suffix = published["node"], published["driver"], published["pool"], published["suffix"]
    run = ansible([{"name": "Report", "kubehw.devices.extended_resource_info": {
        "names": [node], "include_pods": False, "include_dra": True}}])
    assert run.rc == 0, run.output()
    dra = run.result("Report")["dra"]
    assert dra["served"] is True and dra["api_version"] == "resource.k8s.io/v1"
    mine = [d for d in dra["nodes"][node]["devices"] if d["driver"] == driver]
    # the stale generation's old-0 is not reported
    assert mine == [
        {"driver": driver, "pool": pool, "device": "gpu-0", "attributes": {"model": "a100", "index": 0},
         "capacity": {"memory": "40Gi"}}]
    held = [c for c in dra["nodes"][node]["claims"] if c["name"] == "held-" + suffix]
    assert held == [{"namespace": "default", "name": "held-" + suffix, "reserved_for": ["pods/user-" + suffix],
                     "devices": ["%s/%s/gpu-0" % (driver, pool)], "node": node}]
    # no pod uses this one: nobody waits for it, so there is no scheduler's reason either
    assert {"namespace": "default", "name": "waiting-" + suffix, "reserved_for": [], "requests": ["gpu"],
            "pods": []} in dra["pending_claims"]


def _pod(name, resource, hostname=None):
    spec = {"tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {resource: "1"}}}]}
    if hostname:
        spec["nodeSelector"] = {"kubernetes.io/hostname": hostname}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _read_pod(cluster, name):
    return json.loads(cluster.core.read_namespaced_pod(name, "default", _preload_content=False).data)


def test_extended_resource_served_through_dra(cluster, ansible, dc_name):
    """A DeviceClass with extended_resource_name example.com/gpu (made with the module) serves a pod that asks
    for example.com/gpu: 1 on a node that does not advertise it: the scheduler creates a claim for the pod, names
    it in status.extendedResourceClaimStatus, and allocates one of the class's devices. With no device left, the
    next such pod stays Unschedulable with "cannot allocate all claims". The test brings its own driver's
    ResourceSlice (one device) and pods; on a real cluster the pods never start (no kubelet plugin serves the test
    driver), but scheduling and allocation happen all the same."""
    resource = "example.com/gpu"
    api = client.CustomObjectsApi(cluster.api_client)
    node = schedulable_node(cluster)
    node_obj = json.loads(cluster.core.read_node(node, _preload_content=False).data)
    if (node_obj.get("status") or {}).get("allocatable", {}).get(resource) not in (None, "0"):
        pytest.skip("node %s advertises %s through a device plugin, which then serves it instead of DRA"
                    % (node, resource))
    hostname = (node_obj["metadata"].get("labels") or {}).get("kubernetes.io/hostname")
    suffix = uuid.uuid4().hex[:6]
    driver, pool = "ext-%s.kubehw.example.com" % suffix, "%s-ext-%s" % (node, suffix)
    slice_name = "%s-1" % pool
    first, second = "ext-first-" + suffix, "ext-second-" + suffix
    api.create_cluster_custom_object(GROUP, "v1", "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": slice_name},
        "spec": {"driver": driver, "nodeName": node, "devices": [{"name": "gpu-0"}],
                 "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}}})
    try:
        made = ansible([task(dc_name, selectors=['device.driver == "%s"' % driver], extended_resource_name=resource)])
        if made.rc != 0 and "DRAExtendedResource" in made.result("DeviceClass").get("msg", "") \
                and not cluster.controlled:
            pytest.skip("the cluster's apiserver drops DeviceClass.spec.extendedResourceName "
                        "(feature gate DRAExtendedResource off)")
        assert made.rc == 0, made.output()
        cluster.core.create_namespaced_pod("default", _pod(first, resource, hostname))
        deadline = time.monotonic() + 60
        pod = _read_pod(cluster, first)
        while time.monotonic() < deadline and not (pod["spec"].get("nodeName") and
                                                   pod.get("status", {}).get("extendedResourceClaimStatus")):
            time.sleep(0.5)
            pod = _read_pod(cluster, first)
        if not pod["spec"].get("nodeName") and not cluster.controlled:
            conditions = json.dumps((pod.get("status") or {}).get("conditions"))
            if "Insufficient %s" % resource in conditions:
                pytest.skip("the cluster's scheduler does not serve %s through DRA (feature gate DRAExtendedResource "
                            "off in kube-scheduler): %s" % (resource, conditions))
        assert pod["spec"].get("nodeName") == node, pod.get("status")
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]
        claim = api.get_namespaced_custom_object(GROUP, "v1", "default", "resourceclaims", status["resourceClaimName"])
        assert claim["metadata"]["name"].startswith(first + "-extended-resources-")
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
        assert [(o["kind"], o["name"], o.get("controller")) for o in claim["metadata"]["ownerReferences"]] == \
            [("Pod", first, True)]
        assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": dc_name, "allocationMode": "ExactCount", "count": 1}}]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in results] == [
            ("container-0-request-0", driver, pool, "gpu-0")]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [first]

        # the only device is taken: the next pod asking for one stays Unschedulable
        cluster.core.create_namespaced_pod("default", _pod(second, resource, hostname))
        deadline = time.monotonic() + 30
        message = ""
        while time.monotonic() < deadline and "cannot allocate all claims" not in message:
            time.sleep(0.5)
            pod = _read_pod(cluster, second)
            message = " ".join(c.get("message") or "" for c in (pod.get("status") or {}).get("conditions") or []
                               if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable")
        assert "cannot allocate all claims" in message, pod.get("status")
        assert not pod["spec"].get("nodeName")
    finally:
        for name in (first, second):
            try:
                cluster.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
            except ApiException:
                pass
        try:
            api.delete_cluster_custom_object(GROUP, "v1", "resourceslices", slice_name)
        except ApiException:
            pass


def _claim_pod(name, namespace, claim, node):
    """A pod pinned to ``node`` (by name, as the smoke test pins) that uses the ResourceClaim ``claim``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchFields": [
                             {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_smoke_test_through_a_claim_template_and_the_claims_report(cluster, ansible):
    """resource_smoke_test with device_class: its pod is scheduled on the chosen node and the claim made from its
    ResourceClaimTemplate is allocated there (driver, pool, device reported); pod, template and claim are gone
    afterwards; asking for more devices than are free fails with the scheduler's reason. extended_resource_info
    reports, for the same node, an allocated claim (its pod, devices and node) and a pending one (the pod waiting
    for it and the scheduler's reason).

    The test brings its own driver's ResourceSlice (two devices), DeviceClass, and a pod holding one device; on a
    real cluster the pods never start (no kubelet plugin serves the test driver) but scheduling and allocation,
    which is what is proved, happen all the same. One playbook run for every check."""
    api = client.CustomObjectsApi(cluster.api_client)
    node = schedulable_node(cluster)
    namespace = cluster.namespace()
    # as kubehw_rbac_smoke_test_namespace: the identity may make pods, claim templates and claims there
    grant_identity(cluster, ["smoke-test"], kubehw_rbac_smoke_test_namespace=namespace)
    suffix = uuid.uuid4().hex[:6]
    driver, pool = "smoke-%s.kubehw.example.com" % suffix, "%s-smoke-%s" % (node, suffix)
    slice_name = "%s-1" % pool
    holder, waiter = "holder-" + suffix, "waiter-" + suffix
    api.create_cluster_custom_object(GROUP, "v1", "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": slice_name},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-%d" % i, "attributes": {"model": {"string": "a100"}, "index": {"int": i}},
                              "capacity": {"memory": {"value": "40Gi"}}} for i in (0, 1)]}})
    api.create_cluster_custom_object(GROUP, "v1", "deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % driver}}]}})
    if not cluster.controlled:
        # a new namespace gets its "default" ServiceAccount a moment later; a pod created before is refused
        wait_for(lambda: cluster.core.list_namespaced_service_account(
            namespace, field_selector="metadata.name=default").items, what="the default ServiceAccount")
    try:
        for claim, count in ((holder, 1), (waiter, 2)):
            api.create_namespaced_custom_object(GROUP, "v1", namespace, "resourceclaims", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": driver, "allocationMode": "ExactCount", "count": count}}]}}})
            cluster.core.create_namespaced_pod(namespace, _claim_pod(claim, namespace, claim, node))
        # the holder gets one of the two devices, the waiter (two devices) stays Unschedulable
        wait_for(lambda: (api.get_namespaced_custom_object(GROUP, "v1", namespace, "resourceclaims", holder)
                          .get("status") or {}).get("reservedFor"), timeout=60, what="the holder's claim allocated")
        held = api.get_namespaced_custom_object(GROUP, "v1", namespace, "resourceclaims", holder)
        held_device = held["status"]["allocation"]["devices"]["results"][0]["device"]
        free_device = ({"gpu-0", "gpu-1"} - {held_device}).pop()
        wait_for(lambda: [c for c in (_read_pod_in(cluster, namespace, waiter).get("status") or {}).get(
            "conditions") or [] if c.get("reason") == "Unschedulable"], timeout=60, what="the waiter unschedulable")

        smoke = {"device_class": driver, "node": node, "namespace": namespace, "timeout": 60,
                 "tolerations": [{"operator": "Exists"}]}
        run = ansible([
            {"name": "Smoke", "kubehw.devices.resource_smoke_test": smoke},
            {"name": "Report", "kubehw.devices.extended_resource_info": {
                "names": [node], "include_pods": False, "include_dra": True}},
            {"name": "Too many", "ignore_errors": True,
             "kubehw.devices.resource_smoke_test": dict(smoke, count=2, timeout=30)},
        ])
        out = run.result("Smoke")
        assert out.get("failed") is not True, run.output()
        assert out["scheduled"] is True and out["node"] == node, out
        assert out["api_version"] == "resource.k8s.io/v1"
        # the one free device, on the chosen node
        assert out["allocation"] == [{"request": "device", "driver": driver, "pool": pool, "device": free_device}]
        assert out["claim"].startswith(out["pod"] + "-device-"), out
        assert out["template"].startswith("kubehw-smoke-")
        assert out["deleted"] is True and out["claims_deleted"] is True and out["changed"] is False

        dra = run.result("Report")["dra"]
        claims = dict((c["name"], c) for c in dra["nodes"][node]["claims"])
        assert claims[holder] == {"namespace": namespace, "name": holder, "reserved_for": ["pods/" + holder],
                                  "devices": ["%s/%s/%s" % (driver, pool, held_device)], "node": node}
        pending = [c for c in dra["pending_claims"] if c["name"] == waiter]
        assert len(pending) == 1 and pending[0]["pods"] == [waiter] and pending[0]["requests"] == ["gpu"], pending
        assert pending[0]["reason"] == "Unschedulable"
        assert "cannot allocate all claims" in pending[0]["message"], pending
        # the smoke test's own claim is gone from the report too
        assert not [c for c in dra["pending_claims"] + dra["nodes"][node]["claims"]
                    if c["name"].startswith(out["pod"])]

        too_many = run.result("Too many")
        assert too_many["failed"] is True and too_many["scheduled"] is False, too_many
        assert "2 devices of DeviceClass %s was not scheduled" % driver in too_many["msg"], too_many["msg"]
        assert "cannot allocate all claims" in too_many["msg"] and too_many["reason"] == "Unschedulable"
        assert too_many["deleted"] is True and too_many["claims_deleted"] is True

        # nothing of either run is left: no pod, template or claim with the smoke-test label
        label = "app.kubernetes.io/component=smoke-test"
        assert cluster.core.list_namespaced_pod(namespace, label_selector=label).items == []
        for plural in ("resourceclaimtemplates", "resourceclaims"):
            assert api.list_namespaced_custom_object(GROUP, "v1", namespace, plural, label_selector=label)["items"] \
                == [], plural
    finally:
        for name in (holder, waiter):
            try:
                cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            except ApiException:
                pass
            try:
                api.delete_namespaced_custom_object(GROUP, "v1", namespace, "resourceclaims", name)
            except ApiException:
                pass
        for plural, name in (("deviceclasses", driver), ("resourceslices", slice_name)):
            try:
                api.delete_cluster_custom_object(GROUP, "v1", plural, name)
            except ApiException:
                pass


def _read_pod_in(cluster, namespace, name):
    return json.loads(cluster.core.read_namespaced_pod(name, namespace, _preload_content=False).data)
