# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation (``resource.k8s.io/v1``): discovery that the cluster serves it, and raw requests for
kinds the generated client lacks.

Private to the collection: the interface may change without notice.
The input rules are in ``_dra_validation.py``, the per-node device and claim report in ``_dra_report.py``,
the DeviceClass task in ``_dra_device_class.py``.

Facts come from the Kubernetes sources, release 1.34/1.35 (``staging/src/k8s.io/api/resource/v1/types.go``,
``pkg/apis/resource/validation/validation.go``) and from docs/kubernetes_facts.md (DRA on kube-apiserver v1.36.2).

Design choice: only ``resource.k8s.io/v1``, which Kubernetes 1.34 made GA and serves by default. The betas
(v1beta1 in 1.32, v1beta2 in 1.33) were off by default, and 1.32 and 1.33 are out of upstream support; a cluster
that does not serve v1 is refused with one line before any write.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError

GROUP = "resource.k8s.io"
VERSION = "v1"
# the Kubernetes release that serves resource.k8s.io/v1 by default
VERSION_SINCE = "1.34"


# -- requests -------------------------------------------------------------------------------------

class DraApi(object):
    """Requests on resource.k8s.io kinds through the client's custom-objects API, which takes any group, version
    and plural and carries dicts both ways."""

    def __init__(self, client, version=None):
        self.client = client
        self.version = version
        self.custom = client.custom
        self.apis = client.apis
        self.version_api = client.version

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
        """Check that the cluster serves resource.k8s.io/v1 and return "v1"; KubeHwError (reason NotServed) naming
        what the cluster has and needs."""
        served = self.served_versions()
        if VERSION not in served:
            raise KubeHwError(not_served_message(self.server_version(), served), status=404, reason="NotServed")
        self.version = VERSION
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
        body = {"preconditions": {"uid": uid}} if uid else None
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
    return ("The API group %s/%s is not served%s: the cluster offers %s. The DRA modules need Kubernetes %s or "
            "later, where %s/%s is on by default (the betas of 1.32 and 1.33 are not supported). Nothing was "
            "written." % (GROUP, VERSION, where, have, VERSION_SINCE, GROUP, VERSION))


def _requests(spec):
    return ((spec or {}).get("devices") or {}).get("requests")


# The name of the one request (and pod claim) of the claim templates the collection writes.
SMOKE_REQUEST = "device"


def claim_template(name_prefix, namespace, labels, device_class, count):
    """A ResourceClaimTemplate asking for ``count`` devices of ``device_class`` (one request named "device").

    ``labels`` go on the template and, through ``spec.metadata``, on every claim made from it, so the claims
    of a run can be found by label (the resource claim controller copies spec.metadata into the claim).
    """
    spec = {"devices": {"requests": [{"name": SMOKE_REQUEST, "exactly": {
        "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}}]}}
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "ResourceClaimTemplate",
            "metadata": {"generateName": name_prefix, "namespace": namespace, "labels": dict(labels)},
            "spec": {"metadata": {"labels": dict(labels)}, "spec": spec}}


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
