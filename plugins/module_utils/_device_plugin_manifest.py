# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device-plugin DaemonSets: validating device_plugin_deploy's input and building the manifest from a preset.

Private to the collection. Pure functions over plain dicts, so every rule is unit-testable without a
cluster. The presets themselves are tables in _device_plugin_presets.py; the pod-template parts and input
rules this module shares with dra_driver_deploy are in _pod_spec.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re

from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import DNS1123_SUBDOMAIN_RE
from ansible_collections.kubehw.devices.plugins.module_utils._images import check_image, check_image_registry, mirrored
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    APPLIED_HASH_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MANAGED_KEYS_ANNOTATION,
    check_pull_secrets,
    check_tolerations,
    content_hash,
    label_map,
    record_applied,
    to_text,
)
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import (
    COMPONENT_LABEL,
    NAME_LABEL,
    check_dns_label,
    check_env_names,
    default_affinity,
    env_list,
    host_path_volume,
    int_or_percent,
    positive_int,
    rolling_update,
)
from ansible_collections.kubehw.devices.plugins.module_utils._device_plugin_presets import (
    AMD_ONLY,
    DEVICE_ID_STRATEGIES,
    DEVICE_LIST_STRATEGIES,
    GENERIC_DEFAULT_DOMAIN,
    GENERIC_ONLY,
    MIG_STRATEGIES,
    NVIDIA_ONLY,
    PRESET_NAMES,
    PRESETS,
    nvidia_env,
    nvidia_security_context,
)

# Read by the extended-resource module and the test suite's kubelet stand-in: which resources a plugin pod serves.
RESOURCES_ANNOTATION = "devices.kubehw.io/resources"
# On the pod template: a config change must change the template, or pods keep the old file.
CONFIG_HASH_ANNOTATION = "devices.kubehw.io/config-hash"
NVIDIA_CONFIG_DIR = "/etc/kubehw/nvidia-device-plugin"
NVIDIA_CONFIG_KEY = "config.yaml"
WAIT_MODES = ("none", "rollout", "resource")
# A dedicated namespace, not kube-system: the identity that writes device plugins then cannot touch
# kube-proxy, the CNI or CoreDNS (playbooks/rbac.yml creates it and scopes the RBAC to it).
DEFAULT_NAMESPACE = "kubehw-device-plugins"
# Labels and annotations the module computes; the user's labels and annotations must not set them.
_RESERVED_LABELS = (NAME_LABEL, MANAGED_BY_LABEL)
_RESERVED_ANNOTATIONS = (RESOURCES_ANNOTATION, CONFIG_HASH_ANNOTATION, APPLIED_HASH_ANNOTATION, MANAGED_KEYS_ANNOTATION)


# The generic plugin's own rule for device names (squat/generic-device-plugin 0.1.0, main.go deviceTypeFmt):
# lowercase letters, digits and '-', starting and ending with a letter or digit, so at least two characters.
_GENERIC_DEVICE_NAME_RE = re.compile(r"[a-z0-9][-a-z0-9]*[a-z0-9]")


def default_name(preset):
    return PRESETS[preset]["name"] if preset in PRESETS else None


def configmap_name(ds_name):
    return "%s-config" % ds_name


# -- validation: validate() runs the rule groups below in this order -------------------------------

def validate(params):
    """Check everything that can be checked without a cluster. Raises InputRefused."""
    preset = params.get("preset")
    name = params.get("name") or default_name(preset)
    _check_namespace(params)
    if (params.get("state") or "present") == "absent":
        _check_name_to_delete(name)
        return
    _check_preset_and_name(preset, name)
    _check_image_and_placement(params)
    _check_options_of_other_presets(params, preset)
    if preset in _PRESET_RULES:
        _PRESET_RULES[preset](params)
    _check_runtime_class(params)
    _check_resource_names_and_min_count(params)
    _check_update_strategy(params)
    _check_labels_and_annotations(params)
    check_env_names(params.get("env"))
    _check_host_paths(params)
    _check_definition(params, name)


def _check_namespace(params):
    # An empty namespace is refused, not read as the default one (an undefined inventory variable must not
    # send the task to another namespace).
    namespace = params.get("namespace")
    check_dns_label(DEFAULT_NAMESPACE if namespace is None else namespace, "namespace")


def _check_name_to_delete(name):
    if not name:
        raise InputRefused("state=absent needs name, or a preset other than custom to take its default name")
    check_dns_label(name, "name")


