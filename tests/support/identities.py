# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The identities the integration suite's modules run as: the admin of the cluster, or the least-privilege
automation identity of playbooks/templates/rbac.yaml.j2 under names of the test's own (created on any cluster,
with a token from the TokenRequest API)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The module suites: their modules always run as the automation identity of playbooks/templates/rbac.yaml.j2
# (the least-privilege identity a platform team runs them as), so a rule the shipped RBAC lacks fails here. They
# used to run twice, as the admin in `make integration` and as the identity in a `make least-privilege` stage; the
# admin may do everything the identity may, so the admin run proved nothing the identity run does not.
# A test file may also mark itself with pytestmark = pytest.mark.least_privilege_identity.
LEAST_PRIVILEGE_SUITES = frozenset([
    "test_k8s_node_extended_resource.py", "test_device_plugin_deploy.py", "test_info_and_smoke_test.py",
])
# KUBEHW_IDENTITY=admin runs the modules of every test as the admin (to tell a missing RBAC rule from a bug);
# KUBEHW_IDENTITY=least-privilege runs the modules of every test as the identity.
IDENTITIES = ("admin", "least-privilege")

# Whether the running test's modules run as the least-privilege identity, set by the cluster fixture (an xdist
# worker runs one test at a time).
RUNNING_IDENTITY = {"least_privilege": False}


def identity_of(node):
    """True when the modules of this test item run as the least-privilege identity (see LEAST_PRIVILEGE_SUITES)."""
    identity = os.environ.get("KUBEHW_IDENTITY", "")
    if identity:
        return identity == "least-privilege"
    return node.get_closest_marker("least_privilege_identity") is not None


def least_privilege():
    """True when the running test's modules run as the least-privilege identity."""
    return RUNNING_IDENTITY["least_privilege"]


# The least-privilege identity (LEAST_PRIVILEGE_SUITES): the modules run as the automation identity of
# playbooks/templates/rbac.yaml.j2 and nothing more.
# The objects are created and a token requested (TokenRequest) on any cluster, so KUBECONFIG is the admin's.
RBAC_TEMPLATE = os.path.join(REPO_ROOT, "playbooks", "templates", "rbac.yaml.j2")
# The DaemonSets the module suites write, as an inventory declaring them would (playbooks/rbac.yml): every preset's
# default name and gpu-plugin (test_device_plugin_deploy's switch tests). The identity may change no other
# DaemonSet, and no ConfigMap but their <name>-config.
SUITE_PLUGIN_DAEMONSETS = ["amdgpu-device-plugin", "generic-device-plugin", "gpu-plugin", "intel-gpu-plugin",
                           "nvidia-device-plugin"]
RBAC_VARS = {"kubehw_rbac_namespace": "kubehw", "kubehw_rbac_service_account": "automation",
             "kubehw_rbac_plugin_namespace": "kubehw-device-plugins", "kubehw_rbac_smoke_test_namespace": "default",
             "kubehw_rbac_plugin_daemonsets": SUITE_PLUGIN_DAEMONSETS}


# The least-privilege identity of the running test (least_privilege_kubeconfig): its ServiceAccount namespace and
# name, which rbac_objects() binds to unless told otherwise, so a fixture granting the identity more (a plugin or DRA
# namespace of a test's own) binds the identity the test's modules run as. Reset by Cluster.close().
IDENTITY_NAMES = {}


def rbac_objects(**overrides):
    import jinja2

    from ansible.module_utils.parsing.convert_bool import boolean

    env = jinja2.Environment()
    # The template uses Jinja's own filters and Ansible's bool. Not ansible's whole filter set: its `default`
    # (ansible-core 2.19) does not see plain Jinja's Undefined, so `x | default(true) | bool` became false.
    env.filters["bool"] = lambda value: boolean(value, strict=False)
    with open(RBAC_TEMPLATE) as f:
        variables = dict(RBAC_VARS, **IDENTITY_NAMES)
        variables.update(overrides)
        docs = [d for d in yaml.safe_load_all(env.from_string(f.read()).render(**variables)) if d]
    problems = [d for d in docs if d["kind"] == "KubehwRbacProblems"]
    assert not problems, problems   # playbooks/rbac.yml stops on these
    return docs


def _deleter(cluster, doc):
    kind, meta = doc["kind"], doc["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    calls = {
        "Namespace": lambda: cluster.core.delete_namespace(name, _preload_content=False),
        "ServiceAccount": lambda: cluster.core.delete_namespaced_service_account(name, namespace, _preload_content=False),
        "ClusterRole": lambda: cluster.rbac.delete_cluster_role(name, _preload_content=False),
        "ClusterRoleBinding": lambda: cluster.rbac.delete_cluster_role_binding(name, _preload_content=False),
        "Role": lambda: cluster.rbac.delete_namespaced_role(name, namespace, _preload_content=False),
        "RoleBinding": lambda: cluster.rbac.delete_namespaced_role_binding(name, namespace, _preload_content=False),
    }
    return calls[kind]


