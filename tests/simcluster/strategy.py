# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry's strategies around a write, besides defaulting and validation: what a create sets (status, the
NodeTaint admission's not-ready taint) and what an update through the main resource or /status may change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from tests.simcluster.objutil import qos_class
from tests.simcluster.store import STATUS_RESOURCES


def taint_new_node(node):
    """The NodeTaint admission plugin: a new node that is not Ready gets node.kubernetes.io/not-ready:NoSchedule."""
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    if any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
           for c in status.get("conditions") or []):
        return
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else None
    if spec is None:
        return
    taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
    if not any(isinstance(t, dict) and t.get("key") == "node.kubernetes.io/not-ready" for t in taints):
        spec["taints"] = taints + [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]


def prepare_for_create(resource, obj):
    if resource == "pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    elif resource == "daemonsets":
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                         "desiredNumberScheduled": 0, "numberReady": 0}
        obj["metadata"].setdefault("annotations", {})["deprecated.daemonset.template.generation"] = "1"
    elif resource == "namespaces":
        obj["status"] = {"phase": "Active"}


# pkg/registry/core/{node,pod,namespace}/strategy.go, pkg/registry/apps/daemonset/strategy.go: *StatusStrategy
STATUS_KEEPS_METADATA = frozenset(["nodes", "pods", "daemonsets", "namespaces"])


def prepare_for_update(resource, old, new, subresource):
    """Keep the part a given endpoint may not change (main resource: status; /status: the rest)."""
    if resource not in STATUS_RESOURCES:
        return new
    if subresource == "status":
        result = copy.deepcopy(old)
        if resource in STATUS_KEEPS_METADATA and isinstance(new.get("metadata"), dict):
            # the status strategies of these kinds copy only the old spec: labels and annotations written
            # through /status are stored (measured on v1.36.2); a pod keeps its ownerReferences
            result["metadata"] = copy.deepcopy(new["metadata"])
            if resource == "pods":
                result["metadata"].pop("ownerReferences", None)
                if old["metadata"].get("ownerReferences"):
                    result["metadata"]["ownerReferences"] = copy.deepcopy(old["metadata"]["ownerReferences"])
        result["metadata"]["resourceVersion"] = new.get("metadata", {}).get(
            "resourceVersion", old["metadata"]["resourceVersion"])
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        return result
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    if resource == "daemonsets":
        old_template = (old.get("spec") or {}).get("template")
        new_template = (new.get("spec") or {}).get("template")
        annotations = new.setdefault("metadata", {}).setdefault("annotations", {})
        current = (old["metadata"].get("annotations") or {}).get("deprecated.daemonset.template.generation", "1")
        annotations["deprecated.daemonset.template.generation"] = (
            str(int(current) + 1) if old_template != new_template else current)
    if resource == "namespaces":
        new["spec"] = copy.deepcopy(old.get("spec", {}))
    return new
