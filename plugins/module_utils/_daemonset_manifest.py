# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device-plugin DaemonSets: validating the module's input and building the manifest from a preset.

Private to the collection. Pure functions over plain dicts, so every rule is unit-testable without a
cluster. The presets themselves are tables in _device_plugin_presets.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import re

from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
)
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MANAGED_KEYS_ANNOTATION,
    check_image,
    check_tolerations,
    label_map,
    to_text,
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

NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
# Read by the extended-resource module and the simulated kubelet: which resources a plugin pod serves.
RESOURCES_ANNOTATION = "devices.kubehw.io/resources"
# On the pod template: a config change must change the template, or pods keep the old file.
CONFIG_HASH_ANNOTATION = "devices.kubehw.io/config-hash"
# On the DaemonSet: fingerprint of what we last applied, so removing an option is noticed too.
APPLIED_HASH_ANNOTATION = "devices.kubehw.io/applied-hash"
NVIDIA_CONFIG_DIR = "/etc/kubehw/nvidia-device-plugin"
NVIDIA_CONFIG_KEY = "config.yaml"
WAIT_MODES = ("none", "rollout", "resource")
# A dedicated namespace, not kube-system: the identity that writes device plugins then cannot touch
# kube-proxy, the CNI or CoreDNS (playbooks/rbac.yml creates it and scopes the RBAC to it).
DEFAULT_NAMESPACE = "kubehw-device-plugins"

_PERCENT_RE = re.compile(r"[0-9]+%")  # used with fullmatch
_ENV_NAME_RE = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")  # used with fullmatch


class DaemonSetSpecError(ValueError):
    """Invalid module input: the message names the offending value and the rule it breaks."""


def _host_path_volume(name, path, path_type=None):
    host_path = {"path": path}
    if path_type:
        host_path["type"] = path_type
    return {"name": name, "hostPath": host_path}


# The generic plugin's own rule for device names (squat/generic-device-plugin 0.1.0, main.go deviceTypeFmt):
# lowercase letters, digits and '-', starting and ending with a letter or digit, so at least two characters.
_GENERIC_DEVICE_NAME_RE = re.compile(r"[a-z0-9][-a-z0-9]*[a-z0-9]")


def default_name(preset):
    return PRESETS[preset]["name"] if preset in PRESETS else None


def configmap_name(ds_name):
    return "%s-config" % ds_name


def content_hash(data):
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


def check_dns_label(value, what):
    if not isinstance(value, str) or len(value) > 63 or not DNS1123_LABEL_RE.match(value):
        raise DaemonSetSpecError(
            "%s %r must be a lowercase RFC 1123 DNS label (a-z, 0-9 and '-', at most 63 characters, "
            "starting and ending with a letter or digit)" % (what, value))


def check_env_names(env):
    """Refuse container environment variable names the rule below does not allow (both DaemonSet modules)."""
    for key in env or {}:
        if not _ENV_NAME_RE.fullmatch(key):
            raise DaemonSetSpecError("env name %r must consist of letters, digits, '_', '-' or '.', "
                                     "and must not start with a digit" % key)


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


