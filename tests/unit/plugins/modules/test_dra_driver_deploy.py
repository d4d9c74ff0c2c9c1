# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_driver_deploy without a network: the presets field by field (each fact with the upstream file and release
it comes from), the manifests built from them, validation before any request, the comparison that makes a re-run
write nothing, how published ResourceSlices are counted, and which requests a run sends."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _dra
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as dra_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report as dra_report
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_task as driver_task
from ansible_collections.kubehw.devices.plugins.modules import dra_driver_deploy as mod

from tests.unit.plugins.modules import module_harness
from tests.unit.plugins.modules.module_harness import run_module


TEST_DRIVER_IMAGE = "registry.example/dra-test-driver:v1.36.2"


def params(**overrides):
    out = dict(preset="example", state="present", namespace="kubehw-dra-drivers", name=None, image=None, env=None,
               node_selector=None, tolerations=None, rbac="create", device_classes=True,
               extended_resource_name=None, wait="devices", min_count=1, wait_timeout=300,
               allow_empty_rollout=False)
    out.update(overrides)
    if out["preset"] == "kubernetes_test" and "image" not in overrides:
        out["image"] = TEST_DRIVER_IMAGE        # the preset has no default image
    return out


def container(ds, name):
    pod = ds["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] + pod.get("initContainers", []) if c["name"] == name)


def env_of(c):
    return dict((e["name"], e.get("value", e.get("valueFrom"))) for e in c.get("env") or [])


def mounts_of(c):
    return dict((m["mountPath"], m) for m in c["volumeMounts"])


def host_paths(ds):
    return dict((v["name"], v["hostPath"]) for v in ds["spec"]["template"]["spec"]["volumes"])


# -- presets, field by field ----------------------------------------------------------------------------

def test_example_preset_is_the_dra_example_driver_chart_v0_4_0():
    ds = dra_manifest.build_daemonset(params())
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["name"] == "dra-example-driver-kubeletplugin"    # templates/kubeletplugin.yaml
    plugin = container(ds, "plugin")
    # values.yaml image.repository, Chart.yaml appVersion v0.4.0
    assert plugin["image"] == "registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0"
    assert plugin["command"] == ["dra-example-kubeletplugin"]
    env = env_of(plugin)
    assert env["DRIVER_NAME"] == "gpu.example.com" and env["DEVICE_PROFILE"] == "gpu"   # values.yaml deviceProfile
    assert env["NUM_DEVICES"] == "8"                                                     # kubeletPlugin.numDevices
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins"
    assert env["KUBELET_REGISTRAR_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins_registry"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert plugin["securityContext"] == {"privileged": True}            # kubeletPlugin.containers.plugin
    assert plugin["livenessProbe"]["grpc"] == {"port": 51515, "service": "liveness"}     # healthcheckPort
    assert set(mounts_of(plugin)) == set(["/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry",
                                          "/var/run/cdi"])
    assert host_paths(ds)["plugins"] == {"path": "/var/lib/kubelet/plugins"}
    assert host_paths(ds)["plugins-registry"] == {"path": "/var/lib/kubelet/plugins_registry"}
    assert pod["priorityClassName"] == "system-node-critical"           # kubeletPlugin.priorityClassName
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",    # kubeletPlugin.updateStrategy
                                            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert "affinity" not in pod and "tolerations" not in pod and "initContainers" not in pod
    assert pod["serviceAccountName"] == ds["metadata"]["name"]
    # templates/clusterrole.yaml: the kubelet plugin publishes slices and reads claims and its node
    rules = presets.EXAMPLE["rules"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]} in rules
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]} in rules
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]} in rules
    # templates/deviceclass.yaml
    assert dra_manifest.build_device_classes(params()) == [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com", "labels": {"app.kubernetes.io/managed-by": "kubehw.devices"}},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}]


def test_nvidia_preset_is_the_gpu_part_of_dra_driver_nvidia_gpu_v0_4_1():
    """kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, deployments/helm/dra-driver-nvidia-gpu/ (which driver is current:
    the project's current home; NVIDIA/k8s-dra-driver-gpu v25.12.0 stays selectable by image)."""
    ds = dra_manifest.build_daemonset(params(preset="nvidia"))
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["name"] == "nvidia-dra-driver-gpu-kubelet-plugin"   # kept from v25.12.0 (updated in place)
    assert [c["name"] for c in pod["containers"]] == ["gpus"]                 # resources.gpus only
    assert [c["name"] for c in pod["initContainers"]] == ["init-container"]
    gpus = container(ds, "gpus")
    # values.yaml image.repository, _helpers.tpl fullimage (v + Chart.yaml appVersion 0.4.1)
    assert gpus["image"] == ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
                             "@sha256:eefe67396dedea4df74f68a94d5883f33204888b83979babd42b91501a2de1d8")
    assert gpus["command"] == ["gpu-kubelet-plugin"] and gpus["args"] == ["-v", "$(LOG_VERBOSITY)"]
    env = env_of(gpus)
    assert env["LOG_VERBOSITY"] == "4" and env["NVIDIA_DRIVER_ROOT"] == "/" and env["HEALTHCHECK_PORT"] == "51516"
    assert env["IMAGE_NAME"] == gpus["image"]
    assert env["SERVICE_ACCOUNT_NAME"] == {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}     # v0.4.1
    assert env["HTTP_ENDPOINT"] == ":8080" and env["METRICS_PATH"] == "/metrics"    # kubeletPlugin.metrics
    assert mounts_of(gpus)["/var/lib/kubelet/plugins"]["mountPropagation"] == "Bidirectional"
    assert mounts_of(gpus)["/driver-root"]["mountPropagation"] == "HostToContainer"
    # templates/kubeletplugin.yaml v0.4.1 (v25.12.0: periodSeconds 10, failureThreshold 60)
    assert gpus["startupProbe"]["failureThreshold"] == 600 and gpus["startupProbe"]["periodSeconds"] == 1
    assert gpus["livenessProbe"]["periodSeconds"] == 30
    assert container(ds, "init-container")["command"] == ["bash", "/usr/bin/kubelet-plugin-prestart.sh"]
    assert host_paths(ds)["driver-root"] == {"path": "/", "type": "DirectoryOrCreate"}
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}}
    # templates/rbac-kubeletplugin.yaml (computedomains left out with the ComputeDomain part)
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update"]} in presets.NVIDIA["rules"]
    assert not any("computedomains" in r["resources"] for r in presets.NVIDIA["rules"])
    classes = dra_manifest.build_device_classes(params(preset="nvidia"))
    assert [c["metadata"]["name"] for c in classes] == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert "device.attributes['gpu.nvidia.com'].type == 'gpu'" in classes[0]["spec"]["selectors"][0]["cel"]["expression"]
    assert "extendedResourceName" not in classes[0]["spec"]     # only when asked (the chart maps nvidia.com/gpu)


