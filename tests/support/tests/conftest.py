# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apiserver the test equipment's own tests run against: the real stage's (KUBECONFIG, with the kubelet
stand-in's identity in KUBEHW_AGENT_KUBECONFIG), else a control plane of their own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from tests.support import control_plane, k8s_binaries

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="session")
def kubeconfigs():
    """(admin, agent) kubeconfig paths: KUBECONFIG's first file (and KUBEHW_AGENT_KUBECONFIG, else the same) when
    set; else a control plane of this session's own (free ports, state under .cache/, stopped at the end)."""
    if os.environ.get("KUBECONFIG"):
        admin = os.environ["KUBECONFIG"].split(os.pathsep)[0]
        yield admin, os.environ.get("KUBEHW_AGENT_KUBECONFIG") or admin
        return
    bin_dir = k8s_binaries.locate()
    if bin_dir is None:
        pytest.skip("no apiserver for the test equipment's tests: KUBECONFIG is not set and no Kubernetes binaries "
                    "were found (tests/support/k8s_binaries.py)")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = os.path.join(REPO_ROOT, ".cache", "support-k8s")
    plane = control_plane.ControlPlane(bin_dir, os.path.join(base, "%s-%d" % (worker, os.getpid()))).start()
    try:
        yield plane.kubeconfig, plane.agent_kubeconfig
    finally:
        plane.stop(wipe=True)


@pytest.fixture(scope="session")
def upstream_kubeconfig(kubeconfigs):
    return kubeconfigs[0]
