# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guards both deploy modules run before any write: nothing else may hand out the same devices on a node the
DaemonSet runs on, or will run on once it has joined. dra_driver_deploy's: no device plugin of the preset's devices,
no second installation of the driver. device_plugin_deploy's: no DRA driver publishing the plugin's devices.
A device plugin is recognised by what it is (the collection's by the resources it serves, anyone's by the vendor's
upstream labels on the DaemonSet, its selector or its pod template, or by its image, unless it runs only helpers that
serve nothing), a node by the resource in its allocatable, a second installation of the same driver by the driver
annotation or the image's name. Pure functions over listed objects; the modules list them.

Private to the collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils._device_plugin_manifest import RESOURCES_ANNOTATION
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_manifest import DRIVER_ANNOTATION
from ansible_collections.kubehw.devices.plugins.module_utils._daemonset_task import managed_here
from ansible_collections.kubehw.devices.plugins.module_utils._images import image_repository
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import COMPONENT_LABEL


def image_name(image):
    """The last path component of an image's repository (``k8s-dra-driver-gpu`` of
    ``nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0``): what stays the same wherever a site mirrors the image."""
    return image_repository(image).rsplit("/", 1)[-1]


def _runs_image(ds, repositories):
    """Whether a container of the DaemonSet's pods runs an image of one of these repositories (a mirror's copy too:
    the repository's last path components match)."""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        repository = image_repository(container.get("image"))
        if any(repository == r or repository.endswith("/" + r) for r in repositories):
            return True
    return False


def _all_labels(ds):
    """The DaemonSet's own labels, its selector's and its pod template's: NVIDIA's static manifest labels only the
    selector and the template (name: nvidia-device-plugin-ds)."""
    spec = ds.get("spec") or {}
    labels = dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
    labels.update((spec.get("selector") or {}).get("matchLabels") or {})
    labels.update((ds.get("metadata") or {}).get("labels") or {})
    return labels


def _domain(resource):
    return resource.split("/", 1)[0] if "/" in resource else None


def _serves_nothing(ds, programs):
    """Whether every container of the DaemonSet's pods runs one of these programs (named in its command or args, as
    a word or a path's last part): a vendor's helper from the device plugin's image (feature discovery, an MPS
    control daemon) that hands out no device. A container that names none of them (or runs the image's own
    entrypoint) may be the device plugin."""
    containers = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    if not programs or not containers:
        return False
    for container in containers:
        words = " ".join(str(w) for w in (container.get("command") or []) + (container.get("args") or [])).split()
        if not any(word.rsplit("/", 1)[-1] in programs for word in words):
            return False
    return True


def device_plugin_daemonsets(daemonsets, plugin):
    """The DaemonSets that serve the preset's device-plugin resources, recognised by what they are, not by our labels:
    the collection's device plugin serving a resource of the vendor's domain (nvidia.com/gpu, or a MIG or time-sliced
    name such as nvidia.com/mig-1g.10gb or nvidia.com/gpu.shared), or any DaemonSet that carries one of the vendor's
    upstream labels (on itself, its selector or its pod template) or runs the vendor's device-plugin image, unless
    each of its containers runs a program of the vendor's that serves nothing (feature discovery, MPS daemon)."""
    domains = set(_domain(r) for r in plugin["resources"])
    found = []
    for ds in daemonsets:
        labels = _all_labels(ds)
        template = (ds.get("spec") or {}).get("template") or {}
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        served = [r for r in (annotations.get(RESOURCES_ANNOTATION) or "").split(",") if r]
        ours = managed_here(ds) and labels.get(COMPONENT_LABEL) == "device-plugin" and \
            any(_domain(r) in domains for r in served)
        upstream = any(labels.get(k) == v for k, v in plugin["labels"])
        if ours or ((upstream or _runs_image(ds, plugin.get("images") or ()))
                    and not _serves_nothing(ds, plugin.get("non_serving_programs") or ())):
            found.append(ds)
    return found


def same_driver_daemonsets(daemonsets, driver, images, own):
    """Other DaemonSets that run the same DRA driver (a second install, a Helm release in another namespace): the
    collection's, by the driver annotation of their pod template, or any that runs the driver's image. own:
    (namespace, name) of the DaemonSet being deployed, which is left out."""
    found = []
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == tuple(own):
            continue
        template = (ds.get("spec") or {}).get("template") or {}
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        if annotations.get(DRIVER_ANNOTATION) == driver or _runs_image(ds, images):
            found.append(ds)
    return found


def eligible_nodes(pod_spec, nodes):
    """The nodes a DaemonSet of this template runs on now, and those it will run on once they finish joining
    (held back only by the not-ready, unreachable or network-unavailable taints, or not Ready yet)."""
    return set(ds_rollout.selected_nodes(pod_spec, nodes)) | set(ds_rollout.joining_nodes(pod_spec, nodes))


# The NVIDIA GPU Operator's driver container (assets/state-driver/0500_daemonset.yaml of NVIDIA/gpu-operator v26.7.0):
# labelled app.kubernetes.io/component=nvidia-driver and app=nvidia-driver-daemonset; it installs the driver under
# /run/nvidia/driver on the nodes it runs on.
OPERATOR_DRIVER_LABELS = (("app.kubernetes.io/component", "nvidia-driver"), ("app", "nvidia-driver-daemonset"))


