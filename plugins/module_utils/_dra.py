# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation (``resource.k8s.io``): served-version discovery, shape conversion
between API versions, input validation, and raw requests for kinds the generated client lacks.

Private to the collection: the interface may change without notice.

Facts come from the Kubernetes sources, release 1.34/1.35 (``staging/src/k8s.io/api/resource/
{v1,v1beta2,v1beta1}/types.go``, ``pkg/apis/resource/validation/validation.go``) and from the
measurements in the shared apiserver facts (DRA on kube-apiserver v1.36.2).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    escape_pointer,
    extended_resource_name_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_RE,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ObjectTask,
    TaskFailed,
    label_map,
    update_body,
)

CEL_IMPORT_ERROR = None
try:
    # cel-python (PyPI cel-python, module celpy): optional; without it the apiserver's dry run decides.
    import celpy

    HAS_CEL = True
except ImportError:  # pragma: no cover - depends on the environment
    celpy = None
    HAS_CEL = False
    CEL_IMPORT_ERROR = "cel-python is not installed"

GROUP = "resource.k8s.io"
# Most preferred first. v1 is GA since Kubernetes 1.34; v1beta2 came with 1.33 and v1beta1 with 1.32,
# both off by default (they need --runtime-config and, before 1.34, the DynamicResourceAllocation gate).
VERSIONS = ("v1", "v1beta2", "v1beta1")
VERSION_SINCE = {"v1": "1.34", "v1beta2": "1.33", "v1beta1": "1.32"}

# Limits of pkg/apis/resource (types.go constants), checked here before any request.
DEVICE_SELECTORS_MAX = 32           # DeviceSelectorsMaxSize
DEVICE_CONFIG_MAX = 32              # DeviceConfigMaxSize
CEL_EXPRESSION_MAX_LENGTH = 10 * 1024   # CELSelectorExpressionMaxLength
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024    # OpaqueParametersMaxLength
DRIVER_NAME_MAX = 63                # DriverNameMaxLength (ValidateCSIDriverName)


# -- requests -------------------------------------------------------------------------------------

