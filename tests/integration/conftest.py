# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Integration harness: the fixtures. What they hand out lives in tests/support/, one concern a file:
cluster.py (the Cluster a test sees: a real control plane of the suite's own behind the kubelet stand-in and the
fault proxy, or the cluster of KUBECONFIG), identities.py (the least-privilege identity the module suites
run as), playbook_runner.py (ansible-playbook and ansible-inventory with this checkout), write_observer.py (what a test's
modules wrote).

The suite brings what it needs, so the same tests run on every cluster: Node objects of its own, service accounts
with tokens from the TokenRequest API, and RBAC bindings; everything it creates is named kubehw-it-<run id>-... and
deleted after the test.

Fixtures:
  cluster   .controlled, .controls (the fault proxy's and the kubelet stand-in's controls, or None), .kubeconfig,
            .core, .apps, .rbac, .mark(), .writes(since=None), .require_controlled(reason),
            .node_names(), .server()
            (URL, CA file), .create_nodes(specs), .kubelets(nodes, **settings), .service_account(name, ...), .bind(...)
            Mark a test with @pytest.mark.node_config({...}) (or a YAML path) to have the kubelet stand-in
            register those nodes instead of tests/support/node_configs/default.yaml's
            (node_configs.NO_NODES: none, for a test that needs no node).
  kubelet_node  a Ready, schedulable node with a kubelet (pods run there), or a skip naming why
  ansible   ansible(tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None)
            -> PlaybookRun with .rc, .results, .result(name), .stdout, .stderr; .run(plays, inventory) for plays of
            the test's own
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from tests.support.cluster import (
    node_runs_pods, start_own_control_plane, open_cluster, stop_own_control_plane, wait_for)
from tests.support.identities import (
    IDENTITIES, LEAST_PRIVILEGE_SUITES, RUNNING_IDENTITY, create_objects, grant_plugin_namespace, identity_of,
    identity_user, least_privilege, least_privilege_kubeconfig, own_rbac_names, rbac_identity_kubeconfig, rbac_objects)
from tests.support.playbook_runner import AnsibleRunner, collections_path as make_collections_path

# what the test files import from here (the helpers live in tests/support/, one concern a file)
__all__ = ["LEAST_PRIVILEGE_SUITES", "create_objects", "grant_plugin_namespace", "identity_user", "least_privilege",
           "own_rbac_names", "rbac_identity_kubeconfig", "rbac_objects", "wait_for"]


def pytest_unconfigure(config):
    del config
    stop_own_control_plane()


def pytest_configure(config):
    start_own_control_plane(config)
    config.addinivalue_line(
        "markers", "node_config(config): the nodes (dict or YAML path) the kubelet stand-in registers for the test")
    config.addinivalue_line(
        "markers", "least_privilege_identity: the modules run as the shipped least-privilege identity "
                   "(set on the module suites; `pytest -m least_privilege_identity` runs only them)")
    config.addinivalue_line(
        "markers", "integration: a test of tests/integration (set on each; make min-versions runs those also "
                   "marked floor: -m 'floor or not integration')")
    config.addinivalue_line(
        "markers", "floor: run again by make min-versions with the lowest ansible-core and client libraries the "
                   "collection supports (a module's life cycle, or a path of the client library no other such "
                   "test takes)")
    identity = os.environ.get("KUBEHW_IDENTITY", "")
    if identity and identity not in IDENTITIES:
        raise pytest.UsageError("KUBEHW_IDENTITY=%r: must be one of %s or unset" % (identity, ", ".join(IDENTITIES)))


def pytest_collection_modifyitems(config, items):
    del config
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        path = str(item.fspath)   # the unit tests have files of the same names elsewhere
        if os.path.dirname(path) != here:
            continue
        item.add_marker(pytest.mark.integration)
        if os.path.basename(path) in LEAST_PRIVILEGE_SUITES:
            item.add_marker(pytest.mark.least_privilege_identity)


def pytest_report_header(config):
    if os.environ.get("KUBEHW_CONTROL_PLANE"):
        return "kubehw integration: REAL control plane from %s, one per worker, kubelet stand-in for the test nodes" \
            % os.environ["KUBEHW_CONTROL_PLANE"]
    if os.environ.get("KUBECONFIG"):
        return "kubehw integration: REAL cluster from KUBECONFIG=%s" % os.environ["KUBECONFIG"]
    return "kubehw integration: no cluster (run make integration, or set KUBECONFIG)"


@pytest.fixture
def cluster(request):
    marker = request.node.get_closest_marker("node_config")
    config = marker.args[0] if marker and marker.args else None
    RUNNING_IDENTITY["least_privilege"] = identity_of(request.node)
    try:
        with open_cluster(config) as c:
            yield c
    finally:
        RUNNING_IDENTITY["least_privilege"] = False


@pytest.fixture
def kubelet_node(cluster):
    """The name of a node whose kubelet runs pods and copies extended resources from capacity to
    allocatable. A real node: advertise there with cluster.advertise(), which removes what it added
    after the test, and give each test its own resource name (xdist runs tests side by side)."""
    nodes = json.loads(cluster.core.list_node(_preload_content=False).data)["items"]
    usable = sorted(n["metadata"]["name"] for n in nodes if node_runs_pods(n))
    if not usable:
        pytest.skip("the cluster has no Ready, untainted, schedulable node for a test pod")
    return usable[0]


@pytest.fixture(scope="session")
def collections_path(tmp_path_factory):
    """ansible_collections/kubehw/devices pointing at this checkout (plus the cached test deps)."""
    return make_collections_path(str(tmp_path_factory.mktemp("collections")))


@pytest.fixture
def ansible(cluster, collections_path, tmp_path):
    kubeconfig = cluster.kubeconfig
    if least_privilege():
        kubeconfig = least_privilege_kubeconfig(cluster, str(tmp_path))
    return AnsibleRunner(str(tmp_path), collections_path, kubeconfig)
