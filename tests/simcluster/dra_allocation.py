# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA on the scheduler's side and the resource claim controller: claims from templates, the DynamicResources
plugin's PreEnqueue, PreFilter, Filter and PostFilter, allocation and reservation of simple claims before
binding, and extended resources a DeviceClass maps (``extendedResourceName``, KEP-5004) served by DRA on nodes
that do not advertise them. controllers.py's scheduler calls ``waiting_for_claims``, ``prefilter_rejection``,
``device_plugin_requests``, ``claim_filter_reasons``, ``allocate_claims``, ``post_filter_message`` and
``claims_signature``; the kubelet plugins' loop (kubelets.py) runs ``sync_claims``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from tests.simcluster.cel import selector_matches


POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# The scheduler puts it on a claim it allocates (dynamicresources.go bindClaim, resourceapi.Finalizer); the resource
# claim controller removes it with the allocation once no pod uses the claim, so a claim deleted while in use stays
# (deletionTimestamp set) until then.
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
NO_ALLOCATION = "cannot allocate all claims"


def _pod_claims(pod):
    """(pod claim name, ResourceClaim name or None while its template's claim is not created) per pod claim."""
    statuses = dict((s.get("name"), s.get("resourceClaimName"))
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        out.append((entry.get("name"), entry.get("resourceClaimName") or statuses.get(entry.get("name"))))
    return out


def _node_devices(store, node):
    slices, _rv = store.list("resourceslices")
    newest = {}
    for item in slices:
        spec = item.get("spec") or {}
        key = (spec.get("driver"), (spec.get("pool") or {}).get("name"))
        newest[key] = max(newest.get(key, 0), (spec.get("pool") or {}).get("generation") or 0)
    devices = []
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        if spec.get("nodeName") != node or pool.get("generation", 0) != newest[(spec.get("driver"), pool.get("name"))]:
            continue
        for dev in spec.get("devices") or []:
            devices.append(dict(dev, driver=spec.get("driver"), pool=pool.get("name")))
    return devices


def _taken(store):
    claims, _rv = store.list("resourceclaims")
    return set((r.get("driver"), r.get("pool"), r.get("device")) for c in claims
               for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])


