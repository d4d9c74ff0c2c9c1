# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA driver presets: one table per driver, each default with the upstream file and release it comes from.

Private to the collection. dra_driver_deploy builds the kubelet-plugin DaemonSet, the ServiceAccount, the
ClusterRole and its binding, and the DeviceClasses from these tables. Read from the upstream repositories:

- the DRA example driver: kubernetes-sigs/dra-example-driver, tag v0.4.0, deployments/helm/dra-example-driver/
  (values.yaml, templates/kubeletplugin.yaml, clusterrole.yaml, deviceclass.yaml, _helpers.tpl);
- NVIDIA's GPU DRA driver: NVIDIA/k8s-dra-driver-gpu, tag v25.12.0, deployments/helm/nvidia-dra-driver-gpu/
  (values.yaml, templates/kubeletplugin.yaml, rbac-kubeletplugin.yaml, deviceclass-gpu.yaml, deviceclass-mig.yaml).
  Only the GPU part (resources.gpus): ComputeDomains need the chart's CRDs and its controller Deployment
  (templates/controller.yaml is rendered only with resources.computeDomains.enabled), which this collection
  does not install;
- Intel's GPU resource driver: intel/intel-resource-drivers-for-kubernetes, tag gpu-v0.11.0,
  deployments/gpu/base/ (resource-driver.yaml, device-class.yaml).

What differs from upstream, on purpose: the DaemonSet, ServiceAccount, ClusterRole and ClusterRoleBinding
are all named after the DaemonSet (one rule, so the rbac playbook can create them for rbac=existing), the
namespace is the collection's (kubehw-dra-drivers), and no DeviceClass maps an extended resource unless the
task asks for it (NVIDIA's chart maps nvidia.com/gpu on v1, which would take that name from a device plugin
still serving it during a migration).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PLUGINS_DIR = "/var/lib/kubelet/plugins"
REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"


def _env(name, value):
    return {"name": name, "value": value}


def _field_env(name, field_path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def _volume(name, path, path_type=None):
    host_path = {"path": path}
    if path_type:
        host_path["type"] = path_type
    return {"name": name, "hostPath": host_path}


def _mount(name, path, read_only=False, propagation=None):
    mount = {"name": name, "mountPath": path}
    if read_only:
        mount["readOnly"] = True
    if propagation:
        mount["mountPropagation"] = propagation
    return mount


def _grpc_probe(port, period, failure, timeout=None):
    probe = {"grpc": {"port": port, "service": "liveness"}, "failureThreshold": failure, "periodSeconds": period}
    if timeout:
        probe["timeoutSeconds"] = timeout
    return probe


# -- the DRA example driver (kubernetes-sigs/dra-example-driver v0.4.0) ------------------------------------------
EXAMPLE = {
    # _helpers.tpl driverName: derived from deviceProfile "gpu" (values.yaml) -> gpu.example.com
    "driver": "gpu.example.com",
    # templates/kubeletplugin.yaml: <fullname>-kubeletplugin, fullname = the chart name for a release of that name
    "name": "dra-example-driver-kubeletplugin",
    # values.yaml image.repository; the tag defaults to Chart.yaml appVersion v0.4.0
    "image": "registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0",
    "init_containers": [],
    "containers": [{
        "name": "plugin",                                   # templates/kubeletplugin.yaml
        "command": ["dra-example-kubeletplugin"],           # templates/kubeletplugin.yaml
        "env": [
            _env("DRIVER_NAME", "gpu.example.com"),         # templates/kubeletplugin.yaml, from _helpers.tpl
            _env("DEVICE_PROFILE", "gpu"),                  # values.yaml deviceProfile
            _env("CDI_ROOT", "/var/run/cdi"),               # templates/kubeletplugin.yaml
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),     # values.yaml kubeletPlugin
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),        # values.yaml kubeletPlugin
            _field_env("NODE_NAME", "spec.nodeName"),       # templates/kubeletplugin.yaml
            _field_env("NAMESPACE", "metadata.namespace"),  # templates/kubeletplugin.yaml
            _env("NUM_DEVICES", "8"),                       # values.yaml kubeletPlugin.numDevices
            _env("HEALTHCHECK_PORT", "51515"),              # values.yaml kubeletPlugin.containers.plugin.healthcheckPort
            _field_env("POD_UID", "metadata.uid"),          # templates/kubeletplugin.yaml
        ],
        # values.yaml kubeletPlugin.containers.plugin.healthcheckPort; templates/kubeletplugin.yaml livenessProbe
        "liveness_probe": _grpc_probe(51515, period=10, failure=3),
        "security_context": {"privileged": True},           # values.yaml kubeletPlugin.containers.plugin
        "mounts": [_mount("plugins-registry", REGISTRY_DIR), _mount("plugins", PLUGINS_DIR),
                   _mount("cdi", "/var/run/cdi")],          # templates/kubeletplugin.yaml volumeMounts
    }],
    "volumes": [_volume("plugins-registry", REGISTRY_DIR), _volume("plugins", PLUGINS_DIR),
                _volume("cdi", "/var/run/cdi")],            # templates/kubeletplugin.yaml volumes
    "priority_class": "system-node-critical",               # values.yaml kubeletPlugin.priorityClassName
    # values.yaml kubeletPlugin.updateStrategy (a new plugin pod starts before the old one stops)
    "update_strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    "node_terms": [],                                       # values.yaml kubeletPlugin.affinity: {} (every node)
    "tolerations": [],                                      # values.yaml kubeletPlugin.tolerations: []
    "rules": [                                              # templates/clusterrole.yaml
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ],
    "device_classes": [                                     # templates/deviceclass.yaml
        {"name": "gpu.example.com", "selectors": ["device.driver == 'gpu.example.com'"]},
    ],
}

