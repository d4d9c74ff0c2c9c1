# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Authentication, RBAC authorization and forbidden messages of the simulated cluster."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.simcluster import auth
from tests.simcluster.store import Store

SA_USER = "system:serviceaccount:kubehw:automation"


@pytest.fixture
def store():
    s = Store()
    for ns in ("kube-system", "kubehw", "default"):
        s.create("namespaces", {"metadata": {"name": ns}})
    for resource, obj in auth.bootstrap_rbac():
        s.create(resource, obj)
    return s


def cluster_role(store, name, rules):
    store.create("clusterroles", {"metadata": {"name": name}, "rules": rules})


def bind(store, name, role, subjects, namespace=None, role_kind="ClusterRole"):
    obj = {"metadata": {"name": name},
           "roleRef": {"apiGroup": auth.RBAC_GROUP, "kind": role_kind, "name": role},
           "subjects": subjects}
    if namespace:
        obj["metadata"]["namespace"] = namespace
        store.create("rolebindings", obj)
    else:
        store.create("clusterrolebindings", obj)


def sa_subject(name="automation", namespace="kubehw"):
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def user(name, *groups):
    return {"user": name, "groups": list(groups) + [auth.AUTHENTICATED_GROUP]}


# ---------------------------------------------------------------- authentication

class TestAuthenticate:
    def test_admin_token_is_random_and_is_cluster_admin(self):
        a, b = auth.Authenticator({}), auth.Authenticator({})
        assert a.admin_token != b.admin_token
        assert len(a.admin_token) >= 32
        who = a.authenticate({"Authorization": "Bearer " + a.admin_token})
        assert who["user"] == "kubernetes-admin"
        assert set(who["groups"]) == {"system:masters", "system:authenticated"}

    def test_config_tokens_with_implicit_groups(self):
        a = auth.Authenticator({"tokens": [
            {"token": "t-sa", "user": SA_USER, "groups": ["extra"]},
            {"token": "t-alice", "user": "alice"},
        ]})
        sa = a.authenticate({"authorization": "Bearer t-sa"})
        assert sa["user"] == SA_USER
        assert sa["groups"] == ["extra", "system:serviceaccounts", "system:serviceaccounts:kubehw",
                                "system:authenticated"]
        assert a.authenticate({"Authorization": "bearer t-alice"}) == {
            "user": "alice", "groups": ["system:authenticated"]}
        # the admin token of another authenticator means nothing here
        assert a.authenticate({"Authorization": "Bearer " + auth.Authenticator().admin_token}) is None

    def test_unknown_token_is_401_even_with_anonymous_auth(self):
        a = auth.Authenticator({})
        assert a.authenticate({"Authorization": "Bearer nope"}) is None
        who, err = a.identify(Store(), {"Authorization": "Bearer nope"})
        assert who is None
        assert err == (401, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": "Unauthorized", "reason": "Unauthorized", "code": 401})

    @pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic YWRtaW46YWRtaW4="},
                                         {"Authorization": "Bearer"}, {"Authorization": "Bearer "}])
    def test_no_bearer_token_is_anonymous(self, headers):
        assert auth.Authenticator({}).authenticate(headers) == {
            "user": "system:anonymous", "groups": ["system:unauthenticated"]}
        assert auth.Authenticator({"anonymous_auth": False}).authenticate(headers) is None

    def test_http_message_headers(self):
        import email.message
        msg = email.message.Message()
        a = auth.Authenticator({})
        msg["AUTHORIZATION"] = "Bearer " + a.admin_token
        assert a.authenticate(msg)["user"] == "kubernetes-admin"

    def test_add_token_at_run_time(self):
        a = auth.Authenticator({})
        a.add_token("late", "bob", ["devs"])
        assert a.authenticate({"Authorization": "Bearer late"})["groups"] == ["devs", "system:authenticated"]
        a.remove_token("late")
        assert a.authenticate({"Authorization": "Bearer late"}) is None
        with pytest.raises(ValueError):
            a.add_token("", "bob")


class TestImpersonation:
    def test_admin_may_impersonate(self, store):
        a = auth.Authenticator({})
        who, err = a.identify(store, {"Authorization": "Bearer " + a.admin_token,
                                      "Impersonate-User": SA_USER})
        assert err is None
        assert who["user"] == SA_USER
        assert "system:serviceaccounts:kubehw" in who["groups"]
        assert "system:masters" not in who["groups"]
        assert who["impersonated_by"] == "kubernetes-admin"

    def test_impersonation_needs_rbac(self, store):
        a = auth.Authenticator({"tokens": [{"token": "t", "user": "alice"}]})
        who, err = a.identify(store, {"Authorization": "Bearer t", "Impersonate-User": "bob"})
        assert who is None
        assert err[0] == 403
        assert err[1]["message"] == ('users "bob" is forbidden: User "alice" cannot impersonate resource '
                                     '"users" in API group "" at the cluster scope')
        cluster_role(store, "impersonator", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                                              "resourceNames": ["bob"]}])
        bind(store, "alice-impersonates", "impersonator", [{"kind": "User", "name": "alice"}])
        who, err = a.identify(store, {"Authorization": "Bearer t", "Impersonate-User": "bob"})
        assert err is None and who["user"] == "bob"
        # groups are a separate permission
        who, err = a.identify(store, {"Authorization": "Bearer t", "Impersonate-User": "bob",
                                      "Impersonate-Group": "system:masters"})
        assert err[0] == 403 and 'groups "system:masters" is forbidden' in err[1]["message"]


