# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Device-plugin DaemonSets: presets, manifest building, semantic comparison, rollout readiness.

Private to the collection. Pure functions over plain dicts (the JSON the apiserver sends),
so every rule here is unit-testable without a cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import re

from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
)
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
    quantity_value,
)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubehw.devices"
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
# Read by the extended-resource module and the simulated kubelet: which resources a plugin pod serves.
RESOURCES_ANNOTATION = "devices.kubehw.io/resources"
# On the pod template: a config change must change the template, or pods keep the old file.
CONFIG_HASH_ANNOTATION = "devices.kubehw.io/config-hash"
# On the DaemonSet: fingerprint of what we last applied, so removing an option is noticed too.
APPLIED_HASH_ANNOTATION = "devices.kubehw.io/applied-hash"
# Set by the DaemonSet controller on every pod it creates.
POD_TEMPLATE_GENERATION_LABEL = "pod-template-generation"

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
NVIDIA_CONFIG_DIR = "/etc/kubehw/nvidia-device-plugin"
NVIDIA_CONFIG_KEY = "config.yaml"

PRESET_NAMES = ("nvidia", "amd", "intel_gpu", "generic", "custom")
MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
AMD_NAMING_STRATEGIES = ("single", "mixed")
WAIT_MODES = ("none", "rollout", "resource")

_PERCENT_RE = re.compile(r"^[0-9]+%$")
_ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_MISSING = object()


class DaemonSetSpecError(ValueError):
    """Invalid module input: the message names the offending value and the rule it breaks."""


def _host_path_volume(name, path, path_type=None):
    host_path = {"path": path}
    if path_type:
        host_path["type"] = path_type
    return {"name": name, "hostPath": host_path}


# Defaults per preset, learned from each upstream project's own manifests (see docs/device_plugin_deploy.md).
PRESETS = {
    "nvidia": {
        # NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml
        "name": "nvidia-device-plugin",
        "container": "nvidia-device-plugin",
        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
        "resources": ["nvidia.com/gpu"],
        "args": [],
        "env": [],
        "mounts": [("device-plugins", DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR, False, "Directory")],
        "security_context": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "node_label": ("feature.node.kubernetes.io/pci-10de.present", "true"),
    },
    "amd": {
        # ROCm/k8s-device-plugin k8s-ds-amdgpu-dp.yaml and its -resource_naming_strategy flag
        "name": "amdgpu-device-plugin",
        "container": "amdgpu-device-plugin",
        "image": "docker.io/rocm/k8s-device-plugin:1.31.0.10",
        "resources": ["amd.com/gpu"],
        "args": [],
        "env": [],
        "mounts": [
            ("device-plugins", DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR, False, "Directory"),
            ("sys", "/sys", "/sys", False, None),
        ],
        "security_context": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "node_label": ("feature.node.kubernetes.io/pci-1002.present", "true"),
    },
    "intel_gpu": {
        # intel/intel-device-plugins-for-kubernetes deployments/gpu_plugin/base/intel-gpu-plugin.yaml
        "name": "intel-gpu-plugin",
        "container": "intel-gpu-plugin",
        "image": "docker.io/intel/intel-gpu-plugin:0.32.0",
        "resources": ["gpu.intel.com/i915"],
        "args": [],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        ],
        "mounts": [
            ("devfs", "/dev/dri", "/dev/dri", True, None),
            ("sysfsdrm", "/sys/class/drm", "/sys/class/drm", True, None),
            ("device-plugins", DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR, False, "Directory"),
            ("cdipath", "/var/run/cdi", "/var/run/cdi", False, "DirectoryOrCreate"),
        ],
        "security_context": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "seLinuxOptions": {"type": "container_device_plugin_t"},
        },
        "node_label": ("intel.feature.node.kubernetes.io/gpu", "true"),
    },
    "generic": {
        # squat/generic-device-plugin manifests/generic-device-plugin.yaml: it opens host device
        # nodes for the containers it serves, which is why upstream runs it privileged.
        "name": "generic-device-plugin",
        "container": "generic-device-plugin",
        "image": "docker.io/squat/generic-device-plugin:latest",
        "resources": [],
        "args": [],
        "env": [],
        "mounts": [
            ("device-plugins", DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR, False, "Directory"),
            ("dev", "/dev", "/dev", False, None),
        ],
        "security_context": {"privileged": True},
        "node_label": None,
    },
    "custom": {
        "name": None,
        "container": "device-plugin",
        "image": None,
        "resources": [],
        "args": [],
        "env": [],
        "mounts": [("device-plugins", DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR, False, "Directory")],
        "security_context": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "node_label": None,
    },
}

NVIDIA_ONLY = ("mig_strategy", "device_list_strategy", "device_id_strategy", "time_slicing")
AMD_ONLY = ("resource_naming_strategy",)
GENERIC_ONLY = ("devices", "device_domain")


def default_name(preset):
    return PRESETS[preset]["name"] if preset in PRESETS else None


def configmap_name(ds_name):
    return "%s-config" % ds_name


def _hash(data):
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


