# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's in-process kubelets (SimCluster(kubelets="in-process"), its own tests and the large
benchmarks; the integration suite runs the kubelet stand-in through the API instead): the shared kubelet core
(tests/support/kubelet_core.py) on the in-memory Store.

What a kubelet writes and when is the core's, the same as the kubelet stand-in's on a real control plane
(tests/support/kubelet.py); this module is only the transport: the controller worker (controllers.py) reads its
informer cache, asks the core, writes with Store.mutate and sets a timer for the core's next step, so a pass costs no
API request and thousands of nodes stay cheap. Besides, as the simulated cluster's own controllers: the node IPAM's
pod CIDR on each registered node, and (node_lifecycle.py) pods of an unreachable node marked not ready.

KubeletPlugins, the DRA drivers' kubelet plugins, publish the ResourceSlices the core wants, owned by their Node, on
a thread of their own that also runs the resource claim controller (dra.sync_claims).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from tests.support.kubelet_core import DELETE, KUBELET_VERSION, STATUS_STEPS, heartbeat_conditions

from . import dra_allocation as dra
from .objutil import _condition, _meta, pod_ready, pod_terminal
from .store import now_rfc3339


class KubeletMixin:
    """The kubelets of the configured nodes, as parts of the controller worker (Controllers)."""

    def _node_object(self, cfg):
        node = self.kubelet.node(cfg["name"], KUBELET_VERSION)
        idx = self.kubelet.node_index.get(cfg["name"], 0)
        # kube-controller-manager's node IPAM gives each node a pod CIDR (the core's pod IPs come from it)
        node["spec"].update({"podCIDR": "10.244.%d.0/24" % idx, "podCIDRs": ["10.244.%d.0/24" % idx]})
        return node

    # ------------------------------------------------------------ public knobs

    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        """Pods on node (existing and future) never become ready; containers wait with reason."""
        self._set_fail(node, reason)

    def allow_pod_start(self, node):
        """Undo fail_pod_start: the node's pods start normally again."""
        self._set_fail(node, None)

    def _set_fail(self, node, reason):
        with self._cond:
            self.kubelet.set_fail(node, reason)
            self._mark_node_pods_dirty(node)
            self._cond.notify_all()

    def _mark_node_pods_dirty(self, node):
        for key, pod in self._cache["pods"].items():
            if (pod.get("spec") or {}).get("nodeName") == node:
                self._dirty_pods.add(key)

    # ------------------------------------------------------------ node status

    def _kubelet_tick(self):
        """Every sync_interval: copy extended resources to allocatable; heartbeat at its own cadence."""
        now = time.monotonic()
        nodes = self._snapshot("nodes")
        for name in self.node_configs:
            node = nodes.get((None, name))
            if node is None or not self._reachable(name):
                continue
            heartbeat_due = now >= self._next_heartbeat.get(name, 0)
            if not heartbeat_due and not self.kubelet.allocatable_differs(name, node.get("status") or {}) and \
                    (_condition(node, "Ready") or {}).get("status") == "True":
                continue
            if heartbeat_due:
                self._next_heartbeat[name] = now + self.heartbeat_interval
            self.store.mutate("nodes", None, name, self._kubelet_status_fn(name, heartbeat_due))

    def _kubelet_status_fn(self, name, heartbeat):
        stamp = now_rfc3339()

        def fn(node):
            if not self._reachable(name):
                return      # the node went away between the decision and the write
            status = node.setdefault("status", {})
            allocatable = self.kubelet.allocatable(name, status)
            if allocatable:
                status["allocatable"] = allocatable
            elif allocatable is not None:
                status.pop("allocatable", None)
            conditions = heartbeat_conditions(status, stamp, heartbeat)
            if conditions is not None:
                status["conditions"] = conditions
        return fn

    # ------------------------------------------------------------ device plugins

    def _plugin_sync(self, name, pods):
        """Plugins running on a node register their resources (the core's plugin_step and plugin_status)."""
        if name not in self.node_configs or not self._reachable(name):
            return
        node = self._snapshot("nodes").get((None, name))
        if node is None:
            return
        plan, wake = self.kubelet.plugin_step(name, pods, time.monotonic())
        if wake is not None:
            self._add_timer(wake, "plugin", name)
        if self.kubelet.plugin_status(name, node.get("status") or {}, plan) is None:
            return

        def fn(obj):
            status = obj.setdefault("status", {})
            changed = self.kubelet.plugin_status(name, status, plan)
            if changed is not None:
                status["capacity"], allocatable = changed
                if allocatable is not None:
                    status["allocatable"] = allocatable

        self.store.mutate("nodes", None, name, fn)

    def _timer_plugin(self, name):
        with self._cond:
            self._dirty_nodes.add(name)

    # ------------------------------------------------------------ pods

    def _kubelet_pod(self, key, pod):
        if pod is None:
            return
        spec, meta = pod.get("spec") or {}, _meta(pod)
        node, uid = spec.get("nodeName"), meta.get("uid")
        if not node:
            return
        if not self._reachable(node):
            if not meta.get("deletionTimestamp") and not pod_terminal(pod) and pod_ready(pod):
                self.store.mutate("pods", key[0], key[1], self._not_ready_fn(uid))    # node_lifecycle.py
            return
        if node not in self.node_configs:
            # no kubelet here; with in-process kubelets (compressed), a deleted pod of a node made through the API goes
            # at once; else it waits, as on a real cluster, for the kubelet stand-in (or stays Terminating)
            if self.kubelets_in_process and meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self._remove_pod(key, uid)
            return
        step, wake = self.kubelet.pod_step(pod, time.monotonic())
        if wake is not None:
            # one timer per pod and state, so a later start never holds back an earlier stop
            state = "deleting" if meta.get("deletionTimestamp") else (pod.get("status") or {}).get("phase")
            self._add_timer(wake, "pod", key + (uid, state))
        if step == DELETE:
            self._remove_pod(key, uid)
        elif step in STATUS_STEPS:
            self.store.mutate("pods", key[0], key[1], self._pod_status_fn(uid))

    def _pod_status_fn(self, uid):
        def fn(obj):
            # decided again on the stored pod, under the store lock: an API write since the look may change the step
            if _meta(obj).get("uid") != uid:
                return
            step, _wake = self.kubelet.pod_step(obj, time.monotonic())
            if step in STATUS_STEPS:
                status = self.kubelet.status_for(step, obj)
                if status is not None:
                    obj["status"] = status
        return fn

    def _remove_pod(self, key, uid):
        current = self.store.get("pods", key[0], key[1])
        if current is not None and _meta(current).get("uid") == uid:
            self.store.delete("pods", key[0], key[1])
        self.kubelet.forget(uid)

    def _timer_pod(self, key):
        with self._cond:
            self._dirty_pods.add(key[:2])


