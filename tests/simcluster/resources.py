# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The resources the simulated cluster serves (plural -> group, version, kind, scope), and the errors the generic
registry answers with (StoreError and its NotFound, Conflict, AlreadyExists, admission refusals).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# plural -> (group, version, kind, namespaced, short names)
RESOURCES = {
    "namespaces": ("", "v1", "Namespace", False, ["ns"]),
    "nodes": ("", "v1", "Node", False, ["no"]),
    "pods": ("", "v1", "Pod", True, ["po"]),
    "configmaps": ("", "v1", "ConfigMap", True, ["cm"]),
    "serviceaccounts": ("", "v1", "ServiceAccount", True, ["sa"]),
    "events": ("", "v1", "Event", True, ["ev"]),
    "secrets": ("", "v1", "Secret", True, []),
    "daemonsets": ("apps", "v1", "DaemonSet", True, ["ds"]),
    "clusterroles": ("rbac.authorization.k8s.io", "v1", "ClusterRole", False, []),
    "clusterrolebindings": ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", False, []),
    "roles": ("rbac.authorization.k8s.io", "v1", "Role", True, []),
    "rolebindings": ("rbac.authorization.k8s.io", "v1", "RoleBinding", True, []),
    "runtimeclasses": ("node.k8s.io", "v1", "RuntimeClass", False, []),
    # Dynamic Resource Allocation, stored as v1; tests/simcluster/dra_versions.py serves the other versions
    "deviceclasses": ("resource.k8s.io", "v1", "DeviceClass", False, []),
    "resourceslices": ("resource.k8s.io", "v1", "ResourceSlice", False, []),
    "resourceclaims": ("resource.k8s.io", "v1", "ResourceClaim", True, []),
    "resourceclaimtemplates": ("resource.k8s.io", "v1", "ResourceClaimTemplate", True, []),
    "poddisruptionbudgets": ("policy", "v1", "PodDisruptionBudget", True, ["pdb"]),
    # the node heartbeats a kubelet (the kubelet stand-in) renews in kube-node-lease
    "leases": ("coordination.k8s.io", "v1", "Lease", True, []),
}

# Resources whose metadata.generation tracks spec changes (as the real registry strategies do).
GENERATION_RESOURCES = frozenset(["daemonsets", "deviceclasses"])

# Resources with a /status subresource.
STATUS_RESOURCES = frozenset(["nodes", "pods", "daemonsets", "namespaces", "resourceclaims"])


def api_version(resource):
    group, version = RESOURCES[resource][0], RESOURCES[resource][1]
    return "%s/%s" % (group, version) if group else version


def kind_of(resource):
    return RESOURCES[resource][2]


def is_namespaced(resource):
    return RESOURCES[resource][3]


class StoreError(Exception):
    """A failure that the server turns into a Kubernetes Status answer as is."""

    def __init__(self, code, reason, message, details=None):
        super(StoreError, self).__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def group_resource(resource):
    """nodes, daemonsets.apps: how the apiserver names a resource in messages."""
    group = RESOURCES[resource][0] if resource in RESOURCES else ""
    return "%s.%s" % (resource, group) if group else resource


def _details(resource, name):
    details = {"name": name}
    group = RESOURCES[resource][0] if resource in RESOURCES else ""
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def not_found(resource, name):
    return StoreError(404, "NotFound", '%s "%s" not found' % (group_resource(resource), name),
                      _details(resource, name))


def conflict(resource, name):
    return StoreError(
        409, "Conflict",
        'Operation cannot be fulfilled on %s "%s": the object has been modified; '
        "please apply your changes to the latest version and try again" % (group_resource(resource), name),
        _details(resource, name))


def missing_runtime_class(store, pod):
    """The RuntimeClass admission plugin's refusal of a pod whose runtimeClassName names no RuntimeClass, or None.

    kube-apiserver v1.32 plugin/pkg/admission/runtimeclass/admission.go (prepareObjects) answers
    admission.NewForbidden(pod rejected: RuntimeClass %q not found): 403 Forbidden, the pod named by its name,
    else its generateName (k8s.io/apiserver/pkg/admission/errors.go extractResourceName). FACTS.md, RuntimeClass.
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    wanted = spec.get("runtimeClassName")
    if not isinstance(wanted, str) or not wanted or store.get("runtimeclasses", None, wanted) is not None:
        return None
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return StoreError(403, "Forbidden", 'pods "%s" is forbidden: pod rejected: RuntimeClass "%s" not found'
                      % (name, wanted), {"name": name, "kind": "pods"})


def missing_service_account(store, pod):
    """The ServiceAccount admission plugin's refusal of a pod whose service account does not exist, or None.

    plugin/pkg/admission/serviceaccount/admission.go: admission.NewForbidden(error looking up service account
    <ns>/<name>: serviceaccount "<name>" not found), measured on v1.36.2. Simplified: `default` always exists (the
    service account controller makes it in every namespace; there is none here).
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    account = spec.get("serviceAccountName") or "default"
    if account == "default" or not isinstance(account, str) or store.get(
            "serviceaccounts", meta.get("namespace"), account) is not None:
        return None
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return StoreError(403, "Forbidden", 'pods "%s" is forbidden: error looking up service account %s/%s: '
                      'serviceaccount "%s" not found' % (name, meta.get("namespace"), account, account),
                      {"name": name, "kind": "pods"})


def already_exists(resource, name):
    return StoreError(409, "AlreadyExists", '%s "%s" already exists' % (group_resource(resource), name),
                      _details(resource, name))
