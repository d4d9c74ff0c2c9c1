# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The devices DRA drivers' kubelet plugins publish, in each driver's shape, and the ResourceSlice that carries them:
what the kubelet core (kubelet_core.py) wants published for a node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Image substring -> the DRA driver its kubelet plugin registers, the node inventory key it publishes devices from,
# and the shape of its devices ("profile"). Drivers: registry.k8s.io/dra-example-driver (kubernetes-sigs/dra-example-
# driver), nvcr.io/nvidia/k8s-dra-driver-gpu (gpu.nvidia.com), intel-gpu-resource-driver (gpu.intel.com),
# rocm/k8s-gpu-dra-driver (gpu.amd.com).
# Configuration key dra_drivers replaces this map; an entry without a profile publishes gpu-N devices with "model".
DEFAULT_DRA_DRIVERS = {
    "dra-example-driver": {"driver": "gpu.example.com", "inventory": "example.com/gpu", "profile": "example"},
    "k8s-dra-driver-gpu": {"driver": "gpu.nvidia.com", "inventory": "nvidia.com/gpu", "profile": "nvidia"},
    # the same driver since its move to kubernetes-sigs (dra-driver-nvidia-gpu v0.4.1, registry.k8s.io); the same
    # device names and attributes (cmd/gpu-kubelet-plugin/deviceinfo.go)
    "dra-driver-nvidia-gpu": {"driver": "gpu.nvidia.com", "inventory": "nvidia.com/gpu", "profile": "nvidia"},
    "intel-gpu-resource-driver": {"driver": "gpu.intel.com", "inventory": "gpu.intel.com/i915", "profile": "intel"},
    "k8s-gpu-dra-driver": {"driver": "gpu.amd.com", "inventory": "amd.com/gpu", "profile": "amd"},
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


def _amd_device(node, i):
    # ROCm/k8s-gpu-dra-driver (2622427) cmd/gpu-kubeletplugin/deviceinfo.go: gpu-<card index>-<render index>, type
    # amdgpu, PCI address, product, driver version; capacity memory, compute and SIMD units
    return {"name": "gpu-%d-%d" % (i + 1, 128 + i),
            "attributes": {"type": {"string": "amdgpu"}, "pciAddr": {"string": "0000:%02x:00.0" % (i + 3)},
                           "cardIndex": {"int": i + 1}, "renderIndex": {"int": 128 + i},
                           "productName": {"string": "AMD Instinct MI300X"}, "driverVersion": {"version": "6.12.12"}},
            "capacity": {"memory": {"value": "192Gi"}, "computeUnits": {"value": "304"}, "simdUnits": {"value": "1216"}}}


def _plain_device(spec, node, i):
    return {"name": "gpu-%d" % i,
            "attributes": {"index": {"int": i}, "model": {"string": spec.get("model", "simulated-gpu")},
                           "uuid": {"string": "GPU-%s-%d" % (node, i)}},
            "capacity": {"memory": {"value": spec.get("memory", DEVICE_MEMORY)}}}


_PROFILES = {"example": _example_device, "nvidia": _nvidia_device, "intel": _intel_device, "amd": _amd_device}


def slice_name(node, driver):
    return "%s-%s" % (node, driver.replace(".", "-"))


def resource_slice(node, spec, count):
    """The one ResourceSlice a driver's kubelet plugin publishes for a node: a pool named after the node, generation 1
    (the transport adds its own metadata: an owner reference or a label)."""
    make = _PROFILES.get(spec.get("profile"))
    devices = [make(node, i) if make else _plain_device(spec, node, i) for i in range(count)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node, spec["driver"])},
            "spec": {"driver": spec["driver"], "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}
