# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: DRA: claims from templates, allocation by the scheduler."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.dra_api import DRA, _cel, _device_class
from tests.integration.facts.rows import create_pod, pod_body, row
from tests.integration.facts.scheduling import NOT_READY_TOLERATION, _dongle_node, _scheduled, _wait_scheduled


# -- DRA: claims from templates, allocation by the scheduler

def _dra_setup(t, devices=2):
    """A Ready node, a ResourceSlice of a driver of the probe's own with `devices` devices there, a DeviceClass
    selecting that driver, and a one-device ResourceClaimTemplate: (node, driver, class, template)."""
    node = _dongle_node(t)
    driver = t.name("drv") + ".example.com"
    slice_name = t.name("slice")
    spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-%d" % i, "attributes": {"index": {"int": i}}} for i in range(devices)]}
    t.ok("POST", DRA + "/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                           "metadata": {"name": slice_name}, "spec": spec})
    t.later("DELETE", "%s/resourceslices/%s" % (DRA, slice_name))
    device_class, _code, _body = _device_class(t, _cel('device.driver == "%s"' % driver))
    template = t.name("tmpl")
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, template))
    return node, driver, device_class, template


def _claim_pod(t, node, template):
    pod = t.name("pod")
    body = pod_body(pod, nodeSelector={"kubernetes.io/hostname": node}, tolerations=NOT_READY_TOLERATION,
                    resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template}])
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    code, created = create_pod(t, body)
    assert code == 201, created
    return pod


def _pod_claim(t, pod, seconds=20):
    deadline = time.time() + seconds
    while True:
        statuses = (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
            "resourceClaimStatuses") or []
        if statuses and statuses[0].get("resourceClaimName"):
            return statuses[0]
        assert time.time() < deadline, "%s: pod %s has no claim after %d s" % (t.kind, pod, seconds)
        time.sleep(0.1)


@row("dra-template-claim-allocated-by-the-scheduler", {
    "scheduled": ("bound", "<node>"), "status_entry": {"name": "gpu", "resourceClaimName": "<pod>-gpu-<5>"},
    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
    "owner": {"apiVersion": "v1", "kind": "Pod", "name": "<pod>", "controller": True},
    "finalizers": ["resource.kubernetes.io/delete-protection"],
    "results": [{"request": "gpu", "driver": "<driver>", "pool": "<node>", "device": "gpu-0"}],
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                             "values": ["<node>"]}]}]},
    "reservedFor": [{"resource": "pods", "name": "<pod>", "uid": True}],
    "claim_after_pod_deleted": 404}, controllers=True)