# -- image references -----------------------------------------------------------------------------

def _split_registry(image):
    """('registry', 'rest') with Docker's rule: the first part is a registry only if it has '.' or ':' or is localhost."""
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    if not sep:
        return "docker.io", "library/" + image
    return "docker.io", image


def rewrite_registry(image, registry):
    """Point an image at a mirror: nvcr.io/nvidia/x:1 with mirror.local:5000 -> mirror.local:5000/nvidia/x:1."""
    if not registry:
        return image
    rest = _split_registry(image)[1]
    return "%s/%s" % (registry.rstrip("/"), rest)


def default_pull_policy(image):
    """The apiserver's defaulting: Always for :latest or no tag, IfNotPresent otherwise (digests included)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.rsplit(":", 1)[1] == "latest":
        return "Always"
    return "IfNotPresent"


# -- validation -----------------------------------------------------------------------------------

def _check_resource_name(name, what):
    problem = extended_resource_name_problem(name)
    if problem:
        raise DaemonSetSpecError("%s %r is not a valid extended resource name: %s" % (what, name, problem))


def _check_dns_label(value, what):
    if not isinstance(value, str) or len(value) > 63 or not DNS1123_LABEL_RE.match(value):
        raise DaemonSetSpecError(
            "%s %r must be a lowercase RFC 1123 DNS label (a-z, 0-9 and '-', at most 63 characters, "
            "starting and ending with a letter or digit)" % (what, value))


def _check_label_map(labels, what):
    for key, value in (labels or {}).items():
        prefix, _sep, short = key.rpartition("/")
        if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN_RE.match(prefix)):
            raise DaemonSetSpecError("%s key %r: prefix %r must be a lowercase DNS subdomain" % (what, key, prefix))
        if not short or len(short) > 63 or not LABEL_VALUE_RE.match(short):
            raise DaemonSetSpecError(
                "%s key %r: name part must be 1-63 characters of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit" % (what, key))
        if what == "labels" and (not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE_RE.match(value)):
            raise DaemonSetSpecError(
                "labels value %r for %r must be at most 63 characters of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit" % (value, key))


def _int_or_percent(value, what):
    if isinstance(value, bool):
        raise DaemonSetSpecError("%s %r must be a whole number or a percentage such as '25%%'" % (what, value))
    if isinstance(value, int):
        if value < 0:
            raise DaemonSetSpecError("%s %r must not be negative" % (what, value))
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        if _PERCENT_RE.fullmatch(value):
            return value
    raise DaemonSetSpecError("%s %r must be a whole number or a percentage such as '25%%'" % (what, value))


def _positive_int(value, what, minimum=1):
    if isinstance(value, bool):
        raise DaemonSetSpecError("%s %r must be a whole number >= %d" % (what, value, minimum))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < minimum:
        raise DaemonSetSpecError("%s %r must be a whole number >= %d" % (what, value, minimum))
    return value


def _given(params, key):
    value = params.get(key)
    return value is not None


def validate(params):
    """Check everything that can be checked without a cluster. Raises DaemonSetSpecError."""
    preset = params.get("preset")
    state = params.get("state") or "present"
    name = params.get("name") or default_name(preset)
    if state == "absent":
        if not name:
            raise DaemonSetSpecError("state=absent needs name, or a preset other than custom to take its default name")
        _check_dns_label(name, "name")
        _check_dns_label(params.get("namespace") or "kube-system", "namespace")
        return
    if preset not in PRESETS:
        raise DaemonSetSpecError("preset %r must be one of %s" % (preset, ", ".join(PRESET_NAMES)))
    if not name:
        raise DaemonSetSpecError("preset=custom needs name")
    # A DaemonSet name becomes part of pod names and of the selector label value.
    _check_dns_label(name, "name")
    _check_dns_label(params.get("namespace") or "kube-system", "namespace")

    for key in NVIDIA_ONLY:
        if preset != "nvidia" and _given(params, key):
            raise DaemonSetSpecError("%s applies only to preset=nvidia, not preset=%s" % (key, preset))
    for key in AMD_ONLY:
        if preset != "amd" and _given(params, key):
            raise DaemonSetSpecError("%s applies only to preset=amd, not preset=%s" % (key, preset))
    for key in GENERIC_ONLY:
        if preset != "generic" and _given(params, key):
            raise DaemonSetSpecError("%s applies only to preset=generic, not preset=%s" % (key, preset))

    if preset == "custom":
        if not params.get("image"):
            raise DaemonSetSpecError("preset=custom needs image")
        if not params.get("resource_names"):
            raise DaemonSetSpecError("preset=custom needs resource_names (the resources the plugin registers)")
    if preset == "generic":
        if not params.get("devices") and not params.get("args"):
            raise DaemonSetSpecError("preset=generic needs devices (or args with --device specs)")
        if params.get("devices") and params.get("args"):
            raise DaemonSetSpecError("devices and args conflict: devices become --device args; give one of them")
        domain = params.get("device_domain") or "squat.ai"
        for index, device in enumerate(params.get("devices") or []):
            _check_generic_device(device, index, domain)
        if params.get("args") and not params.get("resource_names"):
            raise DaemonSetSpecError("preset=generic with args needs resource_names (they cannot be read from args)")
    if preset == "amd" and params.get("args") and _given(params, "resource_naming_strategy"):
        raise DaemonSetSpecError("args and resource_naming_strategy conflict: args replace the preset's flags")
    if preset == "amd" and params.get("resource_naming_strategy") == "mixed" and not params.get("resource_names") \
            and params.get("wait") == "resource":
        raise DaemonSetSpecError(
            "resource_naming_strategy=mixed names resources after the GPU partitions: give resource_names "
            "to wait for (wait=resource)")

    if preset == "nvidia":
        if _given(params, "mig_strategy") and params["mig_strategy"] not in MIG_STRATEGIES:
            raise DaemonSetSpecError("mig_strategy %r must be one of %s" % (params["mig_strategy"], ", ".join(MIG_STRATEGIES)))
        for strategy in params.get("device_list_strategy") or []:
            if strategy not in DEVICE_LIST_STRATEGIES:
                raise DaemonSetSpecError("device_list_strategy %r must be one of %s"
                                         % (strategy, ", ".join(DEVICE_LIST_STRATEGIES)))
        if _given(params, "device_id_strategy") and params["device_id_strategy"] not in DEVICE_ID_STRATEGIES:
            raise DaemonSetSpecError("device_id_strategy %r must be one of %s"
                                     % (params["device_id_strategy"], ", ".join(DEVICE_ID_STRATEGIES)))
        ts = params.get("time_slicing") or {}
        for res, replicas in (ts.get("replicas") or {}).items():
            _check_resource_name(res, "time_slicing.replicas key")
            _positive_int(replicas, "time_slicing.replicas[%s]" % res, minimum=1)
        if (ts.get("rename_by_default") or ts.get("fail_requests_greater_than_one")) and not ts.get("replicas"):
            raise DaemonSetSpecError("time_slicing options need time_slicing.replicas (which resources to share)")
        if params.get("mig_strategy") == "mixed" and params.get("wait") == "resource" and not params.get("resource_names"):
            raise DaemonSetSpecError(
                "mig_strategy=mixed advertises one resource per MIG profile (nvidia.com/mig-1g.5gb...): give "
                "resource_names to wait for (wait=resource)")

    for res in params.get("resource_names") or []:
        _check_resource_name(res, "resource_names entry")
    if params.get("min_count") is not None:
        _positive_int(params["min_count"], "min_count", minimum=0)

    strategy = params.get("update_strategy") or {}
    stype = strategy.get("type") or "RollingUpdate"
    if stype not in ("RollingUpdate", "OnDelete"):
        raise DaemonSetSpecError("update_strategy.type %r must be RollingUpdate or OnDelete" % stype)
    if stype == "OnDelete" and (strategy.get("max_unavailable") is not None or strategy.get("max_surge") is not None):
        raise DaemonSetSpecError("update_strategy max_unavailable/max_surge conflict with type=OnDelete")
    for key in ("max_unavailable", "max_surge"):
        if strategy.get(key) is not None:
            _int_or_percent(strategy[key], "update_strategy.%s" % key)
    if strategy.get("max_unavailable") in (0, "0%") and strategy.get("max_surge") in (None, 0, "0%"):
        raise DaemonSetSpecError("update_strategy max_unavailable and max_surge cannot both be 0 (nothing could roll)")
    if params.get("delete_old_pods") and stype != "OnDelete":
        raise DaemonSetSpecError("delete_old_pods applies only to update_strategy.type=OnDelete")

    _check_label_map(params.get("labels"), "labels")
    _check_label_map(params.get("annotations"), "annotations")
    for reserved in (NAME_LABEL, MANAGED_BY_LABEL):
        if reserved in (params.get("labels") or {}):
            raise DaemonSetSpecError("labels must not set %r: the module owns it (selector and ownership)" % reserved)
    for reserved in (RESOURCES_ANNOTATION, CONFIG_HASH_ANNOTATION, APPLIED_HASH_ANNOTATION):
        if reserved in (params.get("annotations") or {}):
            raise DaemonSetSpecError("annotations must not set %r: the module computes it" % reserved)
    for key in (params.get("env") or {}):
        if not _ENV_NAME_RE.fullmatch(key):
            raise DaemonSetSpecError("env name %r must consist of letters, digits, '_', '-' or '.', "
                                     "and must not start with a digit" % key)
    for index, host_path in enumerate(params.get("host_paths") or []):
        if not host_path.get("path", "").startswith("/"):
            raise DaemonSetSpecError("host_paths[%d].path %r must be an absolute path" % (index, host_path.get("path")))

    definition = params.get("definition")
    if definition is not None:
        if not isinstance(definition, dict):
            raise DaemonSetSpecError("definition must be a mapping (a DaemonSet manifest fragment)")
        kind = definition.get("kind")
        if kind is not None and kind != "DaemonSet":
            raise DaemonSetSpecError("definition has kind %r: it must be a DaemonSet (or leave kind out)" % kind)
        api = definition.get("apiVersion")
        if api is not None and api != "apps/v1":
            raise DaemonSetSpecError("definition has apiVersion %r: DaemonSets are apps/v1" % api)
        meta = definition.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise DaemonSetSpecError("definition metadata.name %r differs from name %r" % (meta["name"], name))
        if meta.get("namespace") not in (None, params.get("namespace") or "kube-system"):
            raise DaemonSetSpecError("definition metadata.namespace %r differs from namespace %r"
                                     % (meta["namespace"], params.get("namespace") or "kube-system"))
        if (definition.get("spec") or {}).get("selector") is not None:
            raise DaemonSetSpecError("definition must not set spec.selector: the module owns it (it is immutable)")


def _check_generic_device(device, index, domain):
    if not isinstance(device, dict):
        raise DaemonSetSpecError("devices[%d] must be a mapping with name and groups" % index)
    dev_name = device.get("name")
    if not dev_name:
        raise DaemonSetSpecError("devices[%d] needs a name" % index)
    _check_resource_name("%s/%s" % (domain, dev_name), "devices[%d] resource" % index)
    groups = device.get("groups")
    if not isinstance(groups, list) or not groups:
        raise DaemonSetSpecError("devices[%d] (%s) needs a non-empty groups list" % (index, dev_name))
    for gindex, group in enumerate(groups):
        if not isinstance(group, dict) or not (group.get("paths") or group.get("usb")):
            raise DaemonSetSpecError("devices[%d].groups[%d] (%s) needs paths or usb" % (index, gindex, dev_name))
        if group.get("count") is not None:
            _positive_int(group["count"], "devices[%d].groups[%d].count" % (index, gindex), minimum=1)


# -- building -------------------------------------------------------------------------------------

def nvidia_config(params):
    """The NVIDIA plugin's config file (version v1), as a dict."""
    plugin = {
        "deviceListStrategy": _one_or_list(params.get("device_list_strategy") or ["envvar"]),
        "deviceIDStrategy": params.get("device_id_strategy") or "uuid",
    }
    config = {
        "version": "v1",
        "flags": {"migStrategy": params.get("mig_strategy") or "none", "failOnInitError": True, "plugin": plugin},
    }
    ts = params.get("time_slicing") or {}
    if ts.get("replicas"):
        config["sharing"] = {"timeSlicing": {
            "renameByDefault": bool(ts.get("rename_by_default")),
            "failRequestsGreaterThanOne": bool(ts.get("fail_requests_greater_than_one")),
            "resources": [{"name": res, "replicas": int(count)} for res, count in sorted(ts["replicas"].items())],
        }}
    return config