def _check_preset_and_name(preset, name):
    if preset not in PRESETS:
        raise InputRefused("preset %r must be one of %s" % (preset, ", ".join(PRESET_NAMES)))
    if not name:
        raise InputRefused("preset=custom needs name")
    # A DaemonSet name becomes part of pod names and of the selector label value.
    check_dns_label(name, "name")


def _check_image_and_placement(params):
    """image, node_selector, tolerations, image_pull_secrets and image_registry."""
    check_image(params.get("image"), InputRefused)
    label_map(params.get("node_selector"), "node_selector", InputRefused)
    check_tolerations(params.get("tolerations"), InputRefused)
    check_pull_secrets(params.get("image_pull_secrets"), InputRefused)
    check_image_registry(params.get("image_registry"), InputRefused)


def _given(params, key):
    value = params.get(key)
    return value is not None


def _check_options_of_other_presets(params, preset):
    for owner, keys in (("nvidia", NVIDIA_ONLY), ("amd", AMD_ONLY), ("generic", GENERIC_ONLY)):
        for key in keys:
            if preset != owner and _given(params, key):
                raise InputRefused("%s applies only to preset=%s, not preset=%s" % (key, owner, preset))


def _check_custom_preset(params):
    if not params.get("image"):
        raise InputRefused("preset=custom needs image")
    if not params.get("resource_names"):
        raise InputRefused("preset=custom needs resource_names (the resources the plugin registers)")


def _check_generic_preset(params):
    if not params.get("devices") and not params.get("args"):
        raise InputRefused("preset=generic needs devices (or args with --device specs)")
    if params.get("devices") and params.get("args"):
        raise InputRefused("devices and args conflict: devices become --device args; give one of them")
    domain = params.get("device_domain") or GENERIC_DEFAULT_DOMAIN
    for index, device in enumerate(params.get("devices") or []):
        _check_generic_device(device, index, domain)
    if params.get("args") and not params.get("resource_names"):
        raise InputRefused("preset=generic with args needs resource_names (they cannot be read from args)")


def _check_generic_device(device, index, domain):
    if not isinstance(device, dict):
        raise InputRefused("devices[%d] must be a mapping with name and groups" % index)
    dev_name = device.get("name")
    if not dev_name:
        raise InputRefused("devices[%d] needs a name" % index)
    if not isinstance(dev_name, str) or not _GENERIC_DEVICE_NAME_RE.fullmatch(dev_name):
        # the plugin refuses anything else at start and crash-loops
        raise InputRefused(
            "devices[%d] name %r must match the generic device plugin's rule: lowercase letters, digits and '-', "
            "at least two characters, starting and ending with a letter or digit" % (index, dev_name))
    _check_resource_name("%s/%s" % (domain, dev_name), "devices[%d] resource" % index)
    groups = device.get("groups")
    if not isinstance(groups, list) or not groups:
        raise InputRefused("devices[%d] (%s) needs a non-empty groups list" % (index, dev_name))
    for gindex, group in enumerate(groups):
        if not isinstance(group, dict) or not (group.get("paths") or group.get("usb")):
            raise InputRefused("devices[%d].groups[%d] (%s) needs paths or usb" % (index, gindex, dev_name))
        if group.get("paths") and group.get("usb"):
            raise InputRefused("devices[%d].groups[%d] (%s) has both paths and usb: the generic device plugin "
                               "takes one kind per group; make two groups" % (index, gindex, dev_name))
        if group.get("count") is not None:
            positive_int(group["count"], "devices[%d].groups[%d].count" % (index, gindex), minimum=1)


def _check_amd_preset(params):
    if params.get("args") and _given(params, "resource_naming_strategy"):
        raise InputRefused("args and resource_naming_strategy conflict: args replace the preset's flags")
    if params.get("resource_naming_strategy") == "mixed" and not params.get("resource_names") \
            and params.get("wait") == "resource":
        raise InputRefused(
            "resource_naming_strategy=mixed names resources after the GPU partitions: give resource_names "
            "to wait for (wait=resource)")


def _check_nvidia_preset(params):
    _check_nvidia_strategies(params)
    _check_time_slicing(params.get("time_slicing") or {})
    if params.get("mig_strategy") == "mixed" and params.get("wait") == "resource" and not params.get("resource_names"):
        raise InputRefused(
            "mig_strategy=mixed advertises one resource per MIG profile (nvidia.com/mig-1g.5gb...): give "
            "resource_names to wait for (wait=resource)")


