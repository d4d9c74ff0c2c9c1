# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RBAC authorization of the simulated cluster, as kube-apiserver v1.32 with ``--authorization-mode=Node,RBAC``
(the kubeadm default) answers it: ``system:masters`` is allowed everything before RBAC is asked; RBAC evaluates the
ClusterRoles, ClusterRoleBindings, Roles and RoleBindings stored in the cluster like any other object (tests create
them through the API); the discovery and public paths are open as the bootstrap roles open them; a refusal is the
apiserver's 403 Status. bootstrap_rbac() is the few bootstrap objects a fresh kubeadm cluster has.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from tests.simcluster.errors import status_body
from tests.simcluster.store import RESOURCES
from tests.simcluster import users
from tests.simcluster.users import AUTHENTICATED_GROUP, MASTERS_GROUP, SERVICEACCOUNT_PREFIX, UNAUTHENTICATED_GROUP

RBAC_GROUP = "rbac.authorization.k8s.io"

# API groups of resources that are authorized but not stored (impersonation, reviews).
_EXTRA_GROUPS = {
    "users": "",
    "groups": "",
    "uids": "",
    "userextras": "authentication.k8s.io",
    "selfsubjectaccessreviews": "authorization.k8s.io",
    "selfsubjectrulesreviews": "authorization.k8s.io",
    "subjectaccessreviews": "authorization.k8s.io",
    "tokenreviews": "authentication.k8s.io",
    "leases": "coordination.k8s.io",
}


def request_verb(method, name=None, watch=False):
    """The authorizer verb of a resource request, as the apiserver's RequestInfo derives it."""
    method = method.upper()
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return method.lower()


def api_group_of(resource):
    if resource in RESOURCES:
        return RESOURCES[resource][0]
    return _EXTRA_GROUPS.get(resource, "")


def _subject_matches(subject, user_name, groups, binding_namespace):
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return name == user_name
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        # a RoleBinding's ServiceAccount subject without a namespace means the binding's own
        sa_namespace = subject.get("namespace") or binding_namespace
        if not sa_namespace or not name:
            return False
        return user_name == "%s%s:%s" % (SERVICEACCOUNT_PREFIX, sa_namespace, name)
    return False


def _verb_matches(rule, verb):
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _group_matches(rule, group):
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def _resource_matches(rule, combined, subresource):
    for rule_resource in rule.get("resources") or []:
        if rule_resource == "*" or rule_resource == combined:
            return True
        # "*/status" grants the status subresource of every resource
        if subresource and rule_resource == "*/" + subresource:
            return True
    return False


def _name_matches(rule, name):
    names = rule.get("resourceNames") or []
    return not names or (bool(name) and name in names)


def _url_matches(rule, path):
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule, verb, api_group, resource, subresource, name, path=None):
    if not _verb_matches(rule, verb):
        return False
    if path is not None:
        return _url_matches(rule, path)
    if rule.get("nonResourceURLs") and not rule.get("resources"):
        return False
    combined = resource + "/" + subresource if subresource else resource
    return (_group_matches(rule, api_group) and _resource_matches(rule, combined, subresource)
            and _name_matches(rule, name))


def _role_rules(store, role_ref, binding_namespace, errors):
    kind = role_ref.get("kind")
    name = role_ref.get("name")
    if kind == "ClusterRole":
        role = store.get("clusterroles", None, name)
        if role is None:
            errors.append('clusterrole.rbac.authorization.k8s.io "%s" not found' % name)
            return None
    elif kind == "Role" and binding_namespace:
        role = store.get("roles", binding_namespace, name)
        if role is None:
            errors.append('role.rbac.authorization.k8s.io "%s" not found' % name)
            return None
    else:
        return None
    return role.get("rules") or []


def _evaluate(store, user, verb, api_group, resource, subresource, namespace, name, path):
    user_name = users.user_name(user)
    groups = users.user_groups(user)
    errors = []
    bindings = [("ClusterRoleBinding", None, b) for b in store.list("clusterrolebindings")[0]]
    if namespace and path is None:
        bindings += [("RoleBinding", namespace, b) for b in store.list("rolebindings", namespace)[0]]
    for binding_kind, binding_ns, binding in bindings:
        subjects = binding.get("subjects") or []
        matched = [s for s in subjects if _subject_matches(s, user_name, groups, binding_ns)]
        if not matched:
            continue
        role_ref = binding.get("roleRef") or {}
        rules = _role_rules(store, role_ref, binding_ns, errors)
        if rules is None:
            continue
        for rule in rules:
            if rule_allows(rule, verb, api_group, resource, subresource, name, path):
                subject = matched[0]
                binding_name = binding["metadata"]["name"]
                if binding_ns:
                    binding_name += "/" + binding_ns
                # the same wording as the RBAC authorizer's allow reason
                return True, 'RBAC: allowed by %s "%s" of %s "%s" to %s "%s"' % (
                    binding_kind, binding_name, role_ref.get("kind"), role_ref.get("name"),
                    subject.get("kind"), subject.get("name"))
    if not errors:
        return False, ""
    if len(errors) == 1:
        return False, "RBAC: " + errors[0]
    return False, "RBAC: [" + ", ".join(errors) + "]"