def positive_int(value, what, minimum=1):
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
    # An empty namespace is refused, not read as the default one (an undefined inventory variable must not
    # send the task to another namespace).
    namespace = params.get("namespace")
    check_dns_label(DEFAULT_NAMESPACE if namespace is None else namespace, "namespace")
    if state == "absent":
        if not name:
            raise DaemonSetSpecError("state=absent needs name, or a preset other than custom to take its default name")
        check_dns_label(name, "name")
        return
    if preset not in PRESETS:
        raise DaemonSetSpecError("preset %r must be one of %s" % (preset, ", ".join(PRESET_NAMES)))
    if not name:
        raise DaemonSetSpecError("preset=custom needs name")
    # A DaemonSet name becomes part of pod names and of the selector label value.
    check_dns_label(name, "name")
    check_image(params.get("image"), DaemonSetSpecError)
    label_map(params.get("node_selector"), "node_selector", DaemonSetSpecError)
    check_tolerations(params.get("tolerations"), DaemonSetSpecError)
    for index, secret in enumerate(params.get("image_pull_secrets") or []):
        if not isinstance(secret, str) or len(secret) > 253 or not DNS1123_SUBDOMAIN_RE.fullmatch(secret):
            raise DaemonSetSpecError("image_pull_secrets[%d] %r must be a Secret name: a lowercase RFC 1123 DNS "
                                     "subdomain" % (index, secret))

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
        domain = params.get("device_domain") or GENERIC_DEFAULT_DOMAIN
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
            positive_int(replicas, "time_slicing.replicas[%s]" % res, minimum=1)
        if (ts.get("rename_by_default") or ts.get("fail_requests_greater_than_one")) and not ts.get("replicas"):
            raise DaemonSetSpecError("time_slicing options need time_slicing.replicas (which resources to share)")
        if params.get("mig_strategy") == "mixed" and params.get("wait") == "resource" and not params.get("resource_names"):
            raise DaemonSetSpecError(
                "mig_strategy=mixed advertises one resource per MIG profile (nvidia.com/mig-1g.5gb...): give "
                "resource_names to wait for (wait=resource)")

    runtime_class = params.get("runtime_class_name")
    if runtime_class and (len(runtime_class) > 253 or not DNS1123_SUBDOMAIN_RE.match(runtime_class)):
        raise DaemonSetSpecError("runtime_class_name %r must be a RuntimeClass name: a lowercase RFC 1123 DNS subdomain "
                                 "(empty for none)" % runtime_class)
    for res in params.get("resource_names") or []:
        _check_resource_name(res, "resource_names entry")
    if params.get("min_count") is not None:
        positive_int(params["min_count"], "min_count", minimum=0)

    strategy = params.get("update_strategy") or {}
    stype = strategy.get("type") or "RollingUpdate"
    if stype not in ("RollingUpdate", "OnDelete"):
        raise DaemonSetSpecError("update_strategy.type %r must be RollingUpdate or OnDelete" % stype)
    if stype == "OnDelete" and strategy.get("max_surge") is not None:
        raise DaemonSetSpecError("update_strategy max_surge conflicts with type=OnDelete")
    if stype == "OnDelete" and strategy.get("max_unavailable") is not None and not params.get("delete_old_pods"):
        # With OnDelete it is only the batch size of delete_old_pods; it is not written to the DaemonSet.
        raise DaemonSetSpecError("update_strategy max_unavailable with type=OnDelete needs delete_old_pods=true "
                                 "(it sets how many old pods are deleted at a time)")
    for key in ("max_unavailable", "max_surge"):
        if strategy.get(key) is not None:
            _int_or_percent(strategy[key], "update_strategy.%s" % key)
    if strategy.get("max_unavailable") in (0, "0%") and strategy.get("max_surge") in (None, 0, "0%"):
        raise DaemonSetSpecError("update_strategy max_unavailable and max_surge cannot both be 0 (nothing could roll)")
    if params.get("delete_old_pods") and stype != "OnDelete":
        raise DaemonSetSpecError("delete_old_pods applies only to update_strategy.type=OnDelete")

    label_map(params.get("labels"), "labels", DaemonSetSpecError, convert=False)
    label_map(params.get("annotations"), "annotations", DaemonSetSpecError, values=False)
    for reserved in (NAME_LABEL, MANAGED_BY_LABEL):
        if reserved in (params.get("labels") or {}):
            raise DaemonSetSpecError("labels must not set %r: the module owns it (selector and ownership)" % reserved)
    for reserved in (RESOURCES_ANNOTATION, CONFIG_HASH_ANNOTATION, APPLIED_HASH_ANNOTATION, MANAGED_KEYS_ANNOTATION):
        if reserved in (params.get("annotations") or {}):
            raise DaemonSetSpecError("annotations must not set %r: the module computes it" % reserved)
    check_env_names(params.get("env"))
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
        if meta.get("namespace") not in (None, params.get("namespace") or DEFAULT_NAMESPACE):
            raise DaemonSetSpecError("definition metadata.namespace %r differs from namespace %r"
                                     % (meta["namespace"], params.get("namespace") or DEFAULT_NAMESPACE))
        if (definition.get("spec") or {}).get("selector") is not None:
            raise DaemonSetSpecError("definition must not set spec.selector: the module owns it (it is immutable)")