def _check_nvidia_strategies(params):
    if _given(params, "mig_strategy") and params["mig_strategy"] not in MIG_STRATEGIES:
        raise InputRefused("mig_strategy %r must be one of %s" % (params["mig_strategy"], ", ".join(MIG_STRATEGIES)))
    for strategy in params.get("device_list_strategy") or []:
        if strategy not in DEVICE_LIST_STRATEGIES:
            raise InputRefused("device_list_strategy %r must be one of %s"
                               % (strategy, ", ".join(DEVICE_LIST_STRATEGIES)))
    if _given(params, "device_id_strategy") and params["device_id_strategy"] not in DEVICE_ID_STRATEGIES:
        raise InputRefused("device_id_strategy %r must be one of %s"
                           % (params["device_id_strategy"], ", ".join(DEVICE_ID_STRATEGIES)))


def _check_time_slicing(time_slicing):
    for res, replicas in (time_slicing.get("replicas") or {}).items():
        _check_resource_name(res, "time_slicing.replicas key")
        positive_int(replicas, "time_slicing.replicas[%s]" % res, minimum=1)
    if (time_slicing.get("rename_by_default") or time_slicing.get("fail_requests_greater_than_one")) \
            and not time_slicing.get("replicas"):
        raise InputRefused("time_slicing options need time_slicing.replicas (which resources to share)")


# The rules of the options only one preset takes.
_PRESET_RULES = {
    "custom": _check_custom_preset,
    "generic": _check_generic_preset,
    "amd": _check_amd_preset,
    "nvidia": _check_nvidia_preset,
}


def _check_resource_name(name, what):
    problem = extended_resource_name_problem(name)
    if problem:
        raise InputRefused("%s %r is not a valid extended resource name: %s" % (what, name, problem))


def _check_runtime_class(params):
    runtime_class = params.get("runtime_class_name")
    if runtime_class and (len(runtime_class) > 253 or not DNS1123_SUBDOMAIN_RE.match(runtime_class)):
        raise InputRefused("runtime_class_name %r must be a RuntimeClass name: a lowercase RFC 1123 DNS subdomain "
                           "(empty for none)" % runtime_class)


def _check_resource_names_and_min_count(params):
    for res in params.get("resource_names") or []:
        _check_resource_name(res, "resource_names entry")
    if params.get("min_count") is not None:
        positive_int(params["min_count"], "min_count", minimum=0)


def _check_update_strategy(params):
    strategy = params.get("update_strategy") or {}
    stype = strategy.get("type") or "RollingUpdate"
    if stype not in ("RollingUpdate", "OnDelete"):
        raise InputRefused("update_strategy.type %r must be RollingUpdate or OnDelete" % stype)
    if stype == "OnDelete" and strategy.get("max_surge") is not None:
        raise InputRefused("update_strategy max_surge conflicts with type=OnDelete")
    if stype == "OnDelete" and strategy.get("max_unavailable") is not None and not params.get("delete_old_pods"):
        # With OnDelete it is only the batch size of delete_old_pods; it is not written to the DaemonSet.
        raise InputRefused("update_strategy max_unavailable with type=OnDelete needs delete_old_pods=true "
                           "(it sets how many old pods are deleted at a time)")
    if stype == "RollingUpdate":
        rolling_update(strategy)
    else:
        for key in ("max_unavailable", "max_surge"):
            if strategy.get(key) is not None:
                int_or_percent(strategy[key], "update_strategy.%s" % key)
    if params.get("delete_old_pods") and stype != "OnDelete":
        raise InputRefused("delete_old_pods applies only to update_strategy.type=OnDelete")


def _check_labels_and_annotations(params):
    label_map(params.get("labels"), "labels", InputRefused, convert=False)
    label_map(params.get("annotations"), "annotations", InputRefused, values=False)
    for reserved in _RESERVED_LABELS:
        if reserved in (params.get("labels") or {}):
            raise InputRefused("labels must not set %r: the module owns it (selector and ownership)" % reserved)
    for reserved in _RESERVED_ANNOTATIONS:
        if reserved in (params.get("annotations") or {}):
            raise InputRefused("annotations must not set %r: the module computes it" % reserved)


def _check_host_paths(params):
    for index, host_path in enumerate(params.get("host_paths") or []):
        if not host_path.get("path", "").startswith("/"):
            raise InputRefused("host_paths[%d].path %r must be an absolute path" % (index, host_path.get("path")))


