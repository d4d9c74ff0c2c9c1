# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control plane and node agents of the simulated cluster: one worker thread and its informer cache.

One worker thread plays, against the in-memory Store, the parts of a cluster that are not the apiserver:

- the kubelet of each configured node (kubelets.py: the shared kubelet core of tests/support/kubelet_core.py on the
  Store), with the DRA drivers' kubelet plugins (kubelets.KubeletPlugins, a thread of their own);
- the node lifecycle controller and the garbage collector of DaemonSet pods (node_lifecycle.py);
- the DaemonSet controller (daemonsets.py);
- a scheduler whose FailedScheduling messages match kube-scheduler 1.32 (scheduler.py).

The worker is driven by Store.subscribe events plus timers; it keeps an informer-like cache of nodes, pods and
daemonsets so that a pass costs no copies. Every write is a Store.mutate (read-modify-write under the store lock),
so concurrent API writes are never lost.

Configuration knobs read here besides the shared ones (sync_interval, pod_start_delay, device_plugins, nodes):
heartbeat_interval (default 10 s: a kubelet with nothing new to report writes its heartbeat at this cadence, not at
every sync), pod_stop_delay (default pod_start_delay), device_plugin_stop_grace (default 2 s).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import heapq
import itertools
import json
import logging
import threading
import time

from tests.support.kubelet_core import KubeletCore, served_by

from .config import load_config
from .daemonsets import DaemonSetMixin
from .kubelets import KubeletMixin
from .node_lifecycle import NodeLifecycleMixin
from .objutil import _key, _meta, controller_ref, is_extended_resource, parse_quantity, pod_terminal
from .scheduler import SchedulerMixin
from .store import StoreError

__all__ = ["Controllers", "is_extended_resource", "parse_quantity"]

LOG = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_INTERVAL = 10.0


