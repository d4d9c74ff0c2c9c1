# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The delete verbs of the simulated apiserver: delete and deletecollection with preconditions, grace periods,
finalizers and the garbage collector's cascade (ownerReferences, a namespace's contents).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.simcluster.errors import bad_request, status_body
from tests.simcluster.store import (
    RESOURCES, StoreError, api_version, conflict, group_resource, is_namespaced, kind_of, not_found,
)


def pod_grace_period(pod, requested):
    """The grace period a pod DELETE gets, as kube-apiserver's pod strategy decides it (CheckGracefulDelete in
    pkg/registry/core/pod/strategy.go): the request's gracePeriodSeconds, else the pod's
    terminationGracePeriodSeconds (defaulted to 30 on create); 0 for a pod not bound to a node or already
    Succeeded/Failed; a negative value becomes 1. With 0 the registry removes the pod at once (store.go
    updateForGracefulDeletionAndFinalizers: no grace left and no finalizers)."""
    spec = pod.get("spec") or {}
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    return 1 if period < 0 else period


class DeleteVerbsMixin:
    """delete and deletecollection of ApiServer, and delete_object (also used by eviction.py and SimCluster). Needs
    ``self.store``.
    """

    def _delete_options(self, req):
        opts = {}
        if req.body:
            try:
                opts = json.loads(req.body.decode("utf-8")) or {}
            except ValueError as e:
                raise bad_request("error decoding DeleteOptions: %s" % e)
        for key in ("propagationPolicy", "gracePeriodSeconds", "dryRun"):
            if req.q(key) is not None:
                opts[key] = req.q(key)
        return opts

    def _do_delete(self, req, resource, namespace, name, sub):
        if sub:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        opts = self._delete_options(req)
        current = self.store.get(resource, namespace, name)
        if current is None:
            raise not_found(resource, name)
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise StoreError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": Precondition failed: '
                             "UID in precondition: %s, UID in object meta: %s"
                             % (group_resource(resource), name, pre["uid"], current["metadata"]["uid"]),
                             {"name": name, "kind": resource})
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(resource, name)
        if opts.get("dryRun"):
            return (200, current, {})
        obj = self.delete_object(resource, namespace, name, opts)
        if obj is None:
            raise not_found(resource, name)
        if resource in ("pods", "namespaces", "nodes") or obj["metadata"].get("deletionTimestamp"):
            return (200, obj, {})
        details = {"name": name, "kind": resource, "uid": obj["metadata"]["uid"]}
        if RESOURCES[resource][0]:
            details["group"] = RESOURCES[resource][0]
        return (200, status_body(200, None, None, details, status="Success"), {})

    def _do_deletecollection(self, req, resource, namespace, name, sub):
        opts = self._delete_options(req)
        items, rv = self.store.list(resource, namespace, req.q("labelSelector"), req.q("fieldSelector"))
        deleted = []
        for item in items:
            if opts.get("dryRun"):
                deleted.append(item)
                continue
            obj = self.delete_object(resource, item["metadata"].get("namespace"), item["metadata"]["name"], opts)
            if obj is not None:
                obj.pop("kind", None)
                obj.pop("apiVersion", None)
                deleted.append(obj)
        return (200, {"kind": kind_of(resource) + "List", "apiVersion": api_version(resource),
                      "metadata": {"resourceVersion": self.store.resource_version}, "items": deleted}, {})

    def delete_object(self, resource, namespace, name, opts=None):
        """Delete as the apiserver + garbage collector would; returns the last state or None."""
        opts = opts or {}
        current = self.store.get(resource, namespace, name)
        if current is None:
            return None
        grace = opts.get("gracePeriodSeconds")
        grace = int(grace) if grace not in (None, "") else None
        if resource == "pods":
            grace = pod_grace_period(current, grace)
        if current["metadata"].get("finalizers"):
            obj = self.store.mark_deleting(resource, namespace, name, grace)
        elif resource == "pods" and self.store.graceful_pod_delete and grace > 0:
            obj = self.store.mark_deleting(resource, namespace, name, grace)
        elif resource == "pods":
            # grace 0: the registry still writes deletionTimestamp (a MODIFIED event), then removes the pod in the
            # same request (DELETED); the reply is the removed pod, deletionGracePeriodSeconds 0
            self.store.mark_deleting(resource, namespace, name, 0)
            obj = self.store.delete(resource, namespace, name)
        else:
            obj = self.store.delete(resource, namespace, name)
        if obj is None:
            return None
        if resource == "namespaces":
            for res in RESOURCES:
                if is_namespaced(res):
                    for item in self.store.list(res, name)[0]:
                        self.delete_object(res, name, item["metadata"]["name"], {"gracePeriodSeconds": 0})
        if opts.get("propagationPolicy") != "Orphan":
            for res, ns, dep in self.store.dependents(obj["metadata"]["uid"]):
                self.delete_object(res, ns, dep, {"propagationPolicy": opts.get("propagationPolicy")})
        return obj
