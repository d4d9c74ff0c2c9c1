# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's DaemonSet controller, a part of Controllers (controllers.py): one pod per node that should
run it (NodeShouldRunDaemonPod), rolling updates by maxUnavailable, and the status counts. Not simulated: maxSurge
(rollouts always go by maxUnavailable), ControllerRevision objects."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import time

from .objutil import (
    SCHEDULER_NAME, TAINT_NOT_READY, TAINT_UNREACHABLE, _condition, _key, _meta, _rfc3339_to_epoch, controller_ref,
    first_untolerated_taint, node_matches_affinity, pod_ready, pod_terminal, qos_class, random_suffix, template_hash)
from .store import StoreError, missing_runtime_class, now_rfc3339


# Tolerations the DaemonSet controller adds to every daemon pod (util.AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS = [
    {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
    {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                           "effect": "NoSchedule"}


class DaemonSetMixin:
    """The DaemonSet controller's passes (Controllers runs them for dirty DaemonSets)."""

    def _timer_ds(self, key):
        with self._cond:
            self._dirty_ds.add(key)

    def _should_run(self, node, ds):
        """(shouldRun, shouldContinueRunning) as NodeShouldRunDaemonPod decides them."""
        tmpl_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        if tmpl_spec.get("nodeName") and tmpl_spec["nodeName"] != _meta(node).get("name"):
            return False, False
        if not node_matches_affinity(tmpl_spec, node):
            return False, False
        tolerations = self._daemon_tolerations(tmpl_spec)
        taints = (node.get("spec") or {}).get("taints") or []
        if first_untolerated_taint(taints, tolerations, ("NoSchedule", "NoExecute")) is None:
            return True, True
        return False, first_untolerated_taint(taints, tolerations, ("NoExecute",)) is None

    @staticmethod
    def _daemon_tolerations(tmpl_spec):
        tolerations = list(tmpl_spec.get("tolerations") or [])
        extra = list(DAEMON_TOLERATIONS)
        if tmpl_spec.get("hostNetwork"):
            extra.append(HOST_NETWORK_TOLERATION)
        for tol in extra:
            if not any(t.get("key") == tol["key"] and t.get("effect") == tol["effect"] for t in tolerations):
                tolerations.append(dict(tol))
        return tolerations

    def _pod_available(self, pod, min_ready, now):
        if not pod_ready(pod):
            return False
        if not min_ready:
            return True
        since = _rfc3339_to_epoch((_condition(pod, "Ready") or {}).get("lastTransitionTime"))
        return since + min_ready <= now

    def _ds_pods_by_node(self, ds):
        uid = _meta(ds).get("uid")
        ns = _meta(ds).get("namespace")
        by_node = {}
        for (pns, _name), pod in self._snapshot("pods").items():
            if pns != ns:
                continue
            ref = controller_ref(pod)
            if not ref or ref.get("uid") != uid:
                continue
            if pod_terminal(pod) and _meta(pod).get("deletionTimestamp"):
                continue
            by_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", []).append(pod)
        for pods in by_node.values():
            pods.sort(key=lambda p: (_meta(p).get("creationTimestamp") or "",
                                     int(_meta(p).get("resourceVersion") or 0)))
        return by_node

    def _sync_daemonset(self, key):
        ds = self._snapshot("daemonsets").get(key)
        if ds is None:
            return
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        tmpl_hash = template_hash(template, (ds.get("status") or {}).get("collisionCount"))
        nodes = sorted(self._snapshot("nodes").values(), key=lambda n: _meta(n).get("name"))
        node_names = set(_meta(n).get("name") for n in nodes)
        by_node = self._ds_pods_by_node(ds)
        deleting_ds = bool(_meta(ds).get("deletionTimestamp"))
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = time.time()
        verdicts = dict((_meta(n).get("name"), self._should_run(n, ds)) for n in nodes)

        # manage: one pod per node that should run it; none where it must not continue
        if not deleting_ds:
            for node_name, pods in list(by_node.items()):
                if node_name not in node_names:
                    for pod in pods:
                        if not _meta(pod).get("deletionTimestamp"):
                            self._delete_pod(pod)
            for node in nodes:
                name = _meta(node).get("name")
                should_run, should_continue = verdicts[name]
                pods = by_node.get(name, [])
                live = [p for p in pods if not _meta(p).get("deletionTimestamp")]
                if should_run and not pods:
                    self._create_daemon_pod(ds, name, tmpl_hash)
                elif not should_continue:
                    for pod in live:
                        self._delete_pod(pod)
                else:
                    failed = [p for p in live if (p.get("status") or {}).get("phase") == "Failed"]
                    for pod in failed:
                        self._delete_pod(pod)
                    running = [p for p in live if p not in failed]
                    for pod in running[1:]:
                        self._delete_pod(pod)
            by_node = self._ds_pods_by_node(ds)
            strategy = spec.get("updateStrategy") or {}
            if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
                self._rolling_update(ds, by_node, verdicts, tmpl_hash, min_ready, now)
                by_node = self._ds_pods_by_node(ds)

        self._update_ds_status(ds, nodes, verdicts, by_node, tmpl_hash, min_ready, now)

    def _max_unavailable(self, ds, desired):
        rolling = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        value = rolling.get("maxUnavailable", 1)
        if isinstance(value, str) and value.endswith("%"):
            try:
                pct = int(value[:-1])
            except ValueError:
                pct = 0
            result = -(-desired * pct // 100)     # percentages round up, as the controller does
        else:
            try:
                result = int(value)
            except (TypeError, ValueError):
                result = 1
        if desired > 0 and result == 0:
            result = 1
        return result

    def _rolling_update(self, ds, by_node, verdicts, tmpl_hash, min_ready, now):
        desired = sum(1 for v in verdicts.values() if v[0])
        max_unavailable = self._max_unavailable(ds, desired)
        unavailable = 0
        replace, candidates = [], []
        for node_name in sorted(by_node):
            pods = [p for p in by_node[node_name] if not _meta(p).get("deletionTimestamp")]
            new = [p for p in pods if (_meta(p).get("labels") or {}).get("controller-revision-hash") == tmpl_hash]
            old = [p for p in pods if p not in new]
            if len(new) > 1 or len(old) > 1:
                unavailable += 1
                continue
            if (not old and not new) or (old and new):
                unavailable += 1
            elif new:
                if not self._pod_available(new[0], min_ready, now):
                    unavailable += 1
            elif not self._pod_available(old[0], min_ready, now):
                replace.append(old[0])
            elif unavailable < max_unavailable:
                candidates.append(old[0])
        remaining = min(max(max_unavailable - unavailable, 0), len(candidates))
        for pod in replace + candidates[:remaining]:
            self._delete_pod(pod)

    def _create_daemon_pod(self, ds, node_name, tmpl_hash):
        meta = _meta(ds)
        template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        generation = (meta.get("annotations") or {}).get("deprecated.daemonset.template.generation") or \
            str(meta.get("generation", 1))
        labels = dict(tmeta.get("labels") or {})
        labels["controller-revision-hash"] = tmpl_hash
        labels["pod-template-generation"] = str(generation)
        pod_spec["nodeName"] = node_name
        pod_spec["tolerations"] = self._daemon_tolerations(pod_spec)
        pod_spec.setdefault("restartPolicy", "Always")
        pod_spec.setdefault("schedulerName", SCHEDULER_NAME)
        pod_spec.setdefault("dnsPolicy", "ClusterFirst")
        pod_spec.setdefault("terminationGracePeriodSeconds", 30)
        pod_spec.setdefault("serviceAccountName", "default")
        pod_spec.setdefault("securityContext", {})
        account = pod_spec["serviceAccountName"]
        if account != "default" and self.store.get("serviceaccounts", meta.get("namespace"), account) is None:
            # ServiceAccount admission refuses the pod ("error looking up service account"); the controller
            # requeues the DaemonSet and tries again (FACTS.md, DRA kubelet plugins). "default" always exists.
            self._add_timer(self.sync_interval, "ds", _key(ds))
            return None
        if missing_runtime_class(self.store, {"spec": pod_spec}) is not None:
            # RuntimeClass admission refuses the pod (a FailedCreate event on a real cluster); no pod appears and
            # the controller tries again, so the pods come once the RuntimeClass exists (FACTS.md, RuntimeClass).
            self._add_timer(self.sync_interval, "ds", _key(ds))
            return None
        pod = {
            "metadata": {
                "name": "%s-%s" % (meta.get("name"), random_suffix()),
                "generateName": "%s-" % meta.get("name"),
                "namespace": meta.get("namespace"),
                "labels": labels,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta.get("name"),
                                     "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                       "lastTransitionTime": now_rfc3339()}]},
        }
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = dict(tmeta["annotations"])
        pod["status"]["qosClass"] = qos_class(pod["spec"])
        for _attempt in range(3):
            try:
                return self.store.create("pods", pod)
            except StoreError as err:
                if err.code != 409:
                    raise
                pod["metadata"]["name"] = "%s-%s" % (meta.get("name"), random_suffix())
        return None

    def _update_ds_status(self, ds, nodes, verdicts, by_node, tmpl_hash, min_ready, now):
        desired = current = ready = available = updated = misscheduled = 0
        recheck = None
        for node in nodes:
            name = _meta(node).get("name")
            should_run = verdicts[name][0]
            pods = by_node.get(name, [])
            if should_run:
                desired += 1
                if not pods:
                    continue
                current += 1
                pod = sorted(pods, key=lambda p: (_meta(p).get("creationTimestamp") or "",
                                                  (p.get("status") or {}).get("phase") != "Running"))[0]
                if pod_ready(pod):
                    ready += 1
                    if self._pod_available(pod, min_ready, now):
                        available += 1
                    else:
                        since = _rfc3339_to_epoch((_condition(pod, "Ready") or {}).get("lastTransitionTime"))
                        wake = since + min_ready - now
                        recheck = wake if recheck is None else min(recheck, wake)
                if (_meta(pod).get("labels") or {}).get("controller-revision-hash") == tmpl_hash:
                    updated += 1
            elif pods:
                misscheduled += 1
        if recheck is not None:
            self._add_timer(recheck + 0.05, "ds", _key(ds))
        counts = {
            "currentNumberScheduled": current,
            "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": desired,
            "numberReady": ready,
        }
        # these four carry `omitempty` in apps/v1 DaemonSetStatus: a zero is absent, not 0
        optional = {
            "observedGeneration": _meta(ds).get("generation", 1),
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
            "numberUnavailable": desired - available,
        }
        uid = _meta(ds).get("uid")

        def fn(obj):
            if _meta(obj).get("uid") != uid:
                return
            status = dict(obj.get("status") or {})
            status.update(counts)
            for k, v in optional.items():
                if v:
                    status[k] = v
                else:
                    status.pop(k, None)
            # observedGeneration tells which spec the counts describe: the one this pass read
            obj["status"] = status

        ns, name = _key(ds)
        self.store.mutate("daemonsets", ns, name, fn)
