# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A kubelet stand-in: the kubelet's API-side duties for test nodes, done through the Kubernetes API.

A real control plane without kubelets (../shared/k8s) stores Node objects and schedules pods onto them, but
nothing reports the nodes Ready, runs their pods, registers device plugins or publishes ResourceSlices. This
stand-in does those duties for the nodes it registers, as a client of any apiserver, with its own identity
(give it ``agent.kubeconfig``, so audit logs and write observers tell its writes from the collection's):

- registers each node of its configuration (the simulated cluster's node format, tests/simcluster/config.py:
  name, labels, taints, capacity, inventory, without_capacity) with a Ready condition, addresses and nodeInfo;
- renews the node's Lease in kube-node-lease and its Ready heartbeat, so the node lifecycle controller keeps it
  Ready (and lifts the not-ready taint it gets at registration);
- moves pods bound to its nodes to Running and Ready with container statuses (after ``pod_start_delay``), runs
  pods that run to completion (restartPolicy Never with a command) to Succeeded, and removes pods with a
  deletionTimestamp (a DELETE with grace period 0, as the kubelet confirms a termination);
- a running, ready device-plugin pod (image matched by ``device_plugins``, or its devices.kubehw.io/resources
  annotation) registers its resources into the node's capacity from the node's ``inventory``; allocatable
  follows capacity for extended resources; a vanished plugin's resources drop to "0";
- a running, ready DRA kubelet-plugin pod (image matched by ``dra_drivers``, as in tests/simcluster/dra.py)
  publishes one ResourceSlice per node and driver with the node's inventory, and its slice goes when the pod does;
- ``fail_pod_start(node, reason)`` makes the pods of a node fail as a broken image or a crash loop would, and
  ``set_node_unreachable(node)`` stops the node's heartbeats (the real node lifecycle controller then marks it
  Unknown after its grace period).

The status shapes (node conditions, pod conditions and container statuses, slice devices) come from the simulated
cluster's kubelet (tests/simcluster/controllers.py and dra.py), imported, not copied, so the two agree.
It polls (every ``interval`` seconds): the nodes are few and the test suite's objects small, and a poll never
misses a change the way a watch interrupted by a 410 could.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import threading
import time

from tests.simcluster.config import load_config
from tests.simcluster.controllers import (
    PENDING_FAILURES, Controllers, is_extended_resource, pod_ready, pod_terminal, served_by)
from tests.simcluster.dra import DEFAULT_DRA_DRIVERS, _PROFILES, _plain_device, slice_name
from tests.simcluster.store import now_rfc3339

# a label on every node the stand-in registers, so a test (or a person) can tell them from real nodes
STANDIN_LABEL = "kubehw-it.example.com/kubelet-stand-in"
LEASE_DURATION = 40
KUBELET_VERSION = "v1.36.2"


def _meta(obj):
    return obj.get("metadata") or {}


# a pod that runs to completion (restartPolicy Never, a command, no DaemonSet): the simulated kubelets' rule
runs_to_completion = Controllers._runs_to_completion  # pylint: disable=protected-access