def test_the_previous_nvidia_release_runs_from_the_preset_by_image():
    """NVIDIA/k8s-dra-driver-gpu v25.12.0 is selectable by image, keeping the preset's options."""
    ds = dra_manifest.build_daemonset(params(preset="nvidia", image=presets.NVIDIA_PREVIOUS_IMAGE,
                                             nvidia_driver_root="/run/nvidia/driver"))
    pod = ds["spec"]["template"]["spec"]
    assert presets.NVIDIA_PREVIOUS_IMAGE == "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
    assert all(c["image"] == presets.NVIDIA_PREVIOUS_IMAGE for c in pod["containers"] + pod["initContainers"])
    assert env_of(container(ds, "gpus"))["IMAGE_NAME"] == presets.NVIDIA_PREVIOUS_IMAGE
    assert env_of(container(ds, "gpus"))["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_update_strategy_replaces_the_presets_rolling_update_and_bad_numbers_are_refused_before_any_request():
    # the example preset's chart: maxSurge 1, maxUnavailable 0 (a new plugin before the old stops)
    assert dra_manifest.build_daemonset(params())["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    # raised where nodes that are down hold an update up; AWX hands numbers over as strings
    ds = dra_manifest.build_daemonset(params(update_strategy={"max_unavailable": "2", "max_surge": None}))
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}
    ds = dra_manifest.build_daemonset(params(preset="intel", update_strategy={"max_unavailable": "25%", "max_surge": 0}))
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": "25%", "maxSurge": 0}
    for bad, rule in (({"max_unavailable": "two"}, "must be a whole number or a percentage"),
                      ({"max_unavailable": -1}, "must not be negative"),
                      ({"max_unavailable": 0, "max_surge": "0%"}, "cannot both be 0")):
        with pytest.raises(InputRefused, match=rule):
            dra_manifest.validate(params(update_strategy=dict({"max_unavailable": None, "max_surge": None}, **bad)))


# -- the presets against the upstream files, field by field --------------------------------------------------

def test_nvidia_driver_root_is_mounted_as_upstream_and_set_in_every_container_that_reads_it():
    """values.yaml nvidiaDriverRoot; templates/kubeletplugin.yaml mounts the root as /driver-root and its
    parent (sprig dir) as /driver-root-parent, read-only for "/" and HostToContainer otherwise; NVIDIA_DRIVER_ROOT in
    the init container and in the gpus container."""
    ds = dra_manifest.build_daemonset(params(preset="nvidia", nvidia_driver_root="/run/nvidia/driver/"))
    init, gpus = container(ds, "init-container"), container(ds, "gpus")
    assert env_of(init)["NVIDIA_DRIVER_ROOT"] == env_of(gpus)["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert host_paths(ds)["driver-root"] == {"path": "/run/nvidia/driver", "type": "DirectoryOrCreate"}
    assert host_paths(ds)["driver-root-parent"] == {"path": "/run/nvidia", "type": "DirectoryOrCreate"}
    assert mounts_of(init)["/driver-root-parent"] == {"name": "driver-root-parent", "mountPath": "/driver-root-parent",
                                                      "mountPropagation": "HostToContainer"}
    # the default: the host's own driver
    ds = dra_manifest.build_daemonset(params(preset="nvidia"))
    init = container(ds, "init-container")
    assert env_of(init)["NVIDIA_DRIVER_ROOT"] == "/" and host_paths(ds)["driver-root-parent"]["path"] == "/"
    assert mounts_of(init)["/driver-root-parent"]["readOnly"] is True


@pytest.mark.parametrize("root, message", [
    ("run/nvidia/driver", "must be an absolute path"),
    ("/run/../driver", "must be a normal path"),
    ("/run//nvidia", "must be a normal path"),
    ("/run/nvidia driver", "must not contain spaces"),
])
def test_nvidia_driver_root_must_be_an_absolute_normal_path(root, message):
    with pytest.raises(InputRefused) as err:
        dra_manifest.validate(params(preset="nvidia", nvidia_driver_root=root))
    assert "nvidia_driver_root %r" % root in str(err.value) and message in str(err.value)
    with pytest.raises(InputRefused) as err:
        dra_manifest.validate(params(preset="intel", nvidia_driver_root="/"))
    assert "nvidia_driver_root is an option of the nvidia preset" in str(err.value)


def test_nvidia_tolerates_the_gpu_taint_so_the_plugin_lands_on_tainted_gpu_nodes():
    """values.yaml kubeletPlugin.tolerations (v0.4.1) nvidia.com/gpu Exists NoSchedule; the DaemonSet
    controller's predicates then select a node labelled and tainted as GPU nodes commonly are."""
    ds = dra_manifest.build_daemonset(params(preset="nvidia"))
    pod = ds["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    node = {"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert ds_rollout.selected_nodes(pod, [node]) == ["gpu-1"]


def test_nvidia_affinity_has_the_nfd_pci_class_labels():
    """values.yaml kubeletPlugin.affinity (v0.4.1): NFD's pci-10de, pci-0302_10de, pci-0300_10de, the CPU
    vendor and GFD's gpu.present, ORed."""
    pod = dra_manifest.build_daemonset(params(preset="nvidia"))["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [(t["matchExpressions"][0]["key"], t["matchExpressions"][0]["values"]) for t in terms] == [
        ("feature.node.kubernetes.io/pci-10de.present", ["true"]),
        ("feature.node.kubernetes.io/pci-0302_10de.present", ["true"]),
        ("feature.node.kubernetes.io/pci-0300_10de.present", ["true"]),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", ["NVIDIA"]),
        ("nvidia.com/gpu.present", ["true"])]
    nfd_only = {"metadata": {"name": "h100", "labels": {"feature.node.kubernetes.io/pci-0302_10de.present": "true"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    cpu_only = {"metadata": {"name": "cpu", "labels": {}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert ds_rollout.selected_nodes(pod, [nfd_only, cpu_only]) == ["h100"]


def test_intel_runs_only_on_nodes_nfd_labels_as_intel_gpu_nodes():
    """deployments/gpu/overlays/nfd_labeled_nodes/add-nodeselector-intel-gpu.yaml is the default; the
    user's node_selector replaces it."""
    pod = dra_manifest.build_daemonset(params(preset="intel"))["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"intel.feature.node.kubernetes.io/gpu": "true"}
    ready = {"type": "Ready", "status": "True"}
    nodes = [{"metadata": {"name": "arc", "labels": {"intel.feature.node.kubernetes.io/gpu": "true"}},
              "status": {"conditions": [ready]}}]
    nodes += [{"metadata": {"name": "cpu-%d" % i, "labels": {}}, "status": {"conditions": [ready]}} for i in range(5)]
    assert ds_rollout.selected_nodes(pod, nodes) == ["arc"]
    pod = dra_manifest.build_daemonset(params(preset="intel", node_selector={"pool": "arc"}))["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "arc"}


def test_example_role_grants_the_granular_claim_status_verbs_of_kubernetes_1_36():
    """templates/clusterrole.yaml (v0.4.0) resourceclaims/driver associated-node:update and :patch for the
    driver's own name, which 1.36's DRAResourceClaimGranularStatusAuthorization requires."""
    _account, role, _binding = dra_manifest.build_rbac(params())
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
            "verbs": ["associated-node:update", "associated-node:patch"],
            "resourceNames": ["gpu.example.com"]} in role["rules"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]} in role["rules"]


def test_nvidia_gets_the_mps_role_in_its_namespace():
    """templates/rbac-kubeletplugin.yaml's Role (MPSSupport): deployments in the driver's namespace."""
    role, binding = dra_manifest.build_namespace_rbac(params(preset="nvidia", namespace="dra", name="gpus"))
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "dra" and role["metadata"]["name"] == "gpus"
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"],
                              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpus"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpus", "namespace": "dra"}]
    assert dra_manifest.build_namespace_rbac(params()) is None and dra_manifest.build_namespace_rbac(params(preset="intel")) is None


def test_intel_preset_is_the_gpu_resource_driver_gpu_v0_11_0():
    ds = dra_manifest.build_daemonset(params(preset="intel"))
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["name"] == "intel-gpu-resource-driver-kubelet-plugin"    # deployments/gpu/base
    plugin = container(ds, "kubelet-plugin")
    assert plugin["image"] == "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0"
    assert plugin["command"] == ["/kubelet-gpu-plugin"]
    assert env_of(plugin)["SYSFS_ROOT"] == "/sysfs"
    assert plugin["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert plugin["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert mounts_of(plugin)["/sysfs"]["name"] == "sysfs" and host_paths(ds)["sysfs"] == {"path": "/sys"}
    assert "priorityClassName" not in pod and "updateStrategy" not in ds["spec"] and "affinity" not in pod
    # the nfd_labeled_nodes overlay's node selection
    assert pod["nodeSelector"] == {"intel.feature.node.kubernetes.io/gpu": "true"}
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]} in presets.INTEL["rules"]
    assert [c["metadata"]["name"] for c in dra_manifest.build_device_classes(params(preset="intel"))] == ["gpu.intel.com"]


def test_amd_preset_is_rocms_gpu_dra_driver_chart_v0_1_0():
    """ROCm/k8s-gpu-dra-driver helm-charts-k8s at 2622427 (chart v0.1.0): templates/kubeletplugin.yaml, values.yaml,
    clusterrole.yaml, deviceclass.yaml; the nodes are those the amd device-plugin preset selects."""
    ds = dra_manifest.build_daemonset(params(preset="amd"))
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["name"] == "k8s-gpu-dra-driver-kubeletplugin"
    plugin = container(ds, "plugin")
    assert plugin["image"] == "docker.io/rocm/k8s-gpu-dra-driver:v0.1.0" and plugin["command"] == ["gpu-kubeletplugin"]
    assert env_of(plugin)["HEALTHCHECK_PORT"] == "51515" and env_of(plugin)["CDI_ROOT"] == "/var/run/cdi"
    assert plugin["livenessProbe"]["grpc"] == {"port": 51515, "service": "liveness"}
    assert plugin["securityContext"] == {"privileged": True}
    assert host_paths(ds)["dev"] == {"path": "/dev"} and host_paths(ds)["sys"] == {"path": "/sys"}
    assert pod["priorityClassName"] == "system-node-critical" and ds["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    assert "tolerations" not in pod and "nodeSelector" not in pod
    # AMD GPU nodes as NFD labels them (vendor 1002 on amd64), not every node as the chart's empty affinity
    ready = {"type": "Ready", "status": "True"}
    nodes = [{"metadata": {"name": name, "labels": labels}, "status": {"conditions": [ready]}} for name, labels in (
        ("mi300", {"feature.node.kubernetes.io/pci-0380_1002.present": "true", "kubernetes.io/arch": "amd64"}),
        ("radeon", {"feature.node.kubernetes.io/pci-0300_1002.present": "true", "kubernetes.io/arch": "amd64"}),
        ("arm", {"feature.node.kubernetes.io/pci-1002.present": "true", "kubernetes.io/arch": "arm64"}),
        ("h100", {"feature.node.kubernetes.io/pci-10de.present": "true", "kubernetes.io/arch": "amd64"}))]
    assert ds_rollout.selected_nodes(pod, nodes) == ["mi300", "radeon"]
    assert presets.AMD["rules"] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    assert [(c["metadata"]["name"], c["spec"]["selectors"]) for c in dra_manifest.build_device_classes(params(preset="amd"))] == [
        ("gpu.amd.com", [{"cel": {"expression": "device.driver == 'gpu.amd.com'"}}])]


def test_kubernetes_test_preset_runs_the_e2e_test_driver_as_a_kubelet_plugin():
    ds = dra_manifest.build_daemonset(params(preset="kubernetes_test"))
    pod = ds["spec"]["template"]["spec"]
    plugin = container(ds, "kubelet-plugin")
    assert plugin["image"] == TEST_DRIVER_IMAGE and plugin["command"] == ["dra-test-driver"]
    assert plugin["args"] == ["kubelet-plugin", "--node-name=$(NODE_NAME)", "--cdi-dir=/var/run/cdi",
                              "--plugin-registration-path=/var/lib/kubelet/plugins_registry",
                              "--datadir=/var/lib/kubelet/plugins"]
    assert env_of(plugin)["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # the driver's socket folder under --datadir must exist when it starts
    assert host_paths(ds)["plugin-data"] == {"path": "/var/lib/kubelet/plugins/test-driver.cdi.k8s.io",
                                             "type": "DirectoryOrCreate"}
    assert mounts_of(plugin)["/var/run/cdi"]["name"] == "cdi"
    assert plugin["securityContext"] == {"privileged": True}
    assert "nodeSelector" not in pod and "affinity" not in pod and "tolerations" not in pod
    assert [c["metadata"]["name"] for c in dra_manifest.build_device_classes(params(preset="kubernetes_test"))] == [
        "test-driver.cdi.k8s.io"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
            "verbs": ["associated-node:update", "associated-node:patch"],
            "resourceNames": ["test-driver.cdi.k8s.io"]} in presets.KUBERNETES_TEST["rules"]


def test_a_preset_without_an_upstream_image_needs_one_to_deploy_but_not_to_remove():
    with pytest.raises(InputRefused) as err:
        dra_manifest.validate(params(preset="kubernetes_test", image=None))
    assert "preset kubernetes_test has no default image" in str(err.value) and "set image" in str(err.value)
    dra_manifest.validate(params(preset="kubernetes_test", image=None, state="absent"))


@pytest.mark.parametrize("preset", presets.PRESET_NAMES)
def test_every_preset_mounts_the_kubelet_plugin_directories(preset):
    ds = dra_manifest.build_daemonset(params(preset=preset))
    first = ds["spec"]["template"]["spec"]["containers"][0]
    # the registration folder, and the plugin folder or the driver's own folder in it (for its socket)
    for paths in (set(v["path"] for v in host_paths(ds).values()), set(mounts_of(first))):
        assert "/var/lib/kubelet/plugins_registry" in paths
        assert any(p == "/var/lib/kubelet/plugins" or p.startswith("/var/lib/kubelet/plugins/") for p in paths)


# -- building from options ---------------------------------------------------------------------------------

def test_options_replace_image_env_affinity_and_tolerations():
    tolerations = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    ds = dra_manifest.build_daemonset(params(preset="nvidia", name="gpus", namespace="dra", image="mirror.local/dra:1",
                                             env={"LOG_VERBOSITY": 6}, node_selector={"pool": "dra", "on": True},
                                             tolerations=tolerations))
    pod = ds["spec"]["template"]["spec"]
    assert all(c["image"] == "mirror.local/dra:1" for c in pod["containers"] + pod["initContainers"])
    assert env_of(container(ds, "gpus"))["IMAGE_NAME"] == "mirror.local/dra:1"
    assert env_of(container(ds, "gpus"))["LOG_VERBOSITY"] == "6"
    assert pod["nodeSelector"] == {"pool": "dra", "on": "true"} and "affinity" not in pod
    assert pod["tolerations"] == tolerations
    assert ds["metadata"]["namespace"] == "dra" and pod["serviceAccountName"] == "gpus"
    account, role, binding = dra_manifest.build_rbac(params(name="gpus", namespace="dra"))
    assert account["metadata"] == {"name": "gpus", "namespace": "dra", "labels": ds["metadata"]["labels"]}
    assert role["metadata"]["name"] == binding["metadata"]["name"] == "gpus"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpus"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpus", "namespace": "dra"}]


def test_extended_resource_name_goes_on_the_main_class_only():
    classes = dra_manifest.build_device_classes(params(preset="nvidia", extended_resource_name="nvidia.com/gpu"))
    assert classes[0]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in classes[1]["spec"]
    assert dra_manifest.build_device_classes(params(device_classes=False)) == []


@pytest.mark.parametrize("preset", presets.PRESET_NAMES)
def test_a_stored_daemonset_compares_equal_so_a_rerun_writes_nothing(preset):
    desired = dra_manifest.build_daemonset(params(preset=preset))
    stored = compare.apply_defaults(desired)        # what the apiserver stores: defaults filled in
    stored["metadata"].update(uid="u1", resourceVersion="7", generation=1)
    stored["status"] = {"numberReady": 1}
    assert compare.differences(desired, stored) == []
    changed = dra_manifest.build_daemonset(params(preset=preset, env={"EXTRA": "1"}))
    assert any(p.startswith("/spec/template/spec/containers/0/env") for p in compare.differences(changed, stored))


def test_rbac_comparison_sees_rules_labels_and_subjects():
    account, role, binding = dra_manifest.build_rbac(params())
    assert driver_task.rbac_differences(role, copy.deepcopy(role)) == []
    assert driver_task.rbac_differences(account, dict(copy.deepcopy(account), secrets=[{"name": "x"}])) == []
    other = copy.deepcopy(role)
    other["rules"][0]["verbs"] = ["get"]
    assert driver_task.rbac_differences(role, other) == ["/rules"]
    other = copy.deepcopy(binding)
    other["subjects"][0]["namespace"] = "elsewhere"
    other["metadata"]["labels"].pop("app.kubernetes.io/managed-by")
    assert driver_task.rbac_differences(binding, other) == ["/metadata/labels/app.kubernetes.io/managed-by", "/subjects"]
    assert driver_task.rbac_differences(role, None) == ["/"]


# -- validation --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    (dict(name="Bad_Name"), "name 'Bad_Name' must be a lowercase RFC 1123 DNS label"),
    (dict(namespace="x" * 64), "namespace"),
    (dict(image="registry/x: 1"), "image 'registry/x: 1' must be a container image reference"),
    (dict(image=""), "image '' must be a container image reference"),
    (dict(node_selector={"bad key": "x"}), "node_selector key 'bad key'"),
    (dict(node_selector={"pool": "a b"}), "node_selector value 'a b' of 'pool'"),
    (dict(tolerations=[{"key": "gpu", "operator": "Maybe"}]), "tolerations[0] operator 'Maybe' must be Exists or Equal"),
    (dict(tolerations=[{"operator": "Equal", "value": "x"}]), "tolerations[0] without a key must have operator Exists"),
    (dict(tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}]), "value 'x' must be empty"),
    (dict(tolerations=[{"key": "gpu", "effect": "Never"}]), "effect 'Never' must be one of"),
    (dict(tolerations=[{"key": "gpu", "tolerationSeconds": 5}]), "tolerationSeconds needs effect NoExecute"),
    (dict(tolerations=["gpu"]), "tolerations[0] must be a mapping"),
    (dict(env={"1BAD": "x"}), "env name '1BAD'"),
    (dict(min_count=-1), "min_count -1 must be a whole number >= 0"),
    (dict(min_count="many"), "min_count 'many' must be a whole number >= 0"),
    (dict(wait_timeout=-5), "wait_timeout -5 must be a number of seconds 0 or more"),
    (dict(extended_resource_name="kubernetes.io/gpu"), "extended_resource_name 'kubernetes.io/gpu'"),
    (dict(extended_resource_name="gpu"), "extended_resource_name 'gpu'"),
    (dict(extended_resource_name="example.com/gpu", device_classes=False), "needs device_classes: true"),
    (dict(preset="xilinx"), "preset 'xilinx' must be one of example, nvidia, intel, amd"),
])
def test_validation_names_the_value_and_the_rule(overrides, message):
    with pytest.raises(InputRefused) as err:
        dra_manifest.validate(params(**overrides))
    assert message in str(err.value)


def test_min_count_from_an_awx_string_becomes_a_number():
    given = params(min_count="3", wait_timeout=60)
    dra_manifest.validate(given)
    assert given["min_count"] == 3 and given["wait_timeout"] == 60


# -- what nodes published ----------------------------------------------------------------------------------

def rs(node, pool, generation, count, names, driver="gpu.example.com"):
    pool_spec = {"name": pool, "generation": generation, "resourceSliceCount": count}
    return {"metadata": {"name": "%s-%s-%d" % (node, pool, generation)},
            "spec": {"driver": driver, "nodeName": node, "pool": pool_spec,
                     "devices": [{"name": n} for n in names]}}


def test_only_complete_pools_of_the_newest_generation_count():
    slices = [
        rs("n1", "n1", 1, 1, ["gpu-0", "gpu-1", "gpu-2"]),      # superseded by generation 2
        rs("n1", "n1", 2, 2, ["gpu-0"]), rs("n1", "n1", 2, 2, ["gpu-1"]),
        rs("n2", "n2", 1, 2, ["gpu-0"]),                         # 1 of 2 slices: incomplete
        rs("n3", "n3", 1, 1, ["gpu-9"], driver="gpu.nvidia.com"),    # another driver
        {"spec": {"driver": "gpu.example.com", "allNodes": True, "pool": {"name": "p", "generation": 1},
                  "devices": [{"name": "shared"}]}},           # not tied to one node
    ]
    published = dra_report.published_by_node(slices, "gpu.example.com")
    assert published["n1"]["devices"] == ["gpu-0", "gpu-1"]
    assert published["n2"]["devices"] == [] and not published["n2"]["pools"]["n2"]["complete"]
    assert "n3" not in published
    missing = dra_report.nodes_missing_devices(published, ["n1", "n2", "n4"], 2)
    assert missing == {"n2": "0 of 2 devices (pool n2 has 1 of 2 slices of generation 1)", "n4": "no ResourceSlice"}
    assert dra_report.node_results(published, ["n2", "n1"], "gpu.example.com") == [
        {"name": "n1", "driver": "gpu.example.com", "pools": ["n1"], "devices": ["gpu-0", "gpu-1"], "device_count": 2},
        {"name": "n2", "driver": "gpu.example.com", "pools": ["n2"], "devices": [], "device_count": 0}]


def test_a_removed_drivers_nodes_still_publish_while_any_slice_of_theirs_is_left_of_any_pool_or_generation():
    slices = [
        rs("n1", "n1", 1, 1, ["gpu-0", "gpu-1"]), rs("n1", "n1", 2, 2, ["gpu-0"]),     # an old generation counts too
        rs("n2", "n2", 1, 2, []),                                                     # a slice without devices
        rs("n3", "n3", 1, 1, ["gpu-0"]),                                              # not one of the nodes asked
        {"spec": {"driver": "gpu.example.com", "allNodes": True, "devices": [{"name": "shared"}]}},
    ]
    assert dra_report.still_published(slices, ["n1", "n2", "n4"]) == {"n1": (2, 3), "n2": (1, 0)}
    assert dra_report.still_published(slices[2:], ["n1"]) == {}
    assert dra_report.still_published([], ["n1"]) == {}
    # every node's: the slice of no one node still counts for none
    assert dra_report.still_published(slices) == {"n1": (2, 3), "n2": (1, 0), "n3": (1, 1)}


# -- requests a run sends ----------------------------------------------------------------------------------

class FakeApi(object):
    """core, apps and rbac at once: objects by (kind, name); every call is recorded."""

    def __init__(self, objects=None, daemonsets=None, nodes=None):
        self.objects = dict(objects or {})
        self.calls = []
        self.daemonsets = list(daemonsets or [])
        self.nodes = list(nodes or [])

    def _read(self, kind, name):
        self.calls.append(("read", kind, name))
        if (kind, name) not in self.objects:
            raise KubeHwError("not found", status=404, reason="NotFound")
        return copy.deepcopy(self.objects[(kind, name)])

    def read_namespaced_daemon_set(self, name, namespace):
        return self._read("DaemonSet", name)

    def read_namespaced_service_account(self, name, namespace):
        return self._read("ServiceAccount", name)

    def read_cluster_role(self, name):
        return self._read("ClusterRole", name)

    def read_cluster_role_binding(self, name):
        return self._read("ClusterRoleBinding", name)

    def read_namespaced_role(self, name, namespace):
        return self._read("Role", name)

    def read_namespaced_role_binding(self, name, namespace):
        return self._read("RoleBinding", name)

    def list_daemon_set_for_all_namespaces(self):
        self.calls.append(("list", "DaemonSet", None))
        return {"items": copy.deepcopy(self.daemonsets)}

    def list_node(self, label_selector=None):
        self.calls.append(("list", "Node", label_selector))
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(",")) if label_selector else {}
        return {"items": copy.deepcopy([n for n in self.nodes if all(
            (n["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())])}

    def __getattr__(self, name):
        if name.startswith(("create_", "replace_", "delete_")):
            return lambda *args, **kwargs: self.calls.append(("write", name)) or {}
        raise AttributeError(name)


class FakeDra(object):
    version = None

    def __init__(self, classes=None, server="v1.36.2", served=("v1",), slices=()):
        self.server = server
        self.served = list(served)
        self.classes = classes or {}
        self.slices = list(slices)
        self.slice_lists = []
        self.writes = []
        self.dry_runs = []
        self.discoveries = 0
        self.custom = self      # the module lists ResourceSlices through the CustomObjectsApi

    def list_cluster_custom_object(self, group, version, plural, field_selector=None, **kwargs):
        assert (group, version, plural) == ("resource.k8s.io", "v1", "resourceslices")
        self.slice_lists.append(field_selector)
        driver = field_selector.split("=", 1)[1] if field_selector else None
        return {"items": [copy.deepcopy(s) for s in self.slices if driver in (None, s["spec"]["driver"])],
                "metadata": {"resourceVersion": "7"}}

    def served_versions(self):
        return list(self.served)

    def server_version(self):
        return self.server

    def discover(self):
        self.discoveries += 1
        if "v1" not in self.served:
            raise KubeHwError(_dra.not_served_message(self.server, self.served), status=404, reason="NotServed")
        self.version = "v1"
        return self.version

    def get(self, plural, name, what):
        return copy.deepcopy(self.classes.get(name))

    def create(self, plural, body, what, dry_run=False):
        # a server-side dry run stores nothing (dra_device_class's check mode sends one)
        (self.dry_runs if dry_run else self.writes).append(("create", plural, body["metadata"]["name"]))
        return body

    def replace(self, plural, name, body, what, dry_run=False):
        (self.dry_runs if dry_run else self.writes).append(("replace", plural, name))
        return body

    def delete(self, *args, **kwargs):
        self.writes.append(("delete",) + args)
        return True


@pytest.fixture
def fakes(monkeypatch):
    state = {}

    def install(api, dra_api):
        state.update(api=api, dra=dra_api)

        class Client(module_harness.FakeClient):
            pass

        Client.api = api

        monkeypatch.setattr(mod, "KubeClient", Client)
        monkeypatch.setattr(_dra, "DraApi", lambda client: dra_api)
        return state

    return install


def test_rbac_existing_without_its_service_account_fails_before_any_write(fakes, capsys):
    api, dra_api = FakeApi(), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(rbac="existing"))
    assert out["failed"] and not out["changed"]
    assert 'ServiceAccount "kubehw-dra-drivers/dra-example-driver-kubeletplugin" does not exist, and rbac is ' \
           'existing' in out["msg"]
    assert [c for c in api.calls if c[0] == "write"] == [] and dra_api.writes == []
    # rbac=existing reads no ClusterRole (the deploying identity needs no RBAC rights)
    assert not any(c[1].startswith("ClusterRole") for c in api.calls)


def test_a_foreign_cluster_role_fails_before_any_write(fakes, capsys):
    role = {"metadata": {"name": "dra-example-driver-kubeletplugin", "labels": {"app": "helm"}}, "rules": []}
    api, dra_api = FakeApi({("ClusterRole", "dra-example-driver-kubeletplugin"): role}), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params())
    assert out["failed"] and not out["changed"]
    assert 'ClusterRole "dra-example-driver-kubeletplugin" exists and was not created by this module' in out["msg"]
    assert [c for c in api.calls if c[0] == "write"] == [] and dra_api.writes == []


def test_a_driver_of_the_same_name_in_another_namespace_keeps_its_cluster_role_and_binding(fakes, capsys):
    """The ClusterRole and ClusterRoleBinding are cluster-wide and named after the driver: the module's binding for
    the driver in namespace team-a must be neither taken over (present) nor deleted (absent) from namespace team-b."""
    name = "dra-example-driver-kubeletplugin"
    theirs = dict(params(namespace="team-a"))
    account, role, binding = dra_manifest.build_rbac(theirs)
    objects = {("ClusterRole", name): role, ("ClusterRoleBinding", name): binding}
    api, dra_api = FakeApi(objects), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(namespace="team-b"))
    assert out["failed"] and not out["changed"], out
    assert 'ClusterRoleBinding "%s" binds the ServiceAccount of the driver "%s" in namespace team-a' % (name, name) \
        in out["msg"] and "Give this driver another name" in out["msg"]
    assert [c for c in api.calls if c[0] == "write"] == [] and dra_api.writes == []

    api, dra_api = FakeApi(objects), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(namespace="team-b", state="absent", device_classes=False))
    assert not out.get("failed"), out
    assert [c for c in api.calls if c[0] == "write"] == []
    # ansible-core 2.19 returns warnings as structured summaries: look for the text in them
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        assert '%s \\"%s\\" is also the driver\'s in namespace team-a: left alone' % (kind, name) \
            in json.dumps(out["warnings"]), out["warnings"]
    # the driver's own namespace still manages them
    api, dra_api = FakeApi(objects), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(namespace="team-a", state="absent", device_classes=False))
    assert ("write", "delete_cluster_role_binding") in api.calls and ("write", "delete_cluster_role") in api.calls


def test_a_rerun_that_finds_nothing_to_delete_names_the_nodes_that_still_publish(fakes, capsys):
    """An earlier run deleted everything but timed out on a node whose kubelet was down: a rerun has no DaemonSet to
    delete and so nothing to wait for, and says in a warning which nodes still publish the driver's slices (one
    read; not those of another driver, nor a slice of no node). Without wait: devices it does not look."""
    slices = [rs("n1", "n1", 1, 1, ["gpu-0", "gpu-1"]), rs("n3", "n3", 1, 1, ["gpu-0"], driver="gpu.nvidia.com"),
              {"spec": {"driver": "gpu.example.com", "allNodes": True, "devices": [{"name": "shared"}]}}]
    for check in (False, True):
        api, dra_api = FakeApi(), FakeDra(slices=slices)
        fakes(api, dra_api)
        out = run_module(mod, capsys, params(state="absent"), check=check)
        assert not out.get("failed") and not out["changed"] and out["waited_for"] == "none", out
        assert dra_api.slice_lists == ["spec.driver=gpu.example.com"]
        assert ("No DaemonSet kubehw-dra-drivers/dra-example-driver-kubeletplugin was left to delete, so nothing was "
                "waited for, but nodes still publish ResourceSlices of driver gpu.example.com: n1 (2 device(s) in 1 "
                "ResourceSlice(s)).") in json.dumps(out.get("warnings")), out
        assert [c for c in api.calls if c[0] == "write"] == [] and dra_api.writes == []
    api, dra_api = FakeApi(), FakeDra(slices=slices[1:])
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(state="absent"))
    assert not out.get("failed") and not out.get("warnings") and dra_api.slice_lists == ["spec.driver=gpu.example.com"]
    api, dra_api = FakeApi(), FakeDra(slices=slices)
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(state="absent", wait="rollout"))
    assert not out.get("failed") and not out.get("warnings") and dra_api.slice_lists == [], out


