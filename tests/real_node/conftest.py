# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-node stage (`make node`): the modules against a real kubelet and containerd, one node for the whole run
(tests/support/real_node.py), behind a test control plane of the stage's own.

Fixtures:
  real_node   the RealNode, Ready (its teardown fails the run when the host is not left as it was found)
  cluster     the Cluster of that control plane (tests/support/cluster.py): .core, .apps, .api_client
  ansible     ansible(tasks, ...) -> PlaybookRun, the modules acting as the control plane's administrator
  node_name   the real node's name

Each test names what it creates after itself and removes it. The tests run in one process, in file order: they
share one kubelet, and some restart it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from tests.support import k8s_binaries
from tests.support.cluster import Cluster
from tests.support.control_plane import ControlPlane
from tests.support.playbook_runner import AnsibleRunner, collections_path
from tests.support.real_node import RealNode, host_footprint, unavailable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STATE = os.path.join(REPO_ROOT, ".cache", "real-node")
NODE_NAME = "kubehw-real-node"


def pytest_report_header(config):
    del config
    reason = unavailable()
    if reason:
        return "kubehw real node: none on this machine: %s" % reason
    return "kubehw real node: kubelet and containerd in systemd-nspawn, binaries from %s" % k8s_binaries.locate_node()


@pytest.fixture(scope="session")
def real_node():
    reason = unavailable()
    if reason:
        pytest.fail("no real node can run on this machine: %s" % reason)
    before = host_footprint(STATE)
    plane = ControlPlane(k8s_binaries.locate(), os.path.join(STATE, "control-plane")).start()
    node = RealNode(plane, os.path.join(STATE, "node"), NODE_NAME)
    try:
        node.prepare()
        node.start()
        yield node
    finally:
        try:
            node.stop()
        finally:
            plane.stop(wipe=True)
    after = host_footprint(STATE)
    changed = dict((key, {"before": before[key], "after": after[key]}) for key in before if before[key] != after[key])
    assert not changed, "the real node left the host changed: %r" % changed


@pytest.fixture(scope="session")
def node_name(real_node):
    return real_node.name


@pytest.fixture(scope="session")
def cluster(real_node):
    cluster = Cluster(real_node.control_plane.kubeconfig)
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def collections(tmp_path_factory):
    return collections_path(str(tmp_path_factory.mktemp("collections")))


@pytest.fixture
def ansible(real_node, collections, tmp_path):
    return AnsibleRunner(str(tmp_path), collections, real_node.control_plane.kubeconfig)