def _check_definition(params, name):
    definition = params.get("definition")
    if definition is None:
        return
    if not isinstance(definition, dict):
        raise InputRefused("definition must be a mapping (a DaemonSet manifest fragment)")
    kind = definition.get("kind")
    if kind is not None and kind != "DaemonSet":
        raise InputRefused("definition has kind %r: it must be a DaemonSet (or leave kind out)" % kind)
    api = definition.get("apiVersion")
    if api is not None and api != "apps/v1":
        raise InputRefused("definition has apiVersion %r: DaemonSets are apps/v1" % api)
    meta = definition.get("metadata") or {}
    if meta.get("name") not in (None, name):
        raise InputRefused("definition metadata.name %r differs from name %r" % (meta["name"], name))
    if meta.get("namespace") not in (None, params.get("namespace") or DEFAULT_NAMESPACE):
        raise InputRefused("definition metadata.namespace %r differs from namespace %r"
                           % (meta["namespace"], params.get("namespace") or DEFAULT_NAMESPACE))
    if (definition.get("spec") or {}).get("selector") is not None:
        raise InputRefused("definition must not set spec.selector: the module owns it (it is immutable)")


# -- building: build() assembles the parts below ----------------------------------------------------

def build(params):
    """Return (daemonset, configmap or None, resource names) for params that passed validate()."""
    preset = PRESETS[params["preset"]]
    name = params.get("name") or preset["name"]
    namespace = params.get("namespace") or DEFAULT_NAMESPACE
    resources = served_resources(params)
    configmap = nvidia_configmap(params, name, namespace) if params["preset"] == "nvidia" else None
    volumes, mounts = _volumes_and_mounts(params, preset, name)
    labels = _labels(params, name)
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                     "annotations": _daemonset_annotations(params, resources)},
        "spec": {
            "selector": {"matchLabels": {NAME_LABEL: name}},
            "updateStrategy": _update_strategy(params),
            "template": {
                "metadata": {"labels": dict(labels), "annotations": _pod_annotations(params, resources, configmap)},
                "spec": _pod_spec(params, preset, resources, _container(params, preset, mounts), volumes),
            },
        },
    }
    if params.get("definition"):
        daemonset = _merge_user_definition(daemonset, params["definition"], name)
    record_applied(daemonset)
    return daemonset, configmap, resources


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
        domain = params.get("device_domain") or GENERIC_DEFAULT_DOMAIN
        return ["%s/%s" % (domain, d["name"]) for d in params.get("devices") or []]
    return list(PRESETS[preset]["resources"])


def serves_any(params):
    """True when a node has only some of the served resources (the preset's, not resource_names given by the user)."""
    return not params.get("resource_names") and PRESETS[params["preset"]]["serves_any"]


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


def nvidia_configmap(params, name, namespace):
    """The ConfigMap holding the NVIDIA plugin's config file, which its pods mount."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(name),
            "namespace": namespace,
            "labels": {NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
        },
        "data": {NVIDIA_CONFIG_KEY: json.dumps(nvidia_config(params), indent=2, sort_keys=True) + "\n"},
    }


def _volumes_and_mounts(params, preset, name):
    """(volumes, volumeMounts of the plugin container): the preset's host paths, the CDI spec directory of the
    nvidia CDI strategies, the user's host_paths, and the nvidia preset's config file, in this order."""
    pairs = _preset_host_paths(preset) + _cdi_specs(params) + _user_host_paths(params) + _nvidia_config_file(params, name)
    return [volume for volume, _mount in pairs], [mount for _volume, mount in pairs]


def _preset_host_paths(preset):
    pairs = []
    for host in preset["mounts"]:
        mount = {"name": host["name"], "mountPath": host["path"]}
        if host["read_only"]:
            mount["readOnly"] = True
        pairs.append((host_path_volume(host["name"], host["path"], host["type"]), mount))
    return pairs


def _cdi_specs(params):
    if params["preset"] == "nvidia" and set(params.get("device_list_strategy") or []) & set(["cdi-annotations", "cdi-cri"]):
        # CDI strategies write specs the runtime reads from the host's /var/run/cdi.
        return [(host_path_volume("cdi-specs", "/var/run/cdi", "DirectoryOrCreate"),
                 {"name": "cdi-specs", "mountPath": "/var/run/cdi"})]
    return []


def _user_host_paths(params):
    pairs = []
    for index, extra in enumerate(params.get("host_paths") or []):
        vol_name = extra.get("name") or "host-path-%d" % index
        mount = {"name": vol_name, "mountPath": extra.get("mount_path") or extra["path"]}
        if extra.get("read_only"):
            mount["readOnly"] = True
        pairs.append((host_path_volume(vol_name, extra["path"], extra.get("type")), mount))
    return pairs


def _nvidia_config_file(params, name):
    if params["preset"] != "nvidia":
        return []
    return [({"name": "plugin-config", "configMap": {"name": configmap_name(name)}},
             {"name": "plugin-config", "mountPath": NVIDIA_CONFIG_DIR, "readOnly": True})]


def _container(params, preset, mounts):
    """The plugin container: image, arguments, environment, resources, security context, mounts."""
    image = mirrored(params.get("image") or preset["image"], params.get("image_registry"))
    container = {"name": preset["container"], "image": image}
    if params.get("image_pull_policy"):
        container["imagePullPolicy"] = params["image_pull_policy"]
    args = _preset_args(params)
    if args:
        container["args"] = args
    env = env_list(preset["env"], dict(_nvidia_env(params), **(params.get("env") or {})))
    if env:
        container["env"] = env
    if params.get("resources"):
        container["resources"] = copy.deepcopy(params["resources"])
    container["securityContext"] = copy.deepcopy(
        params["security_context"] if params.get("security_context") is not None else
        nvidia_security_context(params) if params["preset"] == "nvidia" else preset["security_context"])
    container["volumeMounts"] = mounts
    return container


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


def _nvidia_env(params):
    """The nvidia preset's environment: where the config file is, and MIG monitoring when a MIG strategy is set."""
    if params["preset"] != "nvidia":
        return {}
    return dict(nvidia_env(params), CONFIG_FILE="%s/%s" % (NVIDIA_CONFIG_DIR, NVIDIA_CONFIG_KEY))


