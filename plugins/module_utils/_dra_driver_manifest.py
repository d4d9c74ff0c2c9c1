# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA driver manifests: dra_driver_deploy's options validated (``validate``), and the kubelet-plugin DaemonSet, its
RBAC and DeviceClasses built from a preset of _dra_driver_presets and those options. Pure functions, private to the
collection.

The module dra_driver_deploy calls these; tests and the rbac playbook's checks read the
same builders, so what is deployed and what is granted come from one place."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import posixpath
import re

from ansible_collections.kubehw.devices.plugins.module_utils import _dra_device_class as dra_device_class
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_validation as dra_validation
from ansible_collections.kubehw.devices.plugins.module_utils import _images as images
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._connection import timeout_problem
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._images import mirrored
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import (
    COMPONENT_LABEL,
    NAME_LABEL,
    check_dns_label,
    check_env_names,
    default_affinity,
    env_list,
    rolling_update,
)
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import positive_int as whole_number

DEFAULT_NAMESPACE = "kubehw-dra-drivers"
# What the module's wait option may name: nothing, the rollout, or the rollout and the devices it publishes.
WAIT_MODES = ("none", "rollout", "devices")
COMPONENT = "dra-kubelet-plugin"
# On the pod template: which DRA driver the pods run (read by people and by the test suite's kubelet stand-in).
DRIVER_ANNOTATION = "devices.kubehw.io/dra-driver"
RBAC_GROUP = "rbac.authorization.k8s.io"
# Pods of these priority classes outside kube-system need a ResourceQuota whose scope allows the class on clusters
# whose ResourceQuota admission limits them (GKE's default configuration); see docs/dra.md.
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def check_driver_root(value, what="nvidia_driver_root"):
    """An absolute host path in normal form ('/', '/run/nvidia/driver'); raises InputRefused naming it."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        raise InputRefused("%s %r must be an absolute path on the node (for example / or %s)"
                           % (what, value, presets.NVIDIA_OPERATOR_DRIVER_ROOT))
    if _CONTROL_RE.search(value) or any(c.isspace() for c in value):
        raise InputRefused("%s %r must not contain spaces or control characters" % (what, value))
    trimmed = value.rstrip("/") or "/"
    if posixpath.normpath(trimmed) != trimmed:
        raise InputRefused("%s %r must be a normal path without '.', '..' or '//' (%r)"
                           % (what, value, posixpath.normpath(trimmed)))
    return trimmed


def driver_root_parent(root):
    """The chart's driver-root-parent: '/' for '/', else the root without its last element (sprig's dir)."""
    return "/" if root == "/" else posixpath.dirname(root)


def object_names(params):
    preset = presets.PRESETS[params["preset"]]
    name = params.get("name") or preset["name"]
    return name, params.get("namespace") or DEFAULT_NAMESPACE


def labels(name):
    return {NAME_LABEL: name, COMPONENT_LABEL: COMPONENT, objects.MANAGED_BY_LABEL: objects.MANAGED_BY}


def _container(spec, image, user_env=None, driver_root=None):
    container = {"name": spec["name"], "image": image}
    for key, field in (("command", "command"), ("args", "args"), ("ports", "ports")):
        if spec.get(key):
            container[field] = copy.deepcopy(spec[key])
    preset_env = []
    for entry in spec.get("env") or []:
        if entry.get("name") == "IMAGE_NAME":
            entry = dict(entry, value=image)
        elif entry.get("name") == "NVIDIA_DRIVER_ROOT" and driver_root is not None:
            entry = dict(entry, value=driver_root)
        preset_env.append(entry)
    env = env_list(preset_env, user_env)
    if env:
        container["env"] = env
    if spec.get("startup_probe"):
        container["startupProbe"] = copy.deepcopy(spec["startup_probe"])
    if spec.get("liveness_probe"):
        container["livenessProbe"] = copy.deepcopy(spec["liveness_probe"])
    container["securityContext"] = copy.deepcopy(spec["security_context"])
    mounts = copy.deepcopy(spec["mounts"])
    if driver_root not in (None, "/"):
        for mount in mounts:
            if mount["name"] == "driver-root-parent":
                # templates/kubeletplugin.yaml: readOnly for "/", else HostToContainer, so that the driver the
                # GPU Operator's container mounts under the root later is seen here
                mount.pop("readOnly", None)
                mount["mountPropagation"] = "HostToContainer"
    container["volumeMounts"] = mounts
    return container


def _volumes(preset, driver_root):
    volumes = copy.deepcopy(preset["volumes"])
    if driver_root is not None:
        for volume in volumes:
            if volume["name"] == "driver-root":
                volume["hostPath"]["path"] = driver_root
            elif volume["name"] == "driver-root-parent":
                volume["hostPath"]["path"] = driver_root_parent(driver_root)
    return volumes


def driver_root(params):
    """The NVIDIA driver root for params (None for presets without one)."""
    preset = presets.PRESETS[params["preset"]]
    if "driver_root" not in preset:
        return None
    return check_driver_root(params.get("nvidia_driver_root")) or preset["driver_root"]


def node_selection(params):
    """(nodeSelector or None, affinity or None) of the kubelet-plugin pods: node_selector replaces the preset's
    default selection (its nodeSelector and its affinity terms)."""
    preset = presets.PRESETS[params["preset"]]
    if params.get("node_selector"):
        return dict((k, objects.to_text(v)) for k, v in params["node_selector"].items()), None
    selector = dict(preset.get("node_selector") or {}) or None
    affinity = default_affinity(preset["node_terms"]) if preset["node_terms"] else None
    return selector, affinity


def placement(params):
    """The keys of the kubelet-plugin pod spec that decide which nodes it runs on (tolerations, nodeSelector,
    affinity): what the guards read before the DaemonSet itself is built."""
    preset = presets.PRESETS[params["preset"]]
    out = {}
    tolerations = params["tolerations"] if params.get("tolerations") is not None else preset["tolerations"]
    if tolerations:
        out["tolerations"] = copy.deepcopy(tolerations)
    selector, affinity = node_selection(params)
    if selector:
        out["nodeSelector"] = selector
    if affinity:
        out["affinity"] = affinity
    return out


def build_daemonset(params):
    """The kubelet-plugin DaemonSet for params that passed dra_driver_deploy's validate()."""
    preset = presets.PRESETS[params["preset"]]
    name, namespace = object_names(params)
    image = mirrored(params.get("image") or preset["image"], params.get("image_registry"))
    root = driver_root(params)
    containers = [_container(c, image, params.get("env") if index == 0 else None, root)
                  for index, c in enumerate(preset["containers"])]
    pod_spec = {"serviceAccountName": name, "containers": containers, "volumes": _volumes(preset, root)}
    if preset["init_containers"]:
        pod_spec["initContainers"] = [_container(c, image, driver_root=root) for c in preset["init_containers"]]
    if params.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": secret} for secret in params["image_pull_secrets"]]
    if preset["priority_class"]:
        pod_spec["priorityClassName"] = preset["priority_class"]
    pod_spec.update(placement(params))
    own = labels(name)
    spec = {
        "selector": {"matchLabels": {NAME_LABEL: name}},
        "template": {"metadata": {"labels": dict(own), "annotations": {DRIVER_ANNOTATION: preset["driver"]}},
                     "spec": pod_spec},
    }
    if params.get("update_strategy"):
        spec["updateStrategy"] = rolling_update(params["update_strategy"])
    elif preset["update_strategy"]:
        spec["updateStrategy"] = copy.deepcopy(preset["update_strategy"])
    annotations = {DRIVER_ANNOTATION: preset["driver"]}
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": name, "namespace": namespace, "labels": own, "annotations": annotations},
                 "spec": spec}
    # The same bookkeeping as device_plugin_deploy: which keys are ours, and a fingerprint of what was applied.
    objects.record_applied(daemonset)
    return daemonset


