# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_manifest as manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import default_pull_policy


def build(**params):
    params.setdefault("preset", "nvidia")
    return checked_build(params)


def checked_build(params):
    """What the module does: validate once, then build."""
    manifest.validate(params)
    return manifest.build(params)


def pod_spec(ds):
    return ds["spec"]["template"]["spec"]


def container(ds):
    return pod_spec(ds)["containers"][0]


def mount_paths(ds):
    return dict((m["mountPath"], m) for m in container(ds)["volumeMounts"])


def host_paths(ds):
    return dict((v["hostPath"]["path"], v) for v in pod_spec(ds)["volumes"] if "hostPath" in v)


def env_of(ds):
    return dict((e["name"], e) for e in container(ds).get("env") or [])


def affinity_keys(ds):
    terms = pod_spec(ds)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [(e["key"], e["operator"], e["values"]) for t in terms for e in t["matchExpressions"]]


def server_stored(ds, generation=1):
    """What a v1.32 apiserver hands back for a DaemonSet we sent: defaults, metadata, status, canonical quantities."""
    live = compare.apply_defaults(ds)
    meta = live["metadata"]
    meta.update(uid="0b6f", resourceVersion="812", generation=generation, creationTimestamp="2025-01-01T00:00:00Z",
                managedFields=[{"manager": "ansible", "operation": "Update"}])
    meta.setdefault("annotations", {})["deprecated.daemonset.template.generation"] = str(generation)
    live["spec"]["template"]["metadata"]["creationTimestamp"] = None
    for c in live["spec"]["template"]["spec"]["containers"]:
        for m in c.get("volumeMounts") or []:
            if m.get("readOnly") is False:
                del m["readOnly"]  # omitempty
        for section in ("limits", "requests"):
            values = (c.get("resources") or {}).get(section) or {}
            for k, v in list(values.items()):
                if v == "0.5":
                    values[k] = "500m"
    live["status"] = {"currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberAvailable": 2,
                      "numberMisscheduled": 0, "numberReady": 2, "observedGeneration": generation,
                      "updatedNumberScheduled": 2}
    return live


# -- presets --------------------------------------------------------------------------------------

def affinity_terms(ds):
    """The required node-affinity alternatives as sets of (key, operator, values) requirements."""
    terms = pod_spec(ds)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [sorted((e["key"], e["operator"], tuple(e["values"])) for e in t["matchExpressions"]) for t in terms]


def volume_sources(ds):
    """mountPath -> (hostPath path, type or None, readOnly) for every hostPath mount of the container."""
    volumes = dict((v["name"], v) for v in pod_spec(ds)["volumes"])
    out = {}
    for m in container(ds)["volumeMounts"]:
        host = volumes[m["name"]].get("hostPath")
        if host:
            out[m["mountPath"]] = (host["path"], host.get("type"), bool(m.get("readOnly")))
    return out


NFD = "feature.node.kubernetes.io/"


def test_every_preset_shares_ownership_labels_annotations_and_priority():
    for preset in ("nvidia", "amd", "intel_gpu"):
        ds, _cm, resources = build(preset=preset)
        assert ds["kind"] == "DaemonSet" and ds["apiVersion"] == "apps/v1"
        assert ds["metadata"]["namespace"] == "kubehw-device-plugins"
        # on the DaemonSet and on its pods: the kubelet stand-in and other modules read either
        assert ds["metadata"]["annotations"][manifest.RESOURCES_ANNOTATION] == ",".join(resources)
        assert ds["spec"]["template"]["metadata"]["annotations"][manifest.RESOURCES_ANNOTATION] == ",".join(resources)
        assert ds["metadata"]["labels"][objects.MANAGED_BY_LABEL] == "kubehw.devices"
        selector = ds["spec"]["selector"]["matchLabels"]
        assert all(ds["spec"]["template"]["metadata"]["labels"][k] == v for k, v in selector.items())
        assert pod_spec(ds)["priorityClassName"] == "system-node-critical"