# ---------------------------------------------------------------- authorization

class TestAuthorize:
    def test_masters_allowed_without_any_rbac_object(self):
        assert auth.authorize(Store(), user("kubernetes-admin", "system:masters"), "delete", "nodes", "",
                              None, "n1") == (True, "")

    def test_nothing_bound_is_denied_without_reason(self, store):
        assert auth.authorize(store, user(SA_USER), "list", "nodes", "", None, "") == (False, "")

    def test_least_privilege_node_reader(self, store):
        cluster_role(store, "node-reader", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}])
        bind(store, "automation-reads-nodes", "node-reader", [sa_subject()])
        sa = user(SA_USER, "system:serviceaccounts")
        allowed, reason = auth.authorize(store, sa, "list", "nodes", "", None, "")
        assert allowed
        assert reason == ('RBAC: allowed by ClusterRoleBinding "automation-reads-nodes" of ClusterRole '
                          '"node-reader" to ServiceAccount "automation"')
        assert auth.authorize(store, sa, "get", "nodes", "", None, "n1")[0]
        # not watch, not patch, not the status subresource
        assert not auth.authorize(store, sa, "watch", "nodes", "", None, "")[0]
        assert not auth.authorize(store, sa, "patch", "nodes", "", None, "n1")[0]
        assert not auth.authorize(store, sa, "get", "nodes", "status", None, "n1")[0]
        # another service account of the same name elsewhere is someone else
        assert not auth.authorize(store, user("system:serviceaccount:other:automation"), "list", "nodes", "",
                                  None, "")[0]

    def test_status_subresource_rules(self, store):
        cluster_role(store, "status-patcher", [{"apiGroups": [""], "resources": ["nodes/status"],
                                                "verbs": ["patch"]}])
        bind(store, "b", "status-patcher", [{"kind": "User", "name": "u"}])
        assert auth.authorize(store, user("u"), "patch", "nodes", "status", None, "n1")[0]
        # the server's impersonation hands the user over keyed "name"
        assert auth.authorize(store, {"name": "u", "groups": []}, "patch", "nodes", "status", None, "n1")[0]
        # nodes/status does not grant nodes
        assert not auth.authorize(store, user("u"), "patch", "nodes", "", None, "n1")[0]

    def test_star_subresource_and_wildcards(self, store):
        cluster_role(store, "any-status", [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}])
        bind(store, "b", "any-status", [{"kind": "Group", "name": "ops"}])
        ops = user("carol", "ops")
        assert auth.authorize(store, ops, "update", "daemonsets", "status", "kube-system", "ds")[0]
        assert auth.authorize(store, ops, "patch", "nodes", "status", None, "n1")[0]
        assert not auth.authorize(store, ops, "get", "nodes", "", None, "n1")[0]
        assert not auth.authorize(store, user("carol"), "patch", "nodes", "status", None, "n1")[0]

    def test_resource_names_restrict_named_requests_only(self, store):
        cluster_role(store, "one-node", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"],
                                          "resourceNames": ["n1"]}])
        bind(store, "b", "one-node", [{"kind": "User", "name": "u"}])
        assert auth.authorize(store, user("u"), "get", "nodes", "", None, "n1")[0]
        assert not auth.authorize(store, user("u"), "get", "nodes", "", None, "n2")[0]
        # a list has no name, so resourceNames cannot allow it
        assert not auth.authorize(store, user("u"), "list", "nodes", "", None, "")[0]

    def test_api_group_must_match(self, store):
        cluster_role(store, "wrong-group", [{"apiGroups": [""], "resources": ["daemonsets"], "verbs": ["*"]}])
        bind(store, "b", "wrong-group", [{"kind": "User", "name": "u"}])
        assert not auth.authorize(store, user("u"), "list", "daemonsets", "", "kube-system", "")[0]
        cluster_role(store, "right-group", [{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]}])
        bind(store, "b2", "right-group", [{"kind": "User", "name": "u"}])
        assert auth.authorize(store, user("u"), "list", "daemonsets", "", "kube-system", "")[0]

    def test_rolebinding_is_limited_to_its_namespace(self, store):
        store.create("roles", {"metadata": {"name": "ds-admin", "namespace": "kube-system"},
                               "rules": [{"apiGroups": ["apps"], "resources": ["daemonsets"],
                                          "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]})
        bind(store, "automation-ds", "ds-admin", [{"kind": "ServiceAccount", "name": "automation",
                                                   "namespace": "kubehw"}],
             namespace="kube-system", role_kind="Role")
        sa = user(SA_USER)
        allowed, reason = auth.authorize(store, sa, "create", "daemonsets", "", "kube-system", "")
        assert allowed
        assert reason.startswith('RBAC: allowed by RoleBinding "automation-ds/kube-system" of Role "ds-admin"')
        assert not auth.authorize(store, sa, "create", "daemonsets", "", "default", "")[0]
        # all-namespaces list is a cluster-scope request: a RoleBinding cannot allow it
        assert not auth.authorize(store, sa, "list", "daemonsets", "", None, "")[0]

    def test_rolebinding_to_clusterrole_and_namespaceless_sa_subject(self, store):
        cluster_role(store, "pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
        # a ServiceAccount subject without namespace means the RoleBinding's namespace
        bind(store, "b", "pod-reader", [{"kind": "ServiceAccount", "name": "automation"}], namespace="kubehw")
        assert auth.authorize(store, user(SA_USER), "list", "pods", "", "kubehw", "")[0]
        assert not auth.authorize(store, user(SA_USER), "list", "pods", "", "default", "")[0]
        # the same subject in a ClusterRoleBinding has no namespace to fall back on
        bind(store, "crb", "pod-reader", [{"kind": "ServiceAccount", "name": "automation"}])
        assert not auth.authorize(store, user(SA_USER), "list", "pods", "", "default", "")[0]

    def test_binding_to_missing_role_gives_rbac_reason(self, store):
        bind(store, "dangling", "does-not-exist", [{"kind": "User", "name": "u"}])
        allowed, reason = auth.authorize(store, user("u"), "list", "nodes", "", None, "")
        assert not allowed
        assert reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "does-not-exist" not found'
        assert auth.forbidden_message(user("u"), "list", "nodes", "", "", None, "", reason) == (
            'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope: '
            'RBAC: clusterrole.rbac.authorization.k8s.io "does-not-exist" not found')

    def test_cluster_admin_binding_from_bootstrap_policy(self, store):
        bind(store, "automation-admin", "cluster-admin", [sa_subject()])
        assert auth.authorize(store, user(SA_USER), "delete", "daemonsets", "", "kube-system", "x")[0]

    def test_non_resource_paths(self, store):
        anon = {"user": "system:anonymous", "groups": ["system:unauthenticated"]}
        assert auth.authorize_path(store, anon, "get", "/version")[0]
        assert not auth.authorize_path(store, anon, "get", "/api")[0]
        assert auth.authorize_path(store, user("u"), "get", "/api")[0]
        assert auth.authorize_path(store, user("u"), "get", "/apis/apps/v1")[0]
        assert not auth.authorize_path(store, user("u"), "get", "/metrics")[0]
        cluster_role(store, "metrics", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
        bind(store, "m", "metrics", [{"kind": "User", "name": "u"}])
        assert auth.authorize_path(store, user("u"), "get", "/metrics")[0]
        # a nonResourceURLs rule never allows a resource request
        assert not auth.authorize(store, user("u"), "get", "nodes", "", None, "n1")[0]
        assert auth.forbidden_path_status(anon, "get", "/api") == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/api"', "reason": "Forbidden",
            "details": {}, "code": 403}


class TestForbiddenMessage:
    def test_named_cluster_scoped_subresource(self):
        assert auth.forbidden_message(user(SA_USER), "patch", "nodes", "status", "", None, "n1") == (
            'nodes "n1" is forbidden: User "system:serviceaccount:kubehw:automation" cannot patch resource '
            '"nodes/status" in API group "" at the cluster scope')

    def test_unnamed_namespaced_non_core_group(self):
        assert auth.forbidden_message("u", "list", "daemonsets", "", "apps", "kube-system", "") == (
            'daemonsets.apps is forbidden: User "u" cannot list resource "daemonsets" in API group "apps" '
            'in the namespace "kube-system"')

    def test_status_body_details(self):
        body = auth.forbidden_status(user("u"), "get", "daemonsets", "", None, "kube-system", "nvidia")
        assert body == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'daemonsets.apps "nvidia" is forbidden: User "u" cannot get resource "daemonsets" in API '
                       'group "apps" in the namespace "kube-system"',
            "reason": "Forbidden", "details": {"name": "nvidia", "group": "apps", "kind": "daemonsets"},
            "code": 403}
        assert auth.forbidden_status(user("u"), "list", "nodes", "", None, None, "")["details"] == {"kind": "nodes"}


@pytest.mark.parametrize("method,name,watch,verb", [
    ("GET", "n1", False, "get"), ("GET", "", False, "list"), ("GET", "", True, "watch"),
    ("POST", "", False, "create"), ("PUT", "n1", False, "update"), ("PATCH", "n1", False, "patch"),
    ("DELETE", "n1", False, "delete"), ("DELETE", "", False, "deletecollection"),
])
def test_request_verb(method, name, watch, verb):
    assert auth.request_verb(method, name, watch) == verb
