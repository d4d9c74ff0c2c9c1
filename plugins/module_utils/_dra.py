# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation (``resource.k8s.io``): served-version discovery, raw requests for kinds the
generated client lacks, and shape conversion between API versions.

Private to the collection: the interface may change without notice.
The input rules are in ``_dra_validation.py``, the per-node device and claim report in ``_dra_report.py``,
the DeviceClass task in ``_dra_device_class.py``.

Facts come from the Kubernetes sources, release 1.34/1.35 (``staging/src/k8s.io/api/resource/
{v1,v1beta2,v1beta1}/types.go``, ``pkg/apis/resource/validation/validation.go``) and from the
measurements in the shared apiserver facts (DRA on kube-apiserver v1.36.2).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError

GROUP = "resource.k8s.io"
# Most preferred first. v1 is GA since Kubernetes 1.34; v1beta2 came with 1.33 and v1beta1 with 1.32,
# both off by default (they need --runtime-config and, before 1.34, the DynamicResourceAllocation gate).
VERSIONS = ("v1", "v1beta2", "v1beta1")
VERSION_SINCE = {"v1": "1.34", "v1beta2": "1.33", "v1beta1": "1.32"}


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