def _one_or_list(values):
    return values[0] if len(values) == 1 else list(values)


def served_resources(params):
    """The extended resources the plugin registers with the kubelet."""
    if params.get("resource_names"):
        return list(params["resource_names"])
    preset = params["preset"]
    if preset == "nvidia":
        ts = params.get("time_slicing") or {}
        names = ["nvidia.com/gpu"]
        if ts.get("replicas") and ts.get("rename_by_default"):
            # renameByDefault advertises shared replicas as <name>.shared instead of <name>.
            names = [n + ".shared" if n in ts["replicas"] else n for n in names]
        return names
    if preset == "generic":
        domain = params.get("device_domain") or "squat.ai"
        return ["%s/%s" % (domain, d["name"]) for d in params.get("devices") or []]
    return list(PRESETS[preset]["resources"])


def _preset_args(params):
    preset = params["preset"]
    if params.get("args") is not None:
        return list(params["args"])
    if preset == "amd":
        return ["-resource_naming_strategy=%s" % (params.get("resource_naming_strategy") or "single")]
    if preset == "generic":
        args = []
        if params.get("device_domain"):
            args += ["--domain", params["device_domain"]]
        for device in params.get("devices") or []:
            # The plugin takes each --device as YAML; JSON is YAML, and sorted keys keep the template stable.
            args += ["--device", json.dumps(device, sort_keys=True, separators=(",", ":"))]
        return args
    return list(PRESETS[preset]["args"])