class DraApi(object):
    """Requests on resource.k8s.io kinds through the generic custom-objects API of the generated client.

    Older clients have no typed API for DRA kinds; the custom-objects calls take any group, version and
    plural and carry dicts both ways, in every client version the collection supports (24 to 37).
    """

    def __init__(self, client, version=None):
        import kubernetes  # the caller made a KubeClient, so the library is there

        self.client = client
        self.version = version
        self.custom = kubernetes.client.CustomObjectsApi(client.api_client)
        self.apis = kubernetes.client.ApisApi(client.api_client)
        self.version_api = kubernetes.client.VersionApi(client.api_client)
        self.delete_options = kubernetes.client.V1DeleteOptions
        self.preconditions = kubernetes.client.V1Preconditions

    def server_version(self):
        """gitVersion of the apiserver, or None when /version cannot be read."""
        try:
            return self.client.call_json(self.version_api.get_code, what="read the server version").get("gitVersion")
        except KubeHwError:
            return None

    def served_versions(self):
        """The versions of resource.k8s.io the apiserver serves (empty when the group is absent)."""
        groups = self.client.call_json(self.apis.get_api_versions, what="discover the served API groups")
        for group in groups.get("groups") or []:
            if group.get("name") == GROUP:
                return [v.get("version") for v in group.get("versions") or [] if v.get("version")]
        return []

    def discover(self):
        """Set and return the version to talk to; KubeHwError (reason NotServed) naming what the cluster needs."""
        served = self.served_versions()
        self.version = choose_version(served)
        if self.version is None:
            raise KubeHwError(not_served_message(self.server_version(), served), status=404, reason="NotServed")
        return self.version

    def get(self, plural, name, what):
        """The object, or None when it does not exist."""
        try:
            return self.client.call_json(self.custom.get_cluster_custom_object, GROUP, self.version, plural, name,
                                         what=what)
        except KubeHwError as err:
            if err.status == 404:
                return None
            raise

    def _finder(self, plural, name):
        """How create_json / replace_json read the object again after a write whose answer was lost."""
        return self.client.finder(self.custom.get_cluster_custom_object, GROUP, self.version, plural, name,
                                  what="read %s %r again after a write whose answer was lost" % (plural, name))

    def create(self, plural, body, what, dry_run=False):
        """POST the object. A dry run stores nothing, so it is simply retried; a real create goes through
        the client layer's create_json: after a lost answer (5xx, reset) the object is looked for by name
        before anything is sent again, so the create neither fails nor runs twice."""
        if dry_run:
            return self.client.call_json(self.custom.create_cluster_custom_object, GROUP, self.version, plural,
                                         body, what=what, dry_run="All")
        name = (body.get("metadata") or {}).get("name")
        return self.client.create_json(self.custom.create_cluster_custom_object, GROUP, self.version, plural, body,
                                       what=what, find=self._finder(plural, name))

    def replace(self, plural, name, body, what, dry_run=False):
        """PUT the object guarded by its resourceVersion; through replace_json unless a dry run, so a PUT
        whose answer was lost and whose repeat meets 409 Conflict is recognised as applied."""
        if dry_run:
            return self.client.call_json(self.custom.replace_cluster_custom_object, GROUP, self.version, plural,
                                         name, body, what=what, dry_run="All")
        return self.client.replace_json(self.custom.replace_cluster_custom_object, GROUP, self.version, plural,
                                        name, body, what=what, find=self._finder(plural, name))

    def list(self, plural, what):
        """Every object of a cluster-wide list (all namespaces for claims), in pages where the client can."""
        fn = self.custom.list_cluster_custom_object
        list_all = getattr(self.client, "list_all", None)
        if list_all is not None:
            return list_all(fn, GROUP, self.version, plural, what=what).get("items") or []
        return self.client.call_json(fn, GROUP, self.version, plural, what=what).get("items") or []

    # -- namespaced kinds (ResourceClaimTemplates, ResourceClaims) ------------------------------------

    def create_namespaced(self, plural, namespace, body, what, find):
        """POST a namespaced object once: after a lost answer ``find()`` looks for it (by the run label of a
        generateName object) before anything is sent again (the client layer's create_json)."""
        return self.client.create_json(self.custom.create_namespaced_custom_object, GROUP, self.version, namespace,
                                       plural, body, what=what, find=find)

    def list_namespaced(self, plural, namespace, what, label_selector=None):
        kwargs = dict(what=what)
        if label_selector:
            kwargs["label_selector"] = label_selector
        return self.client.list_all(self.custom.list_namespaced_custom_object, GROUP, self.version, namespace,
                                    plural, **kwargs).get("items") or []

    def delete_namespaced(self, plural, namespace, name, what):
        """Delete a namespaced object; False when it was already gone."""
        try:
            self.client.call_json(self.custom.delete_namespaced_custom_object, GROUP, self.version, namespace,
                                  plural, name, what=what)
        except KubeHwError as err:
            if err.status == 404:
                return False
            raise
        return True

    def watch_namespaced(self, plural, namespace, predicate, timeout, what, **selectors):
        """Follow a watch on a namespaced kind (client.watch) until ``predicate(objects)``."""
        return self.client.watch(self.custom.list_namespaced_custom_object, predicate, timeout, what=what,
                                 group=GROUP, version=self.version, namespace=namespace, plural=plural, **selectors)

    def delete(self, plural, name, uid, what):
        """Delete with the uid that was read as precondition; False when it was already gone."""
        body = self.delete_options(preconditions=self.preconditions(uid=uid)) if uid else None
        try:
            self.client.call_json(self.custom.delete_cluster_custom_object, GROUP, self.version, plural, name,
                                  body=body, what=what)
        except KubeHwError as err:
            if err.status == 404:
                return False
            raise
        return True


def not_served_message(running, served):
    where = " (this cluster runs %s)" % running if running else ""
    if served:
        have = "only %s" % ", ".join("%s/%s" % (GROUP, v) for v in served)
    else:
        have = "no %s API at all" % GROUP
    return ("The API group %s is not served in a version this module speaks%s: the cluster offers %s. "
            "DeviceClasses need %s/v1 (Kubernetes 1.34 or later, on by default), or v1beta2 (1.33) or v1beta1 "
            "(1.32) enabled with --runtime-config=%s/<version>=true and the DynamicResourceAllocation feature "
            "gate." % (GROUP, where, have, GROUP, GROUP))


