# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubelet plugins of DRA drivers in the simulated cluster: ResourceSlices published from the node's
inventory by known DRA driver images. Test equipment.

The rest of Dynamic Resource Allocation (``resource.k8s.io``; each behaviour's source is in
tests/simcluster/FACTS.md, "Dynamic Resource Allocation"): dra_versions.py (served versions, discovery,
conversion), dra_validation.py and cel.py (DeviceClass validation, CEL), defaulting.py (claim requests),
dra_allocation.py (the resource claim controller and the scheduler's side). SimCluster starts
``KubeletPlugins``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from tests.simcluster.dra_allocation import sync_claims


# ---------------------------------------------------------------- simulated DRA kubelet plugins

# Image substring -> the DRA driver its kubelet plugin registers, the node inventory key it publishes devices from,
# and the shape of its devices ("profile"). Drivers: registry.k8s.io/dra-example-driver (kubernetes-sigs/dra-example-
# driver), nvcr.io/nvidia/k8s-dra-driver-gpu (gpu.nvidia.com), intel-gpu-resource-driver (gpu.intel.com).
# Configuration key dra_drivers replaces this map; an entry without a profile publishes gpu-N devices with "model".
DEFAULT_DRA_DRIVERS = {
    "dra-example-driver": {"driver": "gpu.example.com", "inventory": "example.com/gpu", "profile": "example"},
    "k8s-dra-driver-gpu": {"driver": "gpu.nvidia.com", "inventory": "nvidia.com/gpu", "profile": "nvidia"},
    # the same driver since its move to kubernetes-sigs (dra-driver-nvidia-gpu v0.4.1, registry.k8s.io); the same
    # device names and attributes (cmd/gpu-kubelet-plugin/deviceinfo.go)
    "dra-driver-nvidia-gpu": {"driver": "gpu.nvidia.com", "inventory": "nvidia.com/gpu", "profile": "nvidia"},
    "intel-gpu-resource-driver": {"driver": "gpu.intel.com", "inventory": "gpu.intel.com/i915", "profile": "intel"},
}
DEVICE_MEMORY = "16Gi"


def _example_device(node, i):
    # kubernetes-sigs/dra-example-driver v0.4.0 internal/profiles/gpu/gpu.go: gpu-N, index, uuid, model
    # LATEST-GPU-MODEL, driverVersion 1.0.0, capacity memory 80Gi
    return {"name": "gpu-%d" % i,
            "attributes": {"index": {"int": i}, "uuid": {"string": "gpu-%s-%d" % (node, i)},
                           "model": {"string": "LATEST-GPU-MODEL"}, "driverVersion": {"version": "1.0.0"}},
            "capacity": {"memory": {"value": "80Gi"}}}


def _nvidia_device(node, i):
    # NVIDIA/k8s-dra-driver-gpu v25.12.0 cmd/gpu-kubelet-plugin/deviceinfo.go: gpu-<minor>, type gpu (what the
    # chart's DeviceClass selects on), uuid, productName, index; capacity memory
    return {"name": "gpu-%d" % i,
            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-%s-%d" % (node, i)},
                           "productName": {"string": "simulated-gpu"}, "index": {"int": i}, "minor": {"int": i}},
            "capacity": {"memory": {"value": "40Gi"}}}


def _intel_device(node, i):
    # intel/intel-resource-drivers-for-kubernetes gpu-v0.11.0 pkg/gpu/device/device.go: the device name is the PCI
    # address and the PCI device id with ':' and '.' as '-' (0000-03-00-0-0x56a0); models.go model and family
    return {"name": "0000-%02x-00-0-0x56a0" % (i + 3),
            "attributes": {"model": {"string": "A770"}, "family": {"string": "Arc A-Series"},
                           "pciId": {"string": "0x56a0"}},
            "capacity": {"memory": {"value": DEVICE_MEMORY}, "millicores": {"value": "1k"}}}


def _plain_device(spec, node, i):
    return {"name": "gpu-%d" % i,
            "attributes": {"index": {"int": i}, "model": {"string": spec.get("model", "simulated-gpu")},
                           "uuid": {"string": "GPU-%s-%d" % (node, i)}},
            "capacity": {"memory": {"value": spec.get("memory", DEVICE_MEMORY)}}}


_PROFILES = {"example": _example_device, "nvidia": _nvidia_device, "intel": _intel_device}


