# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""device_plugin_deploy on a real kubelet with Kubernetes' sample device plugin (the `custom` preset): the pod
starts, the plugin registers over the kubelet's gRPC socket, `wait: resource` sees the capacity the kubelet
reports, a pod asking for the resource gets a device the plugin allocated, and removal takes it from allocatable."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.support.cluster import wait_for
from tests.support.real_node import DEVICE_PLUGIN_IMAGE, SHELL_IMAGE

NAMESPACE = "kubehw-rn-device-plugins"
RESOURCE = "example.com/resource"      # what the sample plugin registers: two devices, Dev-1 and Dev-2
PLUGIN = {"name": "sample-device-plugin", "namespace": NAMESPACE}


def allocatable(cluster, node_name):
    return json.loads(cluster.core.read_node(node_name, _preload_content=False).data)["status"]["allocatable"]


def test_the_sample_plugin_registers_and_a_pod_gets_one_of_its_devices(real_node, cluster, ansible, node_name):
    cluster.core.create_namespace({"metadata": {"name": NAMESPACE}})
    try:
        deploy = dict(PLUGIN, preset="custom", image=DEVICE_PLUGIN_IMAGE, resource_names=[RESOURCE], wait="resource",
                      min_count=2, wait_timeout=120)
        run = ansible([{"name": "deploy", "kubehw.devices.device_plugin_deploy": deploy}])
        assert run.rc == 0, run.output()
        result = run.result("deploy")
        assert result["changed"] is True
        assert result["node_outcome"] == {node_name: "ready"}
        assert result["nodes"][node_name]["capacity"][RESOURCE] == 2
        assert result["nodes"][node_name]["allocatable"][RESOURCE] == 2

        again = ansible([{"name": "deploy", "kubehw.devices.device_plugin_deploy": deploy}])
        assert again.rc == 0 and again.result("deploy")["changed"] is False, again.output()

        # The kubelet asks the plugin to allocate: the sample plugin mounts its device file into the container.
        run = ansible([
            {"name": "one", "kubehw.devices.resource_smoke_test": {
                "resource": RESOURCE, "node": node_name, "image": SHELL_IMAGE, "command": ["sh", "-c", "ls /tmp"],
                "wait_for": "completed", "timeout": 90}},
            {"name": "three", "kubehw.devices.resource_smoke_test": {
                "resource": RESOURCE, "count": 3, "node": node_name, "expect": "unschedulable", "timeout": 60}},
        ])
        assert run.rc == 0, run.output()
        assert run.result("one")["phase"] == "Succeeded"
        assert "Dev-" in run.result("one")["log"], run.result("one")["log"]
        assert run.result("three")["scheduled"] is False

        removed = ansible([{"name": "remove", "kubehw.devices.device_plugin_deploy": dict(PLUGIN, state="absent")}])
        assert removed.rc == 0 and removed.result("remove")["changed"] is True, removed.output()
        # The kubelet drops the devices from allocatable once the plugin's socket is gone (it keeps the capacity for
        # its endpoint grace period of five minutes, in case the plugin comes back).
        wait_for(lambda: allocatable(cluster, node_name).get(RESOURCE) in (None, "0"), timeout=30,
                 what="the kubelet to take the plugin's devices from allocatable")
    finally:
        cluster.core.delete_namespace(NAMESPACE)
