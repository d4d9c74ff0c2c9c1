# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet's API-side duties: what a kubelet writes and when. The kubelet stand-in (tests/support/kubelet.py)
carries it through the API, listing and writing with status patches and updates as its own identity
(agent.kubeconfig), for the nodes of a real control plane, which has no kubelet.

What the core holds (pure functions, and KubeletCore, a small state machine per set of nodes):

- the node object a kubelet registers (labels, addresses, nodeInfo, capacity) and its conditions (Ready; Ready False
  for a node still starting; Unknown for a node whose kubelet stopped), the heartbeat, and allocatable following
  capacity for extended resources;
- a bound pod's next step (pod_step) and its status when creating, running, completed or failing, with QoS class,
  host and pod IPs, conditions and container statuses;
- a device plugin's registration: a running, ready pod whose image device_plugins names (or whose
  devices.kubehw.io/resources annotation says so) registers its resources into capacity from the node's inventory;
  a stopped plugin's devices are unhealthy for the stop grace period (allocatable "0"), then "0" in both;
- a DRA driver's ResourceSlices: a running, ready kubelet-plugin pod of a known driver image publishes one slice per
  node and driver with the node's inventory, in the driver's device shape (dra_devices.py).

Knobs: pod_start_delay, pod_stop_delay (default pod_start_delay), device_plugin_stop_grace
(default 2 s; the kubelet's endpointStopGracePeriod is 5 minutes), device_plugins, dra_drivers, and per node its
inventory and whether it starts as a node still joining (``starting``: it registers and posts Ready False until
set_starting(name, False)); fail_pod_start/allow_pod_start, set_unreachable, set_starting and set_inventory change
them while running.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import itertools

from tests.support.k8s_objects import (
    condition, controller_ref, is_extended_resource, metadata, now_rfc3339, pod_ready, pod_terminal, qos_class,
)
from tests.support.node_configs import load_config
from tests.support.dra_devices import DEFAULT_DRA_DRIVERS, resource_slice, slice_name

CONTAINER_RUNTIME_VERSION = "containerd://1.7.24"
KUBELET_VERSION = "v1.36.2"      # the reference control plane's release (../shared/k8s)
RESOURCES_ANNOTATION = "devices.kubehw.io/resources"
DEFAULT_PLUGIN_STOP_GRACE = 2.0

# Image-pull style failures leave the pod Pending; a crash loop leaves it Running but never ready.
PENDING_FAILURES = frozenset(["ImagePullBackOff", "ErrImagePull", "ContainerCreating", "InvalidImageName",
                              "CreateContainerConfigError", "CreateContainerError", "RunContainerError"])

# What pod_step asks the transport to do: write one of these statuses (status_for), or confirm a deletion.
STATUS_STEPS = ("creating", "running", "completed", "failing")
DELETE = "delete"


# ---------------------------------------------------------------- pods and plugins: pure rules

def served_by(pod, device_plugins):
    """Extended resources a (device plugin) pod serves: its annotation, else what device_plugins (image substring ->
    resource names) says of its images."""
    note = (metadata(pod).get("annotations") or {}).get(RESOURCES_ANNOTATION)
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


def serving(pod):
    """A plugin pod serves while it runs and is ready, and not once it is being deleted."""
    return not metadata(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") == "Running" and \
        pod_ready(pod)


def runs_to_completion(pod):
    """A pod that runs to completion: restartPolicy Never with a command, not a DaemonSet's."""
    spec = pod.get("spec") or {}
    ref = controller_ref(pod)
    if ref and ref.get("kind") == "DaemonSet":
        return False
    return spec.get("restartPolicy") == "Never" and any(c.get("command") for c in spec.get("containers") or [])


def pod_conditions(pod, stamp, ready, reason=None, message=None):
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


def completed_status(pod, stamp=None):
    stamp = stamp or now_rfc3339()
    status = copy.deepcopy(pod.get("status") or {})
    status["phase"] = "Succeeded"
    status["conditions"] = pod_conditions(pod, stamp, ready=False, reason="PodCompleted")
    statuses = []
    for cs in status.get("containerStatuses") or []:
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or stamp
        statuses.append(dict(cs, ready=False, started=False, state={"terminated": {
            "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": stamp,
            "containerID": cs.get("containerID")}}))
    status["containerStatuses"] = statuses
    return status


def _unready_message(pod):
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    return "containers with unready status: [%s]" % " ".join(names)


# ---------------------------------------------------------------- nodes: pure rules

def node_ip(index):
    return "10.0.%d.%d" % (index // 250, index % 250 + 2)


def node_conditions(heartbeat, transition, ready):
    """A kubelet's four node conditions; not ready: Unknown, as the node lifecycle controller writes them."""
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


def starting_conditions(heartbeat, transition):
    """What a kubelet that is up but not ready yet posts (a fresh node whose network plugin has not started)."""
    rows = node_conditions(heartbeat, transition, ready=True)
    rows[-1].update(status="False", reason="KubeletNotReady",
                    message="container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                            "message:Network plugin returns error: cni plugin not initialized")
    return rows


def posted_conditions(stamp, ready=True):
    """The conditions a kubelet posts when they change: ready, or (ready False) still starting."""
    return node_conditions(stamp, stamp, ready=True) if ready else starting_conditions(stamp, stamp)


def heartbeat_conditions(status, stamp, beat, ready=True):
    """The conditions a kubelet writes at a status update: fresh ones if Ready is not what the kubelet posts (True, or
    False while it is starting: ``ready`` False), else (on a heartbeat) the same with a new lastHeartbeatTime; None
    when there is nothing to write."""
    current = condition({"status": status}, "Ready")
    if current is None or current.get("status") != ("True" if ready else "False"):
        return posted_conditions(stamp, ready)
    if not beat:
        return None
    return [dict(c, lastHeartbeatTime=stamp) for c in status.get("conditions") or []]


def node_object(cfg, index, kubelet_version, labels=None, ready=True):
    """The Node a kubelet registers for a configured node (tests/support/node_configs.py's format): Ready, or, with
    ready False, Ready False as a kubelet posts it while it starts (the apiserver then keeps the not-ready taint)."""
    name = cfg["name"]
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    all_labels.update(labels or {})
    all_labels.update(cfg.get("labels") or {})
    stamp = now_rfc3339()
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {},
        "status": {
            "conditions": posted_conditions(stamp, ready),
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            # every field: the kubernetes client's models refuse a nodeInfo missing one
            "nodeInfo": {
                "machineID": hashlib.md5(name.encode()).hexdigest(),
                "systemUUID": str(hashlib.md5(("uuid" + name).encode()).hexdigest()),
                "bootID": hashlib.md5(("boot" + name).encode()).hexdigest(),
                "kernelVersion": "6.1.0-28-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
    if cfg.get("annotations"):
        node["metadata"]["annotations"] = dict(cfg["annotations"])
    if cfg.get("taints"):
        node["spec"]["taints"] = copy.deepcopy(cfg["taints"])
    if not cfg.get("without_capacity"):
        node["status"]["capacity"] = dict(cfg.get("capacity") or {})
        node["status"]["allocatable"] = dict(cfg.get("capacity") or {})
    return node


# ---------------------------------------------------------------- the state machine

class KubeletCore:
    """The kubelets of the configured nodes, without a transport: each transport reads the nodes and pods, asks the
    core what to write, and writes it (see the module docstring). Knob changes come from a test's thread; each is a
    single assignment, and every decision reads them once."""

    def __init__(self, config=None):
        self.config = load_config(config)
        self.node_configs = dict((n["name"], n) for n in self.config.get("nodes") or [])
        self.node_index = dict((name, i) for i, name in enumerate(self.node_configs))
        self.inventory = dict((name, dict(n.get("inventory") or {})) for name, n in self.node_configs.items())
        self.device_plugins = dict(self.config.get("device_plugins") or {})
        self.dra_drivers = dict(self.config.get("dra_drivers") or DEFAULT_DRA_DRIVERS)
        self.pod_start_delay = float(self.config["pod_start_delay"])
        self.pod_stop_delay = float(self.config.get("pod_stop_delay", self.pod_start_delay))
        self.plugin_stop_grace = float(self.config.get("device_plugin_stop_grace", DEFAULT_PLUGIN_STOP_GRACE))
        self.unreachable = set()
        # nodes whose kubelet posts Ready False (up, network not ready): no pods run
        self.starting = set(name for name, n in self.node_configs.items() if n.get("starting"))
        self.fail = {}                  # node -> waiting reason of its pods
        self._seen = {}                 # pod uid -> monotonic time the kubelet first saw it bound (Pending)
        self._running = {}              # pod uid -> monotonic time it first saw it running and ready
        self._deleting = {}             # pod uid -> monotonic time it first saw its deletionTimestamp
        self._served = {}               # node -> resources a plugin registered there
        self._stopped = {}              # node -> {resource: monotonic time its plugin went away}
        self._ip_counter = itertools.count(2)

    # ------------------------------------------------------------ knobs

    def set_unreachable(self, name, unreachable=True):
        if unreachable:
            self.unreachable.add(name)
        else:
            self.unreachable.discard(name)

    def set_starting(self, name, starting=True):
        """The node's kubelet posts Ready False, as one that has just registered and waits for its network plugin; the
        node lifecycle controller taints it not-ready, and its pods wait. False: it turns Ready."""
        if starting:
            self.starting.add(name)
        else:
            self.starting.discard(name)

    def set_fail(self, node, reason):
        """Pods on node (existing and future) never become ready, their containers waiting with reason (None: undo)."""
        if reason:
            self.fail[node] = reason
        else:
            self.fail.pop(node, None)

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost); plugins and DRA drivers publish it at their next look."""
        self.inventory.setdefault(node, {})[key] = count

    def reachable(self, name):
        return name not in self.unreachable

    def ready(self, name):
        return name not in self.starting

    def forget(self, uid):
        """A pod is gone: drop what the core remembered of it."""
        for seen in (self._seen, self._running, self._deleting):
            seen.pop(uid, None)

    def forget_all_but(self, uids):
        for seen in (self._seen, self._running, self._deleting):
            for uid in [u for u in seen if u not in uids]:
                del seen[uid]

    # ------------------------------------------------------------ nodes

    def node(self, name, kubelet_version, labels=None):
        return node_object(self.node_configs[name], self.node_index.get(name, 0), kubelet_version, labels,
                           ready=self.ready(name))

    def node_ip(self, name):
        return node_ip(self.node_index.get(name, 0))

    def allocatable(self, name, status):
        """Allocatable as the kubelet writes it: extended resources follow capacity (a stopped plugin's are "0"),
        extended ones gone from capacity go; None when the node has neither extended capacity nor allocatable."""
        capacity = status.get("capacity") or {}
        current = status.get("allocatable")
        wanted = dict((k, v) for k, v in capacity.items() if is_extended_resource(k))
        if not wanted and not current:
            return None
        out = dict(current or {})
        for k in [k for k in out if is_extended_resource(k) and k not in capacity]:
            del out[k]
        out.update(wanted)
        for k in self._stopped.get(name) or {}:
            if k in out:
                out[k] = "0"    # a stopped plugin's devices are unhealthy
        return out

    def allocatable_differs(self, name, status):
        wanted = self.allocatable(name, status)
        return wanted is not None and wanted != (status.get("allocatable") or {})

    # ------------------------------------------------------------ device plugins

    def plugin_step(self, name, pods, now):
        """Plugins running on a node register their resources; a vanished plugin's resource is unhealthy for the
        stop grace period, then gone. Returns (registered, unhealthy, gone) for plugin_status, and how many seconds
        until the grace period of an unhealthy one ends (None if none)."""
        served = set()
        for pod in pods:
            if serving(pod):
                served |= served_by(pod, self.device_plugins)
        inventory = self.inventory.get(name, {})
        registered = set(r for r in served if r in inventory)
        stopped = self._stopped.setdefault(name, {})
        for r in self._served.get(name, set()) - registered:
            stopped.setdefault(r, now)
        for r in registered:
            stopped.pop(r, None)
        unhealthy = set(r for r, t in stopped.items() if now - t < self.plugin_stop_grace)
        gone = set(stopped) - unhealthy
        for r in gone:
            del stopped[r]          # the device manager forgets it: it never writes the key again
        wake = None
        if unhealthy:
            wake = min(stopped[r] for r in unhealthy) + self.plugin_stop_grace - now + 0.05
        self._served[name] = registered | unhealthy
        return (registered, unhealthy, gone), wake

    def plugin_status(self, name, status, plan):
        """(capacity, allocatable) after plan (plugin_step's) on a node's status; None when nothing changes.
        allocatable None: the node has none and keeps none."""
        registered, unhealthy, gone = plan
        inventory = self.inventory.get(name, {})
        capacity = status.get("capacity") or {}
        allocatable = status.get("allocatable")
        cap = dict(capacity)
        for r in registered:
            cap[r] = str(inventory[r])
        alloc = None if allocatable is None else dict(allocatable)
        for r in unhealthy:
            if r in (alloc or {}):
                alloc[r] = "0"
        for r in gone:
            cap[r] = "0"
            alloc = dict(alloc or {})
            alloc[r] = "0"
        if cap == capacity and alloc == allocatable:
            return None
        return cap, alloc

    # ------------------------------------------------------------ DRA drivers

    def drivers_of(self, pod):
        found = []
        for container in (pod.get("spec") or {}).get("containers") or []:
            for needle, spec in self.dra_drivers.items():
                if needle in (container.get("image") or "") and spec not in found:
                    found.append(spec)
        return found

    def wanted_slices(self, pods, may_run=None):
        """slice name -> the ResourceSlice a running, ready DRA kubelet plugin publishes (resource_slice's shape).
        may_run(pod): False for a pod that must not run here."""
        out = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or not serving(pod) or (may_run is not None and not may_run(pod)):
                continue
            for spec in self.drivers_of(pod):
                count = self.inventory.get(node, {}).get(spec["inventory"], 0)
                if count:
                    # a node without such devices publishes nothing (the example driver's pool would be empty)
                    out[slice_name(node, spec["driver"])] = resource_slice(node, spec, count)
        return out

    # ------------------------------------------------------------ pods

    def pod_step(self, pod, now):
        """What the kubelet of the pod's (configured, reachable) node does next: (step, wake). step is one of
        STATUS_STEPS (write status_for(step, ...)), DELETE (confirm the deletion) or None; wake is how many seconds
        until the next step is due, or None."""
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, metadata(pod)
        node, uid = spec.get("nodeName"), meta.get("uid")
        if not node or not self.reachable(node):
            return None, None       # a dead kubelet does nothing, and never confirms a deletion
        if meta.get("deletionTimestamp"):
            if meta.get("finalizers"):
                return None, None
            left = self._deleting.setdefault(uid, now) + self.pod_stop_delay - now
            return (DELETE, None) if left <= 0 else (None, left)
        if pod_terminal(pod):
            return None, None
        if self.fail.get(node):
            return "failing", None
        phase = status.get("phase") or "Pending"
        if phase == "Pending":
            left = self._seen.setdefault(uid, now) + self.pod_start_delay - now
            if not status.get("containerStatuses"):
                return "creating", max(left, 0.0)
            return ("running", None) if left <= 0 else (None, left)
        if phase == "Running":
            if not pod_ready(pod):
                return "running", None
            if runs_to_completion(pod):
                left = self._running.setdefault(uid, now) + max(self.pod_start_delay, 0.05) - now
                return ("completed", None) if left <= 0 else (None, left)
        return None, None

    def status_for(self, step, pod):
        """The status of pod after step (one of STATUS_STEPS); None if it already is so."""
        node = (pod.get("spec") or {}).get("nodeName")
        if step == "creating":
            return self.creating_status(pod, node)
        if step == "running":
            return self.running_status(pod, node)
        if step == "completed":
            return completed_status(pod)
        if step == "failing":
            return self.failing_status(pod, node, self.fail.get(node))
        raise ValueError("not a status step: %r" % (step,))

    def pod_ip(self, node, pod):
        if (pod.get("spec") or {}).get("hostNetwork"):
            return self.node_ip(node)
        return "10.244.%d.%d" % (self.node_index.get(node, 0), next(self._ip_counter) % 250 + 2)

    def base_status(self, pod, node, stamp):
        status = copy.deepcopy(pod.get("status") or {})
        status["hostIP"] = self.node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        if not status.get("podIP"):
            status["podIP"] = self.pod_ip(node, pod)
            status["podIPs"] = [{"ip": status["podIP"]}]
        status.setdefault("startTime", stamp)
        status.setdefault("qosClass", qos_class(pod.get("spec") or {}))     # set once at admission, immutable after
        return status

    def creating_status(self, pod, node):
        stamp = now_rfc3339()
        status = self.base_status(pod, node, stamp)
        status["phase"] = "Pending"
        status["conditions"] = pod_conditions(pod, stamp, ready=False, message=_unready_message(pod))
        status["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False, "started": False,
             "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
            for c in (pod.get("spec") or {}).get("containers") or []]
        return status

    def running_status(self, pod, node):
        stamp = now_rfc3339()
        uid = metadata(pod).get("uid")
        status = self.base_status(pod, node, stamp)
        status["phase"] = "Running"
        status["conditions"] = pod_conditions(pod, stamp, ready=True)
        old = dict((cs.get("name"), cs) for cs in status.get("containerStatuses") or [])
        statuses = []
        for c in (pod.get("spec") or {}).get("containers") or []:
            prev = old.get(c.get("name")) or {}
            image = c.get("image") or ""
            statuses.append({
                "name": c.get("name"), "image": c.get("image"),
                "imageID": "%s@sha256:%s" % (image.split(":")[0], hashlib.sha256(image.encode()).hexdigest()),
                "containerID": prev.get("containerID") or "containerd://" + hashlib.sha256(
                    ("%s/%s" % (uid, c.get("name"))).encode()).hexdigest(),
                "ready": True, "started": True, "restartCount": prev.get("restartCount", 0),
                "state": {"running": (prev.get("state") or {}).get("running") or {"startedAt": stamp}}})
        status["containerStatuses"] = statuses
        return status

    def failing_status(self, pod, node, reason):
        """Containers waiting with reason: image-pull style failures keep the pod Pending, others crash-loop it."""
        current = (pod.get("status") or {}).get("containerStatuses") or []
        if current and not pod_ready(pod) and all(
                ((cs.get("state") or {}).get("waiting") or {}).get("reason") == reason for cs in current):
            return None     # already failing this way: rewriting would only churn timestamps
        stamp = now_rfc3339()
        meta = metadata(pod)
        status = self.base_status(pod, node, stamp)
        crash = reason not in PENDING_FAILURES
        status["phase"] = "Running" if crash else "Pending"
        status["conditions"] = pod_conditions(pod, stamp, ready=False, message=_unready_message(pod))
        statuses = []
        for c in (pod.get("spec") or {}).get("containers") or []:
            image = c.get("image") or ""
            if reason == "CrashLoopBackOff":
                message = "back-off 10s restarting failed container=%s pod=%s_%s(%s)" % (
                    c.get("name"), meta.get("name"), meta.get("namespace"), meta.get("uid"))
            elif reason in ("ImagePullBackOff", "ErrImagePull"):
                message = 'Back-off pulling image "%s"' % image
            else:
                message = "simulated failure: %s" % reason
            cs = {"name": c.get("name"), "image": image, "imageID": "", "ready": False, "started": False,
                  "restartCount": 1 if crash else 0, "state": {"waiting": {"reason": reason, "message": message}}}
            if crash:
                cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp,
                                                  "finishedAt": stamp}}
            statuses.append(cs)
        status["containerStatuses"] = statuses
        return status