def authorize(store, user, verb, resource, subresource, namespace, name, api_group=None):
    """Return (allowed, reason) for a resource request.

    user is the dict from Authenticator.authenticate (or a bare user name). api_group defaults
    to the group the resource is served from. reason is the RBAC authorizer's reason: on a
    denial it is "" unless a binding points at a missing role, and then it belongs at the end
    of the forbidden message (see forbidden_message).
    """
    if MASTERS_GROUP in users.user_groups(user):
        return True, ""
    if api_group is None:
        api_group = api_group_of(resource)
    return _evaluate(store, user, verb, api_group, resource, subresource or "", namespace or "", name or "", None)


# Paths the bootstrap ClusterRoles system:discovery and system:public-info-viewer open to
# everyone; evaluated even when the store holds no such roles.
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
DISCOVERY_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*") + PUBLIC_PATHS


def authorize_path(store, user, verb, path):
    """Return (allowed, reason) for a non-resource request (discovery, /version, /healthz)."""
    if MASTERS_GROUP in users.user_groups(user):
        return True, ""
    groups = users.user_groups(user)
    open_paths = PUBLIC_PATHS
    if AUTHENTICATED_GROUP in groups:
        open_paths = DISCOVERY_PATHS
    if verb == "get" and _url_matches({"nonResourceURLs": list(open_paths)}, path):
        return True, ""
    return _evaluate(store, user, verb, "", "", "", "", "", path)


def forbidden_message(user, verb, resource, subresource, api_group, namespace, name, reason=""):
    """The message of kube-apiserver's 403 answer for a resource request.

    ``nodes "n1" is forbidden: User "u" cannot patch resource "nodes/status" in API group ""
    at the cluster scope``; the group is appended to the resource before "is forbidden" for
    non-core groups (``daemonsets.apps is forbidden: ...``).
    """
    user_name = users.user_name(user) or ""
    qualified = resource + "." + api_group if api_group else resource
    combined = resource + "/" + subresource if subresource else resource
    if namespace:
        what = 'User "%s" cannot %s resource "%s" in API group "%s" in the namespace "%s"' % (
            user_name, verb, combined, api_group, namespace)
    else:
        what = 'User "%s" cannot %s resource "%s" in API group "%s" at the cluster scope' % (
            user_name, verb, combined, api_group)
    if reason:
        what += ": " + reason
    if name:
        return '%s "%s" is forbidden: %s' % (qualified, name, what)
    return "%s is forbidden: %s" % (qualified, what)


def forbidden_status(user, verb, resource, subresource, api_group, namespace, name, reason=""):
    """The whole 403 Status body for a resource request."""
    if api_group is None:
        api_group = api_group_of(resource)
    details = {}
    if name:
        details["name"] = name
    if api_group:
        details["group"] = api_group
    details["kind"] = resource
    return status_body(403, "Forbidden",
                       forbidden_message(user, verb, resource, subresource, api_group, namespace, name, reason),
                       details)


def forbidden_path_status(user, verb, path, reason=""):
    """The 403 Status body for a non-resource request (``forbidden: User "x" cannot get path "/"``)."""
    msg = 'forbidden: User "%s" cannot %s path "%s"' % (users.user_name(user) or "", verb, path)
    if reason:
        msg += ": " + reason
    return status_body(403, "Forbidden", msg, {})


# ---------------------------------------------------------------- bootstrap policy

def bootstrap_rbac():
    """The few bootstrap RBAC objects a fresh kubeadm cluster has that tests lean on.

    Returns a list of (resource, object) for SimCluster to create at start, so
    ``kubectl get clusterrole cluster-admin`` and bindings to it work as on a real cluster.
    """
    def role(name, rules):
        return ("clusterroles", {
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules})

    def binding(name, role_name, groups):
        return ("clusterrolebindings", {
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role_name},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]})

    return [
        role("cluster-admin", [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        role("system:discovery", [
            {"nonResourceURLs": list(DISCOVERY_PATHS), "verbs": ["get"]}]),
        role("system:public-info-viewer", [
            {"nonResourceURLs": list(PUBLIC_PATHS), "verbs": ["get"]}]),
        binding("cluster-admin", "cluster-admin", [MASTERS_GROUP]),
        binding("system:discovery", "system:discovery", [AUTHENTICATED_GROUP]),
        binding("system:public-info-viewer", "system:public-info-viewer",
                [AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
    ]
