# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device-plugin presets: one table per plugin, each default learned from the upstream project's own files.

Private to the collection. To add a preset: write its table below, add it to PRESETS, and (only if it
has options of its own) teach _device_plugin_manifest.py about them. To move to a new upstream release,
change its entry in _images.py and check the table against that release's manifest.

Each table says:
  name, container      default DaemonSet and container names
  image                from the collection's image list (_images.py)
  resources            the extended resources the plugin registers
  serves_any           True when a node has only some of them (a node's GPUs use one kernel driver or the other)
  base_taints          taints of the vendor's node pools, tolerated whatever resources are served
  tolerations          further tolerations, as upstream sets them
  node_terms           node-affinity alternatives (ORed); each a list of (label, value) pairs that must all hold
  args, env            container arguments and environment
  mounts               hostPath mounts
  security_context     the container's
  runtime_class        runtimeClassName of the pods (None: the node's default runtime)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils._images import reference

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"

# Tolerated by upstream NVIDIA and AMD manifests: the taint of nodes reserved for critical add-ons.
CRITICAL_ADDONS_ONLY = {"key": "CriticalAddonsOnly", "operator": "Exists"}
# The upstream AMD and Intel images are built for amd64 only; their manifests select it.
AMD64 = ("kubernetes.io/arch", "amd64")
NFD = "feature.node.kubernetes.io/"


def mount(name, path, path_type=None, read_only=False):
    """A hostPath volume mounted at the same path in the container."""
    return {"name": name, "path": path, "type": path_type, "read_only": read_only}


DEVICE_PLUGINS_MOUNT = mount("device-plugins", DEVICE_PLUGIN_DIR, "Directory")
NO_PRIVILEGES = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

NVIDIA = {
    # NVIDIA/k8s-device-plugin v0.20.0: deployments/static/nvidia-device-plugin.yml and the Helm chart
    # deployments/helm/nvidia-device-plugin (values.yaml, templates/_helpers.tpl, templates/daemonset-device-plugin.yml)
    "name": "nvidia-device-plugin",
    "container": "nvidia-device-plugin",
    "image": reference("nvidia_device_plugin"),
    "resources": ["nvidia.com/gpu"],
    "serves_any": False,
    # values.yaml tolerations: nvidia.com/gpu NoSchedule and CriticalAddonsOnly; with time-slicing renames or MIG
    # resources the pool's nvidia.com/gpu taint must still be tolerated
    "base_taints": ["nvidia.com/gpu"],
    "tolerations": [CRITICAL_ADDONS_ONLY],
    "node_terms": [
        [(NFD + "pci-10de.present", "true")],        # NFD as the GPU Operator configures it (vendor only); values.yaml
        [(NFD + "pci-0300_10de.present", "true")],   # stock NFD: class 0300 (VGA controller) + vendor 10de
        [(NFD + "pci-0302_10de.present", "true")],   # stock NFD: class 0302 (3D controller: data-centre GPUs)
        [(NFD + "cpu-model.vendor_id", "NVIDIA")],   # Tegra (Jetson) boards; values.yaml
        [("nvidia.com/gpu.present", "true")],        # GPU Feature Discovery; values.yaml
    ],
    "args": [],
    "env": [],
    "mounts": [DEVICE_PLUGINS_MOUNT],
    # static manifest; templates/_helpers.tpl swaps it for SYS_ADMIN with MIG or volume-mounts (nvidia_security_context)
    "security_context": NO_PRIVILEGES,
    # the plugin loads NVML, which only the NVIDIA runtime injects; the nvidia_container_toolkit role creates it
    "runtime_class": "nvidia",
}

AMD = {
    # ROCm/k8s-device-plugin v1.31.0.10: k8s-ds-amdgpu-dp.yaml; helm/amd-gpu (values.yaml, deviceplugin-daemonset.yaml)
    "name": "amdgpu-device-plugin",
    "container": "amdgpu-device-plugin",
    "image": reference("amd_device_plugin"),
    "resources": ["amd.com/gpu"],
    "serves_any": False,
    "base_taints": ["amd.com/gpu"],
    "tolerations": [CRITICAL_ADDONS_ONLY],          # k8s-ds-amdgpu-dp.yaml and values.yaml
    "node_terms": [
        [(NFD + "pci-1002.present", "true"), AMD64],       # NFD configured vendor-only
        [(NFD + "pci-0300_1002.present", "true"), AMD64],  # stock NFD, VGA class; values.yaml node_selector
        [(NFD + "pci-0380_1002.present", "true"), AMD64],  # stock NFD, display class 0380 (Instinct accelerators)
    ],
    "args": [],                                      # -resource_naming_strategy is added from the option
    "env": [],
    "mounts": [DEVICE_PLUGINS_MOUNT, mount("sys", "/sys")],
    "security_context": NO_PRIVILEGES,               # values.yaml securityContext
    "runtime_class": None,
}

INTEL_GPU = {
    # intel/intel-device-plugins-for-kubernetes v0.36.0: deployments/gpu_plugin/base/intel-gpu-plugin.yaml, the
    # nfd_labeled_nodes overlay, deployments/nfd/overlays/node-feature-rules/node-feature-rules.yaml, cmd/gpu_plugin
    "name": "intel-gpu-plugin",
    "container": "intel-gpu-plugin",
    "image": reference("intel_gpu_plugin"),
    # cmd/gpu_plugin/gpu_plugin.go: namespace gpu.intel.com, device types i915 and xe (one per kernel driver)
    "resources": ["gpu.intel.com/i915", "gpu.intel.com/xe"],
    "serves_any": True,
    "base_taints": ["gpu.intel.com/i915", "gpu.intel.com/xe"],
    "tolerations": [],
    "node_terms": [
        [("intel.feature.node.kubernetes.io/gpu", "true"), AMD64],  # Intel's NFD rule (vendor 8086, class 0300/0380)
        [(NFD + "pci-0300_8086.present", "true"), AMD64],           # stock NFD, VGA class
        [(NFD + "pci-0380_8086.present", "true"), AMD64],           # stock NFD, display class 0380 (discrete GPUs)
    ],
    "args": [],
    "env": [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ],
    "mounts": [
        mount("devfs", "/dev/dri", read_only=True),
        mount("sysfsdrm", "/sys/class/drm", read_only=True),
        DEVICE_PLUGINS_MOUNT,
        mount("cdipath", "/var/run/cdi", "DirectoryOrCreate"),
    ],
    "security_context": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "seLinuxOptions": {"type": "container_device_plugin_t"},
    },
    "runtime_class": None,
}

GENERIC = {
    # squat/generic-device-plugin 0.1.0: manifests/generic-device-plugin.yaml; the device rules are main.go's
    "name": "generic-device-plugin",
    "container": "generic-device-plugin",
    "image": reference("generic_device_plugin"),
    "resources": [],                                 # <domain>/<device name>, from the devices option
    "serves_any": False,
    "base_taints": [],
    "tolerations": [],
    "node_terms": [],                                # upstream runs it everywhere; set node_selector
    "args": [],
    "env": [],
    "mounts": [DEVICE_PLUGINS_MOUNT, mount("dev", "/dev")],
    # it opens host device nodes for the containers it serves, which is why upstream runs it privileged
    "security_context": {"privileged": True},
    "runtime_class": None,
}

CUSTOM = {
    "name": None,
    "container": "device-plugin",
    "image": None,
    "resources": [],
    "serves_any": False,
    "base_taints": [],
    "tolerations": [],
    "node_terms": [],
    "args": [],
    "env": [],
    "mounts": [DEVICE_PLUGINS_MOUNT],
    "security_context": NO_PRIVILEGES,
    "runtime_class": None,
}

PRESETS = {"nvidia": NVIDIA, "amd": AMD, "intel_gpu": INTEL_GPU, "generic": GENERIC, "custom": CUSTOM}
PRESET_NAMES = ("nvidia", "amd", "intel_gpu", "generic", "custom")

# -- options of one preset ---------------------------------------------------------------------------------------

MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
AMD_NAMING_STRATEGIES = ("single", "mixed")
NVIDIA_ONLY = ("mig_strategy", "device_list_strategy", "device_id_strategy", "time_slicing")
AMD_ONLY = ("resource_naming_strategy",)
GENERIC_ONLY = ("devices", "device_domain")
GENERIC_DEFAULT_DOMAIN = "squat.ai"


def nvidia_needs_sys_admin(params):
    """templates/_helpers.tpl (requiresCapSysAdmin): a MIG strategy other than none, or volume-mounts."""
    return (params.get("mig_strategy") or "none") != "none" or \
        "volume-mounts" in (params.get("device_list_strategy") or [])


def nvidia_security_context(params):
    if nvidia_needs_sys_admin(params):
        # templates/_helpers.tpl: exactly this, no drop list (MIG monitoring and volume-mounts need SYS_ADMIN)
        return {"capabilities": {"add": ["SYS_ADMIN"]}}
    return NVIDIA["security_context"]


def nvidia_env(params):
    """templates/daemonset-device-plugin.yml: NVIDIA_MIG_MONITOR_DEVICES=all when a MIG strategy is set."""
    if (params.get("mig_strategy") or "none") != "none":
        return {"NVIDIA_MIG_MONITOR_DEVICES": "all"}
    return {}
