# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA driver presets: one table per driver, each default with the upstream file and release it comes from.

Private to the collection. dra_driver_deploy builds the kubelet-plugin DaemonSet, the ServiceAccount, the
ClusterRole and its binding, and the DeviceClasses from these tables. Read from the upstream repositories:

- the DRA example driver: kubernetes-sigs/dra-example-driver, tag v0.4.0, deployments/helm/dra-example-driver/
  (values.yaml, templates/kubeletplugin.yaml, clusterrole.yaml, deviceclass.yaml, _helpers.tpl);
- NVIDIA's GPU DRA driver: kubernetes-sigs/dra-driver-nvidia-gpu, tag v0.4.1, deployments/helm/dra-driver-nvidia-gpu/
  (values.yaml, templates/kubeletplugin.yaml, rbac-kubeletplugin.yaml, validation.yaml, deviceclass-gpu.yaml,
  deviceclass-mig.yaml), the project's current home; its predecessor NVIDIA/k8s-dra-driver-gpu v25.12.0
  (deployments/helm/nvidia-dra-driver-gpu/, the same templates) differs in the image, the affinity terms, the
  toleration and the startup probe, and runs from this preset with image: nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0.
  Only the GPU part (resources.gpus): ComputeDomains need the chart's CRDs and its controller Deployment
  (templates/controller.yaml is rendered only with resources.computeDomains.enabled), which this collection
  does not install;
- Intel's GPU resource driver: intel/intel-resource-drivers-for-kubernetes, tag gpu-v0.11.0,
  deployments/gpu/base/ (resource-driver.yaml, device-class.yaml) with the node selection of
  deployments/gpu/overlays/nfd_labeled_nodes/add-nodeselector-intel-gpu.yaml;
- AMD's GPU DRA driver: ROCm/k8s-gpu-dra-driver, chart k8s-gpu-dra-driver v0.1.0 (main at 2622427, the newest
  published; the repository has no release tags), helm-charts-k8s/ (values.yaml, templates/kubeletplugin.yaml,
  clusterrole.yaml, deviceclass.yaml, _helpers.tpl), the driver's name from pkg/consts/consts.go. The AMD GPU
  Operator (ROCm/gpu-operator v1.5.1, spec.draDriver) renders the same kubelet plugin itself.

What differs from upstream, on purpose: the DaemonSet, ServiceAccount, ClusterRole and ClusterRoleBinding
are all named after the DaemonSet (one rule, so the rbac playbook can create them for rbac=existing), the
namespace is the collection's (kubehw-dra-drivers), and no DeviceClass maps an extended resource unless the
task asks for it (NVIDIA's chart maps nvidia.com/gpu on v1, which would take that name from a device plugin
still serving it during a migration).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as device_plugin_presets
from ansible_collections.kubehw.devices.plugins.module_utils._images import reference

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
    "image": reference("dra_example_driver"),
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
    "node_selector": None,                                  # values.yaml kubeletPlugin.nodeSelector: {}
    "tolerations": [],                                      # values.yaml kubeletPlugin.tolerations: []
    "rules": [                                              # templates/clusterrole.yaml
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]},
        # Kubernetes 1.36 authorizes ResourceClaim status writes per driver (DRAResourceClaimGranularStatusAuthorization):
        # a node-local driver needs the associated-node verbs on resourceclaims/driver for its own driver name,
        # granted only for claims on the node its service account token is bound to. Inert before 1.36.
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
         "verbs": ["associated-node:update", "associated-node:patch"], "resourceNames": ["gpu.example.com"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ],
    "namespace_rules": [],
    "device_classes": [                                     # templates/deviceclass.yaml
        {"name": "gpu.example.com", "selectors": ["device.driver == 'gpu.example.com'"]},
    ],
    "min_kubernetes": (1, 33),                              # Chart.yaml kubeVersion ">=1.33.0-0"
    "device_plugin": None,                                  # simulated devices: no device plugin hands them out
}

