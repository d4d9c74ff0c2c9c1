# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's node lifecycle controller and garbage collector, parts of Controllers (controllers.py).

One tainting pass (node_taints), run on every node event, derives a node's taints from what it reports, as
kube-controller-manager's NoSchedule and NoExecute tainting passes and its cordon do: not-ready or unreachable from
the Ready condition (none at all for a node that reports no conditions: the not-ready taint NodeTaint admission gave
it at the create goes), the pressure taints, and unschedulable from spec.unschedulable.

Compressed time, on purpose: an unreachable node is marked Unknown (and so tainted) at once (a real node lifecycle
controller waits its 50 s node-monitor grace period, and marks a node that never reported Unknown after its 60 s
startup grace, which the simulated one never does), pods on it are marked not ready but not evicted (real: after
300 s)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from tests.support.kubelet_core import node_conditions

from .objutil import TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, _condition, _key, _meta, controller_ref, \
    pod_terminal
from .store import now_rfc3339


# kube-controller-manager's NoSchedule tainting pass: which condition status puts which taint on a node
CONDITION_TAINTS = (("Ready", "False", TAINT_NOT_READY), ("Ready", "Unknown", TAINT_UNREACHABLE),
                    ("MemoryPressure", "True", "node.kubernetes.io/memory-pressure"),
                    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
                    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
                    ("NetworkUnavailable", "True", "node.kubernetes.io/network-unavailable"))
# and its NoExecute pass (taint-based eviction), which needs a Ready condition to judge. Only the unreachable verdict
# adds one here: kube-controller-manager adds not-ready:NoExecute for Ready=False only while the node's zone is not
# fully disrupted (some other node there is Ready), which the simulated cluster does not track
READY_NO_EXECUTE = {"Unknown": TAINT_UNREACHABLE}
NO_EXECUTE_KEYS = (TAINT_NOT_READY, TAINT_UNREACHABLE)


def node_taints(node):
    """The taints the node lifecycle controller leaves on a node: the condition taints derived from the conditions
    the node reports (NoSchedule; none for a node that reports no conditions at all, so the not-ready taint the
    create got goes, as on v1.36.2), unreachable:NoExecute from a Ready condition of Unknown and no NoExecute
    condition taint once Ready is True (kept as they are while there is no Ready condition), and
    unschedulable:NoSchedule while spec.unschedulable; every other taint kept as it is, in its place, and a kept
    managed taint keeps its timeAdded."""
    spec = node.get("spec") or {}
    current = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    statuses = dict((c.get("type"), c.get("status")) for c in (node.get("status") or {}).get("conditions") or []
                    if isinstance(c, dict))
    wanted = [(key, "NoSchedule") for ctype, cstatus, key in CONDITION_TAINTS if statuses.get(ctype) == cstatus]
    managed = set((key, "NoSchedule") for _t, _s, key in CONDITION_TAINTS)
    managed.add((TAINT_UNSCHEDULABLE, "NoSchedule"))
    if spec.get("unschedulable"):
        wanted.append((TAINT_UNSCHEDULABLE, "NoSchedule"))
    if "Ready" in statuses:
        managed.update((key, "NoExecute") for key in NO_EXECUTE_KEYS)
        if statuses["Ready"] in READY_NO_EXECUTE:
            wanted.append((READY_NO_EXECUTE[statuses["Ready"]], "NoExecute"))
    taints = [t for t in current if (t.get("key"), t.get("effect")) not in managed or
              (t.get("key"), t.get("effect")) in wanted]
    have = set((t.get("key"), t.get("effect")) for t in taints)
    stamp = now_rfc3339()
    for key, effect in wanted:
        if (key, effect) not in have:
            # the controllers stamp the taints they add for eviction and cordon; condition taints carry no time
            timed = effect == "NoExecute" or key == TAINT_UNSCHEDULABLE
            taints.append(dict({"key": key, "effect": effect}, **({"timeAdded": stamp} if timed else {})))
    return taints


def apply_node_taints(node):
    """Set the node's taints to node_taints(node), in place (no taints key when there are none); unchanged taints are
    not touched."""
    wanted = node_taints(node)
    spec = node.setdefault("spec", {})
    if wanted == (spec.get("taints") or []):
        return
    if wanted:
        spec["taints"] = wanted
    else:
        spec.pop("taints", None)


class NodeLifecycleMixin:
    """Node lifecycle verdicts and taints, and the garbage collector of DaemonSet pods."""

    def set_node_unreachable(self, name, unreachable=True):
        """Stop (or resume) the node's kubelet; the node lifecycle verdict is applied at once."""
        with self._cond:
            self.kubelet.set_unreachable(name, unreachable)
        stamp = now_rfc3339()

        def fn(node):
            status = node.setdefault("status", {})
            heartbeat = (_condition(node, "Ready") or {}).get("lastHeartbeatTime") or stamp
            ready_now = (_condition(node, "Ready") or {}).get("status") == "True"
            if unreachable:
                if (_condition(node, "Ready") or {}).get("status") != "Unknown":
                    status["conditions"] = node_conditions(heartbeat, stamp, ready=False)
            else:
                status["conditions"] = node_conditions(stamp, heartbeat if ready_now else stamp, ready=True)
            # the taints follow in the same write, as the tainting pass would make them
            apply_node_taints(node)

        self.store.mutate("nodes", None, name, fn)
        with self._cond:
            self._next_heartbeat[name] = time.monotonic() + self.heartbeat_interval
            self._mark_node_pods_dirty(name)
            self._dirty_nodes.add(name)
            self._cond.notify_all()

    def _taint_node(self, node):
        """Node lifecycle: the node's taints follow its conditions and spec.unschedulable (node_taints), in one write
        when they differ."""
        if node_taints(node) == ((node.get("spec") or {}).get("taints") or []):
            return

        try:
            self.store.mutate("nodes", None, _meta(node).get("name"), apply_node_taints)
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
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if self.kubelets_in_process:
            # compressed: a finished pod of a running kubelet, and any pod of a node without one, go at once
            at_once = not node or pod_terminal(pod) and node in self.node_configs and self._reachable(node)
        else:
            # as the apiserver's graceful deletion decides: an unbound or finished pod, or a grace period of 0, at once
            at_once = not node or pod_terminal(pod) or grace == 0
        if at_once:
            self.store.delete("pods", ns, name)
            return
        self.store.mark_deleting("pods", ns, name, grace_seconds=grace)
        if self.kubelets_in_process and node not in self.node_configs:
            self.store.delete("pods", ns, name)