def probe_dra_template_claim_allocated_by_the_scheduler(t):
    node, driver, _device_class_name, template = _dra_setup(t)
    pod = _claim_pod(t, node, template)
    scheduled = _wait_scheduled(t, pod)
    entry = _pod_claim(t, pod)
    path = "%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, entry["resourceClaimName"])
    deadline = time.time() + 20
    while not (t.get(path).get("status") or {}).get("reservedFor"):
        assert time.time() < deadline, "%s: claim of %s not reserved" % (t.kind, pod)
        time.sleep(0.1)
    claim = t.get(path)
    allocation = claim["status"]["allocation"]
    owner = dict(claim["metadata"]["ownerReferences"][0])
    owner.pop("uid")
    reserved = [dict(r, uid=bool(r.get("uid"))) for r in claim["status"]["reservedFor"]]
    out = {"scheduled": scheduled, "status_entry": entry, "annotations": claim["metadata"].get("annotations"),
           "owner": owner, "finalizers": claim["metadata"].get("finalizers"),
           "results": allocation["devices"]["results"], "nodeSelector": allocation.get("nodeSelector"),
           "reservedFor": reserved}
    t.ok("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod))
    deadline = time.time() + 30
    while t.req("GET", path)[0] != 404 and time.time() < deadline:   # the resource claim controller and the GC
        time.sleep(0.2)
    out["claim_after_pod_deleted"] = t.req("GET", path)[0]
    text = json.dumps(out).replace(driver, "<driver>").replace(node, "<node>").replace(pod, "<pod>")
    return json.loads(re.sub(r'<pod>-gpu-[a-z0-9]{5}"', '<pod>-gpu-<5>"', text), object_hook=_tuples)


def _tuples(obj):
    if "scheduled" in obj:
        obj["scheduled"] = tuple(obj["scheduled"])
    return obj


@row("dra-no-free-device-unschedulable", {"Unschedulable": {
    "filter": {"cannot allocate all claims": 1}, "post_filter": "still not schedulable",
    "preemption": {"Preemption is not helpful for scheduling": 1}}}, controllers=True)
def probe_dra_no_free_device_unschedulable(t):
    node, _driver, _device_class_name, template = _dra_setup(t, devices=1)
    first = _claim_pod(t, node, template)
    assert _wait_scheduled(t, first)[0] == "bound"
    second = _claim_pod(t, node, template)
    return _scheduled(_wait_scheduled(t, second), node)


@row("dra-pod-without-its-claim-is-held-back", {"conditions_while_missing": [], "after_template_created": "bound to the node"},
     controllers=True)
def probe_dra_pod_without_its_claim_is_held_back(t):
    node, _driver, device_class, _template = _dra_setup(t)
    missing = t.name("tmpl")
    pod = _claim_pod(t, node, missing)
    time.sleep(3)
    conditions = [c.get("type") for c in (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
        "conditions") or []]
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": missing},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, missing))
    return {"conditions_while_missing": conditions, "after_template_created": _scheduled(_wait_scheduled(t, pod, 30), node)}


def _extended_resource_pod(t, node, resource):
    """A pod asking for one of `resource` on node: its name, where the scheduler put it, and its
    extendedResourceClaimStatus once the scheduler has written it (what it is after 20 s else)."""
    pod = t.name("pod")
    code, created = create_pod(t, pod_body(pod, {"limits": {resource: "1"}}, nodeSelector={"kubernetes.io/hostname": node},
                                           tolerations=NOT_READY_TOLERATION))
    assert code == 201, created
    scheduled = _wait_scheduled(t, pod)
    deadline = time.time() + 20
    while True:
        status = (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
            "extendedResourceClaimStatus")
        if status or time.time() > deadline:
            break
        time.sleep(0.1)
    return pod, scheduled, status


@row("dra-extended-resource-claim", {
    "scheduled": ("bound", "<node>"), "generateName": "<pod>-extended-resources-",
    "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
    "owner": {"apiVersion": "v1", "kind": "Pod", "name": "<pod>", "controller": True},
    "requests": [{"name": "container-0-request-0",
                  "exactly": {"deviceClassName": "<class>", "allocationMode": "ExactCount", "count": 1}}],
    "results": [{"request": "container-0-request-0", "driver": "<driver>", "pool": "<node>", "device": "gpu-0"}],
    "pod_status": {"requestMappings": [{"containerName": "c", "resourceName": "<resource>", "requestName": "container-0-request-0"}],
                   "resourceClaimName": "<claim>"}}, controllers=True)
def probe_dra_extended_resource_claim(t):
    node, driver, device_class, _template = _dra_setup(t)
    resource = "example.com/" + t.name("res")
    t.ok("PATCH", "%s/deviceclasses/%s" % (DRA, device_class), {"spec": {"extendedResourceName": resource}}, MERGE_PATCH)
    pod, scheduled, status = _extended_resource_pod(t, node, resource)
    claim = t.get("%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, status["resourceClaimName"]))
    owner = dict(claim["metadata"]["ownerReferences"][0])
    owner.pop("uid")
    out = {"scheduled": scheduled, "generateName": claim["metadata"].get("generateName"),
           "annotations": claim["metadata"].get("annotations"), "owner": owner,
           "requests": claim["spec"]["devices"]["requests"],
           "results": claim["status"]["allocation"]["devices"]["results"], "pod_status": status}
    text = json.dumps(out).replace(status["resourceClaimName"], "<claim>").replace(driver, "<driver>").replace(
        device_class, "<class>").replace(resource, "<resource>").replace(node, "<node>").replace(pod, "<pod>")
    return json.loads(text, object_hook=_tuples)


@row("dra-freed-device-wakes-pending-pod", {"second_before": "unschedulable", "second_after_first_deleted": "bound to the node"},
     controllers=True)
def probe_dra_freed_device_wakes_pending_pod(t):
    node, _driver, _device_class_name, template = _dra_setup(t, devices=1)
    first = _claim_pod(t, node, template)
    assert _wait_scheduled(t, first)[0] == "bound"
    second = _claim_pod(t, node, template)
    before = _wait_scheduled(t, second)[0].lower()
    t.ok("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, first))
    deadline = time.time() + 10   # the scheduler's backoff alone would wait longer: a claim event wakes the pod
    while not t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, second))["spec"].get("nodeName"):
        if time.time() > deadline:
            return {"second_before": before, "second_after_first_deleted": "not bound within 10 s"}
        time.sleep(0.2)
    return {"second_before": before, "second_after_first_deleted": "bound to the node"}


@row("dra-two-classes-one-extended-resource-later-serves", {"driver": "<second driver>"}, controllers=True)
def probe_dra_two_classes_one_extended_resource_later_serves(t):
    node = _dongle_node(t)
    resource = "example.com/" + t.name("res")
    drivers = []
    for index in range(2):
        driver = t.name("drv%d" % index) + ".example.com"
        slice_name = t.name("slice")
        spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}
        t.ok("POST", DRA + "/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                               "metadata": {"name": slice_name}, "spec": spec})
        t.later("DELETE", "%s/resourceslices/%s" % (DRA, slice_name))
        if index:
            time.sleep(1.1)   # creationTimestamp has whole seconds
        _device_class(t, dict(_cel('device.driver == "%s"' % driver), extendedResourceName=resource))
        drivers.append(driver)
    _pod, _where, status = _extended_resource_pod(t, node, resource)
    if not status:
        return {"driver": None}
    claim = t.get("%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, status["resourceClaimName"]))
    driver = claim["status"]["allocation"]["devices"]["results"][0]["driver"]
    return {"driver": {drivers[0]: "<first driver>", drivers[1]: "<second driver>"}.get(driver, driver)}


@row("dra-missing-device-class-refused-by-prefilter", {
    "before": {"Unschedulable": {"filter": "request gpu: device class <class> does not exist",
                                 "post_filter": "no new claims to deallocate",
                                 "preemption": {"Preemption is not helpful for scheduling": 1}}},
    "claim": "stored", "after_class_created": "bound to the node"}, controllers=True)
def probe_dra_missing_device_class_refused_by_prefilter(t):
    node, driver, _class_name, _template = _dra_setup(t)
    missing = t.name("class")
    template = t.name("tmpl")
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": missing}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, template))
    pod = _claim_pod(t, node, template)
    before = _scheduled(_wait_scheduled(t, pod), node)
    claim = "stored" if t.req("GET", "%s/namespaces/%s/resourceclaims/%s" % (
        DRA, t.namespace, _pod_claim(t, pod)["resourceClaimName"]))[0] == 200 else "absent"
    _device_class(t, _cel('device.driver == "%s"' % driver), name=missing)
    deadline = time.time() + 30
    while not t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["spec"].get("nodeName"):
        if time.time() > deadline:
            break
        time.sleep(0.2)
    after = _scheduled(("bound", t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["spec"].get("nodeName"))
                       if time.time() <= deadline else ("pending", "not bound after 30 s"), node)
    return json.loads(json.dumps({"before": before, "claim": claim, "after_class_created": after}).replace(missing, "<class>"))
