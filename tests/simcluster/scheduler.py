# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's scheduler, a part of Controllers (controllers.py): kube-scheduler 1.32's filters in plugin
order, LeastAllocated scoring, binding, and FailedScheduling messages as FitError.Error() writes them, with DRA's
claims (dra_allocation.py). Not simulated: pod priority and preemption (every pod has the same priority, so preemption never
finds a victim)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import time

from . import dra_allocation as dra  # DRA claims in the scheduler (DynamicResources filter, allocation before binding)
from .objutil import (
    SCHEDULER_NAME, _meta, first_untolerated_taint, node_matches_affinity, parse_quantity, pod_requests, pod_terminal,
    toleration_tolerates)
from .store import StoreError, now_rfc3339


class SchedulerMixin:
    """The scheduler's pass over pending pods (Controllers runs it when a decision could change)."""

    def _schedule(self):
        pods = self._snapshot("pods")
        pending = []
        for key, pod in pods.items():
            spec, meta = pod.get("spec") or {}, _meta(pod)
            if spec.get("nodeName") or meta.get("deletionTimestamp") or pod_terminal(pod):
                continue
            if (spec.get("schedulerName") or SCHEDULER_NAME) != SCHEDULER_NAME:
                continue
            order = self._pending_order.setdefault(meta.get("uid"), next(self._seq))
            pending.append((-int(spec.get("priority") or 0), order, key, pod))
        if not pending:
            return
        pending.sort(key=lambda x: x[:2])
        nodes = sorted(self._snapshot("nodes").values(), key=lambda n: _meta(n).get("name"))
        usage = self._node_usage(pods)
        for _prio, _order, key, pod in pending:
            uid = _meta(pod).get("uid")
            if dra.waiting_for_claims(self.store, pod):
                continue  # DynamicResources' PreEnqueue holds it back until its claims exist (dra_allocation.py)
            spec_sig = json.dumps(pod.get("spec"), sort_keys=True) + dra.claims_signature(self.store, pod)
            last = self._unschedulable.get(uid)
            if last and last[0] == self._cluster_gen and last[1] == spec_sig:
                continue
            feasible, statuses = [], {}
            requests = pod_requests(pod)
            # DynamicResources' PreFilter refuses the pod for every node at once (dra_allocation.py)
            refused = dra.prefilter_rejection(self.store, pod)
            for node in ([] if refused else nodes):
                name = _meta(node).get("name")
                # extended resources a DeviceClass maps and the node does not advertise are DRA's (dra_allocation.py)
                reasons, resolvable = self._filter(pod, dra.device_plugin_requests(self.store, requests, node),
                                                   node, usage.get(name))
                if not reasons:
                    reasons = dra.claim_filter_reasons(self.store, pod, name, node, requests)
                    resolvable = resolvable and not reasons  # DRA refusals are unresolvable (dra_allocation.py)
                if reasons:
                    statuses[name] = (reasons, resolvable)
                else:
                    feasible.append(node)
            if feasible:
                chosen = min(feasible, key=lambda n: (self._score(n, usage.get(_meta(n).get("name"))),
                                                      _meta(n).get("name")))
                if dra.allocate_claims(self.store, pod, _meta(chosen).get("name"), chosen, requests) and \
                        self._bind(key, uid, _meta(chosen).get("name")):
                    used = usage.setdefault(_meta(chosen).get("name"), {"pods": 0, "requests": {}})
                    used["pods"] += 1
                    for k, v in requests.items():
                        used["requests"][k] = used["requests"].get(k, 0) + v
                    self._unschedulable.pop(uid, None)
                    self._pending_order.pop(uid, None)
                continue
            if refused:
                statuses = dict((_meta(n).get("name"), ([], False)) for n in nodes)
            message = self._fit_error(len(nodes), statuses, dra.post_filter_message(pod, bool(refused)), refused)
            previous = last[2] if last else None
            self._unschedulable[uid] = (self._cluster_gen, spec_sig, message)
            self._mark_unschedulable(key, uid, pod, message, emit_event=(message != previous))
        live = set(_meta(p).get("uid") for p in pods.values())
        for uid in [u for u in self._unschedulable if u not in live]:
            self._unschedulable.pop(uid, None)
            self._pending_order.pop(uid, None)

    @staticmethod
    def _node_usage(pods):
        usage = {}
        for pod in pods.values():
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or pod_terminal(pod):
                continue
            used = usage.setdefault(node, {"pods": 0, "requests": {}})
            used["pods"] += 1
            for k, v in pod_requests(pod).items():
                used["requests"][k] = used["requests"].get(k, 0) + v
        return usage

    @staticmethod
    def _score(node, used):
        """LeastAllocated on cpu and memory: lower is better here."""
        alloc = (node.get("status") or {}).get("allocatable") or {}
        used = (used or {}).get("requests") or {}
        total = 0
        for r in ("cpu", "memory"):
            cap = parse_quantity(alloc.get(r))
            total += used.get(r, 0) / cap if cap else 1
        return total

    @staticmethod
    def _filter(pod, requests, node, used):
        """kube-scheduler filters in plugin order; returns (reasons, resolvable by preemption)."""
        spec = pod.get("spec") or {}
        nspec = node.get("spec") or {}
        tolerations = spec.get("tolerations") or []
        if nspec.get("unschedulable") and not any(
                toleration_tolerates(t, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
                for t in tolerations):
            return ["node(s) were unschedulable"], False
        taint = first_untolerated_taint(nspec.get("taints"), tolerations, ("NoSchedule", "NoExecute"))
        if taint is not None:
            return ["node(s) had untolerated taint {%s: %s}" % (taint.get("key"), taint.get("value") or "")], False
        if not node_matches_affinity(spec, node):
            return ["node(s) didn't match Pod's node affinity/selector"], False
        alloc = (node.get("status") or {}).get("allocatable") or {}
        used = used or {"pods": 0, "requests": {}}
        reasons = []
        # NodeResourcesFit: a request above the node's whole allocatable is UnschedulableAndUnresolvable (no victim
        # could make room: "Preemption is not helpful"); one above what is left is resolvable. Too many pods is resolvable.
        unresolvable = False
        if used["pods"] + 1 > int(parse_quantity(alloc.get("pods"))):
            reasons.append("Too many pods")
        if not any(v > 0 for v in requests.values()):
            return reasons, True
        named = [r for r in ("cpu", "memory", "ephemeral-storage") if requests.get(r, 0) > 0]
        scalar = [r for r in sorted(requests) if r not in ("cpu", "memory", "ephemeral-storage", "pods") and requests[r] > 0]
        for r in named + scalar:
            allocatable = parse_quantity(alloc.get(r))
            if requests[r] > allocatable - used["requests"].get(r, 0):
                reasons.append("Insufficient %s" % r)
                unresolvable = unresolvable or requests[r] > allocatable
        return reasons, not unresolvable

    @staticmethod
    def _histogram(counts):
        return ", ".join(sorted("%d %s" % (n, reason) for reason, n in counts.items()))

    def _fit_error(self, total, statuses, post_filter="", pre_filter=None):
        """FitError.Error() of kube-scheduler 1.32 with DefaultPreemption's post-filter message (after
        ``post_filter``, the reasons of post-filter plugins that run before it, joined with ", "). A PreFilter
        refusal (``pre_filter``) stands instead of the nodes' reasons (framework/types.go FitError.Error)."""
        if total == 0:
            return "no nodes available to schedule pods"
        reasons, preemption = {}, {}
        for node_reasons, resolvable in statuses.values():
            for reason in node_reasons:
                reasons[reason] = reasons.get(reason, 0) + 1
            # every pod has the same (default) priority, so preemption never finds a victim
            verdict = "No preemption victims found for incoming pod" if resolvable \
                else "Preemption is not helpful for scheduling"
            preemption[verdict] = preemption.get(verdict, 0) + 1
        return "0/%d nodes are available: %s. %spreemption: 0/%d nodes are available: %s." % (
            total, pre_filter or self._histogram(reasons), post_filter + ", " if post_filter else "", total,
            self._histogram(preemption))

    def _bind(self, key, uid, node_name):
        stamp = now_rfc3339()
        bound = []

        def fn(obj):
            if _meta(obj).get("uid") != uid or (obj.get("spec") or {}).get("nodeName") or \
                    _meta(obj).get("deletionTimestamp"):
                return
            obj.setdefault("spec", {})["nodeName"] = node_name
            status = obj.setdefault("status", {})
            status.setdefault("phase", "Pending")
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": stamp})
            status["conditions"] = conds
            bound.append(True)

        self.store.mutate("pods", key[0], key[1], fn)
        if bound:
            self._emit_event(key, uid, "Normal", "Scheduled",
                             "Successfully assigned %s/%s to %s" % (key[0], key[1], node_name))
        return bool(bound)

    def _mark_unschedulable(self, key, uid, pod, message, emit_event):
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid or (obj.get("spec") or {}).get("nodeName"):
                return
            status = obj.setdefault("status", {})
            status.setdefault("phase", "Pending")
            conds = status.get("conditions") or []
            prev = [c for c in conds if c.get("type") == "PodScheduled"]
            cond = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                    "lastTransitionTime": stamp, "reason": "Unschedulable", "message": message}
            if prev and prev[0].get("status") == "False":
                cond["lastTransitionTime"] = prev[0].get("lastTransitionTime") or stamp
            status["conditions"] = [c for c in conds if c.get("type") != "PodScheduled"] + [cond]

        self.store.mutate("pods", key[0], key[1], fn)
        if emit_event:
            self._emit_event(key, uid, "Warning", "FailedScheduling", message)

    def _emit_event(self, key, uid, event_type, reason, message):
        ns, name = key
        stamp = now_rfc3339()
        micro = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        pod = self._snapshot("pods").get(key) or {}
        event = {
            "metadata": {"name": "%s.%x" % (name, time.time_ns()), "namespace": ns},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": uid, "apiVersion": "v1",
                               "resourceVersion": _meta(pod).get("resourceVersion", "")},
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": SCHEDULER_NAME},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "eventTime": micro,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "reportingComponent": SCHEDULER_NAME,
            "reportingInstance": SCHEDULER_NAME,
        }
        try:
            self.store.create("events", event)
        except StoreError as err:
            if err.code != 409:
                raise
