# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's node lifecycle controller and garbage collector, parts of Controllers (controllers.py).

Compressed time, on purpose: an unreachable node is marked Unknown and tainted at once (a real node lifecycle
controller waits about 50 s), pods on it are marked not ready but not evicted (real: after 300 s). taint_new_nodes
(default true): a node created through the API without Ready=True gets node.kubernetes.io/not-ready:NoSchedule, and
loses it once it reports Ready; spec.unschedulable and the unschedulable taint follow each other."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from tests.support.kubelet_core import node_conditions

from .objutil import TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, _condition, _key, _meta, controller_ref, \
    pod_terminal
from .store import now_rfc3339


class NodeLifecycleMixin:
    """Node lifecycle verdicts and taints, and the garbage collector of DaemonSet pods."""

    def set_node_unreachable(self, name, unreachable=True):
        """Stop (or resume) the node's kubelet; the node lifecycle verdict is applied at once."""
        with self._cond:
            self.kubelet.set_unreachable(name, unreachable)
        stamp = now_rfc3339()

        def fn(node):
            status = node.setdefault("status", {})
            conds = status.get("conditions") or []
            heartbeat = (_condition(node, "Ready") or {}).get("lastHeartbeatTime") or stamp
            ready_now = (_condition(node, "Ready") or {}).get("status") == "True"
            if unreachable:
                if not conds or (_condition(node, "Ready") or {}).get("status") != "Unknown":
                    status["conditions"] = node_conditions(heartbeat, stamp, ready=False)
                taints = [t for t in node.get("spec", {}).get("taints") or [] if t.get("key") != TAINT_UNREACHABLE]
                taints.append({"key": TAINT_UNREACHABLE, "effect": "NoSchedule"})
                taints.append({"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp})
                node.setdefault("spec", {})["taints"] = taints
            else:
                status["conditions"] = node_conditions(stamp, heartbeat if ready_now else stamp, ready=True)
                spec = node.setdefault("spec", {})
                taints = [t for t in spec.get("taints") or [] if t.get("key") not in (TAINT_UNREACHABLE,)]
                if taints:
                    spec["taints"] = taints
                else:
                    spec.pop("taints", None)

        self.store.mutate("nodes", None, name, fn)
        with self._cond:
            self._next_heartbeat[name] = time.monotonic() + self.heartbeat_interval
            self._mark_node_pods_dirty(name)
            self._dirty_nodes.add(name)
            self._cond.notify_all()

    def _taint_new_node(self, node):
        """Node lifecycle: a node that has not reported Ready gets not-ready:NoSchedule."""
        name = _meta(node).get("name")
        if name in self.node_configs or (_condition(node, "Ready") or {}).get("status") == "True":
            return
        taints = (node.get("spec") or {}).get("taints") or []
        if any(t.get("key") == TAINT_NOT_READY for t in taints):
            return

        def fn(obj):
            if (_condition(obj, "Ready") or {}).get("status") == "True":
                return
            spec = obj.setdefault("spec", {})
            if not any(t.get("key") == TAINT_NOT_READY for t in spec.get("taints") or []):
                spec["taints"] = list(spec.get("taints") or []) + [{"key": TAINT_NOT_READY, "effect": "NoSchedule"}]

        try:
            self.store.mutate("nodes", None, name, fn)
        except Exception as err:  # pylint: disable=broad-except
            self._record_error(err)

    def _untaint_ready_node(self, node):
        """Node lifecycle: once a node reports Ready, its not-ready:NoSchedule taint goes (kube-controller-manager's
        node lifecycle controller does it at its next look, within a second on v1.36.2 with a 1 s monitor period)."""
        if (_condition(node, "Ready") or {}).get("status") != "True" or not any(
                t.get("key") == TAINT_NOT_READY and t.get("effect") == "NoSchedule"
                for t in (node.get("spec") or {}).get("taints") or []):
            return

        def fn(obj):
            if (_condition(obj, "Ready") or {}).get("status") != "True":
                return
            spec = obj.get("spec") or {}
            kept = [t for t in spec.get("taints") or []
                    if not (t.get("key") == TAINT_NOT_READY and t.get("effect") == "NoSchedule")]
            if kept != (spec.get("taints") or []):
                if kept:
                    spec["taints"] = kept
                else:
                    spec.pop("taints", None)

        try:
            self.store.mutate("nodes", None, _meta(node).get("name"), fn)
        except Exception as err:  # pylint: disable=broad-except
            self._record_error(err)

    def _taint_unschedulable(self, node):
        """Node lifecycle (TaintNodesByCondition): spec.unschedulable <-> node.kubernetes.io/unschedulable:NoSchedule."""
        spec = node.get("spec") or {}
        wanted = bool(spec.get("unschedulable"))
        if wanted == any(t.get("key") == TAINT_UNSCHEDULABLE for t in spec.get("taints") or []):
            return

        def fn(obj):
            ospec = obj.setdefault("spec", {})
            taints = [t for t in ospec.get("taints") or [] if t.get("key") != TAINT_UNSCHEDULABLE]
            if ospec.get("unschedulable"):
                taints.append({"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule", "timeAdded": now_rfc3339()})
            if taints:
                ospec["taints"] = taints
            else:
                ospec.pop("taints", None)

        try:
            self.store.mutate("nodes", None, _meta(node).get("name"), fn)
        except Exception as err:  # pylint: disable=broad-except
            self._record_error(err)

    def _not_ready_fn(self, uid):
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid:
                return
            # node lifecycle controller's MarkPodsNotReady: only the Ready condition flips
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") != "False":
                    cond["status"] = "False"
                    cond["lastTransitionTime"] = stamp
                    cond.pop("reason", None)
                    cond.pop("message", None)
        return fn

    # ------------------------------------------------------------ garbage collector

    def _collect_garbage(self, uids):
        for key, pod in self._snapshot("pods").items():
            ref = controller_ref(pod)
            if ref and ref.get("uid") in uids:
                self._delete_pod(pod)

    def _delete_pod(self, pod):
        """Graceful delete: a bound pod turns Terminating and its kubelet removes it."""
        ns, name = _key(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or pod_terminal(pod) and node in self.node_configs and self._reachable(node):
            self.store.delete("pods", ns, name)
            return
        self.store.mark_deleting("pods", ns, name, grace_seconds=(pod.get("spec") or {}).get(
            "terminationGracePeriodSeconds", 30))
        if node not in self.node_configs:
            self.store.delete("pods", ns, name)