def build_rbac(params):
    """(ServiceAccount, ClusterRole, ClusterRoleBinding), all named after the DaemonSet."""
    preset = presets.PRESETS[params["preset"]]
    name, namespace = object_names(params)
    own = labels(name)
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": namespace, "labels": dict(own)}}
    role = {"apiVersion": "%s/v1" % RBAC_GROUP, "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(own)}, "rules": copy.deepcopy(preset["rules"])}
    binding = {"apiVersion": "%s/v1" % RBAC_GROUP, "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": dict(own)},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    return account, role, binding


def build_namespace_rbac(params):
    """(Role, RoleBinding) in the driver's namespace, named after the DaemonSet, for presets with namespace rules
    (NVIDIA's MPS control daemons); None otherwise."""
    preset = presets.PRESETS[params["preset"]]
    if not preset.get("namespace_rules"):
        return None
    name, namespace = object_names(params)
    own = labels(name)
    role = {"apiVersion": "%s/v1" % RBAC_GROUP, "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(own)},
            "rules": copy.deepcopy(preset["namespace_rules"])}
    binding = {"apiVersion": "%s/v1" % RBAC_GROUP, "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": namespace, "labels": dict(own)},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    return role, binding


def device_class_params(params, state="present"):
    """dra_device_class's options for each of the preset's DeviceClasses (none with device_classes: false); the
    first is the main one, which carries extended_resource_name. They go to _dra_device_class.manage_device_class,
    the code dra_device_class runs."""
    if not params.get("device_classes", True):
        return []
    preset = presets.PRESETS[params["preset"]]
    return [{"name": entry["name"], "state": state, "selectors": list(entry["selectors"]), "config": None,
             "extended_resource_name": params.get("extended_resource_name") if index == 0 else None,
             "labels": None, "adopt": False}
            for index, entry in enumerate(preset["device_classes"])]


def build_device_classes(params):
    """The preset's DeviceClasses (v1 shape) as dra_device_class builds them."""
    return [dra_device_class.build_device_class(p) for p in device_class_params(params)]


# -- input rules ----------------------------------------------------------------------------------------------

def validate(params):
    """Everything that can be checked without a cluster; raises InputRefused naming the value and the rule."""
    preset = params.get("preset")
    if preset not in presets.PRESETS:
        raise InputRefused("preset %r must be one of %s" % (preset, ", ".join(presets.PRESET_NAMES)))
    check_dns_label(params.get("name") or presets.PRESETS[preset]["name"], "name")
    # an empty namespace is refused, never read as the default one
    check_dns_label(DEFAULT_NAMESPACE if params.get("namespace") is None else params["namespace"], "namespace")
    images.check_image(params.get("image"), InputRefused)
    images.check_image_registry(params.get("image_registry"), InputRefused)
    objects.check_pull_secrets(params.get("image_pull_secrets"), InputRefused)
    if params.get("state", "present") == "present" and not (params.get("image") or presets.PRESETS[preset]["image"]):
        raise InputRefused("preset %s has no default image (its upstream publishes none): set image" % preset)
    objects.label_map(params.get("node_selector"), "node_selector", InputRefused)
    objects.check_tolerations(params.get("tolerations"), InputRefused)
    check_env_names(params.get("env"))
    if params.get("nvidia_driver_root") is not None:
        if "driver_root" not in presets.PRESETS[preset]:
            raise InputRefused("nvidia_driver_root is an option of the nvidia preset, not of %s" % preset)
        check_driver_root(params["nvidia_driver_root"])
    if params.get("update_strategy"):
        rolling_update(params["update_strategy"])
    if params.get("min_count") is not None:
        params["min_count"] = whole_number(params["min_count"], "min_count", minimum=0)
    problem = params.get("wait_timeout") is not None and timeout_problem("wait_timeout", params["wait_timeout"], True)
    if problem:
        raise InputRefused(problem)
    extended = params.get("extended_resource_name")
    if extended is not None:
        if not params.get("device_classes", True):
            raise InputRefused("extended_resource_name is set on the preset's DeviceClass: it needs "
                               "device_classes: true")
        problem = dra_validation.extended_name_problem(extended)
        if problem:
            raise InputRefused("extended_resource_name %r %s" % (extended, problem))
    for class_params in device_class_params(params):
        try:
            dra_device_class.build_device_class(class_params)
        except InputRefused as err:
            raise InputRefused("DeviceClass %s: %s" % (class_params["name"], err))


# -- what the cluster must offer -----------------------------------------------------------------------------

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)")
# The release that first served resource.k8s.io/v1 by default: a cluster serving it is at least that new, whatever
# its /version says (vendors rewrite gitVersion; a test apiserver may report an older one).
V1_RELEASE = (1, 34)


def parse_version(git_version):
    """(major, minor) from a gitVersion such as v1.36.2 or v1.34.1-gke.1000, or None."""
    match = _VERSION_RE.match(git_version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def version_problem(preset_name, git_version):
    """Why the cluster cannot run the preset's driver (its Kubernetes floor), or None. The cluster serves
    resource.k8s.io/v1 (discovery said so before), so it is at least V1_RELEASE whatever its /version says; an
    unreadable server version is not refused."""
    floor = presets.PRESETS[preset_name]["min_kubernetes"]
    running = parse_version(git_version)
    if running is not None and max(running, V1_RELEASE) < floor:
        return ("the %s preset's driver needs Kubernetes %d.%d or later; this cluster runs %s"
                % (preset_name, floor[0], floor[1], git_version))
    return None