class Controllers(KubeletMixin, NodeLifecycleMixin, DaemonSetMixin, SchedulerMixin):
    """Kubelets, node lifecycle, DaemonSet controller, garbage collector and scheduler."""

    WATCHED = ("nodes", "pods", "daemonsets", "resourceclaims", "deviceclasses")

    def __init__(self, store, config=None, kubelets=True):
        self.store = store
        self.config = load_config(config)
        # kubelets=False: the configured nodes' kubelets run outside (the kubelet stand-in, through the API), and
        # this worker is the control plane alone: node lifecycle, garbage collector, DaemonSet controller, scheduler
        self.kubelets_in_process = bool(kubelets)
        if not self.kubelets_in_process:
            self.config = dict(self.config, nodes=[])
        self.sync_interval = max(float(self.config["sync_interval"]), 0.01)
        self.heartbeat_interval = max(float(self.config.get("heartbeat_interval", DEFAULT_HEARTBEAT_INTERVAL)),
                                      self.sync_interval)
        # the kubelets' state and rules (tests/support/kubelet_core.py), shared with the DRA kubelet plugins
        self.kubelet = KubeletCore(self.config)
        self.node_configs = self.kubelet.node_configs

        self._cond = threading.Condition(threading.RLock())
        self._stopping = False
        self._thread = None
        self._cache = dict((r, {}) for r in self.WATCHED)
        self._cache_rv = dict((r, {}) for r in self.WATCHED)
        self._node_sig = {}
        self._cluster_gen = 0             # bumps whenever a scheduling decision could change
        self._dirty_pods = set()
        self._dirty_nodes = set()
        self._dirty_ds = set()
        self._gc_uids = set()
        self._sched_dirty = False
        self._timers = []
        self._timer_keys = set()
        self._seq = itertools.count()
        self._next_heartbeat = {}
        self._next_tick = 0.0
        self._pending_order = {}          # pod uid -> arrival number (scheduling queue order)
        self._unschedulable = {}          # pod uid -> (cluster_gen, spec json, message) last verdict
        self.errors = []                  # exceptions raised inside the worker (tests assert it stays empty)

    @property
    def inventory(self):
        """node -> {resource or inventory key: count}: what each configured node has (the kubelet core's)."""
        return self.kubelet.inventory

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.store.graceful_pod_delete = True
        self.store.subscribe(self._on_event)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self._create_ignore_exists("namespaces", {
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        now = time.monotonic()
        count = max(len(self.node_configs), 1)
        for i, (name, cfg) in enumerate(self.node_configs.items()):
            self._create_ignore_exists("nodes", self._node_object(cfg))
            # stagger heartbeats so 500 nodes do not all write in the same pass
            self._next_heartbeat[name] = now + self.heartbeat_interval * (i + 1) / count
        # prime the cache with what already exists (events that raced the list win by resourceVersion)
        for resource in self.WATCHED:
            items, _rv = self.store.list(resource)
            for obj in items:
                self._on_event("ADDED", resource, obj)
        for name, cfg in self.node_configs.items():
            if cfg.get("unreachable"):
                self.set_node_unreachable(name, True)
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="simcluster-controllers", daemon=True)
        self._thread.start()

    def stop(self):
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.store.unsubscribe(self._on_event)

    def _create_ignore_exists(self, resource, obj):
        try:
            return self.store.create(resource, obj)
        except StoreError as err:
            if err.code != 409:
                raise
            return None

    # ------------------------------------------------------------ event intake (writer's thread)

    def _on_event(self, event_type, resource, obj):
        if resource not in self.WATCHED:
            return
        key = _key(obj)
        try:
            rv = int(_meta(obj).get("resourceVersion") or 0)
        except ValueError:
            rv = 0
        with self._cond:
            if rv and rv <= self._cache_rv[resource].get(key, 0):
                return      # an older write's notification arriving late
            self._cache_rv[resource][key] = rv
            old = self._cache[resource].get(key)
            if event_type == "DELETED":
                self._cache[resource].pop(key, None)
            else:
                self._cache[resource][key] = obj
            getattr(self, "_intake_" + resource)(event_type, key, old, obj)
            self._cond.notify_all()
        if resource == "nodes" and event_type != "DELETED":
            self._taint_node(obj)

    def _intake_nodes(self, event_type, key, old, obj):
        name = key[1]
        self._dirty_nodes.add(name)
        sig = None
        if event_type != "DELETED":
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            sig = json.dumps([_meta(obj).get("labels"), spec.get("taints"), spec.get("unschedulable"),
                              status.get("allocatable")], sort_keys=True)
        if self._node_sig.get(name) != sig:
            if sig is None:
                self._node_sig.pop(name, None)
            else:
                self._node_sig[name] = sig
            self._cluster_gen += 1
            self._sched_dirty = True
            self._dirty_ds.update(self._cache["daemonsets"].keys())

    def _intake_pods(self, event_type, key, old, obj):
        self._dirty_pods.add(key)
        if event_type == "DELETED":
            self.kubelet.forget(_meta(obj).get("uid"))
        for pod in (old, obj):
            if pod is None:
                continue
            ref = controller_ref(pod)
            if ref and ref.get("kind") == "DaemonSet":
                self._dirty_ds.add((key[0], ref.get("name")))
            node = (pod.get("spec") or {}).get("nodeName")
            if node and served_by(pod, self.kubelet.device_plugins):
                self._dirty_nodes.add(node)
        new_spec = obj.get("spec") or {}
        if event_type != "DELETED" and not new_spec.get("nodeName"):
            self._sched_dirty = True
        was_using = old is not None and (old.get("spec") or {}).get("nodeName") and not pod_terminal(old)
        now_using = event_type != "DELETED" and new_spec.get("nodeName") and not pod_terminal(obj)
        if was_using and not now_using:
            # resources were freed: pending pods deserve another try
            self._cluster_gen += 1
            self._sched_dirty = True

    def _intake_resourceclaims(self, event_type, key, old, obj):
        # a claim deleted or deallocated frees devices: pending pods deserve another try (kube-scheduler's
        # DynamicResources registers ResourceClaim events; dra_allocation.py)
        if event_type == "DELETED" or ((old or {}).get("status") or {}).get("allocation") and not (
                (obj.get("status") or {}).get("allocation")):
            self._cluster_gen += 1
            self._sched_dirty = True

    def _intake_deviceclasses(self, event_type, key, old, obj):
        # DynamicResources registers DeviceClass events: a pod refused for a missing class gets another try (dra_allocation.py)
        self._cluster_gen += 1
        self._sched_dirty = True

    def _intake_daemonsets(self, event_type, key, old, obj):
        self._dirty_ds.add(key)
        if event_type == "DELETED":
            self._gc_uids.add(_meta(obj).get("uid"))

    # ------------------------------------------------------------ worker

    def _add_timer(self, delay, kind, key):
        with self._cond:
            if (kind, key) in self._timer_keys:
                return
            self._timer_keys.add((kind, key))
            heapq.heappush(self._timers, (time.monotonic() + max(delay, 0.0), next(self._seq), kind, key))
            self._cond.notify_all()

    def _record_error(self, err):
        LOG.exception("simcluster controller error: %s", err)
        self.errors.append(err)

    def _run(self):
        while True:
            with self._cond:
                while not self._stopping:
                    now = time.monotonic()
                    if (self._dirty_pods or self._dirty_nodes or self._dirty_ds or self._gc_uids
                            or self._sched_dirty or now >= self._next_tick
                            or (self._timers and self._timers[0][0] <= now)):
                        break
                    wake = self._next_tick
                    if self._timers:
                        wake = min(wake, self._timers[0][0])
                    self._cond.wait(max(wake - now, 0.001))
                if self._stopping:
                    return
                now = time.monotonic()
                due = []
                while self._timers and self._timers[0][0] <= now:
                    _due, _seq, kind, key = heapq.heappop(self._timers)
                    self._timer_keys.discard((kind, key))
                    due.append((kind, key))
                tick = now >= self._next_tick
                if tick:
                    self._next_tick = now + self.sync_interval
                pods, self._dirty_pods = self._dirty_pods, set()
                nodes, self._dirty_nodes = self._dirty_nodes, set()
                gc_uids, self._gc_uids = self._gc_uids, set()
                sched, self._sched_dirty = self._sched_dirty, False
            try:
                self._process(due, tick, pods, nodes, gc_uids, sched)
            except Exception as err:  # pylint: disable=broad-except
                self._record_error(err)

    def _snapshot(self, resource):
        with self._cond:
            return dict(self._cache[resource])

    def _process(self, due, tick, pods, nodes, gc_uids, sched):
        for kind, key in due:
            self._guard(getattr(self, "_timer_" + kind), key)
        if gc_uids:
            self._guard(self._collect_garbage, gc_uids)
        if pods:
            snapshot = self._snapshot("pods")
            for key in sorted(pods, key=lambda k: (k[0] or "", k[1] or "")):
                self._guard(self._kubelet_pod, key, snapshot.get(key))
        if nodes:
            by_node = {}
            for pod in self._snapshot("pods").values():
                by_node.setdefault((pod.get("spec") or {}).get("nodeName"), []).append(pod)
            for name in sorted(nodes):
                self._guard(self._plugin_sync, name, by_node.get(name, []))
        if tick:
            self._guard(self._kubelet_tick)
        with self._cond:
            dss, self._dirty_ds = self._dirty_ds, set()
        for key in sorted(dss, key=lambda k: (k[0] or "", k[1] or "")):
            self._guard(self._sync_daemonset, key)
        if sched:
            self._guard(self._schedule)

    def _guard(self, fn, *args):
        try:
            fn(*args)
        except Exception as err:  # pylint: disable=broad-except
            self._record_error(err)

    def _reachable(self, node_name):
        return self.kubelet.reachable(node_name)
