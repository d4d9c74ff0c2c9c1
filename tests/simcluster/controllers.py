# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control plane and node agents of the simulated cluster.

One worker thread plays, against the in-memory Store, the parts of a cluster that are not the
apiserver: a kubelet per configured node (heartbeat, extended resources copied from capacity to
allocatable, pods started and stopped, device plugins registering their resources), the node
lifecycle controller (unreachable nodes), the DaemonSet controller, the garbage collector for
DaemonSet pods, and a scheduler whose FailedScheduling messages match kube-scheduler 1.32.

The worker is driven by Store.subscribe events plus timers; it keeps an informer-like cache
of nodes, pods and daemonsets so that a pass costs no copies. Every write is a Store.mutate
(read-modify-write under the store lock), so concurrent API writes are never lost.

Compressed time, on purpose: an unreachable node is marked Ready=Unknown and tainted at once
(a real node lifecycle controller waits about 50 s), pods on it are not evicted (real: 300 s),
and a pod's graceful termination takes pod_stop_delay instead of up to 30 s.

Configuration knobs read here besides the shared ones (sync_interval, pod_start_delay,
device_plugins, nodes): heartbeat_interval (default 10 s: a kubelet with nothing new to report
writes its heartbeat at this cadence, not at every sync), pod_stop_delay (default pod_start_delay),
taint_new_nodes (default true: a node created through the API without Ready=True gets
node.kubernetes.io/not-ready:NoSchedule, as the node lifecycle controller does).

Not simulated: DaemonSet maxSurge (rollouts always go by maxUnavailable), pod priority and
preemption (every pod has the same priority, so preemption never finds a victim), eviction of
pods from unreachable nodes, ControllerRevision objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import hashlib
import heapq
import itertools
import json
import logging
import random
import re
import threading
import time

from .config import load_config
from . import dra_allocation as dra  # DRA claims in the scheduler (DynamicResources filter, allocation before binding)
from .quantity import quantity_amount as parse_quantity
from .store import StoreError, missing_runtime_class, now_rfc3339


LOG = logging.getLogger(__name__)

KUBELET_VERSION = "v1.32.2"
CONTAINER_RUNTIME_VERSION = "containerd://1.7.24"
DEFAULT_HEARTBEAT_INTERVAL = 10.0
RESOURCES_ANNOTATION = "devices.kubehw.io/resources"
SCHEDULER_NAME = "default-scheduler"

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

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

# Image-pull style failures leave the pod Pending; a crash loop leaves it Running but never ready.
PENDING_FAILURES = frozenset(["ImagePullBackOff", "ErrImagePull", "ContainerCreating", "InvalidImageName",
                              "CreateContainerConfigError", "CreateContainerError", "RunContainerError"])

# Alphabet of k8s.io/apimachinery rand.String: no vowels, no confusable characters.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# ---------------------------------------------------------------- small helpers

def is_extended_resource(name):
    """v1helper.IsExtendedResourceName: fully qualified, outside kubernetes.io, valid as requests.<name>."""
    if name.count("/") != 1:
        return False
    domain, short = name.split("/")
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    if not domain or len(domain) > 253 or not _DNS_SUBDOMAIN.match(domain):
        return False
    if not short or len(short) > 63 or not _QUALIFIED_NAME.match(short):
        return False
    return bool(_DNS_SUBDOMAIN.match("requests." + domain))


def _rfc3339_to_epoch(text):
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return 0.0


def random_suffix(n=5):
    return "".join(random.choice(NAME_ALPHABET) for _i in range(n))