def choose_version(served):
    """The most preferred version of VERSIONS in ``served``, or None."""
    for version in VERSIONS:
        if version in served:
            return version
    return None


# -- conversion between versions -----------------------------------------------------------------
# The module works with v1 shapes. DeviceClass is the same in v1, v1beta2 and v1beta1 (selectors, config,
# extendedResourceName); only apiVersion changes. ResourceSlice devices wrap their fields in `basic` in
# v1beta1 only, and claim requests put the single-device fields under `exactly` from v1beta2 on.

EXACT_REQUEST_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                        "capacity")


def device_class_to_version(obj, version):
    out = copy.deepcopy(obj)
    out["apiVersion"] = "%s/%s" % (GROUP, version)
    return out


def device_class_from_version(obj):
    out = copy.deepcopy(obj)
    if out.get("apiVersion"):
        out["apiVersion"] = "%s/v1" % GROUP
    return out


def slice_to_v1(obj, version):
    """A ResourceSlice as read in ``version``, in the v1 shape (devices without the v1beta1 ``basic``)."""
    out = copy.deepcopy(obj)
    if version == "v1beta1":
        devices = []
        for device in (out.get("spec") or {}).get("devices") or []:
            flat = {"name": device.get("name")}
            flat.update(device.get("basic") or {})
            devices.append(flat)
        if "spec" in out and "devices" in out["spec"]:
            out["spec"]["devices"] = devices
    if out.get("apiVersion"):
        out["apiVersion"] = "%s/v1" % GROUP
    return out


def slice_from_v1(obj, version):
    out = copy.deepcopy(obj)
    if version == "v1beta1":
        devices = []
        for device in (out.get("spec") or {}).get("devices") or []:
            rest = dict((k, v) for k, v in device.items() if k != "name")
            devices.append({"name": device.get("name"), "basic": rest})
        if "spec" in out and "devices" in out["spec"]:
            out["spec"]["devices"] = devices
    out["apiVersion"] = "%s/%s" % (GROUP, version)
    return out


def _requests(spec):
    return ((spec or {}).get("devices") or {}).get("requests")


def claim_spec_to_v1(spec, version):
    """A ResourceClaimSpec as read in ``version``, in the v1 shape (requests with ``exactly``)."""
    out = copy.deepcopy(spec or {})
    if version == "v1beta1" and _requests(out) is not None:
        converted = []
        for req in _requests(out):
            exact = dict((k, req[k]) for k in EXACT_REQUEST_FIELDS if k in req)
            new = dict((k, v) for k, v in req.items() if k not in EXACT_REQUEST_FIELDS)
            if exact and not new.get("firstAvailable"):
                new["exactly"] = exact
            converted.append(new)
        out["devices"]["requests"] = converted
    return out


def claim_spec_from_v1(spec, version):
    out = copy.deepcopy(spec or {})
    if version == "v1beta1" and _requests(out) is not None:
        converted = []
        for req in _requests(out):
            new = dict((k, v) for k, v in req.items() if k != "exactly")
            new.update(req.get("exactly") or {})
            converted.append(new)
        out["devices"]["requests"] = converted
    return out


# The name of the one request (and pod claim) of the claim templates the collection writes.
SMOKE_REQUEST = "device"