def operator_driver_daemonsets(daemonsets):
    """The GPU Operator's driver DaemonSets among daemonsets, by their labels."""
    return [ds for ds in daemonsets
            if any(_all_labels(ds).get(key) == value for key, value in OPERATOR_DRIVER_LABELS)]


def operator_driver_root_message(covered, uncovered, root):
    """Why a driver whose nodes the GPU Operator's driver container covers only in part is refused."""
    return ("The NVIDIA GPU Operator's driver DaemonSet %s installs the NVIDIA driver under %s on %s, but not on %s, "
            "which this DRA driver would run on too, and nvidia_driver_root is one path for all of them. Deploy one "
            "DRA driver per kind of node (node_selector, name) with nvidia_driver_root: %s on the operator's nodes and "
            "/ on the others, or set nvidia_driver_root to say where the driver is. Nothing was written."
            % (", ".join(sorted(covered)), root, ", ".join(sorted(set(n for ns in covered.values() for n in ns))),
               ", ".join(sorted(uncovered)), root))


def overlapping_nodes(pod_spec, daemonsets, nodes):
    """{"namespace/name": [nodes]}: the nodes each DaemonSet runs on, or will once they have joined, that pod_spec
    runs on too, or will."""
    wanted = eligible_nodes(pod_spec, nodes)
    out = {}
    for ds in daemonsets:
        template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec")
        shared = sorted(wanted & eligible_nodes(template_spec, nodes))
        if shared:
            meta = ds.get("metadata") or {}
            out["%s/%s" % (meta.get("namespace"), meta.get("name"))] = shared
    return out


def nodes_serving(pod_spec, nodes, resources):
    """{node: "resource=count"} for the nodes pod_spec runs on (or will) whose allocatable already holds one of these
    extended resources above 0: a device plugin serves them there, whatever DaemonSet (or none we can see) runs it.
    Allocatable, not capacity: the kubelet zeroes allocatable as soon as a plugin goes, capacity only minutes later."""
    wanted = eligible_nodes(pod_spec, nodes)
    out = {}
    for node in nodes:
        name = node["metadata"]["name"]
        if name not in wanted:
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        held = ["%s=%s" % (r, allocatable[r]) for r in sorted(allocatable)
                if _domain(r) in set(_domain(x) for x in resources) and str(allocatable[r]) not in ("0", "")]
        if held:
            out[name] = ", ".join(held)
    return out


def overlap_message(driver, overlap, resources, option, serving=None):
    """The refusal: the device-plugin DaemonSets and the nodes they share with the driver (joining ones included),
    and nodes whose allocatable shows the resource served by a plugin no DaemonSet we could see explains."""
    found = []
    if overlap:
        parts = ["%s (%s)" % (key, ds_rollout.few(nodes)) for key, nodes in sorted(overlap.items())]
        found.append("the device plugin DaemonSet %s serves %s on node(s) the driver would run on (joining nodes "
                     "included)" % ("; ".join(parts), " or ".join(resources)))
    if serving:
        found.append("node(s) %s already hand out %s through a device plugin" % (
            ds_rollout.few("%s (%s)" % (node, held) for node, held in sorted(serving.items())), " or ".join(resources)))
    return ("Refusing to deploy the DRA driver %s: %s, and both would hand out the same devices. Narrow the device "
            "plugin and the driver to different nodes (node_selector on both; the migration in docs/dra.md), remove "
            "the device plugin, or set %s: true if you mean it. Nothing was written."
            % (driver, "; ".join(found), option))


def same_driver_message(driver, overlap, option):
    parts = ["%s (%s)" % (key, ds_rollout.few(nodes)) for key, nodes in sorted(overlap.items())]
    return ("Refusing to deploy the DRA driver %s: DaemonSet %s already runs it on node(s) this one would run on, and "
            "two kubelet plugins of one driver on a node publish and prepare the same devices twice. Remove the other "
            "installation, narrow both to different nodes (node_selector), or set %s: true if you mean it. Nothing "
            "was written." % (driver, "; ".join(parts), option))


def dra_drivers_of(resources, dra_presets):
    """The DRA drivers that hand out the devices these device-plugin resources name: each DRA preset's driver whose
    device plugin serves a resource of the same domain (nvidia.com/gpu and gpu.nvidia.com; gpu.intel.com/i915 and
    gpu.intel.com; amd.com/gpu and gpu.amd.com), sorted."""
    domains = set(_domain(r) for r in resources)
    served = {}
    for preset in dra_presets.values():
        if preset.get("device_plugin"):
            served.setdefault(preset["driver"], []).extend(preset["device_plugin"]["resources"])
    return sorted(driver for driver, plugin_resources in served.items()
                  if any(_domain(r) in domains for r in plugin_resources))


def dra_overlap_message(daemonset, resources, published, option):
    """The device plugin's refusal: the DRA drivers that already publish the same devices on node(s) the plugin would
    run on. published: {driver: "node (n device(s) in m ResourceSlice(s)), ..."}."""
    found = "; ".join("the DRA driver %s publishes devices on %s" % (driver, nodes)
                      for driver, nodes in sorted(published.items()))
    return ("Refusing to deploy the device plugin %s: %s, node(s) this plugin would run on (joining nodes included), "
            "and both would hand out the same devices (%s). Narrow the plugin and the driver to different nodes "
            "(node_selector on both; the migration in docs/dra.md), remove the driver, or set %s: true if you mean "
            "it. Nothing was written." % (daemonset, found, " or ".join(resources), option))