def template_hash(template, collision_count=0):
    """A stable controller-revision-hash for a pod template (fnv-1a over its canonical JSON)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode("utf-8")
    h = 0x811C9DC5
    for byte in data + str(collision_count or 0).encode("ascii"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    # encoded like apimachinery's SafeEncodeString so it looks like a real hash label
    return "".join(NAME_ALPHABET[ord(c) % len(NAME_ALPHABET)] for c in str(h))


def _meta(obj):
    return obj.get("metadata") or {}


def _key(obj):
    meta = _meta(obj)
    return (meta.get("namespace"), meta.get("name"))


def _condition(obj, ctype):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def pod_ready(pod):
    cond = _condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True")


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def controller_ref(obj):
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def pod_requests(pod):
    """Effective requests (as Fractions): max(sum of containers, each init container) + overhead.

    A resource with a limit but no request counts the limit, as apiserver defaulting does.
    """
    def container_requests(container):
        res = container.get("resources") or {}
        out = dict((k, parse_quantity(v)) for k, v in (res.get("limits") or {}).items())
        out.update((k, parse_quantity(v)) for k, v in (res.get("requests") or {}).items())
        return out

    spec = pod.get("spec") or {}
    total = {}
    for container in spec.get("containers") or []:
        for k, v in container_requests(container).items():
            total[k] = total.get(k, 0) + v
    for container in spec.get("initContainers") or []:
        for k, v in container_requests(container).items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return total


def served_by(pod, device_plugins):
    """Extended resources a (device plugin) pod serves: its annotation, else what device_plugins (image substring ->
    resource names) says of its images. The simulated kubelets and the kubelet stand-in share it."""
    note = (_meta(pod).get("annotations") or {}).get(RESOURCES_ANNOTATION)
    if note:
        return set(r.strip() for r in note.split(",") if r.strip())
    served = set()
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        image = container.get("image") or ""
        for needle, resources in device_plugins.items():
            if needle and needle in image:
                served.update(resources)
    return served


def toleration_tolerates(tol, taint):
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    if tol.get("key") and tol.get("key") != taint.get("key"):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    return (tol.get("value") or "") == (taint.get("value") or "")


def first_untolerated_taint(taints, tolerations, effects):
    for taint in taints or []:
        if taint.get("effect") not in effects:
            continue
        if not any(toleration_tolerates(t, taint) for t in tolerations or []):
            return taint
    return None


def _match_requirement(req, value, present):
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def node_matches_affinity(pod_spec, node):
    """nodeSelector and required node affinity (NodeAffinity filter / DaemonSet predicates)."""
    labels = _meta(node).get("labels") or {}
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    fields = {"metadata.name": _meta(node).get("name")}
    for term in required.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue    # an empty term matches no node
        if all(_match_requirement(e, labels.get(e.get("key")), e.get("key") in labels) for e in exprs) and \
                all(_match_requirement(e, fields.get(e.get("key")), e.get("key") in fields) for e in field_exprs):
            return True
    return False


# ---------------------------------------------------------------- Controllers

class Controllers:
    """Kubelets, node lifecycle, DaemonSet controller, garbage collector and scheduler."""

    WATCHED = ("nodes", "pods", "daemonsets", "resourceclaims", "deviceclasses")

    def __init__(self, store, config=None):
        self.store = store
        self.config = load_config(config)
        self.sync_interval = max(float(self.config["sync_interval"]), 0.01)
        self.pod_start_delay = float(self.config["pod_start_delay"])
        self.pod_stop_delay = float(self.config.get("pod_stop_delay", self.pod_start_delay))
        self.heartbeat_interval = max(float(self.config.get("heartbeat_interval", DEFAULT_HEARTBEAT_INTERVAL)),
                                      self.sync_interval)
        self.taint_new_nodes = bool(self.config.get("taint_new_nodes", True))
        self.device_plugins = dict(self.config.get("device_plugins") or {})
        # The kubelet's device manager keeps a stopped plugin's resource for endpointStopGracePeriod (5 minutes,
        # pkg/kubelet/cm/devicemanager/types.go, v1.32): its devices turn unhealthy at once (allocatable 0,
        # capacity still counts them), and once the period is over the next node status writes "0" to both
        # (GetCapacity's deleted resources, nodestatus.MachineInfo). Compressed here like the other delays.
        self.plugin_stop_grace = float(self.config.get("device_plugin_stop_grace", 2.0))
        self.node_configs = dict((n["name"], n) for n in self.config.get("nodes") or [])
        self.inventory = dict((n["name"], dict(n.get("inventory") or {})) for n in self.node_configs.values())
        self._node_index = dict((name, i) for i, name in enumerate(self.node_configs))

        self._cond = threading.Condition(threading.RLock())
        self._stopping = False
        self._thread = None
        self._unreachable = set()
        self._fail = {}                   # node -> waiting reason
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
        self._served = {}                 # node -> resources a plugin registered there
        self._stopped = {}                # node -> {resource: monotonic time its plugin went away}
        self._pending_order = {}          # pod uid -> arrival number (scheduling queue order)
        self._unschedulable = {}          # pod uid -> (cluster_gen, spec json, message) last verdict
        self._seen_bound = {}             # pod uid -> monotonic time the kubelet first saw it
        self._ip_counter = itertools.count(2)
        self.errors = []                  # exceptions raised inside the worker (tests assert it stays empty)

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

    def _node_object(self, cfg):
        name = cfg["name"]
        idx = self._node_index.get(name, 0)
        ip = "10.0.%d.%d" % (idx // 250, idx % 250 + 2)
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }
        labels.update(cfg.get("labels") or {})
        stamp = now_rfc3339()
        node = {
            "metadata": {"name": name, "labels": labels,
                         "annotations": dict(cfg.get("annotations") or {})},
            "spec": {"podCIDR": "10.244.%d.0/24" % idx, "podCIDRs": ["10.244.%d.0/24" % idx]},
            "status": {
                "conditions": self._conditions(stamp, stamp, ready=True),
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": hashlib.md5(name.encode()).hexdigest(),
                    "systemUUID": str(hashlib.md5(("uuid" + name).encode()).hexdigest()),
                    "bootID": hashlib.md5(("boot" + name).encode()).hexdigest(),
                    "kernelVersion": "6.1.0-28-amd64",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }
        if not node["metadata"]["annotations"]:
            del node["metadata"]["annotations"]
        if cfg.get("taints"):
            node["spec"]["taints"] = copy.deepcopy(cfg["taints"])
        if not cfg.get("without_capacity"):
            node["status"]["capacity"] = dict(cfg.get("capacity") or {})
            node["status"]["allocatable"] = dict(cfg.get("capacity") or {})
        return node

    @staticmethod
    def _conditions(heartbeat, transition, ready):
        if ready:
            rows = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
        else:
            rows = [(t, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
                    for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")]
        return [{"type": t, "status": s, "reason": r, "message": m,
                 "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition} for t, s, r, m in rows]

    # ------------------------------------------------------------ public knobs

    def set_node_unreachable(self, name, unreachable=True):
        """Stop (or resume) the node's kubelet; the node lifecycle verdict is applied at once."""
        with self._cond:
            if unreachable:
                self._unreachable.add(name)
            else:
                self._unreachable.discard(name)
        stamp = now_rfc3339()

        def fn(node):
            status = node.setdefault("status", {})
            conds = status.get("conditions") or []
            heartbeat = (_condition(node, "Ready") or {}).get("lastHeartbeatTime") or stamp
            ready_now = (_condition(node, "Ready") or {}).get("status") == "True"
            if unreachable:
                if not conds or (_condition(node, "Ready") or {}).get("status") != "Unknown":
                    status["conditions"] = self._conditions(heartbeat, stamp, ready=False)
                taints = [t for t in node.get("spec", {}).get("taints") or [] if t.get("key") != TAINT_UNREACHABLE]
                taints.append({"key": TAINT_UNREACHABLE, "effect": "NoSchedule"})
                taints.append({"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp})
                node.setdefault("spec", {})["taints"] = taints
            else:
                status["conditions"] = self._conditions(stamp, heartbeat if ready_now else stamp, ready=True)
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

    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        """Pods on node (existing and future) never become ready; containers wait with reason."""
        with self._cond:
            self._fail[node] = reason
            self._mark_node_pods_dirty(node)
            self._cond.notify_all()

    def allow_pod_start(self, node):
        """Undo fail_pod_start: the node's pods start normally again."""
        with self._cond:
            self._fail.pop(node, None)
            self._mark_node_pods_dirty(node)
            self._cond.notify_all()

    def _mark_node_pods_dirty(self, node):
        for key, pod in self._cache["pods"].items():
            if (pod.get("spec") or {}).get("nodeName") == node:
                self._dirty_pods.add(key)

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
        if resource == "nodes" and event_type == "ADDED" and self.taint_new_nodes:
            self._taint_new_node(obj)
        if resource == "nodes" and event_type != "DELETED":
            self._taint_unschedulable(obj)
            self._untaint_ready_node(obj)

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
            self._seen_bound.pop(_meta(obj).get("uid"), None)
        for pod in (old, obj):
            if pod is None:
                continue
            ref = controller_ref(pod)
            if ref and ref.get("kind") == "DaemonSet":
                self._dirty_ds.add((key[0], ref.get("name")))
            node = (pod.get("spec") or {}).get("nodeName")
            if node and self._served_by(pod):
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
        # DynamicResources registers ResourceClaim events; dra.py)
        if event_type == "DELETED" or ((old or {}).get("status") or {}).get("allocation") and not (
                (obj.get("status") or {}).get("allocation")):
            self._cluster_gen += 1
            self._sched_dirty = True

    def _intake_deviceclasses(self, event_type, key, old, obj):
        # DynamicResources registers DeviceClass events: a pod refused for a missing class gets another try (dra.py)
        self._cluster_gen += 1
        self._sched_dirty = True

    def _intake_daemonsets(self, event_type, key, old, obj):
        self._dirty_ds.add(key)
        if event_type == "DELETED":
            self._gc_uids.add(_meta(obj).get("uid"))

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
        return node_name not in self._unreachable

    # ------------------------------------------------------------ kubelet: node status

    def _kubelet_tick(self):
        """Every sync_interval: copy extended resources to allocatable; heartbeat at its own cadence."""
        now = time.monotonic()
        nodes = self._snapshot("nodes")
        for name in self.node_configs:
            node = nodes.get((None, name))
            if node is None or not self._reachable(name):
                continue
            heartbeat_due = now >= self._next_heartbeat.get(name, 0)
            if not heartbeat_due and not self._allocatable_differs(node, self._stopped.get(name)) and \
                    (_condition(node, "Ready") or {}).get("status") == "True":
                continue
            if heartbeat_due:
                self._next_heartbeat[name] = now + self.heartbeat_interval
            self.store.mutate("nodes", None, name, self._kubelet_status_fn(name, heartbeat_due))

    @staticmethod
    def _allocatable_differs(node, unhealthy=None):
        status = node.get("status") or {}
        capacity = status.get("capacity") or {}
        allocatable = status.get("allocatable") or {}
        for k, v in capacity.items():
            if is_extended_resource(k) and allocatable.get(k) != ("0" if k in (unhealthy or {}) else v):
                return True
        for k in allocatable:
            if is_extended_resource(k) and k not in capacity:
                return True
        return False

    def _kubelet_status_fn(self, name, heartbeat):
        stamp = now_rfc3339()

        def fn(node):
            if not self._reachable(name):
                return      # the node went away between the decision and the write
            status = node.setdefault("status", {})
            capacity = status.get("capacity") or {}
            allocatable = status.get("allocatable")
            wanted = dict((k, v) for k, v in capacity.items() if is_extended_resource(k))
            if wanted or allocatable:
                allocatable = dict(allocatable or {})
                for k in [k for k in allocatable if is_extended_resource(k) and k not in capacity]:
                    del allocatable[k]
                allocatable.update(wanted)
                for k in self._stopped.get(name) or {}:
                    if k in allocatable:
                        allocatable[k] = "0"    # a stopped plugin's devices are unhealthy
                if allocatable:
                    status["allocatable"] = allocatable
                else:
                    status.pop("allocatable", None)
            ready = _condition(node, "Ready")
            if ready is None or ready.get("status") != "True":
                status["conditions"] = self._conditions(stamp, stamp, ready=True)
            elif heartbeat:
                for cond in status.get("conditions") or []:
                    cond["lastHeartbeatTime"] = stamp
        return fn

    # ------------------------------------------------------------ kubelet: device plugins

    def _served_by(self, pod):
        return served_by(pod, self.device_plugins)

    def _plugin_sync(self, name, pods):
        """Plugins running on a node register their resources; a vanished plugin's resource is unhealthy for the
        stop grace period (allocatable 0, capacity kept), then drops to "0" in both, as the kubelet writes it."""
        if name not in self.node_configs or not self._reachable(name):
            return
        node = self._snapshot("nodes").get((None, name))
        if node is None:
            return
        serving = set()
        for pod in pods:
            if _meta(pod).get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") == "Running" and pod_ready(pod):
                serving |= self._served_by(pod)
        inventory = self.inventory.get(name, {})
        registered = set(r for r in serving if r in inventory)
        now = time.monotonic()
        stopped = self._stopped.setdefault(name, {})
        for r in self._served.get(name, set()) - registered:
            stopped.setdefault(r, now)
        for r in registered:
            stopped.pop(r, None)
        unhealthy = set(r for r, t in stopped.items() if now - t < self.plugin_stop_grace)
        gone = set(stopped) - unhealthy
        for r in gone:
            del stopped[r]          # the device manager forgets it: it never writes the key again
        if unhealthy:
            self._add_timer(min(stopped[r] for r in unhealthy) + self.plugin_stop_grace - now + 0.05, "plugin", name)
        capacity = (node.get("status") or {}).get("capacity") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        needs = any(capacity.get(r) != str(inventory[r]) for r in registered) or \
            any(allocatable.get(r) not in (None, "0") for r in unhealthy) or \
            any(capacity.get(r) != "0" or allocatable.get(r) != "0" for r in gone)
        self._served[name] = registered | unhealthy
        if not needs:
            return

        def fn(obj):
            status = obj.setdefault("status", {})
            cap = dict(status.get("capacity") or {})
            for r in registered:
                cap[r] = str(inventory[r])
            alloc = status.get("allocatable")
            for r in unhealthy:
                if r in (alloc or {}):
                    alloc = dict(alloc)
                    alloc[r] = "0"
            for r in gone:
                cap[r] = "0"
                alloc = dict(alloc or {})
                alloc[r] = "0"
            status["capacity"] = cap
            if alloc is not None:
                status["allocatable"] = alloc

        self.store.mutate("nodes", None, name, fn)

    # ------------------------------------------------------------ kubelet: pods

    def _kubelet_pod(self, key, pod):
        if pod is None:
            return
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, _meta(pod)
        node = spec.get("nodeName")
        uid = meta.get("uid")
        if not node:
            return
        if node not in self.node_configs:
            # no kubelet there (a node made through the API): a deleted pod goes at once
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self._remove_pod(key, uid)
            return
        if meta.get("deletionTimestamp"):
            if self._reachable(node) and not meta.get("finalizers"):
                self._add_timer(self.pod_stop_delay, "remove", key + (uid,))
            return
        if pod_terminal(pod):
            return
        if not self._reachable(node):
            if pod_ready(pod):
                self.store.mutate("pods", key[0], key[1], self._not_ready_fn(uid))
            return
        reason = self._fail.get(node)
        if reason:
            self.store.mutate("pods", key[0], key[1], self._failing_fn(uid, node, reason))
            return
        phase = status.get("phase") or "Pending"
        if phase == "Pending":
            if not status.get("containerStatuses"):
                self.store.mutate("pods", key[0], key[1], self._creating_fn(uid, node))
            first = self._seen_bound.setdefault(uid, time.monotonic())
            self._add_timer(first + self.pod_start_delay - time.monotonic(), "start", key + (uid,))
        elif phase == "Running":
            if not pod_ready(pod):
                self.store.mutate("pods", key[0], key[1], self._running_fn(uid, node))
            elif self._runs_to_completion(pod):
                self._add_timer(max(self.pod_start_delay, 0.05), "complete", key + (uid,))

    @staticmethod
    def _runs_to_completion(pod):
        spec = pod.get("spec") or {}
        ref = controller_ref(pod)
        if ref and ref.get("kind") == "DaemonSet":
            return False
        return spec.get("restartPolicy") == "Never" and \
            any(c.get("command") for c in spec.get("containers") or [])

    def _remove_pod(self, key, uid):
        current = self.store.get("pods", key[0], key[1])
        if current is not None and _meta(current).get("uid") == uid:
            self.store.delete("pods", key[0], key[1])
        self._seen_bound.pop(uid, None)

    def _timer_remove(self, key):
        ns, name, uid = key
        pod = self._snapshot("pods").get((ns, name))
        if pod is None or _meta(pod).get("uid") != uid or not _meta(pod).get("deletionTimestamp"):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not self._reachable(node):
            return      # a dead kubelet never confirms the deletion: the pod stays Terminating
        if _meta(pod).get("finalizers"):
            return
        self._remove_pod((ns, name), uid)

    def _timer_start(self, key):
        ns, name, uid = key
        pod = self._snapshot("pods").get((ns, name))
        if pod is None or _meta(pod).get("uid") != uid or _meta(pod).get("deletionTimestamp"):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not self._reachable(node) or node in self._fail:
            return
        if ((pod.get("status") or {}).get("phase") or "Pending") != "Pending":
            return
        self.store.mutate("pods", ns, name, self._running_fn(uid, node))

    def _timer_complete(self, key):
        ns, name, uid = key
        pod = self._snapshot("pods").get((ns, name))
        if pod is None or _meta(pod).get("uid") != uid or _meta(pod).get("deletionTimestamp"):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not self._reachable(node) or (pod.get("status") or {}).get("phase") != "Running":
            return
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid or (obj.get("status") or {}).get("phase") != "Running":
                return
            status = obj["status"]
            status["phase"] = "Succeeded"
            status["conditions"] = self._pod_conditions(obj, stamp, ready=False, reason="PodCompleted")
            statuses = []
            for cs in status.get("containerStatuses") or []:
                started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or stamp
                cs = dict(cs, ready=False, started=False)
                cs["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                              "finishedAt": stamp, "containerID": cs.get("containerID")}}
                statuses.append(cs)
            status["containerStatuses"] = statuses

        self.store.mutate("pods", ns, name, fn)

    def _timer_plugin(self, name):
        with self._cond:
            self._dirty_nodes.add(name)

    def _timer_ds(self, key):
        with self._cond:
            self._dirty_ds.add(key)

    def _pod_ip(self, node, pod):
        if (pod.get("spec") or {}).get("hostNetwork"):
            return self._node_ip(node)
        n = next(self._ip_counter)
        return "10.244.%d.%d" % (self._node_index.get(node, 0), n % 250 + 2)

    def _node_ip(self, node):
        idx = self._node_index.get(node, 0)
        return "10.0.%d.%d" % (idx // 250, idx % 250 + 2)

    @staticmethod
    def _pod_conditions(pod, stamp, ready, reason=None, message=None):
        old = dict((c.get("type"), c) for c in (pod.get("status") or {}).get("conditions") or [])
        out = []
        for ctype, value in (("PodReadyToStartContainers", "True"), ("Initialized", "True"),
                             ("Ready", "True" if ready else "False"),
                             ("ContainersReady", "True" if ready else "False"), ("PodScheduled", "True")):
            cond = {"type": ctype, "status": value, "lastProbeTime": None}
            prev = old.get(ctype)
            cond["lastTransitionTime"] = prev.get("lastTransitionTime") if prev and prev.get("status") == value \
                and prev.get("lastTransitionTime") else stamp
            if value == "False" and ctype in ("Ready", "ContainersReady"):
                cond["reason"] = reason or "ContainersNotReady"
                if message:
                    cond["message"] = message
            out.append(cond)
        return out

    def _base_status(self, obj, node, stamp):
        status = obj.setdefault("status", {})
        status["hostIP"] = self._node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        if not status.get("podIP"):
            status["podIP"] = self._pod_ip(node, obj)
            status["podIPs"] = [{"ip": status["podIP"]}]
        status.setdefault("startTime", stamp)
        status.setdefault("qosClass", self._qos_class(obj))     # set once at admission, immutable after
        return status

    @staticmethod
    def _qos_class(pod):
        containers = (pod.get("spec") or {}).get("containers") or []
        any_set, guaranteed = False, True
        for c in containers:
            res = c.get("resources") or {}
            limits, requests = res.get("limits") or {}, res.get("requests") or {}
            if limits or requests:
                any_set = True
            for r in ("cpu", "memory"):
                if r not in limits or parse_quantity(requests.get(r, limits.get(r))) != parse_quantity(limits[r]):
                    guaranteed = False
        if not any_set:
            return "BestEffort"
        return "Guaranteed" if guaranteed else "Burstable"

    def _creating_fn(self, uid, node):
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid or (obj.get("status") or {}).get("containerStatuses"):
                return
            status = self._base_status(obj, node, stamp)
            status["phase"] = "Pending"
            names = [c.get("name") for c in (obj.get("spec") or {}).get("containers") or []]
            status["conditions"] = self._pod_conditions(
                obj, stamp, ready=False, message="containers with unready status: [%s]" % " ".join(names))
            status["containerStatuses"] = [
                {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False, "started": False,
                 "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
                for c in (obj.get("spec") or {}).get("containers") or []]
        return fn

    def _running_fn(self, uid, node):
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid or _meta(obj).get("deletionTimestamp"):
                return
            if not self._reachable(node) or node in self._fail:
                return
            status = self._base_status(obj, node, stamp)
            status["phase"] = "Running"
            status["conditions"] = self._pod_conditions(obj, stamp, ready=True)
            old = dict((cs.get("name"), cs) for cs in status.get("containerStatuses") or [])
            statuses = []
            for c in (obj.get("spec") or {}).get("containers") or []:
                prev = old.get(c.get("name")) or {}
                running = (prev.get("state") or {}).get("running")
                digest = hashlib.sha256((c.get("image") or "").encode()).hexdigest()
                statuses.append({
                    "name": c.get("name"), "image": c.get("image"),
                    "imageID": "%s@sha256:%s" % ((c.get("image") or "").split(":")[0], digest),
                    "containerID": prev.get("containerID") or "containerd://" + hashlib.sha256(
                        ("%s/%s" % (uid, c.get("name"))).encode()).hexdigest(),
                    "ready": True, "started": True, "restartCount": prev.get("restartCount", 0),
                    "state": {"running": running or {"startedAt": stamp}}})
            status["containerStatuses"] = statuses
        return fn

    def _failing_fn(self, uid, node, reason):
        stamp = now_rfc3339()

        def fn(obj):
            if _meta(obj).get("uid") != uid or _meta(obj).get("deletionTimestamp") or pod_terminal(obj):
                return
            current = (obj.get("status") or {}).get("containerStatuses") or []
            if current and all(((cs.get("state") or {}).get("waiting") or {}).get("reason") == reason
                               for cs in current) and not pod_ready(obj):
                return      # already failing this way: rewriting would only churn timestamps
            status = self._base_status(obj, node, stamp)
            containers = (obj.get("spec") or {}).get("containers") or []
            names = " ".join(c.get("name") for c in containers)
            crash = reason not in PENDING_FAILURES
            status["phase"] = "Running" if crash else "Pending"
            status["conditions"] = self._pod_conditions(
                obj, stamp, ready=False, message="containers with unready status: [%s]" % names)
            statuses = []
            for c in containers:
                image = c.get("image") or ""
                if reason == "CrashLoopBackOff":
                    message = "back-off 10s restarting failed container=%s pod=%s_%s(%s)" % (
                        c.get("name"), _meta(obj).get("name"), _meta(obj).get("namespace"), uid)
                elif reason in ("ImagePullBackOff", "ErrImagePull"):
                    message = 'Back-off pulling image "%s"' % image
                else:
                    message = "simulated failure: %s" % reason
                cs = {"name": c.get("name"), "image": image, "imageID": "", "ready": False, "started": False,
                      "restartCount": 1 if crash else 0,
                      "state": {"waiting": {"reason": reason, "message": message}}}
                if crash:
                    cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                                      "startedAt": stamp, "finishedAt": stamp}}
                statuses.append(cs)
            status["containerStatuses"] = statuses
        return fn

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

    # ------------------------------------------------------------ DaemonSet controller

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
        pod["status"]["qosClass"] = self._qos_class(pod)
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

    # ------------------------------------------------------------ scheduler

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
                continue  # DynamicResources' PreEnqueue holds it back until its claims exist (dra.py)
            spec_sig = json.dumps(pod.get("spec"), sort_keys=True) + dra.claims_signature(self.store, pod)
            last = self._unschedulable.get(uid)
            if last and last[0] == self._cluster_gen and last[1] == spec_sig:
                continue
            feasible, statuses = [], {}
            requests = pod_requests(pod)
            # DynamicResources' PreFilter refuses the pod for every node at once (dra.py)
            refused = dra.prefilter_rejection(self.store, pod)
            for node in ([] if refused else nodes):
                name = _meta(node).get("name")
                # extended resources a DeviceClass maps and the node does not advertise are DRA's (dra.py)
                reasons, resolvable = self._filter(pod, dra.device_plugin_requests(self.store, requests, node),
                                                   node, usage.get(name))
                if not reasons:
                    reasons = dra.claim_filter_reasons(self.store, pod, name, node, requests)
                    resolvable = resolvable and not reasons  # DRA refusals are unresolvable (dra.py)
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
        if used["pods"] + 1 > int(parse_quantity(alloc.get("pods"))):
            reasons.append("Too many pods")
        if not any(v > 0 for v in requests.values()):
            return reasons, True
        for r in ("cpu", "memory", "ephemeral-storage"):
            want = requests.get(r, 0)
            if want > 0 and want > parse_quantity(alloc.get(r)) - used["requests"].get(r, 0):
                reasons.append("Insufficient %s" % r)
        for r in sorted(requests):
            if r in ("cpu", "memory", "ephemeral-storage", "pods") or requests[r] <= 0:
                continue
            if requests[r] > parse_quantity(alloc.get(r)) - used["requests"].get(r, 0):
                reasons.append("Insufficient %s" % r)
        return reasons, True

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