def claim_template(name_prefix, namespace, labels, device_class, count, version):
    """A ResourceClaimTemplate asking for ``count`` devices of ``device_class`` (one request named "device"),
    in the shape of ``version``: the request's fields under ``exactly`` in v1 and v1beta2, flat in v1beta1.

    ``labels`` go on the template and, through ``spec.metadata``, on every claim made from it, so the claims
    of a run can be found by label (the resource claim controller copies spec.metadata into the claim).
    """
    spec = {"devices": {"requests": [{"name": SMOKE_REQUEST, "exactly": {
        "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}}]}}
    return {"apiVersion": "%s/%s" % (GROUP, version), "kind": "ResourceClaimTemplate",
            "metadata": {"generateName": name_prefix, "namespace": namespace, "labels": dict(labels)},
            "spec": {"metadata": {"labels": dict(labels)}, "spec": claim_spec_from_v1(spec, version)}}


def allocation_results(claim):
    """The devices allocated to a claim: [{request, driver, pool, device}] (empty when not allocated)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [dict((k, r.get(k)) for k in ("request", "driver", "pool", "device"))
            for r in (allocation.get("devices") or {}).get("results") or []]


def allocated_node(claim):
    """The node an allocated claim is tied to by its allocation's node selector (matchFields metadata.name)."""
    return _allocated_node(claim, {})


# -- validation -----------------------------------------------------------------------------------

def device_class_name_problem(name):
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN_RE.match(name):
        return ("must be a lowercase RFC 1123 DNS subdomain (a-z, 0-9, '-' and '.', at most %d characters, "
                "starting and ending with a letter or digit)" % DNS1123_SUBDOMAIN_MAX)
    return None


def driver_name_problem(name):
    """As the apiserver checks a DRA driver name (ValidateCSIDriverName): a DNS subdomain of at most 63 characters.

    The apiserver compares in lower case; drivers are asked to use lower case only, and so does this module,
    because the kubelet plugin registers the name as written.
    """
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > DRIVER_NAME_MAX:
        return "must be no more than %d characters, got %d" % (DRIVER_NAME_MAX, len(name))
    if not DNS1123_SUBDOMAIN_RE.match(name):
        return ("must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or "
                "digit), and should end with a domain the driver's vendor owns, such as gpu.nvidia.com")
    return None


def cel_problem(expression, compile_fn=None):
    """Why a CEL selector expression is refused before any request, or None.

    Syntax is checked locally when cel-python is importable (``compile_fn`` replaces it in tests); type errors
    such as ``device.driver + 1`` are left to the apiserver, whose compiler knows the DRA environment.
    """
    if not isinstance(expression, str) or not expression.strip():
        return "must be a non-empty CEL expression"
    if len(expression) > CEL_EXPRESSION_MAX_LENGTH:
        return "must be no more than %d characters, got %d" % (CEL_EXPRESSION_MAX_LENGTH, len(expression))
    if compile_fn is None and HAS_CEL:
        compile_fn = celpy.Environment().compile
    if compile_fn is None:
        return None
    try:
        compile_fn(expression)
    except Exception as err:  # pylint: disable=broad-except
        # celpy raises CELParseError with line and column; anything else from the library counts the same.
        line, column = getattr(err, "line", None), getattr(err, "column", None)
        where = " at line %s, column %s" % (line, column) if line is not None else ""
        first = ("%s" % err).strip().splitlines()[0] if ("%s" % err).strip() else type(err).__name__
        return "is not valid CEL: syntax error%s near %r (checked locally with cel-python)" % (where, first)
    return None


def parameters_problem(parameters):
    if parameters is None:
        return "is required (the driver's own configuration object, for example {apiVersion, kind, ...})"
    try:
        text = json.dumps(parameters, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as err:
        return "must be JSON data: %s" % err
    if len(text) > OPAQUE_PARAMETERS_MAX_LENGTH:
        return "must be no more than %d bytes as JSON, got %d" % (OPAQUE_PARAMETERS_MAX_LENGTH, len(text))
    return None


def extended_name_problem(name):
    return extended_resource_name_problem(name)


# -- reporting ------------------------------------------------------------------------------------

def _attribute_value(attribute):
    """A device attribute ({"string": "a100"}, {"int": 0}, {"bool": true}, {"version": "1.2.3"}) as a plain value."""
    if isinstance(attribute, dict):
        for key in ("string", "int", "bool", "version"):
            if key in attribute:
                return attribute[key]
        for key in ("strings", "ints", "bools", "versions"):
            if key in attribute:
                return attribute[key]
    return attribute


def current_pools(slices, version="v1"):
    """The one definition of what a driver has published: (driver, pool name) -> the pool's newest generation.

    Per pool only the slices of the newest ``spec.pool.generation`` count (older ones are leftovers the scheduler
    ignores), and the pool is complete once as many slices of that generation exist as its
    ``resourceSliceCount`` says; the scheduler uses no device of an incomplete pool, so neither does anything
    that counts devices here. Each value: {"driver", "pool", "generation", "expected", "slices": [v1 slices],
    "complete"}."""
    pools = {}
    for item in slices:
        item = slice_to_v1(item, version)
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver"), pool.get("name"))
        generation = pool.get("generation") or 0
        entry = pools.get(key)
        if entry is None or generation > entry["generation"]:
            entry = pools[key] = {"driver": key[0], "pool": key[1], "generation": generation,
                                  "expected": pool.get("resourceSliceCount") or 1, "slices": []}
        elif generation < entry["generation"]:
            continue
        entry["slices"].append(item)
    for entry in pools.values():
        entry["complete"] = len(entry["slices"]) >= entry["expected"]
    return pools


def published_devices(slices, version="v1"):
    """Node name -> the devices drivers published for it in complete pools (current_pools), sorted by driver, pool
    and name.

    Slices that are not tied to one node (nodeSelector, allNodes) are reported under the key None.
    """
    nodes = {}
    for entry in current_pools(slices, version).values():
        if not entry["complete"]:
            continue
        for item in entry["slices"]:
            spec = item.get("spec") or {}
            node = spec.get("nodeName") or None
            for device in spec.get("devices") or []:
                nodes.setdefault(node, []).append({
                    "driver": spec.get("driver"),
                    "pool": (spec.get("pool") or {}).get("name"),
                    "device": device.get("name"),
                    "attributes": dict((k, _attribute_value(v)) for k, v in (device.get("attributes") or {}).items()),
                    "capacity": dict((k, (v or {}).get("value") if isinstance(v, dict) else v)
                                     for k, v in (device.get("capacity") or {}).items()),
                })
    for devices in nodes.values():
        devices.sort(key=lambda d: (d["driver"] or "", d["pool"] or "", d["device"] or ""))
    return nodes


def published_by_node(slices, driver, version="v1"):
    """node -> {"pools": {pool: state}, "devices": [names]} for one driver, from current_pools: the devices of
    complete pools only, and each pool's state (generation, slices, expected, complete) so that a wait can say
    what is missing. Slices not tied to one node are skipped."""
    nodes = {}
    for (pool_driver, pool_name), entry in sorted(current_pools(slices, version).items(),
                                                  key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
        if pool_driver != driver:
            continue
        by_node = {}
        for item in entry["slices"]:
            node = (item.get("spec") or {}).get("nodeName")
            if node:
                by_node.setdefault(node, []).append(item)
        for node, items in by_node.items():
            out = nodes.setdefault(node, {"pools": {}, "devices": []})
            out["pools"][pool_name] = {"generation": entry["generation"], "slices": len(entry["slices"]),
                                       "expected": entry["expected"], "complete": entry["complete"]}
            if entry["complete"]:
                out["devices"].extend(d.get("name") for i in items for d in (i.get("spec") or {}).get("devices") or [])
    for out in nodes.values():
        out["devices"].sort()
    return nodes


def nodes_missing_devices(published, node_names, min_count):
    """{node: what is missing} for the nodes that have not published min_count devices in complete pools."""
    missing = {}
    for node in node_names:
        entry = published.get(node)
        if entry is None:
            missing[node] = "no ResourceSlice"
            continue
        incomplete = ["pool %s has %d of %d slices of generation %d" % (p, s["slices"], s["expected"], s["generation"])
                      for p, s in sorted(entry["pools"].items()) if not s["complete"]]
        if len(entry["devices"]) < min_count:
            text = "%d of %d devices" % (len(entry["devices"]), min_count)
            if incomplete:
                text += " (%s)" % "; ".join(incomplete)
            missing[node] = text
    return missing


def node_results(published, node_names, driver):
    return [{"name": node, "driver": driver, "pools": sorted((published.get(node) or {}).get("pools") or {}),
             "devices": list((published.get(node) or {}).get("devices") or []),
             "device_count": len((published.get(node) or {}).get("devices") or [])}
            for node in sorted(node_names)]


def _allocated_node(claim, device_nodes):
    """The node an allocated claim is bound to: its allocation's node selector, else the node of its devices."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
                return field["values"][0]
    for result in (allocation.get("devices") or {}).get("results") or []:
        node = device_nodes.get((result.get("driver"), result.get("pool"), result.get("device")))
        if node:
            return node
    return None


def claim_consumers(pods):
    """(namespace, claim name) -> the pods that use that claim: by ``spec.resourceClaims[].resourceClaimName``
    or, for claims made from a template, by the pod's ``status.resourceClaimStatuses``."""
    users = {}
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        names = set(entry.get("resourceClaimName") for entry in (pod.get("spec") or {}).get("resourceClaims") or [])
        names.update(s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
        extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        names.add(extended)
        for name in names:
            if name:
                users.setdefault((meta.get("namespace"), name), []).append(pod)
    return users


def _scheduling_problem(pod):
    """The pod's PodScheduled=False condition as {pod, reason, message}, or None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return {"pod": (pod.get("metadata") or {}).get("name"), "reason": cond.get("reason"),
                    "message": cond.get("message")}
    return None


def claim_report(claims, devices_by_node, consumers=None):
    """(node name -> allocated claims, pending claims) from ResourceClaims in the v1 shape.

    ``consumers`` ((namespace, claim) -> pods, from claim_consumers) names the pods waiting for a pending
    claim and the scheduler's reason (their ``PodScheduled=False`` condition)."""
    device_nodes = {}
    for node, devices in devices_by_node.items():
        for dev in devices:
            device_nodes[(dev["driver"], dev["pool"], dev["device"])] = node
    allocated, pending = {}, []
    for claim in claims:
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        entry = {"namespace": meta.get("namespace"), "name": meta.get("name"),
                 "reserved_for": ["%s/%s" % (r.get("resource"), r.get("name")) for r in status.get("reservedFor") or []]}
        if status.get("allocation"):
            entry["devices"] = ["%s/%s/%s" % (r.get("driver"), r.get("pool"), r.get("device"))
                                for r in ((status["allocation"].get("devices") or {}).get("results") or [])]
            node = _allocated_node(claim, device_nodes)
            entry["node"] = node
            allocated.setdefault(node, []).append(entry)
        else:
            entry["requests"] = [r.get("name") for r in _requests(claim.get("spec")) or []]
            waiting = (consumers or {}).get((meta.get("namespace"), meta.get("name"))) or []
            entry["pods"] = sorted((p.get("metadata") or {}).get("name") for p in waiting)
            problems = [x for x in (_scheduling_problem(p) for p in waiting) if x]
            if problems:
                problems.sort(key=lambda x: x["pod"] or "")
                entry.update(reason=problems[0]["reason"], message=problems[0]["message"])
            pending.append(entry)
    return allocated, pending


def report(api, node_names=None, pods=None, list_pods=None):
    """What DRA drivers published and which claims are allocated, per node (all nodes when node_names is None).

    The pods that wait for a pending claim come from ``pods`` (every pod, when the caller listed them) or,
    only when some claim is pending, from ``list_pods()``. Never fails for a cluster without resource.k8s.io:
    ``served`` is then false.
    """
    version = choose_version(api.served_versions())
    if version is None:
        return {"served": False}
    api.version = version
    slices = api.list("resourceslices", what="list ResourceSlices")
    claims = [dict(c, spec=claim_spec_to_v1(c.get("spec"), version))
              for c in api.list("resourceclaims", what="list ResourceClaims")]
    devices = published_devices(slices, version)
    if pods is None and list_pods is not None and any(not (c.get("status") or {}).get("allocation") for c in claims):
        pods = list_pods()
    allocated, pending = claim_report(claims, devices, claim_consumers(pods))
    wanted = set(node_names) if node_names is not None else set(n for n in list(devices) + list(allocated) if n)
    nodes = dict((name, {"devices": devices.get(name, []), "claims": allocated.get(name, [])})
                 for name in sorted(wanted))
    return {"served": True, "api_version": "%s/%s" % (GROUP, version), "nodes": nodes,
            "pending_claims": pending}


# -- DeviceClasses: the task's input, comparison and writes (dra_device_class, and any module that manages one) --
# Other modules (dra_driver_deploy) call manage_device_class(DraApi(client), params, check_mode) with the same
# params as dra_device_class's options; it raises DeviceClassSpecError before any request for a bad input.

DEVICE_CLASSES = "deviceclasses"
DEVICE_CLASS_SPEC_FIELDS = ("selectors", "config", "extendedResourceName")
GATE_MESSAGE = ("the apiserver dropped spec.extendedResourceName %r from %s: it needs Kubernetes 1.34 or later with "
                "the DRAExtendedResource feature gate on (beta and on by default from 1.36). Nothing was stored.")


class DeviceClassSpecError(ValueError):
    """Invalid input: the message names the offending value and the rule it breaks."""


def _device_class_labels(mapping):
    out = label_map(mapping, "labels", DeviceClassSpecError)
    if MANAGED_BY_LABEL in out:
        raise DeviceClassSpecError("labels must not set %r: the module owns it (it marks what it created)"
                                   % MANAGED_BY_LABEL)
    out[MANAGED_BY_LABEL] = MANAGED_BY
    return out


def build_device_class(params, cel_compile=None):
    """Validate a DeviceClass task's input (dra_device_class's options: name, state, selectors, config,
    extended_resource_name, labels); return the DeviceClass (v1 shape) it describes, None for state=absent."""
    name = params["name"]
    problem = device_class_name_problem(name)
    if problem:
        raise DeviceClassSpecError("name %r %s" % (name, problem))
    if params.get("state", "present") == "absent":
        return None
    spec = {}
    selectors = params.get("selectors") or []
    if len(selectors) > DEVICE_SELECTORS_MAX:
        raise DeviceClassSpecError("selectors has %d entries; the API allows at most %d"
                                   % (len(selectors), DEVICE_SELECTORS_MAX))
    for index, expression in enumerate(selectors):
        problem = cel_problem(expression, compile_fn=cel_compile)
        if problem:
            raise DeviceClassSpecError("selectors[%d] %r %s" % (index, expression, problem))
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    config = params.get("config") or []
    if len(config) > DEVICE_CONFIG_MAX:
        raise DeviceClassSpecError("config has %d entries; the API allows at most %d" % (len(config), DEVICE_CONFIG_MAX))
    entries = []
    for index, entry in enumerate(config):
        problem = driver_name_problem(entry.get("driver"))
        if problem:
            raise DeviceClassSpecError("config[%d].driver %r %s" % (index, entry.get("driver"), problem))
        problem = parameters_problem(entry.get("parameters"))
        if problem:
            raise DeviceClassSpecError("config[%d].parameters %s" % (index, problem))
        entries.append({"opaque": {"driver": entry["driver"], "parameters": copy.deepcopy(entry["parameters"])}})
    if entries:
        spec["config"] = entries
    extended = params.get("extended_resource_name")
    if extended is not None:
        problem = extended_name_problem(extended)
        if problem:
            raise DeviceClassSpecError("extended_resource_name %r %s" % (extended, problem))
        spec["extendedResourceName"] = extended
    return {"apiVersion": "%s/v1" % GROUP, "kind": "DeviceClass",
            "metadata": {"name": name, "labels": _device_class_labels(params.get("labels"))}, "spec": spec}


def _canonical(value):
    # Parameters are data: compare them as JSON with sorted keys; empty lists and absent fields are the same.
    return json.dumps(value or None, sort_keys=True)


def device_class_differences(desired, live):
    """JSON pointers where the live DeviceClass (v1 shape) differs from the one the task describes."""
    paths = []
    want, have = desired.get("spec") or {}, live.get("spec") or {}
    for field in DEVICE_CLASS_SPEC_FIELDS:
        if _canonical(want.get(field)) != _canonical(have.get(field)):
            paths.append("/spec/%s" % field)
    live_labels = (live.get("metadata") or {}).get("labels") or {}
    for key, value in sorted(desired["metadata"]["labels"].items()):
        if live_labels.get(key) != value:
            paths.append("/metadata/labels/%s" % escape_pointer(key))
    return paths


def device_class_replace_body(desired, live):
    """A PUT body: our spec (whole), our labels over the live metadata, guarded by its resourceVersion."""
    body = update_body(desired, live)
    body["spec"] = copy.deepcopy(desired.get("spec") or {})
    return body


class DeviceClassTask(ObjectTask):
    """One DeviceClass: discover the served version, then the ObjectTask skeleton; every request through
    ``api`` (a DraApi). Check mode sends creates and updates as server-side dry runs; a delete is predicted."""

    kind = "DeviceClass"
    result_key = "device_class"

    def __init__(self, api, params, check_mode):
        super(DeviceClassTask, self).__init__(params["name"], params, check_mode)
        self.api = api
        self.version = None
        self.wants = True

    def fresh_result(self):
        result = super(DeviceClassTask, self).fresh_result()
        result["api_version"] = "%s/%s" % (GROUP, self.version)
        if self.wants:
            result["cel_validation"] = "local syntax check (cel-python) and server" if HAS_CEL else "server"
            if self.check_mode:
                result["cel_validation"] += " dry run"
        return result

    def run(self, desired):
        # A DraApi that has discovered (dra_driver_deploy's, before its classes) keeps that version: one GET /apis a run
        self.version = self.api.version or self.api.discover()
        self.wants = desired is not None
        extended = ((desired or {}).get("spec") or {}).get("extendedResourceName")
        if extended is not None and self.version != "v1":
            # The field came with KEP-5004 in Kubernetes 1.34, which serves resource.k8s.io/v1; a cluster that
            # serves only an older version cannot keep it.
            raise TaskFailed("extended_resource_name %r needs %s/v1 (Kubernetes 1.34 or later, with the "
                             "DRAExtendedResource feature gate); this cluster serves %s/%s. Nothing was written."
                             % (extended, GROUP, GROUP, self.version))
        super(DeviceClassTask, self).run(desired)

    def read(self):
        live = self.api.get(DEVICE_CLASSES, self.name, what="read " + self.label)
        return device_class_from_version(live) if live is not None else None

    def differences(self, desired, live):
        return device_class_differences(desired, live)

    def _check_kept(self, desired, answer):
        """Fail when the server dropped extendedResourceName (its feature gate is off)."""
        wanted = (desired.get("spec") or {}).get("extendedResourceName")
        if wanted is not None and ((answer or {}).get("spec") or {}).get("extendedResourceName") != wanted:
            raise TaskFailed(GATE_MESSAGE % (wanted, self.label))

    def _write(self, action, desired, send):
        """Dry run first where the answer decides (check mode, extendedResourceName), then the write."""
        if self.check_mode or (desired.get("spec") or {}).get("extendedResourceName") is not None:
            answer = send(True)
            self._check_kept(desired, answer)
            if self.check_mode:
                self.result.update(action=action, changed=True, device_class=answer)
                return
        answer = send(False)
        self.result.update(action=action, changed=True, device_class=answer)
        self._check_kept(desired, answer)

    def create(self, desired):
        body = device_class_to_version(desired, self.version)
        self._write("created", desired, lambda dry: self.api.create(
            DEVICE_CLASSES, body, what=("validate (dry run) " if dry else "create ") + self.label, dry_run=dry))

    def update(self, desired, live, paths):
        body = device_class_to_version(device_class_replace_body(desired, live), self.version)
        self.set_diff(live, body)
        self._write("updated", desired, lambda dry: self.api.replace(
            DEVICE_CLASSES, self.name, body,
            what=("validate (dry run) an update of " if dry else "replace ") + self.label, dry_run=dry))

    def delete(self, live):
        self.result.update(action="deleted", changed=True, device_class=None)
        if self.check_mode:
            return
        if not self.api.delete(DEVICE_CLASSES, self.name, (live.get("metadata") or {}).get("uid"),
                               what="delete " + self.label):
            # Someone else deleted it in between: not our change.
            self.result.update(action="none", changed=False)


def manage_device_class(api, params, check_mode=False):
    """Bring one DeviceClass to what ``params`` (dra_device_class's options: name, state, selectors, config,
    extended_resource_name, labels, adopt) describe, through ``api`` (a DraApi on a KubeClient).

    Returns the finished DeviceClassTask: ``.result`` (changed, action, device_class, api_version, changed_paths,
    cel_validation), ``.diff`` (before/after) and ``.warnings`` (for module.warn). Raises DeviceClassSpecError
    before any request for a bad input, KubeHwError or TaskFailed for what the cluster answered.
    """
    desired = build_device_class(params)
    task = DeviceClassTask(api, params, check_mode)
    task.run(desired)
    return task