# -- NVIDIA's GPU DRA driver (NVIDIA/k8s-dra-driver-gpu v25.12.0), GPUs only -------------------------------------
_NVIDIA_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"   # values.yaml image.repository; tag v + appVersion
NVIDIA = {
    "driver": "gpu.nvidia.com",                             # templates/deviceclass-gpu.yaml selector
    "name": "nvidia-dra-driver-gpu-kubelet-plugin",         # templates/kubeletplugin.yaml: <chart name>-kubelet-plugin
    "image": _NVIDIA_IMAGE,
    "init_containers": [{
        "name": "init-container",                           # templates/kubeletplugin.yaml initContainers
        "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],    # waits for the driver root to be ready
        "env": [
            _env("NVIDIA_DRIVER_ROOT", "/"),                # values.yaml nvidiaDriverRoot
            _env("NVIDIA_VISIBLE_DEVICES", "void"),
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),     # values.yaml kubeletPlugin
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),
        ],
        "security_context": {"privileged": True},
        "mounts": [_mount("driver-root-parent", "/driver-root-parent", read_only=True)],   # nvidiaDriverRoot "/"
    }],
    "containers": [{
        "name": "gpus",                                     # templates/kubeletplugin.yaml (resources.gpus.enabled)
        "command": ["gpu-kubelet-plugin"],
        "args": ["-v", "$(LOG_VERBOSITY)"],                 # the chart's start command passes -v $(LOG_VERBOSITY)
        "env": [
            _env("LOG_VERBOSITY", "4"),                     # values.yaml logVerbosity
            _env("NVIDIA_DRIVER_ROOT", "/"),                # values.yaml nvidiaDriverRoot
            _env("NVIDIA_VISIBLE_DEVICES", "void"),
            _env("CDI_ROOT", "/var/run/cdi"),
            _env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
            _field_env("NODE_NAME", "spec.nodeName"),
            _field_env("NAMESPACE", "metadata.namespace"),
            _env("IMAGE_NAME", _NVIDIA_IMAGE),              # replaced with the image actually deployed
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),
            _env("HEALTHCHECK_PORT", "51516"),              # values.yaml kubeletPlugin.containers.gpus.healthcheckPort
        ],
        "startup_probe": _grpc_probe(51516, period=10, failure=60, timeout=10),     # templates/kubeletplugin.yaml
        "liveness_probe": _grpc_probe(51516, period=30, failure=3, timeout=10),     # templates/kubeletplugin.yaml
        "security_context": {"privileged": True},           # values.yaml kubeletPlugin.containers.gpus
        "mounts": [_mount("plugins-registry", REGISTRY_DIR),
                   _mount("plugins", PLUGINS_DIR, propagation="Bidirectional"),
                   _mount("cdi", "/var/run/cdi"),
                   _mount("driver-root", "/driver-root", propagation="HostToContainer")],
    }],
    "volumes": [_volume("plugins-registry", REGISTRY_DIR), _volume("plugins", PLUGINS_DIR),
                _volume("cdi", "/var/run/cdi"),
                _volume("driver-root-parent", "/", "DirectoryOrCreate"),    # nvidiaDriverRoot "/": its parent is "/"
                _volume("driver-root", "/", "DirectoryOrCreate")],
    "priority_class": "system-node-critical",               # values.yaml kubeletPlugin.priorityClassName
    "update_strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},   # values.yaml
    # values.yaml kubeletPlugin.affinity: any of NFD's NVIDIA PCI label, NFD's CPU vendor (Grace), GFD's label
    "node_terms": [
        [("feature.node.kubernetes.io/pci-10de.present", "true")],
        [("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA")],
        [("nvidia.com/gpu.present", "true")],
    ],
    "tolerations": [],                                      # values.yaml kubeletPlugin.tolerations: []
    "rules": [                                              # templates/rbac-kubeletplugin.yaml, without computedomains
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ],
    "device_classes": [
        # templates/deviceclass-gpu.yaml (the chart also sets extendedResourceName nvidia.com/gpu on v1: see above)
        {"name": "gpu.nvidia.com",
         "selectors": ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"]},
        # templates/deviceclass-mig.yaml
        {"name": "mig.nvidia.com",
         "selectors": ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"]},
    ],
}

# -- Intel's GPU resource driver (intel/intel-resource-drivers-for-kubernetes gpu-v0.11.0) ----------------------
INTEL = {
    "driver": "gpu.intel.com",                              # deployments/gpu/base/device-class.yaml
    "name": "intel-gpu-resource-driver-kubelet-plugin",     # deployments/gpu/base/resource-driver.yaml
    # resource-driver.yaml names :latest; the release's own tag pins it (kustomization.yaml images comment)
    "image": "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0",
    "init_containers": [],
    "containers": [{
        "name": "kubelet-plugin",                           # resource-driver.yaml
        "command": ["/kubelet-gpu-plugin"],
        "ports": [{"name": "healthcheck", "containerPort": 51516}],
        "env": [
            _field_env("NODE_NAME", "spec.nodeName"),
            _field_env("POD_NAMESPACE", "metadata.namespace"),
            _env("SYSFS_ROOT", "/sysfs"),
        ],
        "startup_probe": _grpc_probe(51516, period=10, failure=60, timeout=10),
        "liveness_probe": _grpc_probe(51516, period=30, failure=3, timeout=10),
        "security_context": {"privileged": True, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True,
                             "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
        "mounts": [_mount("plugins-registry", REGISTRY_DIR), _mount("plugins", PLUGINS_DIR),
                   _mount("cdi", "/etc/cdi"), _mount("varruncdi", "/var/run/cdi"),
                   _mount("sysfs", "/sysfs"), _mount("xpumd-socket", "/run/xpumd")],
    }],
    "volumes": [_volume("plugins-registry", REGISTRY_DIR), _volume("plugins", PLUGINS_DIR),
                _volume("cdi", "/etc/cdi"), _volume("varruncdi", "/var/run/cdi"),
                _volume("sysfs", "/sys"), _volume("xpumd-socket", "/run/xpumd")],
    "priority_class": None,                                 # resource-driver.yaml sets none
    "update_strategy": None,                                # resource-driver.yaml sets none (the API's default)
    # deployments/gpu/overlays/nfd_labeled_nodes: nodeSelector intel.feature.node.kubernetes.io/gpu=true; the base
    # runs everywhere. The preset keeps the base (node_selector restricts it).
    "node_terms": [],
    "tolerations": [],
    "rules": [                                              # resource-driver.yaml ClusterRole
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    ],
    "device_classes": [                                     # device-class.yaml (gpu-vfio.intel.com is for VMs: left out)
        {"name": "gpu.intel.com", "selectors": ['device.driver == "gpu.intel.com"']},
    ],
}

PRESETS = {"example": EXAMPLE, "nvidia": NVIDIA, "intel": INTEL}
PRESET_NAMES = ("example", "nvidia", "intel")