def test_check_mode_predicts_every_object_and_writes_nothing(fakes, capsys):
    api, dra_api = FakeApi(), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(), check=True, diff=True)
    assert out["changed"] and not out.get("failed"), out
    assert out["changed_objects"] == ["ServiceAccount/dra-example-driver-kubeletplugin",
                                      "ClusterRole/dra-example-driver-kubeletplugin",
                                      "ClusterRoleBinding/dra-example-driver-kubeletplugin",
                                      "DeviceClass/gpu.example.com", "DaemonSet/dra-example-driver-kubeletplugin"]
    assert len(out["diff"]) == 5 and out["waited_for"] == "none"
    assert [c for c in api.calls if c[0] == "write"] == [] and dra_api.writes == []
    # the DeviceClass is validated as dra_device_class does in check mode: a server-side dry run
    assert dra_api.dry_runs == [("create", "deviceclasses", "gpu.example.com")]
    # the served version is discovered once a run, not again for each DeviceClass (one GET /apis)
    assert dra_api.discoveries == 1


def test_a_foreign_device_class_is_left_alone_with_a_warning(fakes, capsys):
    foreign = {"metadata": {"name": "gpu.example.com", "labels": {"app.kubernetes.io/managed-by": "Helm"}},
               "spec": {"selectors": []}}
    api, dra_api = FakeApi(), FakeDra({"gpu.example.com": foreign})
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(), check=True)
    assert "DeviceClass/gpu.example.com" not in out["changed_objects"]
    # ansible-core 2.19 returns warnings as structured summaries: look for the text in them
    assert 'DeviceClass \\"gpu.example.com\\" exists but was not created by kubehw.devices' in json.dumps(out["warnings"])