# -- NVIDIA's GPU DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1), GPUs only -----------------------------
# The chart moved from NVIDIA/k8s-dra-driver-gpu (last release v25.12.0) to kubernetes-sigs; the preset follows
# the new home. Comments name the file under deployments/helm/dra-driver-nvidia-gpu/ at v0.4.1; "v25.12.0:" notes
# where the predecessor's chart (deployments/helm/nvidia-dra-driver-gpu/) differs.
_NVIDIA_IMAGE = reference("nvidia_dra_driver")   # values.yaml image.repository;
#                                                   _helpers.tpl fullimage: tag v + Chart.yaml appVersion 0.4.1
# v25.12.0: nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0 (selectable with image:)
NVIDIA_PREVIOUS_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
NVIDIA_DEFAULT_DRIVER_ROOT = "/"                            # values.yaml nvidiaDriverRoot
# Where the NVIDIA GPU Operator's driver container mounts the driver on the host.
NVIDIA_OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
NVIDIA = {
    "driver": "gpu.nvidia.com",                             # templates/deviceclass-gpu.yaml selector
    # templates/kubeletplugin.yaml: <chart name>-kubelet-plugin. The chart is now dra-driver-nvidia-gpu; the preset
    # keeps v25.12.0's name so an existing deployment is updated in place, not run twice.
    "name": "nvidia-dra-driver-gpu-kubelet-plugin",
    "image": _NVIDIA_IMAGE,
    # Other images of the same driver: NVIDIA's own chart (nvidia-dra-driver-gpu, v25.12.0 and before) runs this one.
    # A DaemonSet running either, under any registry (a mirror's copy too), is another installation of gpu.nvidia.com.
    "previous_images": [NVIDIA_PREVIOUS_IMAGE],
    # The containers that read NVIDIA_DRIVER_ROOT, and the volumes that mount it, get driver_root (build_daemonset).
    "driver_root": NVIDIA_DEFAULT_DRIVER_ROOT,
    "init_containers": [{
        "name": "init-container",                           # templates/kubeletplugin.yaml initContainers
        "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],    # waits for the driver root to be ready
        "env": [
            _env("NVIDIA_DRIVER_ROOT", NVIDIA_DEFAULT_DRIVER_ROOT),    # values.yaml nvidiaDriverRoot
            _env("NVIDIA_VISIBLE_DEVICES", "void"),
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),     # values.yaml kubeletPlugin
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),
        ],
        "security_context": {"privileged": True},
        # readOnly for the root "/", mountPropagation HostToContainer for any other root (build_daemonset)
        "mounts": [_mount("driver-root-parent", "/driver-root-parent", read_only=True)],
    }],
    "containers": [{
        "name": "gpus",                                     # templates/kubeletplugin.yaml (resources.gpus.enabled)
        # The chart runs `bash -c` with a script that masks /proc/driver/nvidia/params when
        # MASK_NVIDIA_DRIVER_PARAMS=true (for nvkind, off by default) and then execs this command.
        "command": ["gpu-kubelet-plugin"],
        "args": ["-v", "$(LOG_VERBOSITY)"],                 # the chart's start command passes -v $(LOG_VERBOSITY)
        "env": [
            _env("LOG_VERBOSITY", "4"),                     # values.yaml logVerbosity
            _env("NVIDIA_DRIVER_ROOT", NVIDIA_DEFAULT_DRIVER_ROOT),    # values.yaml nvidiaDriverRoot
            _env("NVIDIA_VISIBLE_DEVICES", "void"),
            _env("CDI_ROOT", "/var/run/cdi"),
            _env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
            _env("HTTP_ENDPOINT", ":8080"),                 # values.yaml kubeletPlugin.metrics (v0.4.1; not in v25.12.0)
            _env("METRICS_PATH", "/metrics"),
            _field_env("NODE_NAME", "spec.nodeName"),
            _field_env("NAMESPACE", "metadata.namespace"),
            _field_env("SERVICE_ACCOUNT_NAME", "spec.serviceAccountName"),     # v0.4.1 (not in v25.12.0)
            _env("IMAGE_NAME", _NVIDIA_IMAGE),              # replaced with the image actually deployed
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),
            _env("HEALTHCHECK_PORT", "51516"),              # values.yaml kubeletPlugin.containers.gpus.healthcheckPort
        ],
        # templates/kubeletplugin.yaml (v25.12.0: periodSeconds 10, failureThreshold 60)
        "startup_probe": _grpc_probe(51516, period=1, failure=600, timeout=10),
        "liveness_probe": _grpc_probe(51516, period=30, failure=3, timeout=10),     # templates/kubeletplugin.yaml
        "security_context": {"privileged": True},           # values.yaml kubeletPlugin.containers.gpus
        "mounts": [_mount("plugins-registry", REGISTRY_DIR),
                   _mount("plugins", PLUGINS_DIR, propagation="Bidirectional"),
                   _mount("cdi", "/var/run/cdi"),
                   _mount("driver-root", "/driver-root", propagation="HostToContainer")],
    }],
    "volumes": [_volume("plugins-registry", REGISTRY_DIR), _volume("plugins", PLUGINS_DIR),
                _volume("cdi", "/var/run/cdi"),
                # nvidiaDriverRoot's parent ("/" for "/"), and the root itself (build_daemonset sets both)
                _volume("driver-root-parent", "/", "DirectoryOrCreate"),
                _volume("driver-root", "/", "DirectoryOrCreate")],
    "priority_class": "system-node-critical",               # values.yaml kubeletPlugin.priorityClassName
    "update_strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},   # values.yaml
    # values.yaml kubeletPlugin.affinity: any of NFD's NVIDIA PCI labels (any class, then display controllers 0302
    # and VGA controllers 0300), NFD's CPU vendor (Grace), GFD's label. v25.12.0 has only pci-10de.present of the
    # NFD PCI forms.
    "node_terms": [
        [("feature.node.kubernetes.io/pci-10de.present", "true")],
        [("feature.node.kubernetes.io/pci-0302_10de.present", "true")],
        [("feature.node.kubernetes.io/pci-0300_10de.present", "true")],
        [("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA")],
        [("nvidia.com/gpu.present", "true")],
    ],
    "node_selector": None,
    # values.yaml kubeletPlugin.tolerations: GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule (v25.12.0: [])
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "rules": [                                              # templates/rbac-kubeletplugin.yaml, without computedomains
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ],
    # templates/rbac-kubeletplugin.yaml Role <name>-role-kubeletplugin in the driver's namespace: MPS control daemons
    # are Deployments the plugin creates there (featureGates.MPSSupport, set with env FEATURE_GATES); the
    # computedomaincliques rule belongs to the ComputeDomain part, left out.
    "namespace_rules": [
        {"apiGroups": ["apps"], "resources": ["deployments"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ],
    "device_classes": [
        # templates/deviceclass-gpu.yaml (the chart also sets extendedResourceName nvidia.com/gpu on v1: see above)
        {"name": "gpu.nvidia.com",
         "selectors": ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"]},
        # templates/deviceclass-mig.yaml
        {"name": "mig.nvidia.com",
         "selectors": ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"]},
    ],
    # Chart.yaml kubeVersion ">=1.32.0-0" (both releases)
    "min_kubernetes": (1, 32),
    # templates/validation.yaml: resources.gpus.enabled fails unless gpuResourcesEnabledOverride, because the
    # driver "cannot be deployed alongside the standard GPU device plugin on the same node". The preset refuses
    # when a device plugin DaemonSet of these labels (or the collection's, serving these resources) selects a
    # node the driver would run on.
    "device_plugin": {
        "resources": ["nvidia.com/gpu"],
        # NVIDIA/k8s-device-plugin: the Helm chart (app.kubernetes.io/name), the static manifest
        # (deployments/static/nvidia-device-plugin.yml: name), the GPU Operator's DaemonSet (app)
        "labels": [("app.kubernetes.io/name", "nvidia-device-plugin"), ("name", "nvidia-device-plugin-ds"),
                   ("app", "nvidia-device-plugin-daemonset")],
        # the image, wherever it is mirrored: a DaemonSet named and labelled otherwise is still the device plugin
        "images": ["nvidia/k8s-device-plugin"],
        # What else runs from that image and under those labels and serves no resource: gpu-feature-discovery and
        # the MPS control daemon (NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/templates/
        # daemonset-gfd.yml, daemonset-mps-control-daemon.yml; NVIDIA/gpu-operator v26.7.0 assets/
        # gpu-feature-discovery/, assets/state-mps-control-daemon/), each beside a config-manager sidecar. A
        # DaemonSet all of whose containers run one of these programs is not a device plugin.
        "non_serving_programs": ["gpu-feature-discovery", "mps-control-daemon", "config-manager"],
    },
}

# -- Intel's GPU resource driver (intel/intel-resource-drivers-for-kubernetes gpu-v0.11.0) ----------------------
INTEL = {
    "driver": "gpu.intel.com",                              # deployments/gpu/base/device-class.yaml
    "name": "intel-gpu-resource-driver-kubelet-plugin",     # deployments/gpu/base/resource-driver.yaml
    # resource-driver.yaml names :latest; the release's own tag pins it (kustomization.yaml images comment)
    "image": reference("intel_gpu_dra_driver"),
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
    # deployments/gpu/overlays/nfd_labeled_nodes/add-nodeselector-intel-gpu.yaml: the label NFD's rule
    # nfd-intel-gpu-device-rule.yaml sets on nodes with an Intel (vendor 8086) display controller of class 0300 or
    # 0380. The base runs on every node, where a node without an Intel GPU publishes nothing; node_selector
    # replaces it.
    "node_terms": [],
    "node_selector": {"intel.feature.node.kubernetes.io/gpu": "true"},
    "tolerations": [],
    "rules": [                                              # resource-driver.yaml ClusterRole
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    ],
    "namespace_rules": [],
    "device_classes": [                                     # device-class.yaml (gpu-vfio.intel.com is for VMs: left out)
        {"name": "gpu.intel.com", "selectors": ['device.driver == "gpu.intel.com"']},
    ],
    # doc/gpu/README.md: v0.11.0 supports Kubernetes v1.34+; device-class.yaml and the driver (k8s.io/api v0.36)
    # speak resource.k8s.io/v1 only
    "min_kubernetes": (1, 34),
    # intel/intel-device-plugins-for-kubernetes' GPU plugin (deployments/gpu_plugin: app=intel-gpu-plugin) hands out
    # the same GPUs as gpu.intel.com/i915 or gpu.intel.com/xe
    "device_plugin": {"resources": ["gpu.intel.com/i915", "gpu.intel.com/xe"],
                      "labels": [("app", "intel-gpu-plugin")], "images": ["intel/intel-gpu-plugin"]},
}

# -- AMD's GPU DRA driver (ROCm/k8s-gpu-dra-driver, chart k8s-gpu-dra-driver v0.1.0) -------------------------------
# Comments name the file under helm-charts-k8s/ of ROCm/k8s-gpu-dra-driver at 2622427.
AMD = {
    "driver": "gpu.amd.com",                                # pkg/consts/consts.go DriverName; templates/deviceclass.yaml
    # templates/kubeletplugin.yaml: <fullname>-kubeletplugin; fullname is the chart's name for the release its
    # documentation installs (docs/installation.md: helm upgrade -i k8s-gpu-dra-driver ...)
    "name": "k8s-gpu-dra-driver-kubeletplugin",
    "image": reference("amd_dra_driver"),                   # values.yaml image.repository, tag Chart.yaml appVersion
    "init_containers": [],
    "containers": [{
        "name": "plugin",                                   # templates/kubeletplugin.yaml
        "command": ["gpu-kubeletplugin"],
        "env": [
            _env("CDI_ROOT", "/var/run/cdi"),
            _env("KUBELET_REGISTRAR_DIRECTORY_PATH", REGISTRY_DIR),     # values.yaml kubeletPlugin
            _env("KUBELET_PLUGINS_DIRECTORY_PATH", PLUGINS_DIR),
            _field_env("NODE_NAME", "spec.nodeName"),
            _field_env("NAMESPACE", "metadata.namespace"),
            _env("HEALTHCHECK_PORT", "51515"),              # values.yaml kubeletPlugin.containers.plugin.healthcheckPort
        ],
        "liveness_probe": _grpc_probe(51515, period=10, failure=3),     # templates/kubeletplugin.yaml
        "security_context": {"privileged": True},           # values.yaml kubeletPlugin.containers.plugin
        # the driver finds the GPUs through the amdgpu driver's /sys and /dev entries
        "mounts": [_mount("plugins-registry", REGISTRY_DIR), _mount("plugins", PLUGINS_DIR),
                   _mount("cdi", "/var/run/cdi"), _mount("dev", "/dev"), _mount("sys", "/sys")],
    }],
    "volumes": [_volume("plugins-registry", REGISTRY_DIR), _volume("plugins", PLUGINS_DIR),
                _volume("cdi", "/var/run/cdi"), _volume("dev", "/dev"), _volume("sys", "/sys")],
    "priority_class": "system-node-critical",               # values.yaml kubeletPlugin.priorityClassName
    "update_strategy": {"type": "RollingUpdate"},           # values.yaml kubeletPlugin.updateStrategy
    # values.yaml kubeletPlugin.nodeSelector and affinity are empty (every node), but the driver discovers GPUs
    # through the amdgpu kernel module and has nothing to publish without it (ROCm/gpu-operator v1.5.1
    # docs/dra/dra-driver.md, prerequisites). Design choice: the nodes the amd device-plugin preset selects (NFD's
    # PCI labels of AMD's vendor id 1002 on amd64), so a cluster's other nodes run no pod that cannot start;
    # node_selector replaces it (the GPU Operator's own selection is feature.node.kubernetes.io/amd-gpu=true).
    "node_terms": device_plugin_presets.AMD["node_terms"],
    "node_selector": None,
    "tolerations": [],                                      # values.yaml kubeletPlugin.tolerations: []
    "rules": [                                              # templates/clusterrole.yaml
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ],
    "namespace_rules": [],
    "device_classes": [                                     # templates/deviceclass.yaml (there resource.k8s.io/v1beta1)
        {"name": "gpu.amd.com", "selectors": ["device.driver == 'gpu.amd.com'"]},
    ],
    # Chart.yaml kubeVersion says ">=1.32.0-0", but the driver is built on k8s.io/dynamic-resource-allocation v0.34
    # (go.mod) and publishes resource.k8s.io/v1 ResourceSlices, which Kubernetes serves from 1.34
    "min_kubernetes": (1, 34),
    # ROCm/gpu-operator v1.5.1 docs/dra/dra-driver.md: the DRA driver and the device plugin "cannot be enabled at the
    # same time" (the operator rejects such a DeviceConfig). ROCm/k8s-device-plugin's static manifest
    # (k8s-ds-amdgpu-dp.yaml) and its chart (helm/amd-gpu) label their pods name=amdgpu-dp-ds and
    # name=amd-gpu-dp-ds; the GPU Operator's DaemonSets carry only the DeviceConfig's name, so its plugin is known
    # by the image. The node labeller runs from the same repository (helm/amd-gpu templates/labeller.yaml, the
    # operator's node labeller) and serves nothing.
    "device_plugin": {"resources": ["amd.com/gpu"],
                      "labels": [("name", "amdgpu-dp-ds"), ("name", "amd-gpu-dp-ds")],
                      "images": ["rocm/k8s-device-plugin"],
                      "non_serving_programs": ["k8s-node-labeller"]},
}

# -- Kubernetes' DRA test driver (kubernetes/kubernetes test/e2e/dra/test-driver) ----------------------------------
# The kubelet plugin the Kubernetes end-to-end tests use: it publishes simulated devices in a ResourceSlice and
# prepares claims through CDI (a claim's opaque parameters become environment variables of the container). It proves
# a node's DRA stack without hardware: kubelet plugin registration, ResourceSlices, CDI injection by the container
# runtime. Kubernetes publishes no image of it (the end-to-end suite runs it in-process), so `image` is required:
# an image with the binary of the cluster's release as `dra-test-driver` on its PATH. Flags: `dra-test-driver
# kubelet-plugin --help` of that binary.
KUBERNETES_TEST_DRIVER = "test-driver.cdi.k8s.io"           # the binary's --drivername default
KUBERNETES_TEST = {
    "driver": KUBERNETES_TEST_DRIVER,
    "name": "dra-test-driver-kubelet-plugin",
    "image": None,
    "init_containers": [],
    "containers": [{
        "name": "kubelet-plugin",
        "command": ["dra-test-driver"],
        "args": ["kubelet-plugin", "--node-name=$(NODE_NAME)", "--cdi-dir=/var/run/cdi",
                 "--plugin-registration-path=" + REGISTRY_DIR, "--datadir=" + PLUGINS_DIR],
        "env": [_field_env("NODE_NAME", "spec.nodeName")],
        "security_context": {"privileged": True},           # sockets and CDI specs on the host
        "mounts": [_mount("plugins-registry", REGISTRY_DIR),
                   _mount("plugin-data", "%s/%s" % (PLUGINS_DIR, KUBERNETES_TEST_DRIVER)),
                   _mount("cdi", "/var/run/cdi")],
    }],
    # the driver's socket goes into <datadir>/<driver name>, which must exist when it starts (DirectoryOrCreate)
    "volumes": [_volume("plugins-registry", REGISTRY_DIR),
                _volume("plugin-data", "%s/%s" % (PLUGINS_DIR, KUBERNETES_TEST_DRIVER), "DirectoryOrCreate"),
                _volume("cdi", "/var/run/cdi", "DirectoryOrCreate")],
    "priority_class": None,
    "update_strategy": None,
    "node_terms": [],                                       # every node: nodes publish simulated devices
    "node_selector": None,
    "tolerations": [],
    "rules": [                                              # what the example driver's kubelet plugin needs too
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
         "verbs": ["associated-node:update", "associated-node:patch"], "resourceNames": [KUBERNETES_TEST_DRIVER]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    ],
    "namespace_rules": [],
    "device_classes": [
        {"name": KUBERNETES_TEST_DRIVER, "selectors": ["device.driver == '%s'" % KUBERNETES_TEST_DRIVER]},
    ],
    "min_kubernetes": (1, 34),                              # resource.k8s.io/v1
    "device_plugin": None,                                  # simulated devices
}

PRESETS = {"example": EXAMPLE, "nvidia": NVIDIA, "intel": INTEL, "amd": AMD, "kubernetes_test": KUBERNETES_TEST}
PRESET_NAMES = ("example", "nvidia", "intel", "amd", "kubernetes_test")


def for_device_plugin(device_plugin_preset):
    """The DRA preset that hands out the devices a device_plugin_deploy preset serves (a resource of the one is a
    resource the other's guard knows as the same devices), or "" where none does (generic, custom). Raises KeyError
    for a name that is not a device plugin preset."""
    served = set(device_plugin_presets.PRESETS[device_plugin_preset]["resources"])
    for name in PRESET_NAMES:
        if served & set((PRESETS[name].get("device_plugin") or {}).get("resources") or []):
            return name
    return ""