def test_nvidia_default_matches_upstream():
    ds, _cm, resources = build(preset="nvidia")
    # NVIDIA/k8s-device-plugin v0.20.0 deployments/static/nvidia-device-plugin.yml: image, the kubelet socket mount
    # (type Directory), no privilege escalation, all capabilities dropped, priority system-node-critical
    # named by tag and by the digest NVIDIA published for it (the image list)
    assert container(ds)["image"] == ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
                                      "@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312")
    assert resources == ["nvidia.com/gpu"]
    assert "args" not in container(ds)
    assert volume_sources(ds)["/var/lib/kubelet/device-plugins"] == ("/var/lib/kubelet/device-plugins", "Directory", False)
    assert container(ds)["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # no MIG: no MIG monitoring variable (templates/daemonset-device-plugin.yml adds it only with MIG)
    assert "NVIDIA_MIG_MONITOR_DEVICES" not in env_of(ds)
    # deployments/helm/nvidia-device-plugin/values.yaml v0.20.0 tolerations: nvidia.com/gpu NoSchedule, CriticalAddonsOnly
    assert pod_spec(ds)["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                           {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    # values.yaml v0.20.0 affinity: ORed terms over the vendor-only NFD label, Tegra's cpu vendor and GFD's label;
    # plus stock NFD's class+vendor labels (pci-0300_10de VGA, pci-0302_10de 3D controller)
    assert affinity_terms(ds) == [
        [(NFD + "pci-10de.present", "In", ("true",))],
        [(NFD + "pci-0300_10de.present", "In", ("true",))],
        [(NFD + "pci-0302_10de.present", "In", ("true",))],
        [(NFD + "cpu-model.vendor_id", "In", ("NVIDIA",))],
        [("nvidia.com/gpu.present", "In", ("true",))],
    ]
    # the plugin loads NVML, which the NVIDIA runtime injects: RuntimeClass nvidia (nvidia_container_toolkit makes it)
    assert pod_spec(ds)["runtimeClassName"] == "nvidia"


@pytest.mark.parametrize("params", [
    dict(mig_strategy="single"), dict(mig_strategy="mixed", resource_names=["nvidia.com/mig-1g.5gb"]),
    dict(device_list_strategy=["volume-mounts"]),
])
def test_nvidia_mig_and_volume_mounts_get_sys_admin_like_upstream(params):
    ds, _cm, _res = build(preset="nvidia", **params)
    # templates/_helpers.tpl v0.20.0 (requiresCapSysAdmin): a MIG strategy other than none or volume-mounts
    # -> capabilities add SYS_ADMIN (and nothing else)
    assert container(ds)["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    # templates/daemonset-device-plugin.yml v0.20.0: NVIDIA_MIG_MONITOR_DEVICES=all with MIG (addMigMonitorDevices)
    expected = "all" if params.get("mig_strategy") else None
    assert (env_of(ds).get("NVIDIA_MIG_MONITOR_DEVICES") or {}).get("value") == expected


@pytest.mark.parametrize("params,resources", [
    (dict(time_slicing={"replicas": {"nvidia.com/gpu": 2}, "rename_by_default": True}), ["nvidia.com/gpu.shared"]),
    (dict(mig_strategy="mixed", resource_names=["nvidia.com/mig-1g.5gb"]), ["nvidia.com/mig-1g.5gb"]),
])
def test_nvidia_always_tolerates_the_base_gpu_taint(params, resources):
    ds, _cm, served = build(preset="nvidia", **params)
    assert served == resources
    keys = [t["key"] for t in pod_spec(ds)["tolerations"]]
    # GPU node pools are tainted nvidia.com/gpu whatever the plugin serves
    assert keys == ["nvidia.com/gpu"] + resources + ["CriticalAddonsOnly"]


def test_runtime_class_can_be_emptied_or_changed():
    assert "runtimeClassName" not in pod_spec(build(preset="nvidia", runtime_class_name="")[0])
    assert pod_spec(build(preset="nvidia", runtime_class_name="nvidia-cdi")[0])["runtimeClassName"] == "nvidia-cdi"
    assert "runtimeClassName" not in pod_spec(build(preset="amd")[0])
    with pytest.raises(InputRefused, match="runtime_class_name 'Nvidia' must be a RuntimeClass name"):
        build(preset="nvidia", runtime_class_name="Nvidia")


def test_amd_default_matches_upstream():
    ds, cm, resources = build(preset="amd")
    assert cm is None
    # ROCm/k8s-device-plugin v1.31.0.10 (newest tag): k8s-ds-amdgpu-dp.yaml and helm/amd-gpu/values.yaml
    assert container(ds)["image"] == "docker.io/rocm/k8s-device-plugin:1.31.0.10"
    assert resources == ["amd.com/gpu"]
    assert container(ds)["args"] == ["-resource_naming_strategy=single"]
    # k8s-ds-amdgpu-dp.yaml mounts: the kubelet socket directory and /sys
    assert volume_sources(ds) == {"/var/lib/kubelet/device-plugins": ("/var/lib/kubelet/device-plugins", "Directory", False),
                                  "/sys": ("/sys", None, False)}
    # helm/amd-gpu/values.yaml securityContext
    assert container(ds)["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # k8s-ds-amdgpu-dp.yaml tolerations: CriticalAddonsOnly (ours adds the resource's own taint first)
    assert pod_spec(ds)["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                           {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    # nodeSelector kubernetes.io/arch amd64 (k8s-ds-amdgpu-dp.yaml) in every term; values.yaml node_selector
    # pci-0300_1002; stock NFD's display class 0380 and the vendor-only label as alternatives
    arch = ("kubernetes.io/arch", "In", ("amd64",))
    assert affinity_terms(ds) == [sorted([(NFD + "pci-1002.present", "In", ("true",)), arch]),
                                  sorted([(NFD + "pci-0300_1002.present", "In", ("true",)), arch]),
                                  sorted([(NFD + "pci-0380_1002.present", "In", ("true",)), arch])]


def test_intel_gpu_default_matches_upstream():
    ds, _cm, resources = build(preset="intel_gpu")
    # intel/intel-device-plugins-for-kubernetes v0.36.0: deployments/gpu_plugin/base/intel-gpu-plugin.yaml
    assert container(ds)["image"] == "docker.io/intel/intel-gpu-plugin:0.36.0"
    # cmd/gpu_plugin/gpu_plugin.go: resource namespace gpu.intel.com, device types i915 and xe
    assert resources == ["gpu.intel.com/i915", "gpu.intel.com/xe"]
    assert ds["metadata"]["annotations"][manifest.RESOURCES_ANNOTATION] == "gpu.intel.com/i915,gpu.intel.com/xe"
    assert env_of(ds)["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env_of(ds)["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert volume_sources(ds) == {
        "/dev/dri": ("/dev/dri", None, True),
        "/sys/class/drm": ("/sys/class/drm", None, True),
        "/var/lib/kubelet/device-plugins": ("/var/lib/kubelet/device-plugins", "Directory", False),
        "/var/run/cdi": ("/var/run/cdi", "DirectoryOrCreate", False),
    }
    assert container(ds)["securityContext"] == {
        "seLinuxOptions": {"type": "container_device_plugin_t"}, "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    keys = [t["key"] for t in pod_spec(ds)["tolerations"]]
    assert keys == ["gpu.intel.com/i915", "gpu.intel.com/xe"]
    # base nodeSelector kubernetes.io/arch amd64; overlays/nfd_labeled_nodes: intel.feature.node.kubernetes.io/gpu
    # (deployments/nfd/overlays/node-feature-rules: vendor 8086, class 0300 or 0380); stock NFD labels as alternatives
    arch = ("kubernetes.io/arch", "In", ("amd64",))
    assert affinity_terms(ds) == [sorted([("intel.feature.node.kubernetes.io/gpu", "In", ("true",)), arch]),
                                  sorted([(NFD + "pci-0300_8086.present", "In", ("true",)), arch]),
                                  sorted([(NFD + "pci-0380_8086.present", "In", ("true",)), arch])]


def test_generic_default_matches_upstream():
    devices = [{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]}]
    ds, _cm, resources = build(preset="generic", devices=devices)
    # squat/generic-device-plugin 0.1.0: manifests/generic-device-plugin.yaml
    assert container(ds)["image"] == "docker.io/squat/generic-device-plugin:0.1.0"
    assert container(ds)["args"] == ["--device", json.dumps(devices[0], sort_keys=True, separators=(",", ":"))]
    assert resources == ["squat.ai/serial"]            # config.go: default domain squat.ai
    assert volume_sources(ds) == {"/var/lib/kubelet/device-plugins": ("/var/lib/kubelet/device-plugins", "Directory", False),
                                  "/dev": ("/dev", None, False)}
    assert container(ds)["securityContext"] == {"privileged": True}
    assert "affinity" not in pod_spec(ds)              # upstream runs on every node


@pytest.mark.parametrize("device,message", [
    # main.go 0.1.0: device names must match [a-z0-9][-a-z0-9]*[a-z0-9]; a group holds paths or usb, not both
    ({"name": "my_dev", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name 'my_dev' must match"),
    ({"name": "Serial", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name 'Serial' must match"),
    ({"name": "x.y", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name 'x.y' must match"),
    ({"name": "-ab", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name '-ab' must match"),
    ({"name": "a", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name 'a' must match"),
    ({"name": "serial\n", "groups": [{"paths": [{"path": "/dev/x"}]}]}, "devices[0] name 'serial\\n' must match"),
    ({"name": "ch340", "groups": [{"paths": [{"path": "/dev/x"}], "usb": [{"vendor": "1a86", "product": "7523"}]}]},
     "devices[0].groups[0] (ch340) has both paths and usb"),
])
def test_generic_device_rules_of_the_plugin(device, message):
    with pytest.raises(InputRefused) as err:
        build(preset="generic", devices=[device])
    assert message in str(err.value)


def test_generic_valid_names_pass():
    for name in ("ab", "serial-2", "0x", "video0"):
        build(preset="generic", devices=[{"name": name, "groups": [{"usb": [{"vendor": "1209", "product": "000f"}]}]}])


def test_nvidia_config_map_mounted_and_pointed_to():
    ds, cm, _res = build(mig_strategy="single", device_list_strategy=["volume-mounts"], device_id_strategy="index")
    assert cm["metadata"]["name"] == "nvidia-device-plugin-config"
    assert cm["metadata"]["labels"][objects.MANAGED_BY_LABEL] == "kubehw.devices"
    config = json.loads(cm["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["flags"]["migStrategy"] == "single"
    assert config["flags"]["plugin"] == {"deviceListStrategy": "volume-mounts", "deviceIDStrategy": "index"}
    assert "sharing" not in config
    volume = [v for v in pod_spec(ds)["volumes"] if "configMap" in v][0]
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    mount = [m for m in container(ds)["volumeMounts"] if m["name"] == volume["name"]][0]
    assert env_of(ds)["CONFIG_FILE"]["value"] == mount["mountPath"] + "/config.yaml"


def test_nvidia_time_slicing_config_and_renamed_resource():
    ds, cm, resources = build(time_slicing={"replicas": {"nvidia.com/gpu": "4"}, "rename_by_default": True,
                                            "fail_requests_greater_than_one": True})
    sharing = json.loads(cm["data"]["config.yaml"])["sharing"]["timeSlicing"]
    assert sharing == {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                       "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    assert resources == ["nvidia.com/gpu.shared"]
    assert ds["metadata"]["annotations"][manifest.RESOURCES_ANNOTATION] == "nvidia.com/gpu.shared"


def test_nvidia_config_change_changes_pod_template():
    ds1, _cm, _res = build(device_id_strategy="uuid")
    ds2, _cm, _res = build(device_id_strategy="index")
    h1 = ds1["spec"]["template"]["metadata"]["annotations"][manifest.CONFIG_HASH_ANNOTATION]
    h2 = ds2["spec"]["template"]["metadata"]["annotations"][manifest.CONFIG_HASH_ANNOTATION]
    assert h1 != h2
    # The template differs, so the apiserver bumps generation and the controller rolls the pods.
    assert compare.differences(ds2, server_stored(ds1)) == [
        "/spec/template/metadata/annotations/devices.kubehw.io~1config-hash",
        "/metadata/annotations/devices.kubehw.io~1applied-hash"]


def test_nvidia_cdi_strategy_mounts_cdi_dir():
    ds, _cm, _res = build(device_list_strategy=["cdi-annotations", "envvar"])
    assert "/var/run/cdi" in mount_paths(ds)
    assert host_paths(ds)["/var/run/cdi"]["hostPath"]["type"] == "DirectoryOrCreate"


def test_amd_naming_strategy_and_sys_mount():
    ds, cm, _res = build(preset="amd", resource_naming_strategy="mixed", resource_names=["amd.com/cpx_nps4"])
    assert cm is None
    assert container(ds)["args"] == ["-resource_naming_strategy=mixed"]
    assert "/sys" in mount_paths(ds)
    assert ds["metadata"]["annotations"][manifest.RESOURCES_ANNOTATION] == "amd.com/cpx_nps4"
    assert build(preset="amd")[0]["spec"]["template"]["spec"]["containers"][0]["args"] == ["-resource_naming_strategy=single"]


def test_generic_devices_become_args_and_resources():
    devices = [{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]},
               {"name": "fuse", "groups": [{"count": 10, "paths": [{"path": "/dev/fuse"}]}]}]
    ds, _cm, resources = build(preset="generic", devices=devices, device_domain="example.com")
    args = container(ds)["args"]
    assert args[:2] == ["--domain", "example.com"]
    specs = [json.loads(args[i + 1]) for i, a in enumerate(args) if a == "--device"]
    assert specs == devices
    assert resources == ["example.com/serial", "example.com/fuse"]
    assert container(ds)["securityContext"] == {"privileged": True}
    assert "/dev" in mount_paths(ds)
    assert "affinity" not in pod_spec(ds)
    assert build(preset="generic", devices=devices[:1])[2] == ["squat.ai/serial"]


def test_custom_preset():
    ds, cm, resources = build(preset="custom", name="dongle-plugin", image="registry.local/dongle:1.0",
                              resource_names=["example.com/dongle"], args=["--verbose"])
    assert cm is None and resources == ["example.com/dongle"]
    assert container(ds)["args"] == ["--verbose"]
    assert presets.DEVICE_PLUGIN_DIR in mount_paths(ds)
    assert pod_spec(ds)["tolerations"] == [{"key": "example.com/dongle", "operator": "Exists", "effect": "NoSchedule"}]


# -- overrides ------------------------------------------------------------------------------------

@pytest.mark.parametrize("image,policy", [
    ("a/b", "Always"), ("a/b:latest", "Always"), ("a/b:1.0", "IfNotPresent"),
    ("reg:5000/a/b", "Always"), ("reg:5000/a/b:2", "IfNotPresent"), ("a/b@sha256:abc", "IfNotPresent"),
])
def test_default_pull_policy(image, policy):
    assert default_pull_policy(image) == policy


def test_node_selector_replaces_preset_affinity_and_affinity_overrides():
    ds, _cm, _res = build(node_selector={"accelerator": "nvidia"})
    assert pod_spec(ds)["nodeSelector"] == {"accelerator": "nvidia"}
    assert "affinity" not in pod_spec(ds)
    custom = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}
    ds, _cm, _res = build(affinity=custom)
    assert pod_spec(ds)["affinity"] == custom


def test_overrides_reach_the_manifest():
    ds = build(image="my/plugin:2", image_registry="mirror.local", image_pull_policy="Always",
               image_pull_secrets=["pull"], env={"LOG_LEVEL": 4, "CONFIG_FILE": "/x"},
               resources={"limits": {"cpu": "0.5"}}, tolerations=[], priority_class_name="",
               runtime_class_name="nvidia", service_account="dp", labels={"team": "ml"},
               annotations={"note": "x"},
               update_strategy={"type": "RollingUpdate", "max_unavailable": "25%", "max_surge": "0"},
               host_paths=[{"path": "/run/nvidia", "read_only": True}])[0]
    c = container(ds)
    assert c["image"] == "mirror.local/my/plugin:2"
    assert c["imagePullPolicy"] == "Always"
    assert [e["name"] for e in c["env"]] == ["CONFIG_FILE", "LOG_LEVEL"]
    assert env_of(ds)["CONFIG_FILE"]["value"] == "/x" and env_of(ds)["LOG_LEVEL"]["value"] == "4"
    assert c["resources"] == {"limits": {"cpu": "0.5"}}
    spec = pod_spec(ds)
    assert "tolerations" not in spec and "priorityClassName" not in spec
    assert spec["runtimeClassName"] == "nvidia" and spec["serviceAccountName"] == "dp"
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert ds["metadata"]["labels"]["team"] == "ml" and ds["spec"]["template"]["metadata"]["labels"]["team"] == "ml"
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}}
    assert mount_paths(ds)["/run/nvidia"]["readOnly"] is True
    assert build(update_strategy={"type": "OnDelete"})[0]["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_definition_patch_merges_by_name_and_deletes_with_null():
    definition = {"spec": {"template": {"spec": {
        "containers": [{"name": "nvidia-device-plugin", "env": [{"name": "EXTRA", "value": "1"}],
                        "securityContext": None}],
        "volumes": [{"name": "extra", "emptyDir": {}}],
        "hostNetwork": True,
    }}}}
    ds, _cm, _res = build(definition=definition)
    assert "EXTRA" in env_of(ds) and "CONFIG_FILE" in env_of(ds)
    assert "securityContext" not in container(ds)
    assert [v["name"] for v in pod_spec(ds)["volumes"]][-1] == "extra"
    assert pod_spec(ds)["hostNetwork"] is True


# -- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("params,message", [
    (dict(preset="nvidia", resource_names=["nvidia.com/bad name"]), "'nvidia.com/bad name' is not a valid extended resource"),
    (dict(preset="nvidia", resource_names=["kubernetes.io/gpu"]), "reserved"),
    (dict(preset="nvidia", resource_names=["gpu"]), "exactly one '/'"),
    (dict(preset="nvidia", definition={"kind": "Deployment"}), "kind 'Deployment': it must be a DaemonSet"),
    (dict(preset="nvidia", definition={"apiVersion": "extensions/v1beta1"}), "apps/v1"),
    (dict(preset="nvidia", definition={"spec": {"selector": {"matchLabels": {"a": "b"}}}}), "spec.selector"),
    (dict(preset="nvidia", definition={"metadata": {"name": "other"}}), "differs from name"),
    (dict(preset="amd", mig_strategy="single"), "mig_strategy applies only to preset=nvidia"),
    (dict(preset="nvidia", resource_naming_strategy="single"), "only to preset=amd"),
    (dict(preset="nvidia", devices=[{"name": "x"}]), "only to preset=generic"),
    (dict(preset="nvidia", mig_strategy="all"), "mig_strategy 'all' must be one of"),
    (dict(preset="nvidia", device_list_strategy=["bogus"]), "device_list_strategy 'bogus'"),
    (dict(preset="nvidia", time_slicing={"replicas": {"nvidia.com/gpu": 0}}), "replicas[nvidia.com/gpu] 0 must be"),
    (dict(preset="nvidia", time_slicing={"rename_by_default": True}), "need time_slicing.replicas"),
    (dict(preset="nvidia", update_strategy={"type": "OnDelete", "max_unavailable": 1}), "needs delete_old_pods=true"),
    (dict(preset="nvidia", update_strategy={"type": "OnDelete", "max_surge": 1}), "conflicts with type=OnDelete"),
    (dict(preset="nvidia", update_strategy={"max_unavailable": "a lot"}), "max_unavailable 'a lot'"),
    (dict(preset="nvidia", update_strategy={"max_unavailable": 0}), "cannot both be 0"),
    (dict(preset="nvidia", delete_old_pods=True), "delete_old_pods applies only"),
    (dict(preset="nvidia", labels={objects.MANAGED_BY_LABEL: "me"}), "module owns it"),
    (dict(preset="nvidia", labels={"team": "has space"}), "labels value 'has space'"),
    # One label-map rule for every module (_k8s_objects.label_map); the DaemonSet modules refuse non-string values.
    (dict(preset="nvidia", labels={"team": 1}), "labels value 1 of 'team' must be a string"),
    (dict(preset="nvidia", annotations={"bad key!": "x"}), "annotations key 'bad key!'"),
    (dict(preset="nvidia", annotations={manifest.RESOURCES_ANNOTATION: "x/y"}), "module computes it"),
    (dict(preset="nvidia", name="Bad_Name"), "name 'Bad_Name' must be a lowercase RFC 1123 DNS label"),
    (dict(preset="nvidia", min_count=-1), "min_count -1"),
    (dict(preset="nvidia", env={"1BAD": "x"}), "env name '1BAD'"),
    (dict(preset="custom", name="x", resource_names=["a.com/b"]), "preset=custom needs image"),
    (dict(preset="custom", name="x", image="a:1"), "needs resource_names"),
    (dict(preset="custom"), "preset=custom needs name"),
    (dict(preset="generic"), "needs devices"),
    (dict(preset="generic", devices=[{"name": "Bad Name", "groups": [{"paths": [{"path": "/dev/x"}]}]}]), "devices[0] name"),
    (dict(preset="generic", devices=[{"name": "xy", "groups": []}]), "non-empty groups"),
    (dict(preset="amd", args=["-x"], resource_naming_strategy="single"), "conflict"),
    (dict(preset="nvidia", mig_strategy="mixed", wait="resource"), "give resource_names"),
    (dict(preset="gpu"), "preset 'gpu' must be one of"),
    (dict(state="absent", preset="custom"), "state=absent needs name"),
])
def test_validation_errors_name_value_and_rule(params, message):
    with pytest.raises(InputRefused) as err:
        checked_build(params)
    assert message in str(err.value)


def test_absent_needs_only_a_name():
    manifest.validate(dict(state="absent", preset="nvidia"))
    manifest.validate(dict(state="absent", name="anything"))


# -- defaults and semantic comparison -------------------------------------------------------------

def test_server_defaults_applied():
    ds, _cm, _res = build(definition={"spec": {"template": {"spec": {"containers": [
        {"name": "nvidia-device-plugin", "ports": [{"containerPort": 8080}],
         "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}}}]}}}})
    live = compare.apply_defaults(ds)
    spec = live["spec"]
    assert spec["revisionHistoryLimit"] == 10
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    pod = spec["template"]["spec"]
    assert (pod["dnsPolicy"], pod["schedulerName"], pod["restartPolicy"], pod["terminationGracePeriodSeconds"],
            pod["securityContext"]) == ("ClusterFirst", "default-scheduler", "Always", 30, {})
    c = pod["containers"][0]
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"], c["imagePullPolicy"]) == (
        "/dev/termination-log", "File", "IfNotPresent")
    assert c["ports"][0]["protocol"] == "TCP"
    assert c["livenessProbe"]["periodSeconds"] == 10 and c["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert [v for v in pod["volumes"] if "configMap" in v][0]["configMap"]["defaultMode"] == 420
    assert compare.apply_defaults(build(update_strategy={"type": "OnDelete"})[0])["spec"]["updateStrategy"] == {"type": "OnDelete"}
    # The input is left alone.
    assert "revisionHistoryLimit" not in ds["spec"]


@pytest.mark.parametrize("preset_params", [
    dict(preset="nvidia", time_slicing={"replicas": {"nvidia.com/gpu": 2}}, resources={"limits": {"cpu": "0.5"}}),
    dict(preset="amd", host_paths=[{"path": "/opt/rocm", "read_only": False}]),
    dict(preset="intel_gpu", service_account="intel"),
    dict(preset="generic", devices=[{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]}]),
])
def test_live_object_as_the_server_stores_it_is_no_change(preset_params):
    ds, _cm, _res = checked_build(preset_params)
    assert compare.differences(ds, server_stored(ds)) == []


def test_live_without_defaults_is_no_change():
    # An apiserver (or an older one) that did not fill a default must not cause a write on every run.
    ds, _cm, _res = build()
    live = copy.deepcopy(ds)
    live["status"] = {}
    assert compare.differences(ds, live) == []


def test_fields_only_others_set_are_not_ours_to_judge():
    ds, _cm, _res = build()
    live = server_stored(ds)
    live["metadata"]["labels"]["owner"] = "someone"
    live["spec"]["template"]["spec"]["hostNetwork"] = False
    live["spec"]["template"]["spec"]["enableServiceLinks"] = True
    assert compare.differences(ds, live) == []


def test_changed_image_is_a_difference():
    ds, _cm, _res = build()
    live = server_stored(build(image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0")[0])
    assert "/spec/template/spec/containers/0/image" in compare.differences(ds, live)


def test_extra_env_in_live_is_a_difference():
    ds, _cm, _res = build()
    live = server_stored(ds)
    live["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "DEBUG", "value": "1"})
    assert compare.differences(ds, live) == ["/spec/template/spec/containers/0/env"]


def test_removed_option_is_noticed_through_applied_hash():
    with_class = build(service_account="plugin")[0]
    without = build()[0]
    live = server_stored(with_class)
    diffs = compare.differences(without, live)
    assert diffs == ["/metadata/annotations/devices.kubehw.io~1applied-hash"]


def test_changed_update_strategy_and_quantity_value():
    ds, _cm, _res = build(update_strategy={"max_unavailable": 2}, resources={"limits": {"cpu": "0.5"}})
    live = server_stored(ds)
    assert compare.differences(ds, live) == []
    live["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 1
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "600m"
    assert sorted(compare.differences(ds, live)) == ["/spec/template/spec/containers/0/resources/limits/cpu",
                                                     "/spec/updateStrategy/rollingUpdate/maxUnavailable"]


def test_configmap_differences():
    _ds, cm, _res = build()
    live = copy.deepcopy(cm)
    live["metadata"].update(uid="u", resourceVersion="3")
    assert compare.configmap_differences(cm, live) == []
    live["data"]["config.yaml"] = "{}"
    assert compare.configmap_differences(cm, live) == ["/data"]
    assert compare.configmap_differences(cm, None) == ["/"]


def test_selector_conflict_and_update_body():
    ds, _cm, _res = build()
    live = server_stored(ds)
    assert compare.selector_conflict(ds, live) is None
    live["spec"]["selector"] = {"matchLabels": {"name": "nvidia-device-plugin-ds"}}
    assert "immutable" in compare.selector_conflict(ds, live)
    live = server_stored(ds)
    live["metadata"]["labels"]["owner"] = "someone"
    body = objects.update_body(ds, live)
    assert body["metadata"]["resourceVersion"] == "812"
    assert body["metadata"]["labels"]["owner"] == "someone"
    assert body["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
    assert body["spec"] == ds["spec"] and "status" not in body


def test_clean_strips_server_fields():
    ds, _cm, _res = build()
    cleaned = objects.clean(server_stored(ds))
    assert "status" not in cleaned and "uid" not in cleaned["metadata"] and "managedFields" not in cleaned["metadata"]
    assert "creationTimestamp" not in cleaned["spec"]["template"]["metadata"]
    assert objects.clean(None) is None


# -- rollout readiness ----------------------------------------------------------------------------

def ds_with(status, generation=1, strategy="RollingUpdate"):
    return {"metadata": {"generation": generation}, "spec": {"updateStrategy": {"type": strategy}}, "status": status}


def test_rollout_no_status_yet_is_not_done():
    state = ds_rollout.rollout_status(ds_with(None))
    assert not state["done"] and "observe generation 1" in state["reason"]


def test_rollout_pod_never_starts_is_not_done():
    # The facts file's measurement: one Ready node whose pod never starts.
    status = {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0, "numberUnavailable": 1,
              "updatedNumberScheduled": 1, "observedGeneration": 1}
    state = ds_rollout.rollout_status(ds_with(status))
    assert not state["done"] and state["unavailable"] == 1 and state["available"] == 0


def test_rollout_running_is_done():
    status = {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 1, "numberAvailable": 1,
              "updatedNumberScheduled": 1, "observedGeneration": 1}
    assert ds_rollout.rollout_status(ds_with(status))["done"]


def test_rollout_observed_generation_ahead_of_counts_is_not_done():
    status = {"desiredNumberScheduled": 2, "numberAvailable": 2, "updatedNumberScheduled": 1, "observedGeneration": 2}
    assert not ds_rollout.rollout_status(ds_with(status, generation=2))["done"]
    status["observedGeneration"] = 1
    status["updatedNumberScheduled"] = 2
    assert not ds_rollout.rollout_status(ds_with(status, generation=2))["done"]


def test_rollout_absent_updated_count_is_zero():
    status = {"desiredNumberScheduled": 1, "numberAvailable": 1, "observedGeneration": 1}
    state = ds_rollout.rollout_status(ds_with(status))
    assert state["updated"] == 0 and not state["done"]


def test_rollout_zero_desired_is_done_at_once():
    # The unreachable-node shape: desired 0, one misscheduled pod, updatedNumberScheduled gone.
    status = {"desiredNumberScheduled": 0, "numberMisscheduled": 1, "observedGeneration": 3}
    state = ds_rollout.rollout_status(ds_with(status, generation=3))
    assert state["done"] and state["misscheduled"] == 1
    assert not ds_rollout.rollout_status(ds_with({"desiredNumberScheduled": 0, "observedGeneration": 2}, generation=3))["done"]


def test_rollout_on_delete_reports_old_pods_pending():
    status = {"desiredNumberScheduled": 2, "numberAvailable": 2, "updatedNumberScheduled": 0, "observedGeneration": 2}
    state = ds_rollout.rollout_status(ds_with(status, generation=2, strategy="OnDelete"))
    assert not state["done"] and state["old_pods_pending"]
    status["updatedNumberScheduled"] = 2
    state = ds_rollout.rollout_status(ds_with(status, generation=2, strategy="OnDelete"))
    assert state["done"] and not state["old_pods_pending"]
    status["updatedNumberScheduled"] = 0
    assert not ds_rollout.rollout_status(ds_with(status, generation=2))["old_pods_pending"]


# -- pods and nodes -------------------------------------------------------------------------------

def pod(name, node=None, pinned=None, ready=False, waiting=None, generation="1", created="2025-01-01T00:00:00Z",
        terminating=False):
    p = {"metadata": {"name": name, "creationTimestamp": created,
                      "labels": {ds_rollout.POD_TEMPLATE_GENERATION_LABEL: generation}},
         "spec": {}, "status": {"phase": "Running" if ready else "Pending",
                                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if node:
        p["spec"]["nodeName"] = node
    if pinned:
        p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pinned]}]}]}}}
    if waiting:
        p["status"]["containerStatuses"] = [{"name": "plugin", "ready": False,
                                             "state": {"waiting": {"reason": waiting, "message": "back-off"}}}]
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2025-01-01T00:01:00Z"
    return p


def node(name, capacity=None, allocatable=None):
    return {"metadata": {"name": name}, "status": {"capacity": capacity or {}, "allocatable": allocatable or {}}}


def test_node_report_readiness_reasons_and_resources():
    pods = [pod("p1", node="gpu-1", ready=True), pod("p2", node="gpu-2", waiting="ImagePullBackOff"),
            pod("p3", pinned="gpu-3"), pod("p4")]
    nodes = {"gpu-1": node("gpu-1", {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "3"}),
             "gpu-2": node("gpu-2", {"nvidia.com/gpu": "1Ki"}), "gpu-3": node("gpu-3")}
    report = ds_rollout.node_report(pods, nodes, ["nvidia.com/gpu"], 1, generation=1)
    assert sorted(report) == ["gpu-1", "gpu-2", "gpu-3"]
    assert report["gpu-1"]["pod_ready"] and report["gpu-1"]["resource_ready"]
    assert report["gpu-1"]["capacity"] == {"nvidia.com/gpu": 4} and report["gpu-1"]["allocatable"] == {"nvidia.com/gpu": 3}
    assert report["gpu-2"]["waiting_reasons"] == ["plugin: ImagePullBackOff (back-off)"]
    assert report["gpu-2"]["capacity"] == {"nvidia.com/gpu": 1024}
    assert report["gpu-3"]["pod"] == "p3" and report["gpu-3"]["capacity"] == {"nvidia.com/gpu": None}
    assert not report["gpu-3"]["resource_ready"]
    assert ds_rollout.nodes_with_resource(nodes, ["gpu-1", "gpu-2"], ["nvidia.com/gpu"], 4)
    assert not ds_rollout.nodes_with_resource(nodes, ["gpu-1", "gpu-3"], ["nvidia.com/gpu"], 1)
    assert not ds_rollout.nodes_with_resource(nodes, ["gpu-1"], ["nvidia.com/gpu"], 5)
    assert not ds_rollout.nodes_with_resource(nodes, ["gone"], ["nvidia.com/gpu"], 0)


def test_node_report_prefers_replacement_over_terminating_pod():
    pods = [pod("old", node="gpu-1", ready=True, generation="1", created="2025-01-01T00:00:00Z", terminating=True),
            pod("new", node="gpu-1", ready=False, generation="2", created="2025-01-01T00:02:00Z")]
    report = ds_rollout.node_report(list(reversed(pods)), {}, ["nvidia.com/gpu"], 1, generation=2)
    assert report["gpu-1"]["pod"] == "new" and report["gpu-1"]["updated"] is True
    assert not report["gpu-1"]["resource_ready"]
    assert ds_rollout.is_old_pod(pods[0], 2) and not ds_rollout.is_old_pod(pods[1], 2)


def test_timeout_message_names_nodes_reasons_and_missing_resources():
    ds, _cm, _res = build()
    status = {"desiredNumberScheduled": 3, "updatedNumberScheduled": 2, "numberAvailable": 1, "observedGeneration": 1}
    rollout = ds_rollout.rollout_status(ds_with(status))
    nodes = {"gpu-1": node("gpu-1", {"nvidia.com/gpu": "4"}), "gpu-2": node("gpu-2")}
    report = ds_rollout.node_report([pod("p1", node="gpu-1", ready=True), pod("p2", node="gpu-2", waiting="CrashLoopBackOff")],
                                    nodes, ["nvidia.com/gpu"], 1)
    msg = ds_rollout.timeout_message("rollout", 30, ds, rollout, report, ["nvidia.com/gpu"], 1, True)
    assert "kubehw-device-plugins/nvidia-device-plugin" in msg
    assert "nodes without a ready plugin pod: gpu-2 (pod p2: plugin: CrashLoopBackOff (back-off))" in msg
    # the nvidia preset's pods name RuntimeClass nvidia: without it the apiserver refuses them
    assert "1 selected node(s) have no plugin pod yet (pods naming runtimeClassName nvidia are refused while " \
        "RuntimeClass nvidia does not exist" in msg
    assert "nodes lacking nvidia.com/gpu >= 1 in capacity: gpu-2 (nvidia.com/gpu=None)" in msg
    assert "gpu-1" not in msg


# -- who reads a ConfigMap, and who made it -------------------------------------------------------

@pytest.mark.parametrize("spec, used", [
    ({"volumes": [{"name": "c", "configMap": {"name": "p-config"}}]}, True),
    ({"volumes": [{"name": "c", "projected": {"sources": [{"secret": {"name": "s"}},
                                                          {"configMap": {"name": "p-config"}}]}}]}, True),
    ({"containers": [{"name": "a", "envFrom": [{"configMapRef": {"name": "p-config"}}]}]}, True),
    ({"initContainers": [{"name": "i", "env": [{"name": "X", "valueFrom": {
        "configMapKeyRef": {"name": "p-config", "key": "k"}}}]}]}, True),
    ({"volumes": [{"name": "c", "configMap": {"name": "other-config"}},
                  {"name": "h", "hostPath": {"path": "/dev"}}],
      "containers": [{"name": "a", "env": [{"name": "X", "value": "p-config"}]}]}, False),
    ({}, False),
    (None, False),
])
def test_uses_configmap(spec, used):
    assert ds_rollout.uses_configmap(spec, "p-config") is used


def test_nvidia_template_uses_its_configmap_and_generic_does_not():
    nvidia, _cm, _res = checked_build({"preset": "nvidia", "name": "p"})
    generic, _cm, _res = checked_build({"preset": "generic", "name": "p", "devices": [
        {"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB0"}]}]}]})
    assert ds_rollout.uses_configmap(nvidia["spec"]["template"]["spec"], "p-config")
    assert not ds_rollout.uses_configmap(generic["spec"]["template"]["spec"], "p-config")


def test_configmap_created_for_needs_our_owner_reference_or_both_labels():
    _ds, cm, _res = checked_build({"preset": "nvidia", "name": "p"})
    assert ds_rollout.configmap_created_for(cm, "p")
    assert not ds_rollout.configmap_created_for(cm, "other")
    only_managed_by = {"metadata": {"labels": {objects.MANAGED_BY_LABEL: objects.MANAGED_BY}}}
    assert not ds_rollout.configmap_created_for(only_managed_by, "p")
    owned = {"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "p", "uid": "u1"}]}}
    assert ds_rollout.configmap_created_for(owned, "p", "u1")
    assert not ds_rollout.configmap_created_for(owned, "p", "u2")
    assert not ds_rollout.configmap_created_for(owned, "p")
    assert not ds_rollout.configmap_created_for({"metadata": {}}, "p", "u1")


def test_intel_nodes_need_one_of_i915_or_xe():
    nodes = {"xe-node": node("xe-node", {"gpu.intel.com/xe": "1"}),
             "i915-node": node("i915-node", {"gpu.intel.com/i915": "2"}),
             "bare": node("bare")}
    served = ["gpu.intel.com/i915", "gpu.intel.com/xe"]
    assert ds_rollout.nodes_with_resource(nodes, ["xe-node", "i915-node"], served, 1, any_of=True)
    assert not ds_rollout.nodes_with_resource(nodes, ["xe-node", "i915-node"], served, 1)
    assert not ds_rollout.nodes_with_resource(nodes, ["xe-node", "bare"], served, 1, any_of=True)
    assert manifest.serves_any({"preset": "intel_gpu"})
    assert not manifest.serves_any({"preset": "intel_gpu", "resource_names": ["gpu.intel.com/xe"]})
    assert not manifest.serves_any({"preset": "nvidia"})


def test_node_selection_report_counts_nodes_per_term():
    ds, _cm, _res = build(preset="nvidia")
    nodes = [node("a"), node("b"), node("c")]
    nodes[0]["metadata"]["labels"] = {"nvidia.com/gpu.present": "true"}
    nodes[1]["metadata"]["labels"] = {"feature.node.kubernetes.io/pci-10de.present": "false"}
    text = ds_rollout.node_selection_report(pod_spec(ds), nodes)
    assert text.startswith("node affinity, any of: feature.node.kubernetes.io/pci-10de.present in (true) (0 of 3 nodes); ")
    assert "nvidia.com/gpu.present in (true) (1 of 3 nodes)" in text
    text = ds_rollout.node_selection_report({"nodeSelector": {"pool": "gpu"}}, nodes)
    assert text == "nodeSelector pool=gpu (0 of 3 nodes)"