def _check_generic_device(device, index, domain):
    if not isinstance(device, dict):
        raise DaemonSetSpecError("devices[%d] must be a mapping with name and groups" % index)
    dev_name = device.get("name")
    if not dev_name:
        raise DaemonSetSpecError("devices[%d] needs a name" % index)
    if not isinstance(dev_name, str) or not _GENERIC_DEVICE_NAME_RE.fullmatch(dev_name):
        # the plugin refuses anything else at start and crash-loops
        raise DaemonSetSpecError(
            "devices[%d] name %r must match the generic device plugin's rule: lowercase letters, digits and '-', "
            "at least two characters, starting and ending with a letter or digit" % (index, dev_name))
    _check_resource_name("%s/%s" % (domain, dev_name), "devices[%d] resource" % index)
    groups = device.get("groups")
    if not isinstance(groups, list) or not groups:
        raise DaemonSetSpecError("devices[%d] (%s) needs a non-empty groups list" % (index, dev_name))
    for gindex, group in enumerate(groups):
        if not isinstance(group, dict) or not (group.get("paths") or group.get("usb")):
            raise DaemonSetSpecError("devices[%d].groups[%d] (%s) needs paths or usb" % (index, gindex, dev_name))
        if group.get("paths") and group.get("usb"):
            raise DaemonSetSpecError("devices[%d].groups[%d] (%s) has both paths and usb: the generic device plugin "
                                     "takes one kind per group; make two groups" % (index, gindex, dev_name))
        if group.get("count") is not None:
            positive_int(group["count"], "devices[%d].groups[%d].count" % (index, gindex), minimum=1)


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
        domain = params.get("device_domain") or GENERIC_DEFAULT_DOMAIN
        return ["%s/%s" % (domain, d["name"]) for d in params.get("devices") or []]
    return list(PRESETS[preset]["resources"])


def serves_any(params):
    """True when a node has only some of the served resources (the preset's, not resource_names given by the user)."""
    return not params.get("resource_names") and PRESETS[params["preset"]]["serves_any"]


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


def env_list(preset_env, user_env):
    env = [copy.deepcopy(e) for e in preset_env]
    index = dict((e["name"], i) for i, e in enumerate(env))
    for key in sorted(user_env or {}):
        value = user_env[key]
        entry = dict(value, name=key) if isinstance(value, dict) else {"name": key, "value": to_text(value)}
        if key in index:
            env[index[key]] = entry
        else:
            env.append(entry)
    return env


def default_affinity(terms):
    """Required node affinity: any of the terms (ORed), each term's labels all (ANDed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]} for key, value in term]}
        for term in terms]}}}


def _default_tolerations(preset, resources):
    """The vendor's base taints, each served resource's own taint (NoSchedule), then the preset's extra ones."""
    keys = list(preset["base_taints"]) + [r for r in resources if r not in preset["base_taints"]]
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in keys]
    return tolerations + copy.deepcopy(preset["tolerations"])


def build(params):
    """Return (daemonset, configmap or None, resource names) for params that passed validate()."""
    preset_name = params["preset"]
    preset = PRESETS[preset_name]
    name = params.get("name") or preset["name"]
    namespace = params.get("namespace") or DEFAULT_NAMESPACE
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
    for host in preset["mounts"]:
        volumes.append(_host_path_volume(host["name"], host["path"], host["type"]))
        mount = {"name": host["name"], "mountPath": host["path"]}
        if host["read_only"]:
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
        env_extra = dict(nvidia_env(params), CONFIG_FILE="%s/%s" % (NVIDIA_CONFIG_DIR, NVIDIA_CONFIG_KEY))
        pod_annotations[CONFIG_HASH_ANNOTATION] = content_hash(text)

    env = env_list(preset["env"], dict(env_extra, **(params.get("env") or {})))
    if env:
        container["env"] = env
    if params.get("resources"):
        container["resources"] = copy.deepcopy(params["resources"])
    container["securityContext"] = copy.deepcopy(
        params["security_context"] if params.get("security_context") is not None else
        nvidia_security_context(params) if preset_name == "nvidia" else preset["security_context"])
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
        tolerations = _default_tolerations(preset, resources)
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
    meta = daemonset["metadata"]
    meta["annotations"][MANAGED_KEYS_ANNOTATION] = json.dumps(
        {"labels": sorted(meta["labels"]), "annotations": sorted(meta["annotations"]) + [MANAGED_KEYS_ANNOTATION]},
        sort_keys=True, separators=(",", ":"))
    meta["annotations"][APPLIED_HASH_ANNOTATION] = content_hash(
        {"spec": daemonset["spec"], "labels": meta["labels"], "annotations": meta["annotations"]})
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