def create_objects(cluster, docs):
    """Create these objects as the admin (namespaces that exist are left alone); deleted after the test."""
    from kubernetes import utils

    existing = set(ns.metadata.name for ns in cluster.core.list_namespace().items)
    for doc in docs:
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] in existing:
            continue
        try:
            utils.create_from_dict(cluster.api_client, doc)
        except utils.FailToCreateError as err:
            if any(e.status != 409 for e in err.api_exceptions):
                raise
            continue    # made earlier in this test (the least-privilege identity of the run): left to that
        cluster.on_close("delete %s %s" % (doc["kind"], doc["metadata"]["name"]), _deleter(cluster, doc))


def grant_plugin_namespace(cluster, namespace):
    """In least-privilege runs, the shipped plugin Role and its binding, in another plugin namespace."""
    if not least_privilege():
        return
    names = suite_identity_names(cluster)
    role = "%s-plugins" % names["kubehw_rbac_name"]
    create_objects(cluster, [doc for doc in rbac_objects(**dict(names, kubehw_rbac_plugin_namespace=namespace))
                             if doc["metadata"]["name"] == role])


def own_rbac_names(cluster, **overrides):
    """Template variables that give the shipped RBAC names of this test's own (identity namespace, role prefix,
    plugin and DRA namespaces, smoke-test namespace), so a test that changes or deletes them touches nothing another
    test, run or the cluster's own kubehw identity uses."""
    variables = {"kubehw_rbac_name": cluster.unique_name("rbac"), "kubehw_rbac_namespace": cluster.unique_name("id"),
                 "kubehw_rbac_plugin_namespace": cluster.unique_name("plugins"),
                 "kubehw_rbac_dra_namespace": cluster.unique_name("dra"),
                 "kubehw_rbac_smoke_test_namespace": cluster.namespace(),
                 # the DRA drivers' own ClusterRoles are named after their DaemonSets, shared by the whole cluster
                 "kubehw_rbac_dra_presets": []}
    variables.update(overrides)
    return variables


def rbac_identity_kubeconfig(cluster, filename, **overrides):
    """Create the shipped RBAC objects (playbooks/templates/rbac.yaml.j2 rendered with RBAC_VARS and
    overrides) as the admin; return a kubeconfig of a TokenRequest token of the automation account."""
    create_objects(cluster, rbac_objects(**overrides))
    params = dict(RBAC_VARS, **overrides)
    token = cluster.request_token(params["kubehw_rbac_service_account"], params["kubehw_rbac_namespace"])
    return cluster.token_kubeconfig(token, filename)


def suite_identity_names(cluster):
    """The template variables of the running test's least-privilege identity: RBAC_VARS (the smoke tests' namespace
    default, the DaemonSets the suites write) under names of the test's own (own_rbac_names: ClusterRoles,
    bindings, the identity's namespace, the plugin namespace), so two tests, xdist workers or runs on one real
    cluster never share, and never delete, each other's identity, and the cluster's own kubehw identity is never
    touched. The ServiceAccount keeps its name, automation, in that namespace of the test's own."""
    if cluster.identity_names is None:
        # no request here: the Cluster sets the identity up when it opens (IDENTITY_NAMES), before any fixture grants it
        # more. The DRA presets stay the template's default, as the DRA suites' grants expect (their drivers'
        # ClusterRoles are named after the DaemonSets, so shared on a real cluster).
        cluster.identity_names = dict(RBAC_VARS, kubehw_rbac_name=cluster.unique_name("rbac"),
                                      kubehw_rbac_namespace=cluster.unique_name("id"),
                                      kubehw_rbac_plugin_namespace=cluster.unique_name("plugins"),
                                      kubehw_rbac_dra_namespace=cluster.unique_name("dra"))
    return cluster.identity_names


def identity_user(cluster):
    """The user name the least-privilege identity of the running test authenticates as."""
    names = suite_identity_names(cluster)
    return "system:serviceaccount:%s:%s" % (names["kubehw_rbac_namespace"], names["kubehw_rbac_service_account"])


def least_privilege_kubeconfig(cluster, directory):
    """The least-privilege identity of the shipped RBAC (any cluster: objects created, token requested), under
    names of the test's own (suite_identity_names)."""
    del directory  # kept for callers; the kubeconfig lives in the cluster's own work directory
    return rbac_identity_kubeconfig(cluster, "least-privilege.kubeconfig", **suite_identity_names(cluster))