class KubeletStandIn:
    """The kubelets of the configured nodes, as one thread talking to an apiserver (see the module docstring)."""

    def __init__(self, kubeconfig, config=None, interval=0.25, heartbeat_interval=10.0):
        from kubernetes import client, config as kube_config

        self.config = load_config(config)
        self.node_configs = dict((n["name"], n) for n in self.config["nodes"])
        self.inventory = dict((name, dict(n.get("inventory") or {})) for name, n in self.node_configs.items())
        self.device_plugins = dict(self.config.get("device_plugins") or {})
        self.dra_drivers = dict(self.config.get("dra_drivers") or DEFAULT_DRA_DRIVERS)
        self.pod_start_delay = float(self.config["pod_start_delay"])
        self.interval = interval
        self.heartbeat_interval = heartbeat_interval
        self.api_client = kube_config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._unreachable = set()
        self._fail = {}                 # node -> waiting reason of its pods
        self._seen = {}                 # pod uid -> monotonic time first seen bound here
        self._deleted = set()           # pod uids whose deletion was confirmed
        self._next_heartbeat = {}
        self._registered = {}           # node -> resources a plugin registered there
        self._node_index = dict((name, i) for i, name in enumerate(sorted(self.node_configs)))
        self.errors = []                # what went wrong in the loop (a test may assert it stays empty)

    # ------------------------------------------------------------ lifecycle

    def start(self):
        for name in self.node_configs:
            self._register(name)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kubelet-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self, delete_nodes=True):
        """Stop the loop; with delete_nodes, remove the nodes, their leases, pods and slices (test cleanup)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if delete_nodes:
            self._unregister_all()
        self.api_client.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------ knobs a test uses

    def set_node_unreachable(self, name, unreachable=True):
        with self._lock:
            if unreachable:
                self._unreachable.add(name)
            else:
                self._unreachable.discard(name)
                self._next_heartbeat[name] = 0

    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        with self._lock:
            self._fail[node] = reason

    def allow_pod_start(self, node):
        with self._lock:
            self._fail.pop(node, None)

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost); plugins and DRA drivers publish it at the next pass."""
        with self._lock:
            self.inventory.setdefault(node, {})[key] = count

    # ------------------------------------------------------------ nodes

    def _node_ip(self, name):
        idx = self._node_index.get(name, 0)
        return "10.0.%d.%d" % (idx // 250, idx % 250 + 2)

    def _node_object(self, cfg):
        name = cfg["name"]
        stamp = now_rfc3339()
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  STANDIN_LABEL: "true"}
        labels.update(cfg.get("labels") or {})
        meta = {"name": name, "labels": labels}
        if cfg.get("annotations"):
            meta["annotations"] = dict(cfg["annotations"])
        digest = hashlib.md5(name.encode()).hexdigest()
        status = {
            "conditions": Controllers._conditions(stamp, stamp, ready=True),  # pylint: disable=protected-access
            "addresses": [{"type": "InternalIP", "address": self._node_ip(name)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": digest, "systemUUID": digest, "bootID": digest[::-1],
                         "kernelVersion": "6.1.0-28-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": KUBELET_VERSION,
                         "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux", "architecture": "amd64"},
        }
        if not cfg.get("without_capacity"):
            status["capacity"] = dict(cfg.get("capacity") or {})
            status["allocatable"] = dict(cfg.get("capacity") or {})
        spec = {}
        if cfg.get("taints"):
            spec["taints"] = copy.deepcopy(cfg["taints"])
        return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}

    def _register(self, name):
        from kubernetes.client.rest import ApiException

        body = self._node_object(self.node_configs[name])
        try:
            self.core.create_node(body, _preload_content=False)
        except ApiException as err:
            if err.status != 409:
                raise
        # the kubelet writes its status after registering: a create may keep it, a status write surely does
        status = body["status"]
        ops = [{"op": "replace", "path": "/status/conditions", "value": status["conditions"]},
               {"op": "replace", "path": "/status/addresses", "value": status["addresses"]},
               {"op": "replace", "path": "/status/nodeInfo", "value": status["nodeInfo"]}]
        for key in ("capacity", "allocatable"):
            if key in status:
                ops.append({"op": "add", "path": "/status/" + key, "value": status[key]})
        self.core.patch_node_status(name, ops, _preload_content=False)
        self._renew_lease(name)
        self._next_heartbeat[name] = time.monotonic() + self.heartbeat_interval

    def _renew_lease(self, name):
        from kubernetes.client.rest import ApiException

        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now}}
        try:
            self.coordination.patch_namespaced_lease(name, "kube-node-lease", {"spec": body["spec"]},
                                                     _preload_content=False)
        except ApiException as err:
            if err.status != 404:
                raise
            # the client's Lease model rewrites renewTime in a format the apiserver refuses: create, then patch it
            self.coordination.create_namespaced_lease("kube-node-lease", dict(body, spec={"holderIdentity": name}),
                                                      _preload_content=False)
            self.coordination.patch_namespaced_lease(name, "kube-node-lease", {"spec": body["spec"]},
                                                     _preload_content=False)

    def _heartbeat(self, name, node):
        """Ready condition and Lease renewed at the heartbeat cadence; allocatable kept equal to capacity."""
        now = time.monotonic()
        status = node.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
        wanted = dict(allocatable)
        for key in list(wanted):
            if is_extended_resource(key) and key not in capacity:
                del wanted[key]
        wanted.update((k, v) for k, v in capacity.items() if is_extended_resource(k))
        due = now >= self._next_heartbeat.get(name, 0)
        if not due and ready and wanted == allocatable:
            return
        ops = []
        if due or not ready:
            stamp = now_rfc3339()
            old = dict((c.get("type"), c) for c in status.get("conditions") or [])
            conditions = Controllers._conditions(stamp, stamp, ready=True)  # pylint: disable=protected-access
            for cond in conditions:
                prev = old.get(cond["type"])
                if prev and prev.get("status") == cond["status"] and prev.get("lastTransitionTime"):
                    cond["lastTransitionTime"] = prev["lastTransitionTime"]
            ops.append({"op": "replace", "path": "/status/conditions", "value": conditions})
        if wanted != allocatable and capacity:
            ops.append({"op": "add", "path": "/status/allocatable", "value": wanted})
        # a test of the collection's own writes compares resourceVersions: only write what changed
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": _meta(node)["resourceVersion"]})
        self.core.patch_node_status(name, ops, _preload_content=False)
        if due:
            self._renew_lease(name)
            self._next_heartbeat[name] = now + self.heartbeat_interval

    # ------------------------------------------------------------ the loop

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as err:  # pylint: disable=broad-except
                # test equipment: one bad pass (a conflict, a deleted object) must not stop every node's kubelet
                self.errors.append(repr(err))
                del self.errors[:-20]

    def sync(self):
        """One pass over the nodes and their pods."""
        from kubernetes.client.rest import ApiException

        nodes = dict((n["metadata"]["name"], n) for n in json.loads(self.core.list_node(
            label_selector=STANDIN_LABEL, _preload_content=False).data)["items"])
        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        by_node = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in self.node_configs:
                by_node.setdefault(node, []).append(pod)
        with self._lock:
            unreachable, fail = set(self._unreachable), dict(self._fail)
        for name in self.node_configs:
            node = nodes.get(name)
            if node is None or name in unreachable:
                continue
            for step in (lambda: self._heartbeat(name, node), lambda: self._pods(name, by_node.get(name, []), fail),
                         lambda: self._plugins(name, node, by_node.get(name, []))):
                try:
                    step()
                except ApiException as err:
                    if err.status not in (404, 409, 422):   # raced with another writer: the next pass retries
                        raise
        self._slices(dict((n, p) for n, p in by_node.items() if n not in unreachable))

    # ------------------------------------------------------------ pods

    def _pods(self, node, pods, fail):
        for pod in pods:
            meta, uid = _meta(pod), _meta(pod).get("uid")
            if meta.get("deletionTimestamp"):
                if uid not in self._deleted:
                    self._confirm_deletion(pod)
                continue
            if pod_terminal(pod):
                continue
            status = pod.get("status") or {}
            if node in fail:
                self._write_status(pod, self._failing_status(pod, node, fail[node]))
                continue
            phase = status.get("phase") or "Pending"
            first = self._seen.setdefault(uid, time.monotonic())
            if phase == "Pending":
                if time.monotonic() - first >= self.pod_start_delay:
                    self._write_status(pod, self._running_status(pod, node))
                elif not status.get("containerStatuses"):
                    self._write_status(pod, self._creating_status(pod, node))
            elif phase == "Running":
                if not pod_ready(pod):
                    self._write_status(pod, self._running_status(pod, node))
                elif runs_to_completion(pod) and time.monotonic() - first >= 2 * self.pod_start_delay:
                    self._write_status(pod, self._completed_status(pod))

    def _confirm_deletion(self, pod):
        from kubernetes.client.rest import ApiException

        meta = _meta(pod)
        try:
            # no uid precondition in a body: the client's DeleteOptions body then loses the grace period of 0
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0,
                                            _preload_content=False)
        except ApiException as err:
            if err.status not in (404, 409):
                raise
        if not meta.get("finalizers"):
            self._deleted.add(meta["uid"])

    def _write_status(self, pod, status):
        if status is None or status == pod.get("status"):
            return
        body = dict(pod, status=status)
        meta = _meta(pod)
        self.core.replace_namespaced_pod_status(meta["name"], meta["namespace"], body, _preload_content=False)

    def _base_status(self, pod, node, stamp):
        status = copy.deepcopy(pod.get("status") or {})
        status["hostIP"] = self._node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        if not status.get("podIP"):
            if (pod.get("spec") or {}).get("hostNetwork"):
                status["podIP"] = status["hostIP"]
            else:
                digest = int(hashlib.md5(_meta(pod)["uid"].encode()).hexdigest(), 16)
                status["podIP"] = "10.244.%d.%d" % (self._node_index.get(node, 0), digest % 250 + 2)
            status["podIPs"] = [{"ip": status["podIP"]}]
        status.setdefault("startTime", stamp)
        return status

    @staticmethod
    def _conditions(pod, stamp, ready, reason=None, message=None):
        return Controllers._pod_conditions(pod, stamp, ready, reason, message)  # pylint: disable=protected-access

    def _creating_status(self, pod, node):
        stamp = now_rfc3339()
        status = self._base_status(pod, node, stamp)
        containers = (pod.get("spec") or {}).get("containers") or []
        status["phase"] = "Pending"
        status["conditions"] = self._conditions(pod, stamp, False, message="containers with unready status: [%s]"
                                                % " ".join(c.get("name") for c in containers))
        status["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False, "started": False,
             "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}} for c in containers]
        return status

    def _running_status(self, pod, node):
        stamp = now_rfc3339()
        status = self._base_status(pod, node, stamp)
        status["phase"] = "Running"
        status["conditions"] = self._conditions(pod, stamp, True)
        old = dict((cs.get("name"), cs) for cs in status.get("containerStatuses") or [])
        uid = _meta(pod)["uid"]
        statuses = []
        for c in (pod.get("spec") or {}).get("containers") or []:
            prev = old.get(c.get("name")) or {}
            image = c.get("image") or ""
            statuses.append({
                "name": c.get("name"), "image": image,
                "imageID": "%s@sha256:%s" % (image.split(":")[0], hashlib.sha256(image.encode()).hexdigest()),
                "containerID": prev.get("containerID") or "containerd://" + hashlib.sha256(
                    ("%s/%s" % (uid, c.get("name"))).encode()).hexdigest(),
                "ready": True, "started": True, "restartCount": prev.get("restartCount", 0),
                "state": {"running": (prev.get("state") or {}).get("running") or {"startedAt": stamp}}})
        status["containerStatuses"] = statuses
        return status

    def _completed_status(self, pod):
        stamp = now_rfc3339()
        status = copy.deepcopy(pod.get("status") or {})
        status["phase"] = "Succeeded"
        status["conditions"] = self._conditions(pod, stamp, False, reason="PodCompleted")
        statuses = []
        for cs in status.get("containerStatuses") or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or stamp
            statuses.append(dict(cs, ready=False, started=False, state={"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": stamp,
                "containerID": cs.get("containerID")}}))
        status["containerStatuses"] = statuses
        return status

    def _failing_status(self, pod, node, reason):
        current = (pod.get("status") or {}).get("containerStatuses") or []
        if current and not pod_ready(pod) and all(
                ((cs.get("state") or {}).get("waiting") or {}).get("reason") == reason for cs in current):
            return None     # already failing this way: rewriting would only churn timestamps
        stamp = now_rfc3339()
        status = self._base_status(pod, node, stamp)
        containers = (pod.get("spec") or {}).get("containers") or []
        crash = reason not in PENDING_FAILURES
        status["phase"] = "Running" if crash else "Pending"
        status["conditions"] = self._conditions(pod, stamp, False, message="containers with unready status: [%s]"
                                                % " ".join(c.get("name") for c in containers))
        statuses = []
        for c in containers:
            image = c.get("image") or ""
            if reason == "CrashLoopBackOff":
                message = "back-off 10s restarting failed container=%s pod=%s_%s(%s)" % (
                    c.get("name"), _meta(pod).get("name"), _meta(pod).get("namespace"), _meta(pod).get("uid"))
            elif reason in ("ImagePullBackOff", "ErrImagePull"):
                message = 'Back-off pulling image "%s"' % image
            else:
                message = "stand-in failure: %s" % reason
            cs = {"name": c.get("name"), "image": image, "imageID": "", "ready": False, "started": False,
                  "restartCount": 1 if crash else 0, "state": {"waiting": {"reason": reason, "message": message}}}
            if crash:
                cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp,
                                                  "finishedAt": stamp}}
            statuses.append(cs)
        status["containerStatuses"] = statuses
        return status

    # ------------------------------------------------------------ device plugins

    @staticmethod
    def _serving(pod):
        status = pod.get("status") or {}
        return not _meta(pod).get("deletionTimestamp") and status.get("phase") == "Running" and pod_ready(pod)

    def _plugins(self, name, node, pods):
        """Running plugins register their resources with the node's inventory; a plugin gone leaves "0"."""
        inventory = self.inventory.get(name, {})
        serving = set()
        for pod in pods:
            if self._serving(pod):
                serving |= served_by(pod, self.device_plugins)
        registered = set(r for r in serving if r in inventory)
        gone = self._registered.get(name, set()) - registered
        status = node.get("status") or {}
        capacity = status.get("capacity") or {}
        ops = []
        for resource in sorted(registered):
            if capacity.get(resource) != str(inventory[resource]):
                ops.append((resource, str(inventory[resource])))
        for resource in sorted(gone):
            if capacity.get(resource) != "0":
                ops.append((resource, "0"))
        self._registered[name] = registered
        if not ops:
            return
        patch = []
        if not capacity:
            patch.append({"op": "add", "path": "/status/capacity", "value": {}})
        for resource, value in ops:
            key = resource.replace("~", "~0").replace("/", "~1")
            patch.append({"op": "add", "path": "/status/capacity/" + key, "value": value})
            if status.get("allocatable") is not None:
                patch.append({"op": "add", "path": "/status/allocatable/" + key, "value": value})
        self.core.patch_node_status(name, patch, _preload_content=False)

    # ------------------------------------------------------------ DRA kubelet plugins

    def _drivers_of(self, pod):
        found = []
        for container in (pod.get("spec") or {}).get("containers") or []:
            for needle, spec in self.dra_drivers.items():
                if needle in (container.get("image") or "") and spec not in found:
                    found.append(spec)
        return found

    def _wanted_slices(self, by_node):
        out = {}
        for node, pods in by_node.items():
            for pod in pods:
                if not self._serving(pod):
                    continue
                for spec in self._drivers_of(pod):
                    count = self.inventory.get(node, {}).get(spec["inventory"], 0)
                    if count:
                        make = _PROFILES.get(spec.get("profile"))
                        devices = [make(node, i) if make else _plain_device(spec, node, i) for i in range(count)]
                        out[slice_name(node, spec["driver"])] = {
                            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": {"name": slice_name(node, spec["driver"]), "labels": {STANDIN_LABEL: node}},
                            "spec": {"driver": spec["driver"], "nodeName": node, "devices": devices,
                                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}
        return out

    def _slices(self, by_node):
        from kubernetes.client.rest import ApiException

        wanted = self._wanted_slices(by_node)
        existing = json.loads(self.custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", label_selector=STANDIN_LABEL, _preload_content=False).data)
        live = dict((s["metadata"]["name"], s) for s in existing["items"]
                    if s["metadata"]["labels"].get(STANDIN_LABEL) in self.node_configs)
        try:
            for name, obj in wanted.items():
                if name not in live:
                    self.custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", obj,
                                                             _preload_content=False)
                elif live[name]["spec"].get("devices") != obj["spec"]["devices"]:
                    body = copy.deepcopy(live[name])
                    body["spec"]["devices"] = obj["spec"]["devices"]
                    body["spec"]["pool"]["generation"] = body["spec"]["pool"].get("generation", 0) + 1
                    self.custom.replace_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name, body,
                                                              _preload_content=False)
            for name in live:
                if name not in wanted:
                    self.custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name,
                                                             _preload_content=False)
        except ApiException as err:
            if err.status not in (404, 409):
                raise

    # ------------------------------------------------------------ cleanup

    def _unregister_all(self):
        """Remove what the nodes leave behind: their pods (at once), slices, leases and the Node objects."""
        from kubernetes.client.rest import ApiException

        def ignore_missing(fn, *args, **kwargs):
            try:
                fn(*args, **kwargs)
            except ApiException as err:
                if err.status != 404:
                    raise

        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") in self.node_configs:
                meta = _meta(pod)
                ignore_missing(self.core.delete_namespaced_pod, meta["name"], meta["namespace"],
                               grace_period_seconds=0, _preload_content=False)
        ignore_missing(self.custom.delete_collection_cluster_custom_object, "resource.k8s.io", "v1", "resourceslices",
                       label_selector=STANDIN_LABEL, _preload_content=False)
        for name in self.node_configs:
            ignore_missing(self.coordination.delete_namespaced_lease, name, "kube-node-lease", _preload_content=False)
            ignore_missing(self.core.delete_node, name, _preload_content=False)
