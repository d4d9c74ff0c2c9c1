# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_driver_deploy and resource_smoke_test on a real kubelet and containerd with Kubernetes' DRA test driver (the
kubernetes_test preset): the kubelet plugin registers through plugins_registry and publishes its ResourceSlice, a
pod's claim is allocated and prepared, and containerd injects the claim's CDI device into the container; with CDI
switched off in containerd the same pod fails and the smoke test says why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from tests.support.playbook_runner import AnsibleRunner
from tests.support.real_node import DRA_DRIVER_IMAGE, SHELL_IMAGE

NAMESPACE = "kubehw-rn-dra"
DRIVER = "test-driver.cdi.k8s.io"
# The test driver's CDI spec for a prepared claim sets claim_<claim>_<request>=true in the container.
SEES_THE_CLAIM = ["sh", "-c", "env | grep '^claim_.*=true'"]
# The toolkit role's containerd drop-in (its enable_cdi = true is what turns CDI on: the node's main configuration
# has it off, tests/support/real_node_files/runtime.yml).
TOOLKIT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def driver_task(state="present"):
    task = {"preset": "kubernetes_test", "namespace": NAMESPACE, "state": state}
    if state == "present":
        task.update(image=DRA_DRIVER_IMAGE, wait="devices", wait_timeout=120)
    return [{"name": "driver", "kubehw.devices.dra_driver_deploy": task}]


def smoke_task(node_name):
    return [{"name": "smoke", "kubehw.devices.resource_smoke_test": {
        "device_class": DRIVER, "node": node_name, "image": SHELL_IMAGE, "command": SEES_THE_CLAIM,
        "wait_for": "completed", "timeout": 90}}]


@pytest.fixture(scope="module")
def deployed(real_node, cluster, collections, tmp_path_factory):
    """The test driver deployed by the module (its first run's result), removed after the file's tests."""
    runner = AnsibleRunner(str(tmp_path_factory.mktemp("dra")), collections, real_node.control_plane.kubeconfig)
    cluster.core.create_namespace({"metadata": {"name": NAMESPACE}})
    try:
        run = runner(driver_task())
        assert run.rc == 0, run.output()
        yield run.result("driver")
    finally:
        removed = runner(driver_task("absent"))
        cluster.core.delete_namespace(NAMESPACE)
        assert removed.rc == 0, removed.output()


def slices_of(cluster, node_name):
    from kubernetes import client
    items = json.loads(client.CustomObjectsApi(cluster.api_client).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector="spec.driver=" + DRIVER,
        _preload_content=False).data)["items"]
    return [s for s in items if s["spec"].get("nodeName") == node_name]


def test_the_driver_publishes_devices_and_a_claim_reaches_the_container(deployed, cluster, ansible, node_name):
    assert deployed["changed"] is True
    assert deployed["node_outcome"] == {node_name: "ready"}
    published = slices_of(cluster, node_name)
    assert published and sum(len(s["spec"].get("devices") or []) for s in published) >= 1, published

    again = ansible(driver_task())
    assert again.rc == 0 and again.result("driver")["changed"] is False, again.output()

    run = ansible(smoke_task(node_name))
    assert run.rc == 0, run.output()
    smoke = run.result("smoke")
    assert smoke["phase"] == "Succeeded" and smoke["exit_code"] == 0
    assert smoke["allocation"][0]["driver"] == DRIVER and smoke["allocation"][0]["pool"] == node_name
    assert "claim_" in smoke["log"]
    assert smoke["claims_deleted"] is True


def test_without_the_roles_cdi_setting_the_claim_never_reaches_the_container_and_the_smoke_test_says_why(
        deployed, real_node, ansible, node_name):
    """The toolkit role's drop-in without its enable_cdi line: the main configuration's CDI-off stands, the CRI plugin
    ignores the CDI devices the kubelet passes, and the container never sees the claim. So the passing test above
    passes because of the role's setting."""
    del deployed
    dropin = real_node.run(["cat", TOOLKIT_DROPIN]).stdout
    assert "enable_cdi = true" in dropin, dropin
    saved = "/run/kubehw-node/99-nvidia.toml.saved"
    real_node.run(["cp", "-p", TOOLKIT_DROPIN, saved])
    real_node.run(["sed", "-i", "/enable_cdi/d", TOOLKIT_DROPIN])
    try:
        real_node.restart_containerd()
        run = ansible(smoke_task(node_name))
        assert run.rc != 0, run.output()
        smoke = run.result("smoke")
        assert smoke["phase"] == "Failed" and smoke["exit_code"] == 1
        assert "claim_" not in smoke["log"]
        assert "prepared by the driver" in smoke["msg"] and "enable_cdi = true" in smoke["msg"], smoke["msg"]
        # the node's own containerd (2.x: CDI on unless a configuration turns it off, as the node's main file does)
        assert "the node runs containerd 2." in smoke["msg"] and "sets enable_cdi = false" in smoke["msg"], smoke["msg"]
    finally:
        real_node.run(["mv", saved, TOOLKIT_DROPIN])
        real_node.restart_containerd()
    run = ansible(smoke_task(node_name))
    assert run.rc == 0, run.output()


def test_removing_the_driver_waits_until_the_kubelet_has_removed_its_resource_slices(
        deployed, cluster, ansible, node_name):
    """The last test of the file: the kubelet removes a plugin's ResourceSlices only some time after the plugin has
    stopped (the removal took 34 s in a run on v1.36.2), so the removal waits for it, by watching, and returns when
    the node publishes nothing of the driver."""
    del deployed
    assert slices_of(cluster, node_name), "the driver publishes nothing before its removal"
    run = ansible(driver_task("absent"))
    assert run.rc == 0, run.output()
    removed = run.result("driver")
    assert removed["changed"] and removed["waited_for"] == "devices", removed
    assert slices_of(cluster, node_name) == []