def test_the_devices_timeout_names_each_node_and_what_it_lacks():
    module = type("Module", (), {"params": params(min_count=2, wait_timeout=7), "check_mode": False})()
    client = module_harness.FakeClient(None)
    client.core = client.apps = FakeApi()     # its lists are never called here
    task = driver_task.DraDriverDeploy(module, client=client, dra_api=FakeDra())
    published = dra_report.published_by_node([rs("n1", "n1", 1, 1, ["gpu-0"])], "gpu.example.com")
    crashing = {"metadata": {"name": "p3"}, "spec": {"nodeName": "n3"},
                "status": {"containerStatuses": [{"name": "plugin", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    msg = task._devices_timeout(published, ["n1", "n2"], ["n3"], [crashing], 2)  # pylint: disable=protected-access
    assert msg.startswith("Timed out after 7s waiting for the nodes running DaemonSet kubehw-dra-drivers/"
                          "dra-example-driver-kubeletplugin to publish ResourceSlices of driver gpu.example.com "
                          "with at least 2 device(s) each")
    assert "nodes without enough devices: n1 (1 of 2 devices), n2 (no ResourceSlice)" in msg
    assert "nodes whose kubelet-plugin pod is not ready: n3 (plugin: CrashLoopBackOff)" in msg


def test_a_dropped_extended_resource_name_fails_before_anything_is_written(fakes, capsys):
    class GateOff(FakeDra):
        def create(self, plural, body, what, dry_run=False):
            answer = super(GateOff, self).create(plural, body, what, dry_run)
            return dict(answer, spec=dict((k, v) for k, v in answer["spec"].items() if k != "extendedResourceName"))

    api, dra_api = FakeApi(), GateOff()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia", extended_resource_name="nvidia.com/gpu"))
    assert out["failed"] and "DRAExtendedResource" in out["msg"], out
    assert dra_api.dry_runs == [("create", "deviceclasses", "gpu.nvidia.com")] and dra_api.writes == []
    assert [c for c in api.calls if c[0] == "write"] == []


# -- refusals before any write ----------------------------------------------------------------------------------

def writes_of(api, dra_api):
    return [c for c in api.calls if c[0] == "write"] + dra_api.writes


@pytest.mark.parametrize("preset, server, served", [
    ("intel", "v1.33.4", ("v1beta2", "v1beta1")),
    # AMD's chart says 1.32, but its driver publishes resource.k8s.io/v1 slices (dynamic-resource-allocation v0.34)
    ("amd", "v1.33.4", ("v1beta2", "v1beta1")),
    ("example", "v1.32.9", ("v1beta1",)),
    # a 1.34 server with resource.k8s.io/v1 switched off
    ("nvidia", "v1.34.1-gke.1000", ("v1beta2",)),
])
def test_a_cluster_without_resource_k8s_io_v1_is_refused_before_any_write(fakes, capsys, preset, server, served):
    api, dra_api = FakeApi(), FakeDra(server=server, served=served)
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset=preset))
    assert out["failed"] and not out["changed"], out
    assert "resource.k8s.io/v1 is not served (this cluster runs %s)" % server in out["msg"]
    assert "Kubernetes 1.34 or later" in out["msg"] and "Nothing was written" in out["msg"]
    assert writes_of(api, dra_api) == [] and dra_api.dry_runs == []


def test_a_presets_floor_is_checked_against_the_server_version(monkeypatch):
    """Every preset's driver runs on 1.34 (the release that serves resource.k8s.io/v1), which a cluster serving v1
    is whatever its /version says; a preset whose driver needs a newer release is refused on an older server."""
    version_problem = dra_manifest.version_problem
    assert version_problem("intel", "v1.34.1-gke.1000") is None and version_problem("nvidia", "v1.31.0") is None
    monkeypatch.setitem(presets.PRESETS["intel"], "min_kubernetes", (1, 35))
    assert "needs Kubernetes 1.35 or later; this cluster runs v1.34.2" in version_problem("intel", "v1.34.2")
    assert version_problem("intel", "v1.35.0") is None
    # an unreadable /version is not refused by itself
    assert version_problem("intel", None) is None


READY = {"type": "Ready", "status": "True"}


def gpu_node(name, **labels):
    return {"metadata": {"name": name, "labels": dict({"nvidia.com/gpu.present": "true"}, **labels)},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"conditions": [READY]}}


def plugin_daemonset(namespace="kube-system", name="nvidia-device-plugin-daemonset", labels=None, node_selector=None,
                     ours=False):
    meta_labels = dict(labels or {})
    annotations = {}
    if ours:
        meta_labels.update({"app.kubernetes.io/managed-by": "kubehw.devices", "app.kubernetes.io/component": "device-plugin"})
        annotations = {"devices.kubehw.io/resources": "nvidia.com/gpu"}
    spec = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
            "spec": {"template": {"metadata": {"annotations": annotations}, "spec": spec}}}