def slice_name(node, driver):
    return "%s-%s" % (node, driver.replace(".", "-"))


class KubeletPlugins:
    """The kubelet side of DRA drivers: once a driver's plugin pod runs and is ready on a node, the node's
    inventory is published as one ResourceSlice (one pool named after the node, owned by the Node), as the
    three drivers do through the kubelet-plugin helper library (k8s.io/dynamic-resource-allocation
    resourceslice controller). When what a node publishes changes (its inventory), the slice is updated with
    the pool's generation one higher. When the pod is gone, the slice is deleted (the kubelet wipes the slices
    of a plugin that unregistered). A pod whose service account does not exist never publishes: the apiserver
    would refuse such a pod, and the DaemonSet controller (controllers.py) does not create it. The same loop
    runs the resource claim controller (sync_claims); the scheduler calls claim_filter_reasons and
    allocate_claims.
    """

    def __init__(self, store, config):
        self.store = store
        self.drivers = dict(config.get("dra_drivers") or DEFAULT_DRA_DRIVERS)
        self.inventory = dict((n["name"], dict(n.get("inventory") or {})) for n in config.get("nodes") or [])
        self.interval = max(float(config.get("sync_interval", 1.0)), 0.05)
        self._stop = None
        self._thread = None

    def start(self):
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="simcluster-dra-plugins", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None

    def _run(self):
        while not self._stop.wait(min(self.interval, 0.5)):
            try:
                self.sync()
                sync_claims(self.store)
            except Exception:  # pylint: disable=broad-except
                # test equipment: a bad object must not stop the plugins of every node
                pass

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost); the next sync republishes with a new generation."""
        self.inventory.setdefault(node, {})[key] = count

    def _drivers_of(self, pod):
        found = []
        for container in (pod.get("spec") or {}).get("containers") or []:
            for needle, spec in self.drivers.items():
                if needle in (container.get("image") or "") and spec not in found:
                    found.append(spec)
        return found

    def _account_exists(self, pod):
        name = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        # "default" exists in every namespace of a real cluster (the service account controller makes it)
        return name == "default" or self.store.get("serviceaccounts", pod["metadata"].get("namespace"), name) is not None

    def wanted(self):
        """(node, driver) -> the ResourceSlice its running plugin publishes."""
        out = {}
        pods, _rv = self.store.list("pods")
        for pod in pods:
            status = pod.get("status") or {}
            node = (pod.get("spec") or {}).get("nodeName")
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            if not node or status.get("phase") != "Running" or not ready or pod["metadata"].get("deletionTimestamp"):
                continue
            if not self._account_exists(pod):
                continue
            for spec in self._drivers_of(pod):
                count = self.inventory.get(node, {}).get(spec["inventory"], 0)
                if count:
                    # a node without such devices publishes nothing (the example driver's pool would be empty)
                    out[(node, spec["driver"])] = self._slice(node, spec, count)
        return out

    def _slice(self, node, spec, count):
        node_obj = self.store.get("nodes", None, node) or {"metadata": {}}
        make = _PROFILES.get(spec.get("profile"))
        devices = [make(node, i) if make else _plain_device(spec, node, i) for i in range(count)]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": slice_name(node, spec["driver"]),
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                  "uid": node_obj["metadata"].get("uid", ""), "controller": True}]},
                "spec": {"driver": spec["driver"], "nodeName": node, "devices": devices,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}

    def sync(self):
        wanted = self.wanted()
        names = dict((slice_name(n, d), obj) for (n, d), obj in wanted.items())
        existing, _rv = self.store.list("resourceslices")
        mine = dict((s["metadata"]["name"], s) for s in existing
                    if any(r.get("kind") == "Node" for r in s["metadata"].get("ownerReferences") or []))
        for name, obj in names.items():
            if name not in mine:
                self.store.create("resourceslices", obj)
            elif mine[name]["spec"].get("devices") != obj["spec"]["devices"]:
                generation = ((mine[name]["spec"].get("pool") or {}).get("generation") or 0) + 1

                def republish(live, devices=obj["spec"]["devices"], generation=generation):
                    live["spec"]["devices"] = devices
                    live["spec"]["pool"] = dict(live["spec"].get("pool") or {}, generation=generation)

                self.store.mutate("resourceslices", None, name, republish)
        for name in mine:
            if name not in names:
                self.store.delete("resourceslices", None, name)