def _labels(params, name):
    labels = {NAME_LABEL: name, COMPONENT_LABEL: "device-plugin", MANAGED_BY_LABEL: MANAGED_BY}
    labels.update(params.get("labels") or {})
    return labels


def _daemonset_annotations(params, resources):
    annotations = {RESOURCES_ANNOTATION: ",".join(resources)}
    annotations.update(params.get("annotations") or {})
    return annotations


def _pod_annotations(params, resources, configmap):
    annotations = {RESOURCES_ANNOTATION: ",".join(resources)}
    if configmap is not None:
        annotations[CONFIG_HASH_ANNOTATION] = content_hash(configmap["data"][NVIDIA_CONFIG_KEY])
    annotations.update(params.get("annotations") or {})
    return annotations


def _pod_spec(params, preset, resources, container, volumes):
    """The pod template's spec: the container, its volumes, priority, tolerations, node selection, identity."""
    pod_spec = {"containers": [container], "volumes": volumes}
    priority = params.get("priority_class_name")
    if priority is None:
        priority = "system-node-critical"
    if priority:
        pod_spec["priorityClassName"] = priority
    tolerations = _tolerations(params, preset, resources)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if params.get("node_selector"):
        pod_spec["nodeSelector"] = dict((k, to_text(v)) for k, v in params["node_selector"].items())
    if params.get("affinity"):
        pod_spec["affinity"] = copy.deepcopy(params["affinity"])
    elif not params.get("node_selector") and preset["node_terms"]:
        pod_spec["affinity"] = default_affinity(preset["node_terms"])
    if params.get("service_account"):
        pod_spec["serviceAccountName"] = params["service_account"]
    runtime_class = params.get("runtime_class_name")
    if runtime_class is None:
        runtime_class = preset.get("runtime_class")
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    if params.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": s} for s in params["image_pull_secrets"]]
    return pod_spec


def _tolerations(params, preset, resources):
    if params.get("tolerations") is not None:
        return copy.deepcopy(params["tolerations"])
    # Nodes with the hardware are often tainted with the resource name so only its users land there.
    return _default_tolerations(preset, resources)


def _default_tolerations(preset, resources):
    """The vendor's base taints, each served resource's own taint (NoSchedule), then the preset's extra ones."""
    keys = list(preset["base_taints"]) + [r for r in resources if r not in preset["base_taints"]]
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in keys]
    return tolerations + copy.deepcopy(preset["tolerations"])


def _update_strategy(params):
    strategy = params.get("update_strategy") or {}
    if (strategy.get("type") or "RollingUpdate") == "OnDelete":
        return {"type": "OnDelete"}
    return rolling_update(strategy)


def _merge_user_definition(daemonset, definition, name):
    """The user's definition merged over the built DaemonSet, which must keep the label its selector needs."""
    patch = copy.deepcopy(definition)
    patch.pop("kind", None)
    patch.pop("apiVersion", None)
    daemonset = merge_definition(daemonset, patch)
    if daemonset["spec"]["template"]["metadata"].get("labels", {}).get(NAME_LABEL) != name:
        raise InputRefused("definition must keep the template label %s=%s (the selector needs it)"
                           % (NAME_LABEL, name))
    return daemonset


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
