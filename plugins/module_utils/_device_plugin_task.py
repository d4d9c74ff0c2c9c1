# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""device_plugin_deploy's task: the device-plugin DaemonSet and its ConfigMap read, compared, guarded, written and
waited for (DevicePluginDeploy, on the shared base _daemonset_task.DaemonSetTask).

Private to the collection: the interface may change without notice."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

from ansible_collections.kubehw.devices.plugins.module_utils._errors import (
    KubeHwError,
    TaskFailed,
    WaitTimedOut,
)
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _dra
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets
from ansible_collections.kubehw.devices.plugins.module_utils._dra_report import describe_published, still_published
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_manifest as manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_wait as ds_wait
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects


class DevicePluginDeploy(ds_task.DaemonSetTask):
    """One task: build, compare, write if needed, wait; all writes through self.client. The steps both deploy modules
    share are _daemonset_task.DaemonSetTask's; the ConfigMap, OnDelete batches and the resource wait are this one's."""

    def __init__(self, module, client):
        params = module.params
        super(DevicePluginDeploy, self).__init__(module, client, params["namespace"],
                                                 params.get("name") or manifest.default_name(params.get("preset")))
        self.result.update(configmap=None, generation=dict(before=None, after=None))
        self.old_pods = None
        # a node serving any one of the resources is enough (the Intel GPU plugin: i915 or xe)
        self.any_of = self.params.get("state") == "present" and self.params.get("preset") in presets.PRESETS \
            and manifest.serves_any(self.params)

    def namespace_hint(self):
        if self.namespace != manifest.DEFAULT_NAMESPACE:
            return ""
        return (" (playbooks/rbac.yml with kubehw_rbac_plugin_namespace: %s creates it, with the RBAC the plugin "
                "deployment needs)" % self.namespace)

    # -- reads ---------------------------------------------------------------------------------
    def read_configmap(self):
        cm_name = manifest.configmap_name(self.name)
        return self.read(self.client.core.read_namespaced_config_map, cm_name, self.namespace,
                         what='read ConfigMap "%s/%s"' % (self.namespace, cm_name))

    def list_pods(self, daemonset):
        return self.rollout_wait().pods(daemonset)

    def list_nodes(self):
        """Every node by name: listed by the guard (the wait lists them once more, then watches)."""
        return dict((n["metadata"]["name"], n) for n in self.nodes())

    # -- present -------------------------------------------------------------------------------
    def present(self, desired, configmap, resources):
        self.result["resources"] = resources
        # Every read and every refusal before the first write.
        live = self._read_daemonset_to_replace(desired)
        live_cm, stale_cm = self._read_configmap_to_replace(configmap, desired, live)
        self._check_dra_overlap(desired, resources)
        self.report_selected_nodes()
        before_gen = (live or {}).get("metadata", {}).get("generation")
        self.result["generation"]["before"] = before_gen

        cm_diffs = compare.configmap_differences(configmap, live_cm) if configmap is not None else []
        ds_diffs = compare.differences(desired, live)
        cm_owner_missing = configmap is not None and live is not None and live_cm is not None and \
            not self._owned_by_ds(live_cm, live)
        # In check mode this is the prediction; otherwise each successful write sets it.
        self.result["changed"] = bool(self.check_mode and (cm_diffs or ds_diffs or cm_owner_missing))
        if configmap is not None and (cm_diffs or cm_owner_missing):
            self._add_diff("ConfigMap", manifest.configmap_name(self.name), live_cm,
                           self._configmap_body(configmap, live_cm, live))
        if ds_diffs:
            self._add_diff("DaemonSet", self.name, live, desired if live is None else objects.update_body(desired, live))
            self.result["changed_paths"] = ds_diffs if live is not None else []

        if self.check_mode:
            if stale_cm is not None:
                self._predict_configmap_deletion(stale_cm, desired)
            self._predict(desired, configmap, live, live_cm, cm_diffs, ds_diffs, before_gen)
            return
        current = self._write_configmap_and_daemonset(desired, configmap, live, live_cm, cm_diffs, ds_diffs)
        self._wait(current, resources, stale_cm)

    def _check_dra_overlap(self, desired, resources):
        """Refuse before any write when a DRA driver of the same devices already publishes on a node the plugin would
        run on, or will once it has joined (the other direction of dra_driver_deploy's guard). One list of
        ResourceSlices per such driver; the nodes are listed only when a driver publishes something."""
        if self.params.get("allow_dra_overlap"):
            return
        published = {}
        slices_fn = functools.partial(self.client.custom.list_cluster_custom_object, _dra.GROUP, _dra.VERSION,
                                      "resourceslices")
        for driver in guard.dra_drivers_of(resources, dra_presets.PRESETS):
            try:
                listing = self.client.list_all(slices_fn, field_selector="spec.driver=%s" % driver,
                                               what="list the ResourceSlices of DRA driver %s" % driver)
            except KubeHwError as err:
                if err.status == 404:
                    return      # no resource.k8s.io/v1 on this cluster: no DRA driver publishes anything
                if err.status != 403:
                    raise
                self.warnings.append(
                    "Could not check whether the DRA driver %s already publishes the devices of %s on this plugin's "
                    "nodes: the identity may not list ResourceSlices (%s). playbooks/rbac.yml grants it with "
                    "kubehw_rbac_dra: true." % (driver, " or ".join(resources), err.msg))
                continue
            if listing.get("items"):
                published[driver] = listing["items"]
        if not published:
            return
        wanted = guard.eligible_nodes(desired["spec"]["template"]["spec"], self.nodes())
        on_wanted = dict((driver, still_published(items, wanted)) for driver, items in published.items())
        overlap = dict((driver, describe_published(left)) for driver, left in on_wanted.items() if left)
        if overlap:
            raise TaskFailed(guard.dra_overlap_message("%s/%s" % (self.namespace, self.name), resources, overlap,
                                                       "allow_dra_overlap"))

    def _read_daemonset_to_replace(self, desired):
        """The live DaemonSet (None when there is none); refuses one whose selector differs or that someone else
        made (unless adopt_daemonset), and a RuntimeClass the pods name that does not exist."""
        live = self.daemonset_to_replace(desired)
        self._check_runtime_class(desired)
        return live

    def _read_configmap_to_replace(self, configmap, desired, live):
        """(the live ConfigMap this run writes or None, a ConfigMap of ours the new template no longer reads or None);
        refuses a ConfigMap someone else made unless adopt_configmap."""
        live_cm = self.read_configmap()
        stale_cm = None
        if configmap is None:
            # A ConfigMap this module wrote for an earlier preset (nvidia) that the new template does not read.
            if live_cm is not None and self._created_here(live_cm, live) and not ds_rollout.uses_configmap(
                    desired["spec"]["template"]["spec"], live_cm["metadata"]["name"]):
                stale_cm = live_cm
            live_cm = None
        if live_cm is not None and not self._created_here(live_cm, live) and not self.params["adopt_configmap"]:
            raise TaskFailed(
                "ConfigMap %s/%s exists and was not created by this module (%s); the %s preset would replace its "
                "data and delete it with the DaemonSet. Choose another name for the DaemonSet, remove the ConfigMap, "
                "or set adopt_configmap: true to let this module take it over."
                % (self.namespace, live_cm["metadata"]["name"], objects.owner_description(live_cm),
                   self.params["preset"]))
        return live_cm, stale_cm

    def _predict(self, desired, configmap, live, live_cm, cm_diffs, ds_diffs, before_gen):
        """Check mode: the objects and the generation a run would leave, and whether it would change anything."""
        predicted = live if not ds_diffs else (desired if live is None else objects.update_body(desired, live))
        self.result["daemonset"] = predicted
        self.result["configmap"] = configmap if (cm_diffs or live_cm is None) else live_cm
        spec_changes = [p for p in ds_diffs if p.startswith("/spec")]
        self.result["generation"]["after"] = (before_gen + 1 if spec_changes else before_gen) if live else None
        if live is not None:
            self.result["rollout"] = ds_rollout.rollout_status(live)
            if self.params["delete_old_pods"] and self.result["rollout"]["old_pods_pending"]:
                # the real run would delete the old pods
                self.result["changed"] = True

    def _write_configmap_and_daemonset(self, desired, configmap, live, live_cm, cm_diffs, ds_diffs):
        """Write what differs and return the DaemonSet as written (or live, unchanged)."""
        # ConfigMap before DaemonSet: pods started by the new template must find the new file.
        cm_obj = live_cm
        if configmap is not None and (cm_diffs or live_cm is None):
            cm_obj = self._write_configmap(configmap, live_cm, live)
        current = live
        if ds_diffs:
            current = self.write_daemonset(desired, live)
        if configmap is not None and not self._owned_by_ds(cm_obj, current):
            cm_obj = self._write_configmap(configmap, cm_obj, current)
        self.result["configmap"] = cm_obj
        self.result["daemonset"] = current
        self.result["generation"]["after"] = current["metadata"].get("generation")
        return current

    def _wait(self, current, resources, stale_cm):
        """The wait asked for (none: report the rollout), then the ConfigMap no pod reads any more, then the
        resources on the nodes (wait: resource)."""
        wait = self.params["wait"]
        if wait == "none":
            self._report(current, resources)
        else:
            self.result["waited_for"] = wait
            current = self._wait_rollout(current, resources)
            self.result["daemonset"] = current
        # Only now: the DaemonSet no longer mounts it, and the rollout has replaced the pods that did.
        if stale_cm is not None:
            self._delete_stale_configmap(stale_cm)
        if wait == "resource":
            self._wait_resource(current, resources)

    def _created_here(self, cm, daemonset):
        uid = ((daemonset or {}).get("metadata") or {}).get("uid")
        return ds_rollout.configmap_created_for(cm, self.name, uid)

    def _configmap_users(self, cm_name):
        """Pods in the namespace that read the ConfigMap and may still (re)start a container."""
        listing = self.client.list_all(self.client.core.list_namespaced_pod, self.namespace,
                                       what='list pods in namespace "%s"' % self.namespace)
        return sorted(p["metadata"]["name"] for p in listing.get("items") or []
                      if not p["metadata"].get("deletionTimestamp")
                      and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                      and ds_rollout.uses_configmap(p.get("spec"), cm_name))

    def _configmap_kept(self, cm_name, users):
        self.warnings.append(
            "ConfigMap %s/%s is no longer used by DaemonSet %s/%s, but pods still mount it (%s): it is kept so they "
            "can restart, and a later run deletes it once they are replaced."
            % (self.namespace, cm_name, self.namespace, self.name, ", ".join(users)))

    def _predict_configmap_deletion(self, cm, desired):
        cm_name = cm["metadata"]["name"]
        users = self._configmap_users(cm_name)
        on_delete = ((desired["spec"].get("updateStrategy") or {}).get("type")) == "OnDelete"
        # The real run deletes it after the rollout, which replaces the pods that mount it.
        rollout_replaces = self.params["wait"] != "none" and (not on_delete or self.params["delete_old_pods"])
        if users and not rollout_replaces:
            self._configmap_kept(cm_name, users)
            return
        self.result["changed"] = True
        self.result["deleted_configmap"] = cm_name
        self._add_diff("ConfigMap", cm_name, cm, None)

    def _delete_stale_configmap(self, cm):
        cm_name = cm["metadata"]["name"]
        users = self._configmap_users(cm_name)
        if users:
            self._configmap_kept(cm_name, users)
            return
        what = 'delete ConfigMap "%s/%s"' % (self.namespace, cm_name)
        try:
            # The uid precondition: a ConfigMap someone made in its place since it was read is not ours.
            self.client.call_json(self.client.core.delete_namespaced_config_map, cm_name, self.namespace,
                                  body={"preconditions": {"uid": cm["metadata"].get("uid")}}, what=what)
        except KubeHwError as err:
            if err.status == 404:
                return
            if err.status == 409:
                self.warnings.append("ConfigMap %s/%s was replaced since it was read; left alone"
                                     % (self.namespace, cm_name))
                return
            raise
        self.result["changed"] = True
        self.result["deleted_configmap"] = cm_name
        self._add_diff("ConfigMap", cm_name, cm, None)

    def _owned_by_ds(self, cm, daemonset):
        return daemonset is not None and objects.has_owner_uid(cm, daemonset["metadata"].get("uid"))

    def _configmap_body(self, configmap, live_cm, daemonset):
        body = dict(configmap, metadata=dict(configmap["metadata"]))
        if live_cm is not None:
            body["metadata"]["resourceVersion"] = live_cm["metadata"].get("resourceVersion")
            body["metadata"]["labels"] = dict(live_cm["metadata"].get("labels") or {}, **configmap["metadata"]["labels"])
        refs = [dict(r) for r in ((live_cm or {}).get("metadata") or {}).get("ownerReferences") or []]
        uid = (daemonset or {}).get("metadata", {}).get("uid")
        if uid and not any(r.get("uid") == uid for r in refs):
            # Garbage collection removes the ConfigMap with the DaemonSet, whoever deletes it. Other owners
            # stay: the ConfigMap then outlives the DaemonSet until they are gone too.
            refs.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset["metadata"]["name"],
                         "uid": uid, "controller": False, "blockOwnerDeletion": False})
        if refs:
            body["metadata"]["ownerReferences"] = refs
        return body

    def _write_configmap(self, configmap, live_cm, daemonset):
        body = self._configmap_body(configmap, live_cm, daemonset)
        name = configmap["metadata"]["name"]
        if live_cm is None:
            written = self.create(self.client.core.create_namespaced_config_map, (self.namespace,), body,
                                  'create ConfigMap "%s/%s"' % (self.namespace, name))
        else:
            written = self.client.replace_json(self.client.core.replace_namespaced_config_map, name, self.namespace,
                                               body, what='replace ConfigMap "%s/%s"' % (self.namespace, name))
        self.result["changed"] = True
        return written

    def _wait_rollout(self, current, resources):
        """The shared rollout wait (_daemonset_wait.RolloutWait), with this module's OnDelete handling: with
        delete_old_pods the old template's pods are deleted in batches once the controller observed the new one;
        without, the rollout counts as finished when only old pods remain (a warning names them)."""
        on_delete = ds_rollout.rollout_status(current)["strategy"] == "OnDelete"
        generation = current["metadata"].get("generation")
        waiter = self.rollout_wait()
        if on_delete and self.params["delete_old_pods"]:
            try:
                current = waiter.wait(
                    "observe generation %s of DaemonSet %s/%s" % (generation, self.namespace, self.name), current,
                    done=lambda ds: (ds.get("status") or {}).get("observedGeneration", 0) >= generation,
                    cover_nodes=False)
                self._delete_old_pods(current)
            except WaitTimedOut:
                current = waiter.daemonsets.objects.get(waiter.key) or current
                self._report(current, resources)
                raise TaskFailed(waiter.timeout_message(current, self.result, self.params["wait_timeout"]))
        try:
            current = self.wait_rollout(
                current, "the plugin", "Label the nodes (or deploy Node Feature Discovery), set node_selector or affinity",
                done=lambda ds: ds_rollout.rollout_done(ds) or (
                    on_delete and not self.params["delete_old_pods"]
                    and ds_rollout.rollout_status(ds)["old_pods_pending"]))
        except TaskFailed:
            self._report(self.result.get("daemonset") or current, resources)   # the nodes' report, as on success
            raise
        state = self._report(current, resources)
        if state["old_pods_pending"]:
            old = [p["metadata"]["name"] for p in self.list_pods(current) if ds_rollout.is_old_pod(p, generation)]
            self.old_pods = sorted(old)
            self.result["rollout"]["old_pods"] = self.old_pods
            self.warnings.append(
                "DaemonSet %s/%s uses updateStrategy OnDelete: %d pod(s) of the old template (%s) keep running until "
                "deleted. Delete them, or set delete_old_pods: true to let this module do it."
                % (self.namespace, self.name, len(old), ", ".join(sorted(old)) or "none listed"))
        return current

    def _batch_size(self, desired):
        """How many old pods one batch deletes: update_strategy.max_unavailable (a number or a percentage of
        the scheduled pods, rounded up as the DaemonSet controller does), at least 1; 1 when not given."""
        value = (self.params.get("update_strategy") or {}).get("max_unavailable")
        if value is None:
            return 1
        text = "%s" % value
        if text.endswith("%"):
            return max(1, -(-desired * int(text[:-1]) // 100))
        return max(1, int(text))

    def _delete_old_pods(self, daemonset):
        """Delete the old template's pods in batches of max_unavailable, each batch once the previous one's
        replacements are ready, so at most that many nodes are without a working plugin at a time."""
        generation = daemonset["metadata"].get("generation")
        old = sorted((p for p in self.list_pods(daemonset)
                      if ds_rollout.is_old_pod(p, generation) and not p["metadata"].get("deletionTimestamp")),
                     key=lambda p: (ds_rollout.pod_node(p) or "", p["metadata"]["name"]))
        batch = self._batch_size(ds_rollout.rollout_status(daemonset)["desired"])
        deleted = []
        self.result["deleted_pods"] = deleted
        for start in range(0, len(old), batch):
            if start:
                self._wait_replacements(daemonset, old[start - batch:start])
            for pod in old[start:start + batch]:
                name = pod["metadata"]["name"]
                try:
                    self.client.call_json(self.client.core.delete_namespaced_pod, name, self.namespace,
                                          what='delete old pod "%s/%s"' % (self.namespace, name))
                except KubeHwError as err:
                    if err.status != 404:
                        raise
                deleted.append(name)
                self.result["changed"] = True
        self.result["deleted_pods"] = sorted(deleted)

    def _wait_replacements(self, daemonset, deleted_pods):
        """Wait until each node of ``deleted_pods`` runs a ready pod of the current template."""
        generation = daemonset["metadata"].get("generation")
        nodes = sorted(set(ds_rollout.pod_node(p) for p in deleted_pods if ds_rollout.pod_node(p)))

        def replaced(objects):
            ready = set(ds_rollout.pod_node(p) for p in objects.values()
                        if ds_rollout.owned_by(p, daemonset) and not ds_rollout.is_old_pod(p, generation)
                        and not p["metadata"].get("deletionTimestamp") and ds_rollout.pod_ready(p))
            return all(n in ready for n in nodes)

        self.client.watch(self.client.core.list_namespaced_pod, replaced, timeout=self.remaining(),
                          what="see ready replacements on %s before deleting more old pods of DaemonSet %s/%s"
                          % (", ".join(nodes), self.namespace, self.name),
                          namespace=self.namespace, label_selector=ds_wait.pod_selector(daemonset))

    def _wait_resource(self, current, resources):
        min_count = self.params["min_count"]
        pods = self.list_pods(current)
        node_names = sorted(set(ds_rollout.pod_node(p) for p in pods
                                if ds_rollout.pod_node(p) and not p["metadata"].get("deletionTimestamp")))
        if not node_names:
            self.warnings.append("No node runs a pod of DaemonSet %s/%s, so no node advertises %s"
                                 % (self.namespace, self.name, ", ".join(resources)))
        try:
            # the nodes' watch the task began with goes on: no second list of every node
            ds_wait.node_list(self.node_watch)
            self.node_watch.what = "see %s on the nodes running DaemonSet %s/%s" % (
                ", ".join(resources), self.namespace, self.name)
            self.node_watch.until(
                lambda nodes: ds_rollout.nodes_with_resource(nodes, node_names, resources, min_count, self.any_of),
                self.remaining())
        except WaitTimedOut:
            self._fail_timeout("the resources %s" % ", ".join(resources), resources, check_resources=True)
        self._report(current, resources)

    def _report(self, current, resources, pods=None, nodes=None):
        state = ds_rollout.rollout_status(current)
        if self.old_pods is not None and state["old_pods_pending"]:
            state["old_pods"] = self.old_pods
        self.result["rollout"] = state
        pods = self.list_pods(current) if pods is None else pods
        nodes = self.list_nodes() if nodes is None else nodes
        self.result["nodes"] = ds_rollout.node_report(pods, nodes, resources, self.params["min_count"],
                                                      current["metadata"].get("generation"), any_of=self.any_of)
        return state

    def _fail_timeout(self, what, resources, check_resources):
        current = self.read_daemonset() or self.result["daemonset"]
        self.result["daemonset"] = current
        pods = self.list_pods(current)
        nodes = self.list_nodes()
        state = self._report(current, resources, pods, nodes)
        if check_resources:
            outcome = self.result.setdefault("node_outcome", {})
            for node, entry in self.result["nodes"].items():
                if not entry["resource_ready"]:
                    outcome[node] = ds_wait.MISSING_DEVICES
        msg = ds_rollout.timeout_message(what, self.params["wait_timeout"], current, state, self.result["nodes"],
                                         resources, self.params["min_count"], check_resources, self.any_of)
        raise TaskFailed(msg)

    def _add_diff(self, kind, name, before, after):
        self.add_diff(kind, "%s/%s" % (self.namespace, name), before, after)

    def _check_runtime_class(self, desired):
        """Every pod naming a RuntimeClass that does not exist is refused by the apiserver, so a rollout would only
        wait out wait_timeout: refused before any write (in check mode a warning, since the play may create it
        first)."""
        if self.params["wait"] == "none":
            return
        missing = ds_task.missing_runtime_class(self.client, desired["spec"]["template"]["spec"])
        if not missing:
            return
        text = ("RuntimeClass %s, which the %s preset's pods name (runtime_class_name), does not exist, so the "
                "apiserver would refuse every plugin pod. Create it first (the nvidia_container_toolkit role, or "
                "kubehw.devices.k8s_runtime_class), or set runtime_class_name: \"\" for none."
                % (missing, self.params["preset"]))
        if self.check_mode:
            self.warnings.append(text)
            return
        raise TaskFailed(text + " Nothing was written.")

    def absent(self):
        live = self.read_daemonset()
        self.refuse_foreign_daemonset(live, "delete it")
        live_cm = self.read_configmap()
        if live_cm is not None and not self._created_here(live_cm, live):
            live_cm = None
        self.result["generation"]["before"] = (live or {}).get("metadata", {}).get("generation")
        if live is not None:
            self._add_diff("DaemonSet", self.name, live, None)
        if live_cm is not None:
            self._add_diff("ConfigMap", live_cm["metadata"]["name"], live_cm, None)
        if self.check_mode or (live is None and live_cm is None):
            self.result["changed"] = live is not None or live_cm is not None
            return
        # Gone already (someone else deleted it): not an error, and not our change.
        if live is not None and self.delete_daemonset():
            self.record_change("DaemonSet", self.name)
        if live_cm is not None:
            cm_name = live_cm["metadata"]["name"]
            if self.delete(self.client.core.delete_namespaced_config_map, (cm_name, self.namespace),
                           'delete ConfigMap "%s/%s"' % (self.namespace, cm_name)):
                self.record_change("ConfigMap", cm_name)
        if live is not None and self.params["wait"] != "none":
            self.wait_deleted()
