# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated DRA kubelet plugins against tests/simcluster/FACTS.md ("Dynamic Resource Allocation"): each
driver's device shapes, a new pool generation when a node's devices change, the spec.driver field selector, and
no DaemonSet pod for a ServiceAccount that does not exist. Over raw HTTP, as the modules see the server.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from tests.simcluster.tests.test_api import Raw

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
IMAGES = {"gpu.example.com": "registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0",
          "gpu.nvidia.com": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0",
          "gpu.intel.com": "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0"}


def _wait(fn, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    return fn()


def plugin_pod(name, node, image, account=None):
    spec = {"nodeName": node, "containers": [{"name": "plugin", "image": image}]}
    if account:
        spec["serviceAccountName"] = account
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kube-system"}, "spec": spec}


def test_each_driver_publishes_its_own_device_shapes_and_a_new_generation_on_change(simcluster_factory):
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "n1", "inventory": {"example.com/gpu": 1, "nvidia.com/gpu": 1, "gpu.intel.com/i915": 1}}]})
    raw = Raw(sim)
    for driver, image in sorted(IMAGES.items()):
        assert raw.request("POST", "/api/v1/namespaces/kube-system/pods",
                           plugin_pod(driver.replace(".", "-"), "n1", image))[0] == 201
    published = _wait(lambda: len(raw.request("GET", SLICES)[1]["items"]) == 3 and raw.request("GET", SLICES)[1])
    by_driver = dict((s["spec"]["driver"], s["spec"]) for s in published["items"])
    assert set(by_driver) == set(IMAGES)
    example = by_driver["gpu.example.com"]["devices"][0]
    assert example["name"] == "gpu-0" and example["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}
    assert example["attributes"]["driverVersion"] == {"version": "1.0.0"}
    assert example["capacity"]["memory"] == {"value": "80Gi"}
    nvidia = by_driver["gpu.nvidia.com"]["devices"][0]
    assert nvidia["name"] == "gpu-0" and nvidia["attributes"]["type"] == {"string": "gpu"}
    intel = by_driver["gpu.intel.com"]["devices"][0]
    assert intel["name"] == "0000-03-00-0-0x56a0" and intel["attributes"]["family"] == {"string": "Arc A-Series"}
    for spec in by_driver.values():
        assert spec["pool"] == {"name": "n1", "generation": 1, "resourceSliceCount": 1}

    # one GPU more: the example driver's pool is republished as generation 2, in place
    code, listing, _h = raw.request("GET", SLICES + "?fieldSelector=spec.driver%3Dgpu.example.com")
    assert code == 200 and [s["spec"]["driver"] for s in listing["items"]] == ["gpu.example.com"]
    name = listing["items"][0]["metadata"]["name"]
    sim.dra_plugins.set_inventory("n1", "example.com/gpu", 2)
    changed = _wait(lambda: raw.request("GET", SLICES + "/" + name)[1]["spec"]["pool"]["generation"] == 2
                    and raw.request("GET", SLICES + "/" + name)[1])
    assert [d["name"] for d in changed["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    assert raw.request("GET", SLICES + "?fieldSelector=spec.nodeName%3Dn1")[1]["items"]
    # a field ResourceSlices do not have is refused, as for every kind
    assert raw.request("GET", SLICES + "?fieldSelector=spec.pool%3Dn1")[0] == 400


def test_a_daemonset_pod_naming_a_missing_service_account_is_not_created(simcluster_factory):
    sim = simcluster_factory({"sync_interval": 0.2, "pod_start_delay": 0.1, "nodes": [
        {"name": "n1", "inventory": {"example.com/gpu": 1}}]})
    raw = Raw(sim)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "drv", "namespace": "kube-system"},
          "spec": {"selector": {"matchLabels": {"app": "drv"}}, "template": {
              "metadata": {"labels": {"app": "drv"}},
              "spec": {"serviceAccountName": "drv", "containers": [
                  {"name": "plugin", "image": IMAGES["gpu.example.com"]}]}}}}
    assert raw.request("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", ds)[0] == 201
    time.sleep(1.0)
    pods = "/api/v1/namespaces/kube-system/pods?labelSelector=app%3Ddrv"
    assert raw.request("GET", pods)[1]["items"] == []
    assert raw.request("GET", SLICES)[1]["items"] == []
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "drv", "namespace": "kube-system"}}
    assert raw.request("POST", "/api/v1/namespaces/kube-system/serviceaccounts", account)[0] == 201
    assert _wait(lambda: raw.request("GET", pods)[1]["items"])
    assert _wait(lambda: raw.request("GET", SLICES)[1]["items"])