def _env_list(preset_env, user_env):
    env = [copy.deepcopy(e) for e in preset_env]
    index = dict((e["name"], i) for i, e in enumerate(env))
    for key in sorted(user_env or {}):
        value = user_env[key]
        entry = dict(value, name=key) if isinstance(value, dict) else {"name": key, "value": _to_text(value)}
        if key in index:
            env[index[key]] = entry
        else:
            env.append(entry)
    return env


def _to_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%s" % (value,)


def _default_affinity(label):
    key, value = label
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}


def build(params):
    """Return (daemonset, configmap or None, resource names) for validated params."""
    validate(params)
    preset_name = params["preset"]
    preset = PRESETS[preset_name]
    name = params.get("name") or preset["name"]
    namespace = params.get("namespace") or "kube-system"
    resources = served_resources(params)

    image = rewrite_registry(params.get("image") or preset["image"], params.get("image_registry"))
    container = {"name": preset["container"], "image": image}
    if params.get("image_pull_policy"):
        container["imagePullPolicy"] = params["image_pull_policy"]
    args = _preset_args(params)
    if args:
        container["args"] = args

    configmap = None
    volumes = []
    mounts = []
    for vol_name, host, mount_path, read_only, path_type in preset["mounts"]:
        volumes.append(_host_path_volume(vol_name, host, path_type))
        mount = {"name": vol_name, "mountPath": mount_path}
        if read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    if preset_name == "nvidia" and set(params.get("device_list_strategy") or []) & set(["cdi-annotations", "cdi-cri"]):
        # CDI strategies write specs the runtime reads from the host's /var/run/cdi.
        volumes.append(_host_path_volume("cdi-specs", "/var/run/cdi", "DirectoryOrCreate"))
        mounts.append({"name": "cdi-specs", "mountPath": "/var/run/cdi"})
    for index, extra in enumerate(params.get("host_paths") or []):
        vol_name = extra.get("name") or "host-path-%d" % index
        volumes.append(_host_path_volume(vol_name, extra["path"], extra.get("type")))
        mount = {"name": vol_name, "mountPath": extra.get("mount_path") or extra["path"]}
        if extra.get("read_only"):
            mount["readOnly"] = True
        mounts.append(mount)

    env_extra = {}
    pod_annotations = {RESOURCES_ANNOTATION: ",".join(resources)}
    if preset_name == "nvidia":
        config = nvidia_config(params)
        text = json.dumps(config, indent=2, sort_keys=True) + "\n"
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": configmap_name(name),
                "namespace": namespace,
                "labels": {NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
            },
            "data": {NVIDIA_CONFIG_KEY: text},
        }
        volumes.append({"name": "plugin-config", "configMap": {"name": configmap_name(name)}})
        mounts.append({"name": "plugin-config", "mountPath": NVIDIA_CONFIG_DIR, "readOnly": True})
        env_extra = {"CONFIG_FILE": "%s/%s" % (NVIDIA_CONFIG_DIR, NVIDIA_CONFIG_KEY)}
        pod_annotations[CONFIG_HASH_ANNOTATION] = _hash(text)

    env = _env_list(preset["env"], dict(env_extra, **(params.get("env") or {})))
    if env:
        container["env"] = env
    if params.get("resources"):
        container["resources"] = copy.deepcopy(params["resources"])
    container["securityContext"] = copy.deepcopy(
        params["security_context"] if params.get("security_context") is not None else preset["security_context"])
    container["volumeMounts"] = mounts

    labels = {NAME_LABEL: name, COMPONENT_LABEL: "device-plugin", MANAGED_BY_LABEL: MANAGED_BY}
    labels.update(params.get("labels") or {})
    pod_annotations.update(params.get("annotations") or {})

    pod_spec = {"containers": [container], "volumes": volumes}
    priority = params.get("priority_class_name")
    if priority is None:
        priority = "system-node-critical"
    if priority:
        pod_spec["priorityClassName"] = priority
    if params.get("tolerations") is not None:
        tolerations = copy.deepcopy(params["tolerations"])
    else:
        # Nodes with the hardware are often tainted with the resource name so only its users land there.
        tolerations = [{"key": res, "operator": "Exists", "effect": "NoSchedule"} for res in resources]
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if params.get("node_selector"):
        pod_spec["nodeSelector"] = dict((k, _to_text(v)) for k, v in params["node_selector"].items())
    if params.get("affinity"):
        pod_spec["affinity"] = copy.deepcopy(params["affinity"])
    elif not params.get("node_selector") and preset["node_label"]:
        pod_spec["affinity"] = _default_affinity(preset["node_label"])
    if params.get("service_account"):
        pod_spec["serviceAccountName"] = params["service_account"]
    if params.get("runtime_class_name"):
        pod_spec["runtimeClassName"] = params["runtime_class_name"]
    if params.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": s} for s in params["image_pull_secrets"]]

    strategy = params.get("update_strategy") or {}
    if (strategy.get("type") or "RollingUpdate") == "OnDelete":
        update_strategy = {"type": "OnDelete"}
    else:
        rolling = {}
        if strategy.get("max_unavailable") is not None:
            rolling["maxUnavailable"] = _int_or_percent(strategy["max_unavailable"], "update_strategy.max_unavailable")
        if strategy.get("max_surge") is not None:
            rolling["maxSurge"] = _int_or_percent(strategy["max_surge"], "update_strategy.max_surge")
        update_strategy = {"type": "RollingUpdate"}
        if rolling:
            update_strategy["rollingUpdate"] = rolling

    ds_annotations = {RESOURCES_ANNOTATION: ",".join(resources)}
    ds_annotations.update(params.get("annotations") or {})
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": ds_annotations},
        "spec": {
            "selector": {"matchLabels": {NAME_LABEL: name}},
            "updateStrategy": update_strategy,
            "template": {
                "metadata": {"labels": dict(labels), "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    }
    if params.get("definition"):
        patch = copy.deepcopy(params["definition"])
        patch.pop("kind", None)
        patch.pop("apiVersion", None)
        daemonset = merge_definition(daemonset, patch)
        if daemonset["spec"]["template"]["metadata"].get("labels", {}).get(NAME_LABEL) != name:
            raise DaemonSetSpecError("definition must keep the template label %s=%s (the selector needs it)"
                                     % (NAME_LABEL, name))
    daemonset["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] = _hash(
        {"spec": daemonset["spec"], "labels": daemonset["metadata"]["labels"],
         "annotations": daemonset["metadata"]["annotations"]})
    return daemonset, configmap, resources


# Lists whose items the definition patch merges by a key, as kubectl's strategic merge does.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
    "ports": "containerPort",
}


def merge_definition(base, patch):
    """Merge a manifest fragment over base: maps recursively, keyed lists by key, other lists replaced, null deletes."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif key in _MERGE_KEYS and isinstance(value, list) and isinstance(result.get(key), list) \
                and all(isinstance(i, dict) and _MERGE_KEYS[key] in i for i in value):
            merge_key = _MERGE_KEYS[key]
            items = result[key]
            for item in value:
                for pos, existing in enumerate(items):
                    if existing.get(merge_key) == item[merge_key]:
                        items[pos] = merge_definition(existing, item)
                        break
                else:
                    items.append(copy.deepcopy(item))
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_definition(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


# -- server defaults and semantic comparison -----------------------------------------------------

def _default_container(container):
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if container.get("image"):
        container.setdefault("imagePullPolicy", default_pull_policy(container["image"]))
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_key)
        if probe:
            probe.setdefault("timeoutSeconds", 1)
            probe.setdefault("periodSeconds", 10)
            probe.setdefault("successThreshold", 1)
            probe.setdefault("failureThreshold", 3)
            if "httpGet" in probe:
                probe["httpGet"].setdefault("scheme", "HTTP")


def apply_defaults(daemonset):
    """Return a copy with the defaults kube-apiserver v1.32 fills into an apps/v1 DaemonSet."""
    ds = copy.deepcopy(daemonset)
    spec = ds.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Always")
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("securityContext", {})
    pod.setdefault("schedulerName", "default-scheduler")
    if pod.get("serviceAccountName") and "serviceAccount" not in pod:
        # The deprecated alias is still filled in from serviceAccountName.
        pod["serviceAccount"] = pod["serviceAccountName"]
    for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        _default_container(container)
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            volume["hostPath"].setdefault("type", "")
        for source in ("configMap", "secret"):
            if source in volume:
                volume[source].setdefault("defaultMode", 420)
        if "projected" in volume:
            volume["projected"].setdefault("defaultMode", 420)
    return ds


def _is_empty(value):
    return value is _MISSING or value is None or value == {} or value == [] or value == "" or value is False


def _scalar_equal(want, have, path):
    if want == have and type(want) is type(have):
        return True
    if isinstance(want, bool) or isinstance(have, bool):
        return False
    if "resources" in path and ("limits" in path or "requests" in path):
        # The apiserver canonicalises quantities ("0.5" is stored as "500m").
        a, b = quantity_value(want), quantity_value(have)
        return a is not None and a == b
    return False


def _differences(want, have, path, out):
    if isinstance(want, dict):
        if _is_empty(want) and _is_empty(have):
            return
        if not isinstance(have, dict):
            out.append(path or "/")
            return
        for key, value in want.items():
            if value is None:
                continue
            _differences(value, have.get(key, _MISSING), "%s/%s" % (path, _pointer(key)), out)
    elif isinstance(want, list):
        if _is_empty(want) and _is_empty(have):
            return
        if not isinstance(have, list) or len(have) != len(want):
            out.append(path)
            return
        for index, (a, b) in enumerate(zip(want, have)):
            _differences(a, b, "%s/%d" % (path, index), out)
    else:
        if _is_empty(want) and _is_empty(have):
            return
        if not _scalar_equal(want, have, path):
            out.append(path)


def _pointer(token):
    return token.replace("~", "~0").replace("/", "~1")


def differences(desired, live):
    """Paths where the live object does not match what we want.

    Both sides are defaulted as the apiserver would, then every field we set must match; fields
    only the live object has (status, managedFields, what others added) are not ours to judge.
    Lists must match item by item, so an env var, toleration or volume that is gone counts.
    """
    if live is None:
        return ["/"]
    want = apply_defaults(desired)
    have = apply_defaults(live)
    out = []
    _differences(want.get("spec"), have.get("spec"), "/spec", out)
    meta_want = want.get("metadata") or {}
    meta_have = have.get("metadata") or {}
    for key in ("labels", "annotations"):
        for item, value in (meta_want.get(key) or {}).items():
            if (meta_have.get(key) or {}).get(item) != value:
                out.append("/metadata/%s/%s" % (key, _pointer(item)))
    return out


def configmap_differences(desired, live):
    if live is None:
        return ["/"]
    out = []
    if (live.get("data") or {}) != (desired.get("data") or {}):
        out.append("/data")
    for item, value in desired["metadata"].get("labels", {}).items():
        if ((live.get("metadata") or {}).get("labels") or {}).get(item) != value:
            out.append("/metadata/labels/%s" % _pointer(item))
    return out


def selector_conflict(desired, live):
    """The selector is immutable: a live DaemonSet selecting other labels cannot be updated in place."""
    if live is None:
        return None
    have = (live.get("spec") or {}).get("selector")
    want = desired["spec"]["selector"]
    if have != want:
        return ("DaemonSet %s/%s exists with selector %s, but this module selects %s; spec.selector is "
                "immutable. Delete the DaemonSet (state=absent) or choose another name."
                % (desired["metadata"]["namespace"], desired["metadata"]["name"],
                   json.dumps(have, sort_keys=True), json.dumps(want, sort_keys=True)))
    return None


def update_body(desired, live):
    """Body for a PUT: our spec and metadata keys over the live object, guarded by its resourceVersion."""
    body = copy.deepcopy(desired)
    live_meta = live.get("metadata") or {}
    meta = body["metadata"]
    meta["resourceVersion"] = live_meta.get("resourceVersion")
    # Keep labels/annotations others put there (the controller's template generation annotation included).
    meta["labels"] = dict(live_meta.get("labels") or {}, **meta.get("labels", {}))
    meta["annotations"] = dict(live_meta.get("annotations") or {}, **meta.get("annotations", {}))
    for key in ("ownerReferences", "finalizers"):
        if live_meta.get(key):
            meta[key] = copy.deepcopy(live_meta[key])
    return body


_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds")


def clean(obj):
    """The object without status and server-populated metadata, for diffs."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in _SERVER_META:
        meta.pop(key, None)
    tmeta = ((out.get("spec") or {}).get("template") or {}).get("metadata")
    if isinstance(tmeta, dict):
        tmeta.pop("creationTimestamp", None)
    return out


# -- rollout readiness ----------------------------------------------------------------------------

def rollout_status(daemonset):
    """Rollout state of a DaemonSet as the DaemonSet controller reports it.

    Done when observedGeneration >= generation and updated == available == desired; absent counts
    are 0 (the controller drops them, e.g. updatedNumberScheduled on an unreachable node); zero
    desired is done at once. OnDelete rollouts never finish on their own: ``old_pods_pending``.
    """
    meta = daemonset.get("metadata") or {}
    status = daemonset.get("status") or {}
    strategy = (((daemonset.get("spec") or {}).get("updateStrategy")) or {}).get("type") or "RollingUpdate"
    generation = meta.get("generation") or 0
    observed = status.get("observedGeneration") or 0
    counts = dict(
        desired=status.get("desiredNumberScheduled") or 0,
        current=status.get("currentNumberScheduled") or 0,
        updated=status.get("updatedNumberScheduled") or 0,
        ready=status.get("numberReady") or 0,
        available=status.get("numberAvailable") or 0,
        unavailable=status.get("numberUnavailable") or 0,
        misscheduled=status.get("numberMisscheduled") or 0,
    )
    observed_ok = observed >= generation and generation > 0
    if not observed_ok:
        done, reason = False, "waiting for the DaemonSet controller to observe generation %d (observed %d)" % (
            generation, observed)
    elif counts["desired"] == 0:
        done, reason = True, "no node is selected for the plugin (desiredNumberScheduled is 0)"
    elif counts["updated"] == counts["desired"] and counts["available"] == counts["desired"]:
        done, reason = True, "all %d pods are updated and available" % counts["desired"]
    else:
        done = False
        reason = "%d of %d pods updated, %d available" % (counts["updated"], counts["desired"], counts["available"])
    old_pending = bool(observed_ok and not done and strategy == "OnDelete" and counts["updated"] < counts["desired"])
    result = dict(counts, done=done, reason=reason, generation=generation, observed_generation=observed,
                  strategy=strategy, old_pods_pending=old_pending)
    return result


def rollout_done(daemonset):
    return rollout_status(daemonset)["done"]


# -- pods and nodes -------------------------------------------------------------------------------

def pod_node(pod):
    """Node a DaemonSet pod runs on, or is pinned to before it is bound (matchFields metadata.name)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


def pod_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_waiting_reasons(pod):
    """Why the pod's containers are not running, e.g. ['nvidia-device-plugin: ImagePullBackOff']."""
    status = pod.get("status") or {}
    reasons = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            state = cs.get("state") or {}
            if state.get("waiting"):
                reason = state["waiting"].get("reason") or "Waiting"
                message = state["waiting"].get("message")
                reasons.append("%s: %s%s" % (cs.get("name"), reason, " (%s)" % message if message else ""))
            elif state.get("terminated") and not cs.get("ready"):
                reasons.append("%s: %s" % (cs.get("name"), state["terminated"].get("reason") or "Terminated"))
    if not reasons and status.get("phase") == "Pending":
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                reasons.append("unschedulable: %s" % (cond.get("message") or cond.get("reason")))
    return reasons


def uses_configmap(pod_spec, name):
    """True when a pod spec reads ConfigMap ``name``: a volume, a projected source, env or envFrom."""
    spec = pod_spec or {}
    for volume in spec.get("volumes") or []:
        if (volume.get("configMap") or {}).get("name") == name:
            return True
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("configMap") or {}).get("name") == name:
                return True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for env_from in container.get("envFrom") or []:
            if (env_from.get("configMapRef") or {}).get("name") == name:
                return True
        for env in container.get("env") or []:
            if ((env.get("valueFrom") or {}).get("configMapKeyRef") or {}).get("name") == name:
                return True
    return False


def has_owner_uid(obj, owner_uid):
    """True when ``obj`` has an ownerReference to the object with uid ``owner_uid`` (uids are unique cluster-wide)."""
    if not owner_uid:
        return False
    return any(ref.get("uid") == owner_uid for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def configmap_created_for(cm, daemonset_name, daemonset_uid=None):
    """True when the module created ConfigMap ``cm`` for this DaemonSet.

    Either it is owned by the DaemonSet (ownerReference with its uid), or it carries both labels the
    module writes on it: managed-by kubehw.devices and app.kubernetes.io/name of the DaemonSet.
    Anything else is someone else's ConfigMap, whatever its name.
    """
    if has_owner_uid(cm, daemonset_uid):
        return True
    labels = ((cm or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(NAME_LABEL) == daemonset_name


def owned_by(pod, daemonset):
    uid = (daemonset.get("metadata") or {}).get("uid")
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet" and (uid is None or ref.get("uid") == uid):
            return True
    return False


def is_old_pod(pod, generation):
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_TEMPLATE_GENERATION_LABEL)
    return label is not None and label != str(generation)


def _resource_count(node, where, resource):
    value = ((node.get("status") or {}).get(where) or {}).get(resource)
    if value is None:
        return None
    number = quantity_value(value)
    return int(number) if number is not None else None


def node_report(pods, nodes, resource_names, min_count, generation=None):
    """Per node running (or due to run) a plugin pod: pod readiness and the resources it advertises."""
    report = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        node = pod_node(pod)
        if not node:
            continue
        meta = pod.get("metadata") or {}
        terminating = bool(meta.get("deletionTimestamp"))
        entry = report.get(node)
        # A terminating old pod loses to its replacement; otherwise the newest pod speaks for the node.
        if entry is not None and terminating and not entry["terminating"]:
            continue
        report[node] = {
            "pod": meta.get("name"),
            "pod_ready": pod_ready(pod),
            "phase": (pod.get("status") or {}).get("phase"),
            "waiting_reasons": pod_waiting_reasons(pod),
            "terminating": terminating,
            "updated": None if generation is None else not is_old_pod(pod, generation),
        }
    for node, entry in report.items():
        node_obj = nodes.get(node) or {}
        capacity = {}
        allocatable = {}
        for res in resource_names:
            capacity[res] = _resource_count(node_obj, "capacity", res)
            allocatable[res] = _resource_count(node_obj, "allocatable", res)
        entry["capacity"] = capacity
        entry["allocatable"] = allocatable
        entry["resource_ready"] = bool(node_obj) and all(
            capacity[r] is not None and capacity[r] >= min_count for r in resource_names)
    return report


def nodes_with_resource(nodes, node_names, resource_names, min_count):
    """True when every named node has every resource in capacity with at least min_count."""
    for name in node_names:
        node = nodes.get(name)
        if node is None:
            return False
        for res in resource_names:
            count = _resource_count(node, "capacity", res)
            if count is None or count < min_count:
                return False
    return True


def timeout_message(what, timeout, daemonset, rollout, report, resource_names, min_count, check_resources):
    meta = daemonset.get("metadata") or {}
    parts = ["Timed out after %ss waiting for %s of DaemonSet %s/%s: %s" % (
        timeout, what, meta.get("namespace"), meta.get("name"), rollout["reason"])]
    not_ready = []
    for node in sorted(report):
        entry = report[node]
        if not entry["pod_ready"]:
            detail = "; ".join(entry["waiting_reasons"]) or entry.get("phase") or "not ready"
            not_ready.append("%s (pod %s: %s)" % (node, entry["pod"], detail))
    if not_ready:
        parts.append("nodes without a ready plugin pod: %s" % ", ".join(not_ready))
    missing_pods = rollout["desired"] - len(report)
    if missing_pods > 0:
        parts.append("%d selected node(s) have no plugin pod yet" % missing_pods)
    if check_resources:
        lacking = []
        for node in sorted(report):
            entry = report[node]
            short = ["%s=%s" % (r, entry["capacity"].get(r)) for r in resource_names
                     if entry["capacity"].get(r) is None or entry["capacity"][r] < min_count]
            if short:
                lacking.append("%s (%s)" % (node, ", ".join(short)))
        if lacking:
            parts.append("nodes lacking %s >= %d in capacity: %s" % (
                ", ".join(resource_names), min_count, ", ".join(lacking)))
    return "; ".join(parts)