@pytest.mark.parametrize("daemonset", [
    plugin_daemonset(labels={"app": "nvidia-device-plugin-daemonset"}),                 # the GPU Operator's
    plugin_daemonset(name="nvdp", labels={"app.kubernetes.io/name": "nvidia-device-plugin"}),   # the Helm chart's
    plugin_daemonset(namespace="kubehw-device-plugins", name="nvidia-device-plugin", ours=True),  # device_plugin_deploy's
])
def test_a_dra_driver_next_to_a_serving_device_plugin_is_refused_before_any_write(fakes, capsys, daemonset):
    """templates/validation.yaml (gpuResourcesEnabledOverride): the driver and the device plugin must not
    hand out the same GPUs. Refused naming the DaemonSet, the nodes and the option; nothing written."""
    nodes = [gpu_node("gpu-1"), gpu_node("gpu-2"), {"metadata": {"name": "cpu-1"}, "status": {"conditions": [READY]}}]
    api, dra_api = FakeApi(daemonsets=[daemonset], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia"))
    assert out["failed"] and not out["changed"], out
    key = "%s/%s" % (daemonset["metadata"]["namespace"], daemonset["metadata"]["name"])
    assert "the device plugin DaemonSet %s (gpu-1, gpu-2) serves nvidia.com/gpu" % key in out["msg"], out["msg"]
    assert "allow_device_plugin_overlap: true" in out["msg"] and "Nothing was written" in out["msg"]
    assert writes_of(api, dra_api) == [] and dra_api.dry_runs == []


def test_a_device_plugin_on_other_nodes_or_the_option_lets_the_driver_deploy(fakes, capsys):
    nodes = [gpu_node("gpu-1", pool="device-plugin"), gpu_node("gpu-2", pool="dra")]
    plugin = plugin_daemonset(labels={"app": "nvidia-device-plugin-daemonset"}, node_selector={"pool": "device-plugin"})
    api, dra_api = FakeApi(daemonsets=[plugin], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia", node_selector={"pool": "dra"}), check=True)
    assert not out.get("failed") and out["changed"], out
    # only the nodes the driver's template can select are listed: the apiserver filters them by its node selector
    assert [c for c in api.calls if c[:2] == ("list", "Node")] == [("list", "Node", "pool=dra")]
    api, dra_api = FakeApi(daemonsets=[plugin], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia", allow_device_plugin_overlap=True, nvidia_driver_root="/"),
                     check=True)
    assert not out.get("failed"), out
    # the option skips the check (and a driver root given needs no look for the GPU Operator's driver)
    assert ("list", "DaemonSet", None) not in api.calls
    # the example driver hands out simulated devices: no device plugin counts against it
    api, dra_api = FakeApi(daemonsets=[plugin], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    assert not run_module(mod, capsys, params(), check=True).get("failed")


def operator_driver_daemonset(node_selector):
    """NVIDIA/gpu-operator v26.7.0 assets/state-driver/0500_daemonset.yaml: its labels, selector and node selection."""
    labels = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}
    return {"metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": node_selector,
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:595.91.07"}]}}}}


def driver_root_of(out):
    containers = out["daemonset"]["spec"]["template"]["spec"]["containers"]
    return [e["value"] for c in containers for e in c.get("env") or [] if e["name"] == "NVIDIA_DRIVER_ROOT"]


def test_the_gpu_operators_driver_container_sets_the_driver_root_where_it_covers_every_node(fakes, capsys):
    """The standalone dra_driver role names no root unless the host role ran: the module finds the GPU Operator's
    driver DaemonSet, as accelerator_node finds /run/nvidia/driver on the hosts."""
    nodes = [gpu_node("gpu-1", pool="a", driver="operator"), gpu_node("gpu-2", pool="a", driver="operator"),
             gpu_node("gpu-3", pool="b")]
    operator = operator_driver_daemonset({"driver": "operator"})
    api, dra_api = FakeApi(daemonsets=[operator], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia", node_selector={"pool": "a"}), check=True)
    assert not out.get("failed"), out
    assert out["nvidia_driver_root"] == "/run/nvidia/driver" and set(driver_root_of(out)) == {"/run/nvidia/driver"}
    # a root the user gives wins; on nodes without the operator's driver the default stays
    for overrides, root in (({"node_selector": {"pool": "a"}, "nvidia_driver_root": "/"}, "/"),
                            ({"node_selector": {"pool": "b"}}, "/")):
        fakes(FakeApi(daemonsets=[operator], nodes=nodes), FakeDra())
        out = run_module(mod, capsys, params(preset="nvidia", **overrides), check=True)
        assert not out.get("failed") and out["nvidia_driver_root"] == root and set(driver_root_of(out)) == {root}, out
    # covering some of the nodes only: refused before any write, naming both kinds
    api = FakeApi(daemonsets=[operator], nodes=nodes)
    fakes(api, FakeDra())
    out = run_module(mod, capsys, params(preset="nvidia"))
    assert out.get("failed"), out
    assert ("The NVIDIA GPU Operator's driver DaemonSet gpu-operator/nvidia-driver-daemonset installs the NVIDIA driver "
            "under /run/nvidia/driver on gpu-1, gpu-2, but not on gpu-3") in out["msg"], out["msg"]
    assert not [c for c in api.calls if c[0] == "write"]


def static_manifest_daemonset():
    """NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml: no labels on the DaemonSet itself,
    name: nvidia-device-plugin-ds only in its selector and pod template."""
    ds = plugin_daemonset(name="nvidia-device-plugin-daemonset")
    ds["spec"]["selector"] = {"matchLabels": {"name": "nvidia-device-plugin-ds"}}
    ds["spec"]["template"]["metadata"]["labels"] = {"name": "nvidia-device-plugin-ds"}
    return ds


def renamed_daemonset():
    """A plugin under names and labels of its own, recognised by its image (a mirror's copy)."""
    ds = plugin_daemonset(name="gpu-plugin", labels={"team": "ml"})
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.corp.example/mirror/nvidia/k8s-device-plugin:v0.17.0"
    return ds


def mig_mixed_daemonset():
    """device_plugin_deploy's own plugin under another name, MIG mixed: no nvidia.com/gpu among its resources."""
    ds = plugin_daemonset(namespace="ops", name="a100-plugin", ours=True)
    ds["spec"]["template"]["metadata"]["annotations"]["devices.kubehw.io/resources"] = \
        "nvidia.com/mig-1g.10gb,nvidia.com/mig-3g.40gb"
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/other-image:1"
    return ds


@pytest.mark.parametrize("daemonset", [static_manifest_daemonset(), renamed_daemonset(), mig_mixed_daemonset()],
                         ids=["static-manifest", "image-only", "ours-mig-mixed"])
def test_a_device_plugin_is_recognised_by_what_it_is(fakes, capsys, daemonset):
    nodes = [gpu_node("gpu-1")]
    api, dra_api = FakeApi(daemonsets=[daemonset], nodes=nodes), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia"))
    key = "%s/%s" % (daemonset["metadata"]["namespace"], daemonset["metadata"]["name"])
    assert out["failed"] and "the device plugin DaemonSet %s (gpu-1)" % key in out["msg"], out["msg"]
    assert writes_of(api, dra_api) == []


def test_a_joining_node_counts_for_the_overlap():
    """Right after provisioning (or during a reboot) the node is not Ready and carries the not-ready taint: both
    DaemonSets would land on it once it joins."""
    joining = gpu_node("gpu-new")
    joining["spec"]["taints"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    joining["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    driver = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    plugin = static_manifest_daemonset()
    assert guard.overlapping_nodes(driver, [plugin], [joining]) == {"kube-system/nvidia-device-plugin-daemonset":
                                                                    ["gpu-new"]}
    # a node tainted for another reason (not joining) stays out
    joining["spec"]["taints"].append({"key": "dedicated", "value": "other", "effect": "NoSchedule"})
    assert guard.overlapping_nodes(driver, [plugin], [joining]) == {}


def test_a_node_whose_allocatable_shows_the_resource_is_refused_without_a_daemonset_in_sight(fakes, capsys):
    """A plugin run by something the identity cannot see as such (another tool's DaemonSet, a static pod): the
    node's allocatable says a plugin serves the GPUs. Allocatable 0 (a plugin that went) does not count."""
    serving, gone = gpu_node("gpu-1"), gpu_node("gpu-2")
    serving["status"]["allocatable"] = {"cpu": "8", "nvidia.com/gpu.shared": "4"}
    gone["status"]["allocatable"] = {"cpu": "8", "nvidia.com/gpu": "0"}
    gone["status"]["capacity"] = {"cpu": "8", "nvidia.com/gpu": "4"}
    api, dra_api = FakeApi(nodes=[serving, gone]), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia"))
    assert out["failed"] and "node(s) gpu-1 (nvidia.com/gpu.shared=4) already hand out nvidia.com/gpu" in out["msg"]
    assert "gpu-2" not in out["msg"] and writes_of(api, dra_api) == []


@pytest.mark.parametrize("image", [
    "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0",      # kubernetes-sigs' chart
    "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0",                          # NVIDIA's chart (nvidia-dra-driver-gpu)
    "mirror.example:5000/nvidia/k8s-dra-driver-gpu:v25.8.1",               # NVIDIA's, from a site's mirror
    "mirror.example:5000/dra-driver-nvidia-gpu@sha256:" + "0" * 64,        # kubernetes-sigs', mirrored by digest
], ids=["sigs-chart", "nvidia-chart", "nvidia-mirrored", "sigs-mirrored"])
def test_a_second_installation_of_the_same_driver_is_refused(fakes, capsys, image):
    """A Helm release of gpu.nvidia.com in another namespace, from either chart's image wherever it is mirrored: two
    kubelet plugins of one driver per node."""
    helm = plugin_daemonset(namespace="nvidia-dra-driver-gpu", name="nvidia-dra-driver-gpu-kubelet-plugin",
                            labels={"app.kubernetes.io/managed-by": "Helm"})
    helm["spec"]["template"]["spec"]["containers"][0]["image"] = image
    api, dra_api = FakeApi(daemonsets=[helm], nodes=[gpu_node("gpu-1")]), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia"))
    assert out["failed"], out
    assert ("DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (gpu-1) already runs it"
            in out["msg"]) and "allow_device_plugin_overlap: true" in out["msg"]
    assert writes_of(api, dra_api) == []


def foreign_daemonset():
    return {"metadata": {"name": "dra-example-driver-kubeletplugin", "namespace": "kubehw-dra-drivers",
                         "labels": {"app.kubernetes.io/managed-by": "Helm"}, "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "dra-example-driver-kubeletplugin"}},
                     "template": {"spec": {"containers": []}}}}


@pytest.mark.parametrize("state, action", [("present", "replace its pod template"), ("absent", "delete it")])
def test_a_foreign_daemonset_is_refused_unless_adopt_daemonset(fakes, capsys, state, action):
    """One adoption rule for both modules (device_plugin_deploy's adopt_daemonset): the DRA module adopted a foreign
    DaemonSet with only a warning, and left it with a warning on absent."""
    api = FakeApi({("DaemonSet", "dra-example-driver-kubeletplugin"): foreign_daemonset()})
    dra_api = FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(state=state))
    assert out["failed"] and not out["changed"], out
    assert ("DaemonSet kubehw-dra-drivers/dra-example-driver-kubeletplugin exists and was not created by this "
            "module") in out["msg"] and "this task would %s" % action in out["msg"] and "adopt_daemonset: true" in out["msg"]
    assert writes_of(api, dra_api) == []
    api = FakeApi({("DaemonSet", "dra-example-driver-kubeletplugin"): foreign_daemonset()})
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(state=state, adopt_daemonset=True), check=True)
    assert not out.get("failed"), out
    assert "DaemonSet/dra-example-driver-kubeletplugin" in out["changed_objects"]


def test_nvidia_check_mode_predicts_the_mps_role_and_binding(fakes, capsys):
    api, dra_api = FakeApi(), FakeDra()
    fakes(api, dra_api)
    out = run_module(mod, capsys, params(preset="nvidia", device_classes=False), check=True)
    assert out["changed_objects"] == ["ServiceAccount/nvidia-dra-driver-gpu-kubelet-plugin",
                                      "ClusterRole/nvidia-dra-driver-gpu-kubelet-plugin",
                                      "ClusterRoleBinding/nvidia-dra-driver-gpu-kubelet-plugin",
                                      "Role/nvidia-dra-driver-gpu-kubelet-plugin",
                                      "RoleBinding/nvidia-dra-driver-gpu-kubelet-plugin",
                                      "DaemonSet/nvidia-dra-driver-gpu-kubelet-plugin"], out
    assert writes_of(api, dra_api) == []


def test_a_rollout_timeout_with_the_nvidia_init_container_still_waiting_names_nvidia_driver_root():
    """The nvidia preset's init container waits, without end, for the driver under the driver root; with the driver
    where the GPU Operator puts it and the default root, the rollout used to time out with 'PodInitializing' only."""
    client = module_harness.FakeClient(None)
    client.core = client.apps = FakeApi()
    waiting = {"metadata": {"name": "kp-1"}, "spec": {"initContainers": [{"name": "init-container"}]},
               "status": {"initContainerStatuses": [{"name": "init-container", "state": {"running": {}}}]}}
    started = dict(waiting, status={"initContainerStatuses": [
        {"name": "init-container", "state": {"terminated": {"exitCode": 0}}}]})
    nvidia = driver_task.DraDriverDeploy(type("Module", (), {"params": params(preset="nvidia"), "check_mode": False})(),
                                         client=client, dra_api=FakeDra())
    hint = nvidia._driver_root_hint({}, [waiting, started])  # pylint: disable=protected-access
    assert ("pod(s) kp-1 are still in their init container, which waits until it finds the NVIDIA driver under "
            "nvidia_driver_root (/ here): where the GPU Operator's driver container installs the driver set "
            "nvidia_driver_root: /run/nvidia/driver") in hint
    assert nvidia._driver_root_hint({}, [started]) == ""  # pylint: disable=protected-access
    example = driver_task.DraDriverDeploy(type("Module", (), {"params": params(), "check_mode": False})(),
                                          client=client, dra_api=FakeDra())
    assert example._driver_root_hint({}, [waiting]) == ""  # pylint: disable=protected-access


# -- closed networks: the mirror and its pull secrets ------------------------------------------------------------

def test_a_mirror_holds_every_image_of_the_driver_init_container_and_image_name_included():
    ds = dra_manifest.build_daemonset(params(preset="nvidia", image_registry="mirror.local:5000",
                                             image_pull_secrets=["mirror-pull"]))
    pod = ds["spec"]["template"]["spec"]
    expected = ("mirror.local:5000/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
                "@sha256:eefe67396dedea4df74f68a94d5883f33204888b83979babd42b91501a2de1d8")
    assert [c["image"] for c in pod["containers"] + pod["initContainers"]] == [expected, expected]
    # the driver starts its own pods from IMAGE_NAME: the mirror's copy too
    assert env_of(container(ds, "gpus"))["IMAGE_NAME"] == expected
    assert pod["imagePullSecrets"] == [{"name": "mirror-pull"}]
    assert "imagePullSecrets" not in dra_manifest.build_daemonset(params(preset="nvidia"))["spec"]["template"]["spec"]


@pytest.mark.parametrize("option,value,words", [
    ("image_registry", "https://mirror.local", "image_registry 'https://mirror.local' must be a registry host"),
    ("image_registry", "", "image_registry '' must be a registry host"),
    ("image_registry", "mirror.local\n", "image_registry 'mirror.local\\n' must be a registry host"),
    ("image_pull_secrets", ["Mirror"], "image_pull_secrets[0] 'Mirror' must be a Secret name"),
])
def test_bad_mirror_settings_are_refused_before_any_request(option, value, words):
    with pytest.raises(InputRefused) as err:
        dra_manifest.validate(params(**{option: value}))
    assert words in str(err.value)
