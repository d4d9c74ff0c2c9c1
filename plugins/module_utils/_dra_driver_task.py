# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_driver_deploy's task: the DRA driver's kubelet-plugin DaemonSet, its RBAC and DeviceClasses read, compared,
guarded, written and waited for (DraDriverDeploy, on the shared base _daemonset_task.DaemonSetTask).

Private to the collection: the interface may change without notice."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import functools
import json

from ansible_collections.kubehw.devices.plugins.module_utils._errors import (
    TaskFailed,
    WaitTimedOut,
    timed_out,
)
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_wait as ds_wait
from ansible_collections.kubehw.devices.plugins.module_utils import _dra as dra
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_device_class as dra_device_class
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as dra_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import (
    NAME_LABEL,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra_report import (
    describe_published,
    node_results,
    nodes_missing_devices,
    published_by_node,
    still_published,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_manifest import (
    DEFAULT_NAMESPACE,
    build_daemonset,
    build_namespace_rbac,
    build_rbac,
    device_class_params,
    object_names,
    placement,
)

OVERLAP_OPTION = "allow_device_plugin_overlap"


def _labels_differ(desired, live):
    have = (live.get("metadata") or {}).get("labels") or {}
    return [k for k, v in sorted((desired["metadata"].get("labels") or {}).items()) if have.get(k) != v]


def rbac_differences(desired, live):
    """JSON-pointer-ish paths where a live RBAC object or ServiceAccount differs from the desired one."""
    if live is None:
        return ["/"]
    paths = ["/metadata/labels/%s" % k for k in _labels_differ(desired, live)]
    for field in ("rules", "roleRef", "subjects"):
        if field in desired and _canonical_rbac(desired[field]) != _canonical_rbac(live.get(field)):
            paths.append("/" + field)
    return paths


def _canonical_rbac(value):
    # The apiserver stores rules and subjects as sent, dropping empty lists (omitempty) and defaulting nothing
    # else the module sends; compare as data.
    def strip(item):
        if isinstance(item, dict):
            return dict((k, strip(v)) for k, v in item.items() if v not in (None, [], {}))
        if isinstance(item, list):
            return [strip(v) for v in item]
        return item
    return json.dumps(strip(value), sort_keys=True)


def bound_elsewhere(binding, name, namespace):
    """The namespaces, other than ``namespace``, whose ServiceAccount ``name`` the module's ClusterRoleBinding
    ``name`` binds: a driver of the same name deployed there owns the cluster-wide ClusterRole and binding."""
    if binding is None or not managed_here(binding, name):
        return []
    return sorted(set(s.get("namespace") for s in binding.get("subjects") or []
                      if s.get("kind") == "ServiceAccount" and s.get("name") == name
                      and s.get("namespace") and s.get("namespace") != namespace))


def managed_here(obj, name=None):
    """True when the collection made ``obj`` (_daemonset_task.managed_here) and, given ``name``, for this driver."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return ds_task.managed_here(obj) and (name is None or labels.get(NAME_LABEL) == name)


# -- the task --------------------------------------------------------------------------------------

class DraDriverDeploy(ds_task.DaemonSetTask):
    """One task: read, compare, write what differs, wait; every request through self.client. The steps both deploy
    modules share are _daemonset_task.DaemonSetTask's; RBAC, DeviceClasses, the guard and the devices wait are this
    one's."""

    def __init__(self, module, client, dra_api=None):
        name, namespace = object_names(module.params)
        super(DraDriverDeploy, self).__init__(module, client, namespace, name)
        self.preset = presets.PRESETS[self.params["preset"]]
        self.driver = self.preset["driver"]
        self.api = dra_api or dra.DraApi(client)
        self._daemonsets = None     # every DaemonSet of the cluster, listed once for the checks before any write
        self.result.update(driver=self.driver, device_classes=[], changed_objects=[],
                           rbac={"mode": self.params["rbac"],
                                 "service_account": "%s/%s" % (self.namespace, self.name),
                                 "cluster_role": self.name, "cluster_role_binding": self.name})

    def namespace_hint(self):
        return " (playbooks/rbac.yml creates %s)" % DEFAULT_NAMESPACE

    def record_change(self, kind, name):
        super(DraDriverDeploy, self).record_change(kind, name)
        self.result["changed_objects"].append("%s/%s" % (kind, name))

    # -- reads -------------------------------------------------------------------------------------
    def read_rbac(self):
        account = self.read(self.client.core.read_namespaced_service_account, self.name, self.namespace,
                            what='read ServiceAccount "%s/%s"' % (self.namespace, self.name))
        if self.params["rbac"] != "create":
            return account, None, None
        role = self.read(self.client.rbac.read_cluster_role, self.name, what='read ClusterRole "%s"' % self.name)
        binding = self.read(self.client.rbac.read_cluster_role_binding, self.name,
                            what='read ClusterRoleBinding "%s"' % self.name)
        return account, role, binding

    def read_namespace_rbac(self):
        role = self.read(self.client.rbac.read_namespaced_role, self.name, self.namespace,
                         what='read Role "%s/%s"' % (self.namespace, self.name))
        binding = self.read(self.client.rbac.read_namespaced_role_binding, self.name, self.namespace,
                            what='read RoleBinding "%s/%s"' % (self.namespace, self.name))
        return role, binding

    def _check_device_plugin_overlap(self, desired_ds):
        """Refuse before any write when something else would hand out the same devices on a node the driver runs on,
        or will once it has joined: a device plugin serving the preset's devices (recognised by its labels, selector
        or image, or as the collection's; upstream: gpuResourcesEnabledOverride), a node whose allocatable shows
        that a plugin serves them, or a second installation of the same driver."""
        if self.params.get(OVERLAP_OPTION):
            return
        plugin = self.preset.get("device_plugin")
        daemonsets = self.all_daemonsets()
        pod_spec = desired_ds["spec"]["template"]["spec"]
        nodes = self.nodes()
        # the driver's images by name, not by registry: NVIDIA's chart, kubernetes-sigs' chart or a mirror of either
        images = [image for image in (self.preset["image"], self.params.get("image")) if image]
        images += list(self.preset.get("previous_images") or ())
        twins = guard.same_driver_daemonsets(daemonsets, self.driver, sorted(set(guard.image_name(i) for i in images)),
                                             (self.namespace, self.name))
        twin_overlap = guard.overlapping_nodes(pod_spec, twins, nodes)
        if twin_overlap:
            raise TaskFailed(guard.same_driver_message(self.driver, twin_overlap, OVERLAP_OPTION))
        if not plugin:
            return
        overlap = guard.overlapping_nodes(pod_spec, guard.device_plugin_daemonsets(daemonsets, plugin), nodes)
        explained = set(node for shared in overlap.values() for node in shared)
        serving = dict((node, held) for node, held in guard.nodes_serving(pod_spec, nodes, plugin["resources"]).items()
                       if node not in explained)
        if overlap or serving:
            raise TaskFailed(guard.overlap_message(self.driver, overlap, plugin["resources"], OVERLAP_OPTION,
                                                   serving))

    def all_daemonsets(self):
        """Every DaemonSet of the cluster, listed once per task."""
        if self._daemonsets is None:
            listing = self.client.list_all(self.client.apps.list_daemon_set_for_all_namespaces,
                                           what="list DaemonSets in all namespaces (device plugins, other installations "
                                                "of %s, the GPU Operator's driver)" % self.driver)
            self._daemonsets = listing.get("items") or []
        return self._daemonsets

    def _driver_root_of_the_operator(self):
        """With the nvidia preset and nvidia_driver_root not set: /run/nvidia/driver where the GPU Operator's driver
        container installs the driver on every node the driver runs on (as accelerator_node finds it on the hosts),
        None where it runs on none of them; refused when it covers only some."""
        if "driver_root" not in self.preset or self.params.get("nvidia_driver_root") is not None:
            return None
        operator = guard.operator_driver_daemonsets(self.all_daemonsets())
        if not operator:
            return None
        pod_spec = self.node_selection
        nodes = self.nodes()
        covered = guard.overlapping_nodes(pod_spec, operator, nodes)
        if not covered:
            return None
        uncovered = guard.eligible_nodes(pod_spec, nodes) - set(n for shared in covered.values() for n in shared)
        if uncovered:
            raise TaskFailed(guard.operator_driver_root_message(covered, uncovered, presets.NVIDIA_OPERATOR_DRIVER_ROOT))
        return presets.NVIDIA_OPERATOR_DRIVER_ROOT

    # -- present -----------------------------------------------------------------------------------
    def present(self):
        version = self._served_version_the_preset_runs_on()
        self.select_nodes(placement(self.params))
        operator_root = self._driver_root_of_the_operator()
        if operator_root is not None:
            self.params["nvidia_driver_root"] = operator_root
        desired_ds = build_daemonset(self.params)
        if "driver_root" in self.preset:
            self.result["nvidia_driver_root"] = self.params.get("nvidia_driver_root") or presets.NVIDIA_DEFAULT_DRIVER_ROOT
        classes = device_class_params(self.params)
        self.result["device_classes"] = [c["name"] for c in classes]
        # Every read and every refusal before the first write.
        live_ds = self.daemonset_to_replace(desired_ds)
        self._check_device_plugin_overlap(desired_ds)
        self.report_selected_nodes()
        rbac_plan = self._rbac_plan()
        ds_diffs = compare.differences(desired_ds, live_ds)
        self._add_planned_diffs(rbac_plan, desired_ds, live_ds, ds_diffs)
        if self.check_mode:
            self._predict(rbac_plan, classes, desired_ds, live_ds, ds_diffs)
            return
        current = self._write_all(rbac_plan, classes, desired_ds, live_ds, ds_diffs)
        self._wait(current, version)

    def _served_version_the_preset_runs_on(self):
        """Checks that the cluster serves resource.k8s.io/v1 and is new enough for the preset's driver, before anything
        else: such a driver would only hang a rollout."""
        version = self.api.discover()
        self.result["api_version"] = "%s/%s" % (dra.GROUP, version)
        problem = dra_manifest.version_problem(self.params["preset"], self.api.server_version())
        if problem:
            raise TaskFailed("Refusing to deploy: %s. Nothing was written." % problem)
        return version

    def _rbac_plan(self):
        """[(kind, desired, live)] of the ServiceAccount and RBAC objects to create or replace. With rbac: existing
        nothing, but the ServiceAccount must exist; with rbac: create, refuses objects another driver or someone
        else owns."""
        live_account, live_role, live_binding = self.read_rbac()
        if self.params["rbac"] == "existing":
            if live_account is None:
                raise TaskFailed(
                    'ServiceAccount "%s/%s" does not exist, and rbac is existing: create it, the ClusterRole "%s" and '
                    'its ClusterRoleBinding "%s" first (playbooks/rbac.yml does), or set rbac: create. Nothing was '
                    "written." % (self.namespace, self.name, self.name, self.name))
            return []
        elsewhere = bound_elsewhere(live_binding, self.name, self.namespace)
        if elsewhere:
            raise TaskFailed(
                'ClusterRoleBinding "%s" binds the ServiceAccount of the driver "%s" in namespace %s: the ClusterRole '
                "and binding are cluster-wide and named after the driver, so a driver of the same name in "
                "namespace %s would take them over. Give this driver another name. Nothing was written."
                % (self.name, self.name, ", ".join(elsewhere), self.namespace))
        account, role, binding = build_rbac(self.params)
        wanted = [("ServiceAccount", account, live_account), ("ClusterRole", role, live_role),
                  ("ClusterRoleBinding", binding, live_binding)]
        namespace_rbac = build_namespace_rbac(self.params)
        if namespace_rbac is not None:
            live_ns_role, live_ns_binding = self.read_namespace_rbac()
            wanted += [("Role", namespace_rbac[0], live_ns_role), ("RoleBinding", namespace_rbac[1], live_ns_binding)]
        for kind, desired, live in wanted:
            if live is not None and not managed_here(live, self.name):
                raise TaskFailed(
                    "%s %s exists and was not created by this module (%s): it would be replaced and deleted with "
                    "the driver. Remove it, choose another name, or set rbac: existing to use it as it is. "
                    "Nothing was written." % (kind, self._display(desired), objects.owner_description(live)))
        return [(kind, desired, live) for kind, desired, live in wanted if rbac_differences(desired, live)]

    def _add_planned_diffs(self, rbac_plan, desired_ds, live_ds, ds_diffs):
        for kind, desired, live in rbac_plan:
            self.add_diff(kind, self._display(desired), live, desired if live is None else self._update(desired, live))
        if ds_diffs:
            self.add_diff("DaemonSet", "%s/%s" % (self.namespace, self.name), live_ds,
                          desired_ds if live_ds is None else objects.update_body(desired_ds, live_ds))
            if live_ds is not None:
                self.result["changed_paths"] = ds_diffs

    def _predict(self, rbac_plan, classes, desired_ds, live_ds, ds_diffs):
        """Check mode: what a run would change, nothing written."""
        for kind, desired, _live in rbac_plan:
            self.record_change(kind, desired["metadata"]["name"])
        # dra_device_class's check mode: creates and updates as server-side dry runs, which store nothing
        self._device_classes(classes)
        if ds_diffs:
            self.record_change("DaemonSet", self.name)
        self.result["daemonset"] = live_ds if not ds_diffs else (
            desired_ds if live_ds is None else objects.update_body(desired_ds, live_ds))
        if live_ds is not None:
            self.result["rollout"] = ds_rollout.rollout_status(live_ds)

    def _write_all(self, rbac_plan, classes, desired_ds, live_ds, ds_diffs):
        """Write what differs; returns the DaemonSet as stored."""
        # DeviceClasses first: one whose extendedResourceName the apiserver would drop fails (after a dry run)
        # before anything else is written. Then RBAC: the DaemonSet's pods need their ServiceAccount, and the
        # plugin its rights, when they start.
        self._device_classes(classes)
        for kind, desired, live in rbac_plan:
            self._write_rbac(kind, desired, live)
        current = live_ds
        if ds_diffs:
            current = self.write_daemonset(desired_ds, live_ds)
        self.result["daemonset"] = current
        return current

    def _wait(self, current, version):
        """The wait asked for: none (report the rollout), the rollout, or the rollout and the devices published."""
        wait = self.params["wait"]
        if wait == "none":
            self.result["rollout"] = ds_rollout.rollout_status(current)
            return
        current = self.wait_rollout(current, "the DRA driver", "Label the nodes, set node_selector",
                                    timeout_hint=self._driver_root_hint)
        self.result["daemonset"] = current
        if wait == "devices":
            self._wait_devices(current, version)

    def _display(self, obj):
        meta = obj["metadata"]
        return '"%s/%s"' % (meta["namespace"], meta["name"]) if meta.get("namespace") else '"%s"' % meta["name"]

    @staticmethod
    def _update(desired, live):
        body = objects.update_body(desired, live)
        for field in ("rules", "roleRef", "subjects", "spec"):
            if field in desired:
                body[field] = copy.deepcopy(desired[field])
        return body

    def _write_rbac(self, kind, desired, live):
        name = desired["metadata"]["name"]
        core, rbac = self.client.core, self.client.rbac
        calls = {
            "ServiceAccount": (core.create_namespaced_service_account, core.replace_namespaced_service_account,
                               core.read_namespaced_service_account, (self.namespace,)),
            "ClusterRole": (rbac.create_cluster_role, rbac.replace_cluster_role, rbac.read_cluster_role, ()),
            "ClusterRoleBinding": (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding,
                                   rbac.read_cluster_role_binding, ()),
            "Role": (rbac.create_namespaced_role, rbac.replace_namespaced_role, rbac.read_namespaced_role,
                     (self.namespace,)),
            "RoleBinding": (rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding,
                            rbac.read_namespaced_role_binding, (self.namespace,)),
        }
        create_fn, replace_fn, read_fn, scope = calls[kind]
        find = self.client.finder(read_fn, name, *scope, what="read %s %s again" % (kind, self._display(desired)))
        if live is None:
            self.create(create_fn, scope, desired, "create %s %s" % (kind, self._display(desired)), find)
        elif kind in ("ClusterRoleBinding", "RoleBinding") and live.get("roleRef") != desired["roleRef"]:
            # roleRef is immutable: a binding of ours pointing elsewhere is replaced by delete and create.
            delete_fn = rbac.delete_cluster_role_binding if kind == "ClusterRoleBinding" else \
                rbac.delete_namespaced_role_binding
            self.client.call_json(delete_fn, name, *scope, what="delete %s %s" % (kind, self._display(desired)))
            self.create(create_fn, scope, desired, "create %s %s" % (kind, self._display(desired)), find)
        else:
            self.client.replace_json(replace_fn, name, *(scope + (self._update(desired, live),)),
                                     what="replace %s %s" % (kind, self._display(desired)), find=find)
        self.record_change(kind, name)

    def _device_classes(self, class_params):
        """Each DeviceClass through dra_device_class's own task (_dra_device_class.manage_device_class): read,
        compare, a class made by others left alone with a warning, the DRAExtendedResource dry run, write or delete."""
        for params in class_params:
            task = dra_device_class.manage_device_class(self.api, params, self.check_mode)
            self.warnings.extend(task.warnings)
            if task.diff:
                self.diff.append(task.diff)
            if task.result.get("changed"):
                self.record_change("DeviceClass", params["name"])

    # -- waiting -----------------------------------------------------------------------------------
    def _driver_root_hint(self, daemonset, pods):
        """The nvidia preset's init container waits, without end, until it finds the driver under the driver root: a
        pod still initializing at the timeout most likely looks in the wrong place."""
        if "driver_root" not in self.preset:
            return ""
        waiting = sorted(p["metadata"]["name"] for p in pods if ds_rollout.initializing(p))
        if not waiting:
            return ""
        root = self.params.get("nvidia_driver_root") or presets.NVIDIA_DEFAULT_DRIVER_ROOT
        return ("; pod(s) %s are still in their init container, which waits until it finds the NVIDIA driver under "
                "nvidia_driver_root (%s here): where the GPU Operator's driver container installs the driver set "
                "nvidia_driver_root: %s, where the driver is installed on the host (the nvidia_driver role) keep %s"
                % (", ".join(waiting), root, presets.NVIDIA_OPERATOR_DRIVER_ROOT, presets.NVIDIA_DEFAULT_DRIVER_ROOT))

    def _slices_fn(self, version):
        return functools.partial(self.api.custom.list_cluster_custom_object, dra.GROUP, version, "resourceslices")

    def _wait_devices(self, current, version):
        min_count = self.params["min_count"]
        pods = [p for p in self.rollout_wait().pods(current) if not p["metadata"].get("deletionTimestamp")]
        ready = sorted(set(ds_rollout.pod_node(p) for p in pods if ds_rollout.pod_node(p) and ds_rollout.pod_ready(p)))
        not_ready = sorted(set(ds_rollout.pod_node(p) for p in pods if ds_rollout.pod_node(p)) - set(ready))

        def enough(found):
            return not nodes_missing_devices(published_by_node(found.values(), self.driver), ready, min_count)

        try:
            found = self.client.watch(
                self._slices_fn(version), enough, timeout=self.remaining(),
                what="see ResourceSlices of driver %s with at least %d device(s) on %d node(s)"
                % (self.driver, min_count, len(ready)),
                field_selector="spec.driver=%s" % self.driver)
        except WaitTimedOut as err:
            published = published_by_node((err.objects or {}).values(), self.driver)
            self._record_devices(published, ready, min_count)
            raise TaskFailed(self._devices_timeout(published, ready, not_ready, pods, min_count))
        self._record_devices(published_by_node(found.values(), self.driver), ready, min_count)

    def _record_devices(self, published, ready, min_count):
        self.result["nodes"] = node_results(published, ready, self.driver)
        outcome = self.result.get("node_outcome") or {}
        for node in nodes_missing_devices(published, ready, min_count):
            outcome[node] = ds_wait.MISSING_DEVICES

    def _devices_timeout(self, published, ready, not_ready, pods, min_count):
        parts = [timed_out(self.params["wait_timeout"], "waiting for the nodes running DaemonSet %s/%s to publish "
                           "ResourceSlices of driver %s with at least %d device(s) each"
                           % (self.namespace, self.name, self.driver, min_count))]
        missing = nodes_missing_devices(published, ready, min_count)
        if missing:
            parts.append("nodes without enough devices: %s" % ", ".join(
                "%s (%s)" % (node, text) for node, text in sorted(missing.items())))
        if not_ready:
            reasons = {}
            for pod in pods:
                node = ds_rollout.pod_node(pod)
                if node in not_ready:
                    reasons[node] = "; ".join(ds_rollout.pod_waiting_reasons(pod)) or "not ready"
            parts.append("nodes whose kubelet-plugin pod is not ready: %s" % ", ".join(
                "%s (%s)" % (node, reasons.get(node, "not ready")) for node in not_ready))
        return "; ".join(parts)

    # -- absent ------------------------------------------------------------------------------------
    def absent(self):
        # Discovery first: a cluster without resource.k8s.io/v1 has no DeviceClasses of ours to remove.
        served = dra.VERSION if dra.VERSION in self.api.served_versions() else None
        self.api.version = served
        if served:
            self.result["api_version"] = "%s/%s" % (dra.GROUP, served)
        plan = []
        live_ds = self.read_daemonset()
        self.refuse_foreign_daemonset(live_ds, "delete it", " Nothing was deleted.")
        if live_ds is not None:
            plan.append(("DaemonSet", live_ds))
        if self.params["rbac"] == "create":
            live_rbac = self.read_rbac()
            elsewhere = bound_elsewhere(live_rbac[2], self.name, self.namespace)
            for kind, live in zip(("ServiceAccount", "ClusterRole", "ClusterRoleBinding"), live_rbac):
                if live is not None and elsewhere and kind != "ServiceAccount":
                    self.warnings.append("%s %s is also the driver's in namespace %s: left alone"
                                         % (kind, self._display(live), ", ".join(elsewhere)))
                elif live is not None and managed_here(live, self.name):
                    plan.append((kind, live))
                elif live is not None:
                    self.warnings.append("%s %s was not created by this module: left alone"
                                         % (kind, self._display(live)))
            if "namespace_rules" in self.preset and self.preset["namespace_rules"]:
                for kind, live in zip(("Role", "RoleBinding"), self.read_namespace_rbac()):
                    if live is not None and managed_here(live, self.name):
                        plan.append((kind, live))
                    elif live is not None:
                        self.warnings.append("%s %s was not created by this module: left alone"
                                             % (kind, self._display(live)))
        classes = device_class_params(self.params, state="absent") if served else []
        self.result["device_classes"] = [c["name"] for c in classes]
        # The DaemonSet first (its pods stop publishing), then the DeviceClasses, the binding before the role,
        # the account last.
        order = ("DaemonSet", "RoleBinding", "Role", "ClusterRoleBinding", "ClusterRole", "ServiceAccount")
        plan.sort(key=lambda item: order.index(item[0]))
        waiting = live_ds is not None and self.params["wait"] != "none" and not self.check_mode
        # the nodes whose devices the driver's pods publish, read before the DaemonSet goes (its pods go with it)
        plugin_nodes = self._plugin_nodes(live_ds) if waiting and served and self.params["wait"] == "devices" else []
        for kind, live in [item for item in plan if item[0] == "DaemonSet"]:
            self._remove(kind, live)
        self._device_classes(classes)
        for kind, live in [item for item in plan if item[0] != "DaemonSet"]:
            self._remove(kind, live)
        if waiting:
            self.wait_deleted()
        if plugin_nodes:
            self._wait_unpublished(plugin_nodes, served)
        elif live_ds is None and served and self.params["wait"] == "devices":
            self._warn_still_published(served)

    def _plugin_nodes(self, live_ds):
        """The nodes the DaemonSet's pods run on (or are bound to)."""
        return sorted(set(ds_rollout.pod_node(p) for p in self.rollout_wait().pods(live_ds) if ds_rollout.pod_node(p)))

    def _wait_unpublished(self, nodes, version):
        """Until none of ``nodes`` publishes a ResourceSlice of the driver (the kubelet removes a node's slices once
        the driver's plugin there has stopped), by watching the driver's slices, within wait_timeout."""
        self.result["waited_for"] = "devices"
        try:
            self.client.watch(self._slices_fn(version), lambda found: not still_published(found.values(), nodes),
                              timeout=self.remaining(),
                              what="see the ResourceSlices of driver %s gone from %d node(s)" % (self.driver, len(nodes)),
                              field_selector="spec.driver=%s" % self.driver)
        except WaitTimedOut as err:
            left = still_published((err.objects or {}).values(), nodes)
            raise TaskFailed(timed_out(
                self.params["wait_timeout"], "waiting for the nodes that ran DaemonSet %s/%s to stop publishing "
                "ResourceSlices of driver %s: %s. The kubelet removes a node's slices once the driver's plugin there has "
                "stopped; a node whose kubelet is down keeps them (set wait: rollout not to wait for them)"
                % (self.namespace, self.name, self.driver, describe_published(left))))

    def _warn_still_published(self, version):
        """A run that found no DaemonSet to delete waits for nothing; it says which nodes still publish ResourceSlices of
        the driver (those of a node whose kubelet was down when an earlier run removed the driver, or of another
        deployment of the same driver), read once."""
        slices = self.client.list_all(self._slices_fn(version), what="list the ResourceSlices of driver %s" % self.driver,
                                      field_selector="spec.driver=%s" % self.driver).get("items") or []
        left = still_published(slices)
        if left:
            self.warnings.append(
                "No DaemonSet %s/%s was left to delete, so nothing was waited for, but nodes still publish ResourceSlices "
                "of driver %s: %s. A node's kubelet removes them once the driver's plugin there has stopped (a node whose "
                "kubelet was down keeps them until it runs again); another deployment of the driver publishes its own"
                % (self.namespace, self.name, self.driver, describe_published(left)))

    def _remove(self, kind, live):
        self.add_diff(kind, self._display(live), live, None)
        if self.check_mode or self._delete(kind, live):
            self.record_change(kind, live["metadata"]["name"])

    def _delete(self, kind, live):
        """Delete one object of the plan; False when it was gone already."""
        name = live["metadata"]["name"]
        calls = {
            "DaemonSet": (self.client.apps.delete_namespaced_daemon_set, (name, self.namespace)),
            "ServiceAccount": (self.client.core.delete_namespaced_service_account, (name, self.namespace)),
            "ClusterRole": (self.client.rbac.delete_cluster_role, (name,)),
            "ClusterRoleBinding": (self.client.rbac.delete_cluster_role_binding, (name,)),
            "Role": (self.client.rbac.delete_namespaced_role, (name, self.namespace)),
            "RoleBinding": (self.client.rbac.delete_namespaced_role_binding, (name, self.namespace)),
        }
        fn, args = calls[kind]
        return self.delete(fn, args, "delete %s %s" % (kind, self._display(live)))