def _allocated_node(claim):
    for term in ((((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {})
                 .get("nodeSelectorTerms") or []):
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


# -- extended resources served by DRA (KEP-5004, DRAExtendedResource) ------------------------------------
# Read from kubernetes/kubernetes pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go
# and extended/util.go (master, late 2025; alpha in 1.34, beta in 1.36): a DeviceClass maps the extended
# resource named by spec.extendedResourceName, and always deviceclass.resource.kubernetes.io/<class name>. On a
# node whose allocatable has none of a mapped resource, DRA serves the pod's request for it: the scheduler
# builds one special claim for the pod (generateName "<pod>-extended-resources-", annotation
# resource.kubernetes.io/extended-resource-claim: "true", the pod as controller owner), one request per
# container and resource named container-<i>-request-<j> (i over initContainers + containers, j the index of
# the resource among the container's sorted request names; exactly: the class, ExactCount, the quantity),
# creates it in PreBind with the allocation, and patches the pod's status.extendedResourceClaimStatus
# {requestMappings: [{containerName, resourceName, requestName}], resourceClaimName}. A node whose allocatable
# has the resource (a device plugin advertises it) is left to NodeResourcesFit, not DRA.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_classes(store):
    """{extended resource name: DeviceClass name}. Where two classes name the same resource, the one created
    later wins, and among classes created in the same second the first by name (the DeviceClassSpec
    extendedResourceName comment, staging/src/k8s.io/api/resource/v1/types.go)."""
    classes, _rv = store.list("deviceclasses")
    mapping = {}
    ordered = sorted(classes, key=lambda c: c["metadata"]["name"])
    # stable: equal timestamps keep the name order
    ordered.sort(key=lambda c: c["metadata"].get("creationTimestamp") or "", reverse=True)
    for item in ordered:
        name = item["metadata"]["name"]
        mapping.setdefault(IMPLICIT_EXTENDED_PREFIX + name, name)
        explicit = (item.get("spec") or {}).get("extendedResourceName")
        if explicit:
            mapping.setdefault(explicit, name)
    return mapping


def _is_quantity_zero(value):
    text = str(value if value is not None else "0").strip()
    return re.match(r"^[+]?0*(\.0*)?[a-zA-Z]*$", text) is not None


def dra_served(store, requests, node_obj, mapping=None):
    """{resource: class name} of the pod's extended resource requests (``requests`` as the scheduler computed
    them) that DRA serves on ``node_obj``: mapped to a DeviceClass, and none of it in the node's allocatable."""
    if not any("/" in r for r in requests):
        return {}   # no extended resource asked for (they all have a domain): no list of classes per node
    mapping = extended_resource_classes(store) if mapping is None else mapping
    allocatable = (node_obj.get("status") or {}).get("allocatable") or {}
    return dict((r, mapping[r]) for r, v in requests.items()
                if v and r in mapping and _is_quantity_zero(allocatable.get(r)))


def device_plugin_requests(store, requests, node_obj):
    """The requests NodeResourcesFit checks on ``node_obj``: all but those DRA serves there."""
    served = dra_served(store, requests, node_obj)
    return dict((r, v) for r, v in requests.items() if r not in served) if served else requests


def extended_claim(store, pod):
    """The pod's special claim from an earlier cycle, or None."""
    meta = pod["metadata"]
    claims, _rv = store.list("resourceclaims", meta.get("namespace"))
    for claim in claims:
        cmeta = claim["metadata"]
        if (cmeta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true" and any(
                r.get("uid") == meta.get("uid") and r.get("controller") for r in cmeta.get("ownerReferences") or []):
            return claim
    return None


def _extended_requests(pod, served):
    """The special claim's requests and the pod's request mappings for the resources in ``served``.
    Simplification: init containers get their own requests (upstream lets a non-sidecar init container reuse
    a later container's devices); the collection's pods have no init containers asking for devices."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    requests, mappings = [], []
    for resource in sorted(served):
        for index, container in enumerate(containers):
            res = container.get("resources") or {}
            wanted = dict(res.get("limits") or {})
            wanted.update(res.get("requests") or {})
            if resource not in wanted or _is_quantity_zero(wanted[resource]):
                continue
            name = "container-%d-request-%d" % (index, sorted(wanted).index(resource))
            exact = {"deviceClassName": served[resource], "allocationMode": "ExactCount",
                     "count": int(str(wanted[resource]))}
            requests.append({"name": name, "exactly": exact})
            mappings.append({"containerName": container.get("name"), "resourceName": resource, "requestName": name})
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


def _pick(store, request, devices, taken):
    """Results for one request from the free devices matching its class and selectors, or None."""
    exact = request.get("exactly") or {}
    device_class = store.get("deviceclasses", None, exact.get("deviceClassName") or "")
    if device_class is None:
        return None
    selectors = [s["cel"]["expression"] for s in ((device_class.get("spec") or {}).get("selectors") or []) +
                 (exact.get("selectors") or []) if isinstance(s, dict) and s.get("cel")]
    free = [d for d in devices if (d["driver"], d["pool"], d["name"]) not in taken
            and all(selector_matches(s, d) for s in selectors)]
    want = len(free) if exact.get("allocationMode") == "All" else int(exact.get("count") or 1)
    if not free or len(free) < want:
        return None
    results = []
    for dev in free[:want]:
        taken.add((dev["driver"], dev["pool"], dev["name"]))
        results.append({"request": request.get("name"), "driver": dev["driver"], "pool": dev["pool"],
                        "device": dev["name"]})
    return results


def plan_allocation(store, pod, node, node_obj=None, requests=None):
    """{claim name: results} for the pod's unallocated claims on ``node``, or None when they cannot all be
    allocated there (a claim missing, allocated to another node, or too few matching free devices). The
    special claim for extended resources DRA serves on the node is planned under the key None, as
    (requests, mappings, results)."""
    namespace = pod["metadata"].get("namespace")
    devices = _node_devices(store, node)
    taken = _taken(store)
    plan = {}
    served = dra_served(store, requests, node_obj) if node_obj is not None and requests else {}
    if served:
        if extended_claim(store, pod) is not None:
            # a claim from an earlier cycle: upstream deletes it in PostFilter and tries anew
            return None
        ext_requests, mappings = _extended_requests(pod, served)
        results = []
        for request in ext_requests:
            picked = _pick(store, request, devices, taken)
            if picked is None:
                return None
            results.extend(picked)
        plan[None] = (ext_requests, mappings, results)
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None:
            return None
        if (claim.get("status") or {}).get("allocation"):
            if _allocated_node(claim) not in (None, node):
                return None
            continue
        results = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            picked = _pick(store, request, devices, taken)
            if picked is None:
                return None
            results.extend(picked)
        plan[claim_name] = results
    return plan


def waiting_for_claims(store, pod):
    """Whether the scheduler holds the pod back before trying any node (DynamicResources' PreEnqueue): a claim
    made from a template is not created yet, or a claim it names is missing or being deleted. Such a pod gets no
    PodScheduled condition; the claim's creation brings it back (dynamicresources.go PreEnqueue and
    foreachPodResourceClaim, kubernetes 1.33/1.34)."""
    namespace = pod["metadata"].get("namespace")
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            return True
    return False


def prefilter_rejection(store, pod):
    """The reason DynamicResources' PreFilter refuses the pod before any node is tried, or None: a request of an
    unallocated claim naming a DeviceClass that does not exist. The apiserver accepts such a claim (validation
    checks only that deviceClassName is a DNS subdomain, pkg/apis/resource/validation ValidateDeviceClassName);
    kube-scheduler answers UnschedulableAndUnresolvable "request <request>: device class <name> does not exist"
    (dynamicresources.go validateDeviceClass, kubernetes 1.34), and the pod waits for a DeviceClass event."""
    namespace = pod["metadata"].get("namespace")
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None or (claim.get("status") or {}).get("allocation"):
            continue
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            class_name = (request.get("exactly") or {}).get("deviceClassName")
            if class_name and store.get("deviceclasses", None, class_name) is None:
                return "request %s: device class %s does not exist" % (request.get("name"), class_name)
    return None


# DynamicResources' PostFilter for a pod with claims it tried to allocate and could not (no allocated claim to
# give back): dynamicresources.go PostFilter, kubernetes 1.33/1.34. RunPostFilterPlugins joins the reasons of
# the post-filter plugins (DynamicResources before DefaultPreemption) with ", ".
POST_FILTER_STILL = "still not schedulable"
# The same PostFilter after PreFilter refused the pod: PreFilter returned before recording the pod's claims in
# its cycle state, so PostFilter's fast path answers (state.claims.empty()).
POST_FILTER_NO_CLAIMS = "no new claims to deallocate"


def post_filter_message(pod, prefiltered=False):
    """What DynamicResources' PostFilter adds to the scheduler's message for ``pod``: "no new claims to
    deallocate" for a pod without spec.resourceClaims (its fast path; kube-scheduler v1.36.2 with
    DRAExtendedResource, on by default, says so for every such pod, cpu-only ones included: measured by
    tests/integration/test_facts.py) and after a PreFilter refusal (``prefiltered``), else "still not
    schedulable"."""
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return POST_FILTER_NO_CLAIMS
    return POST_FILTER_NO_CLAIMS if prefiltered else POST_FILTER_STILL


def _needs_dra(store, pod, node_obj, requests):
    return bool((pod.get("spec") or {}).get("resourceClaims")) or bool(
        node_obj is not None and requests and dra_served(store, requests, node_obj))


def claim_filter_reasons(store, pod, node, node_obj=None, requests=None):
    """The scheduler's DynamicResources filter: [] when the pod's claims (and the extended resources DRA
    serves on the node, given ``node_obj`` and the pod's ``requests``) can be allocated on the node.
    A refusal is UnschedulableAndUnresolvable (``statusUnschedulable`` in dynamicresources.go), so preemption
    answers "Preemption is not helpful for scheduling" for that node."""
    if not _needs_dra(store, pod, node_obj, requests):
        return []
    return [] if plan_allocation(store, pod, node, node_obj, requests) is not None else [NO_ALLOCATION]


def _node_selector(node):
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def allocate_claims(store, pod, node, node_obj=None, requests=None):
    """Write the allocation (devices, node selector) and reserve every claim of the pod for it, as the
    scheduler does before binding; create the special claim for extended resources DRA serves and record it
    in the pod's status. Returns False when the claims could not be allocated after all."""
    if not _needs_dra(store, pod, node_obj, requests):
        return True
    plan = plan_allocation(store, pod, node, node_obj, requests)
    if plan is None:
        return False
    namespace, meta = pod["metadata"].get("namespace"), pod["metadata"]
    consumer = {"resource": "pods", "name": meta.get("name"), "uid": meta.get("uid")}
    if None in plan:
        ext_requests, mappings, results = plan.pop(None)
        created = store.create("resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": meta["name"] + "-extended-resources-", "namespace": namespace,
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid"), "controller": True}]},
            "spec": {"devices": {"requests": ext_requests}}})
        claim_name = created["metadata"]["name"]

        def allocate(claim, results=results):
            claim["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": _node_selector(node)},
                               "reservedFor": [dict(consumer)]}
            claim["metadata"]["finalizers"] = [DELETE_PROTECTION]
        store.mutate("resourceclaims", namespace, claim_name, allocate)

        def record(obj, claim_name=claim_name, mappings=mappings):
            obj.setdefault("status", {})["extendedResourceClaimStatus"] = {
                "requestMappings": mappings, "resourceClaimName": claim_name}
        store.mutate("pods", namespace, meta["name"], record)
    for _pod_claim, claim_name in _pod_claims(pod):
        def fn(claim, results=plan.get(claim_name)):
            status = claim.setdefault("status", {})
            if results is not None and not status.get("allocation"):
                status["allocation"] = {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
                finalizers = claim["metadata"].setdefault("finalizers", [])
                if DELETE_PROTECTION not in finalizers:
                    finalizers.append(DELETE_PROTECTION)
            reserved = status.setdefault("reservedFor", [])
            if consumer not in reserved:
                reserved.append(consumer)
        store.mutate("resourceclaims", namespace, claim_name, fn)
    return True


def sync_claims(store):
    """The resource claim controller: claims from templates for pods (named <pod>-<claim>-<random>, owned by
    the pod, listed in its status.resourceClaimStatuses), reservations of pods that are gone dropped, an
    unreserved claim deallocated, generated claims deleted with their pod."""
    import random
    import string

    pods, _rv = store.list("pods")
    live = set(p["metadata"].get("uid") for p in pods if not p["metadata"].get("deletionTimestamp"))
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        have = dict(_pod_claims(pod))
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or have.get(entry.get("name")):
                continue
            template = store.get("resourceclaimtemplates", meta.get("namespace"), template_name)
            if template is None:
                continue
            tspec = template.get("spec") or {}
            name = "%s-%s-%s" % (meta["name"], entry.get("name"),
                                 "".join(random.choices(string.ascii_lowercase + string.digits, k=5)))
            claim_meta = copy.deepcopy(tspec.get("metadata") or {})
            claim_meta.update({"name": name, "namespace": meta.get("namespace")})
            claim_meta.setdefault("annotations", {})[POD_CLAIM_ANNOTATION] = entry.get("name")
            # no blockOwnerDeletion (measured on v1.36.2 by tests/integration/test_facts.py)
            claim_meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid"), "controller": True}]
            store.create("resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                            "metadata": claim_meta, "spec": copy.deepcopy(tspec.get("spec") or {})})

            def record(obj, pod_claim=entry.get("name"), claim_name=name):
                statuses = obj.setdefault("status", {}).setdefault("resourceClaimStatuses", [])
                statuses.append({"name": pod_claim, "resourceClaimName": claim_name})
            store.mutate("pods", meta.get("namespace"), meta["name"], record)
    claims, _rv = store.list("resourceclaims")
    for claim in claims:
        cmeta = claim["metadata"]
        owner = [r for r in cmeta.get("ownerReferences") or [] if r.get("kind") == "Pod" and r.get("controller")]
        if owner and owner[0].get("uid") not in live:
            store.delete("resourceclaims", cmeta.get("namespace"), cmeta["name"])
            continue
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        unused_and_deleted = cmeta.get("deletionTimestamp") and not reserved
        if any(r.get("uid") not in live for r in reserved) or unused_and_deleted:
            def drop(obj):
                status = obj.setdefault("status", {})
                status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") in live]
                if not status["reservedFor"]:
                    # no longer in use: deallocated, and the scheduler's delete protection lifted, so a claim
                    # deleted while in use goes now (pkg/controller/resourceclaim/controller.go syncClaim)
                    status.pop("reservedFor")
                    status.pop("allocation", None)
                    meta = obj["metadata"]
                    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION]
            store.mutate("resourceclaims", cmeta.get("namespace"), cmeta["name"], drop)


def claims_signature(store, pod):
    """Part of the scheduler's memo key: a pod with claims is tried again after any write (slices, claims and
    classes change without a pod or node event); others keep their memo."""
    if not (pod.get("spec") or {}).get("resourceClaims") and not _asks_mapped(store, pod):
        return ""
    return "|dra:%s" % store.resource_version


def _asks_mapped(store, pod):
    mapping = extended_resource_classes(store)
    for container in ((pod.get("spec") or {}).get("containers") or []) + \
            ((pod.get("spec") or {}).get("initContainers") or []):
        res = container.get("resources") or {}
        if any(r in mapping for r in list(res.get("limits") or {}) + list(res.get("requests") or {})):
            return True
    return False