class KubeletPlugins:
    """The kubelet side of DRA drivers: once a driver's plugin pod runs and is ready on a node, the node's
    inventory is published as one ResourceSlice (one pool named after the node, owned by the Node), as the
    three drivers do through the kubelet-plugin helper library (k8s.io/dynamic-resource-allocation
    resourceslice controller). When what a node publishes changes (its inventory), the slice is updated with
    the pool's generation one higher. When the pod is gone, the slice is deleted (the kubelet wipes the slices
    of a plugin that unregistered). A pod whose service account does not exist never publishes: the apiserver
    would refuse such a pod, and the DaemonSet controller (daemonsets.py) does not create it. The same loop
    runs the resource claim controller (dra.sync_claims); the scheduler calls claim_filter_reasons and
    allocate_claims. What is published is the kubelet core's (wanted_slices).
    """

    def __init__(self, store, kubelet, config, publish=True):
        self.store = store
        self.kubelet = kubelet
        # publish=False: the kubelet stand-in publishes the slices through the API; only the claim controller runs here
        self.publish = publish
        self.interval = max(float(config.get("sync_interval", 1.0)), 0.05)
        self._stop = None
        self._thread = None

    def start(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="simcluster-dra-plugins", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None

    def _run(self):
        while not self._stop.wait(min(self.interval, 0.5)):
            try:
                if self.publish:
                    self.sync()
                dra.sync_claims(self.store)
            except Exception:  # pylint: disable=broad-except
                # test equipment: a bad object must not stop the plugins of every node
                pass

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost); the next sync republishes with a new generation."""
        self.kubelet.set_inventory(node, key, count)

    def _account_exists(self, pod):
        name = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        # "default" exists in every namespace of a real cluster (the service account controller makes it)
        return name == "default" or self.store.get("serviceaccounts", pod["metadata"].get("namespace"), name) is not None

    def wanted(self):
        """slice name -> the ResourceSlice a running plugin publishes, owned by its Node."""
        pods, _rv = self.store.list("pods")
        out = self.kubelet.wanted_slices(pods, self._account_exists)
        for obj in out.values():
            node = obj["spec"]["nodeName"]
            node_obj = self.store.get("nodes", None, node) or {"metadata": {}}
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                   "uid": node_obj["metadata"].get("uid", ""), "controller": True}]
        return out

    def sync(self):
        names = self.wanted()
        existing, _rv = self.store.list("resourceslices")
        mine = dict((s["metadata"]["name"], s) for s in existing
                    if any(r.get("kind") == "Node" for r in s["metadata"].get("ownerReferences") or []))
        for name, obj in names.items():
            if name not in mine:
                self.store.create("resourceslices", obj)
            elif mine[name]["spec"].get("devices") != obj["spec"]["devices"]:
                generation = ((mine[name]["spec"].get("pool") or {}).get("generation") or 0) + 1

                def republish(live, devices=obj["spec"]["devices"], generation=generation):
                    live["spec"]["devices"] = devices
                    live["spec"]["pool"] = dict(live["spec"].get("pool") or {}, generation=generation)

                self.store.mutate("resourceslices", None, name, republish)
        for name in mine:
            if name not in names:
                self.store.delete("resourceslices", None, name)
