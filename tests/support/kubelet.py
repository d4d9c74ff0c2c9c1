"""A kubelet stand-in: the kubelet's API-side duties for test nodes, done through the Kubernetes API.

A real control plane without kubelets (../shared/k8s) stores Node objects and schedules pods onto them, but
nothing reports the nodes Ready, runs their pods, registers device plugins or publishes ResourceSlices. This
stand-in does those duties for the nodes it registers, as a client of any apiserver, with its own identity
(give it ``agent.kubeconfig``, so audit logs and write observers tell its writes from the collection's):

- registers each node of its configuration (tests/support/node_configs.py: name, labels, taints, capacity,
  inventory, without_capacity) with a Ready condition, addresses and nodeInfo;
- renews the node's Lease in kube-node-lease and its Ready heartbeat, so the node lifecycle controller keeps it
  Ready (and lifts the not-ready taint it gets at registration);
- moves pods bound to its nodes to Running and Ready with container statuses (after ``pod_start_delay``), runs
  pods that run to completion (restartPolicy Never with a command) to Succeeded, and removes pods with a
  deletionTimestamp (a DELETE with grace period 0, as the kubelet confirms a termination, after ``pod_stop_delay``);
- a running, ready device-plugin pod (image matched by ``device_plugins``, or its devices.kubehw.io/resources
  annotation) registers its resources into the node's capacity from the node's ``inventory``; allocatable
  follows capacity for extended resources; a vanished plugin's resources are unhealthy ("0" allocatable) for
  ``device_plugin_stop_grace``, then "0" in both;
- a running, ready DRA kubelet-plugin pod (image matched by ``dra_drivers``) publishes one ResourceSlice per node and
  driver with the node's inventory, and its slice goes when the pod does (not while the node is unreachable: a kubelet
  that is down leaves its slices as they are);
- ``fail_pod_start(node, reason)`` makes the pods of a node fail as a broken image or a crash loop would, and
  ``set_node_unreachable(node)`` stops the node's heartbeats (the real node lifecycle controller then marks it
  Unknown after its grace period).

It serves the control planes of the integration suite and of `make demo`, writing past the fault proxy, so its
requests stay out of the request log and the faults. What to write and when is the kubelet core's
(tests/support/kubelet_core.py); this module is the transport. It reads as a kubelet does, by watching: its nodes,
the pods and its ResourceSlices are kept in memory by list and watch (tests/support/watch_mirror.py), and a pass over
them runs at each change and at least every ``interval`` seconds (for the steps that are due by time: a pod's start
delay, a plugin's stop grace, the heartbeat), so an idle stand-in sends the apiserver nothing but its heartbeats. The
heartbeat is a kubelet's: the node's Lease renewed every ``heartbeat_interval`` seconds, the Ready condition written
when it changes and otherwise every ``status_report_interval`` seconds (the kubelet's nodeStatusReportFrequency).
Each node has a kubelet of its own: a request of one node's that fails (other than a conflict or a gone object,
which the next pass retries) ends that node's pass, not the other nodes', and is kept in ``errors`` (the last 20),
which the integration suite prints with the report of a test that fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import functools
import json
import threading
import time

from tests.support.k8s_objects import condition, metadata, now_rfc3339, read_out
from tests.support.kubelet_core import DELETE, KUBELET_VERSION, STATUS_STEPS, KubeletCore, heartbeat_conditions
from tests.support.watch_mirror import WatchMirror

# a label on every node the stand-in registers, so a test (or a person) can tell them from real nodes
STANDIN_LABEL = "kubehw-it.example.com/kubelet-stand-in"
LEASE_DURATION = 40
SYNC_TIMEOUT = 30       # seconds for the first list of each watched collection
PASS_INTERVAL = 0.25    # seconds between passes when nothing changes (the steps that are due by time)
AWAIT_SECONDS = 2.0     # how long a pass leaves alone an object it changed, waiting for the watch to bring the change


class KubeletStandIn:
    """The kubelets of the configured nodes, as one thread talking to an apiserver (see the module docstring)."""

    # heartbeat_interval 10 s: a kubelet's (a quarter of its 40 s lease), four renewals within the node-monitor grace
    # period of the suite's control plane (40 s, tests/support/control_plane.py); at 4 s the stand-ins' Lease writes
    # were a sixth of the integration stage's requests; status_report_interval 60 s: the Ready condition's heartbeat, which the node
    # lifecycle controller needs only when there is no Lease (a kubelet's default is 5 minutes)
    def __init__(self, kubeconfig, config=None, interval=PASS_INTERVAL, heartbeat_interval=10.0,
                 status_report_interval=60.0):
        from kubernetes import client, config as kube_config

        self.kubelet = KubeletCore(config)
        self.config = self.kubelet.config
        self.node_configs = self.kubelet.node_configs
        self.interval = interval
        self.heartbeat_interval = heartbeat_interval
        self.status_report_interval = status_report_interval
        self.kubeconfig = kubeconfig
        self.api_client = kube_config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._thread = None
        self._deleted = set()           # pod uids whose deletion was confirmed
        self._next_heartbeat = {}       # node -> when its Lease is renewed next
        self._next_status_report = {}   # node -> when its Ready condition's heartbeat is written next
        # what was written and not yet seen back by the watch: (kind, name) -> the resourceVersion written against, so
        # a pass woken before the watch delivers the write does not write the same again
        self._awaiting = {}
        self.errors = []                # what went wrong in the loop (a test may assert it stays empty)
        self.mirrors = [
            WatchMirror("nodes", self.core.list_node, self._changed.set, STANDIN_LABEL, self.errors),
            WatchMirror("pods", self.core.list_pod_for_all_namespaces, self._changed.set, errors=self.errors),
            WatchMirror("resourceslices", functools.partial(
                self.custom.list_cluster_custom_object, "resource.k8s.io", "v1", "resourceslices"),
                self._changed.set, STANDIN_LABEL, self.errors)]
        self._node_mirror, self._pod_mirror, self._slice_mirror = self.mirrors

    # ------------------------------------------------------------ lifecycle

    def start(self):
        """Register the nodes, fill the mirrors and start the loop; if any of it fails, remove the nodes registered
        so far (a stand-in that did not start leaves nothing behind) and raise."""
        self._stop.clear()
        try:
            for name in self.node_configs:
                self._register(name)
            for mirror in self.mirrors:
                mirror.start()
            for mirror in self.mirrors:
                if not mirror.wait_synced(SYNC_TIMEOUT):
                    raise RuntimeError("kubelet stand-in: no list of %s within %ss: %s" % (
                        mirror.name, SYNC_TIMEOUT, mirror.errors[-1:]))
        except Exception:
            try:
                self.stop()
            except Exception:  # pylint: disable=broad-except
                pass    # the apiserver is likely gone as well: the first error is the one to show
            raise
        self._thread = threading.Thread(target=self._run, name="kubelet-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self, delete_nodes=True):
        """Stop the loop and the watches; with delete_nodes, remove the nodes, their leases, pods and slices (test
        cleanup)."""
        self._stop.set()
        self._changed.set()
        for mirror in self.mirrors:
            mirror.stop()
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

    def wait_schedulable(self, timeout=30, names=None):
        """Wait until every configured node (or those of names) exists and the node lifecycle controller has lifted
        its not-ready taint, as it does once a kubelet reports Ready; nodes configured with taints of their own keep
        those."""
        names = set(self.node_configs if names is None else names)
        deadline = time.monotonic() + timeout
        while True:
            nodes = json.loads(self.core.list_node(label_selector=STANDIN_LABEL, _preload_content=False).data)["items"]
            tainted = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] in names and any(
                t.get("key") == "node.kubernetes.io/not-ready" for t in (n.get("spec") or {}).get("taints") or [])]
            if not tainted and names <= set(n["metadata"]["name"] for n in nodes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("stand-in nodes %s still not schedulable after %ss" % (sorted(names), timeout))
            time.sleep(0.2)

    def set_node_unreachable(self, name, unreachable=True):
        with self._lock:
            self.kubelet.set_unreachable(name, unreachable)
            if not unreachable:
                self._next_heartbeat[name] = 0
                self._next_status_report[name] = 0
        self._changed.set()

    def set_node_starting(self, name, starting=True):
        """The node's kubelet posts Ready False (up, its network not ready yet) until called with False; its pods wait."""
        with self._lock:
            self.kubelet.set_starting(name, starting)
        self._changed.set()

    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        self.kubelet.set_fail(node, reason)
        self._changed.set()

    def allow_pod_start(self, node):
        self.kubelet.set_fail(node, None)
        self._changed.set()

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost); plugins and DRA drivers publish it at the next pass."""
        self.kubelet.set_inventory(node, key, count)
        self._changed.set()

    # ------------------------------------------------------------ nodes

    def _register(self, name):
        from kubernetes.client.rest import ApiException

        body = self.kubelet.node(name, KUBELET_VERSION, {STANDIN_LABEL: "true"})
        try:
            read_out(self.core.create_node(body, _preload_content=False))
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
        read_out(self.core.patch_node_status(name, ops, _preload_content=False))
        self._renew_lease(name)
        self._next_heartbeat[name] = time.monotonic() + self.heartbeat_interval
        self._next_status_report[name] = time.monotonic() + self.status_report_interval

    def _renew_lease(self, name):
        from kubernetes.client.rest import ApiException

        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now}}
        try:
            read_out(self.coordination.patch_namespaced_lease(name, "kube-node-lease", {"spec": body["spec"]},
                                                              _preload_content=False))
        except ApiException as err:
            if err.status != 404:
                raise
            # the client's Lease model rewrites renewTime in a format the apiserver refuses: create, then patch it
            read_out(self.coordination.create_namespaced_lease(
                "kube-node-lease", dict(body, spec={"holderIdentity": name}), _preload_content=False))
            read_out(self.coordination.patch_namespaced_lease(name, "kube-node-lease", {"spec": body["spec"]},
                                                              _preload_content=False))

    def _heartbeat(self, name, node):
        """The Lease renewed at the heartbeat cadence; the Ready condition written when it is not what the kubelet
        posts, else at the status report cadence; allocatable kept equal to capacity."""
        now = time.monotonic()
        if now >= self._next_heartbeat.get(name, 0):
            self._renew_lease(name)
            self._next_heartbeat[name] = now + self.heartbeat_interval
        if self._unseen("node", name, node):
            return
        status = node.get("status") or {}
        wanted = self.kubelet.ready(name)
        as_wanted = (condition(node, "Ready") or {}).get("status") == ("True" if wanted else "False")
        allocatable = self.kubelet.allocatable(name, status)
        changed = allocatable is not None and allocatable != (status.get("allocatable") or {})
        due = now >= self._next_status_report.get(name, 0)
        if not due and as_wanted and not changed:
            return
        ops = []
        conditions = heartbeat_conditions(status, now_rfc3339(), due, wanted)
        if conditions is not None:
            ops.append({"op": "replace", "path": "/status/conditions", "value": conditions})
        if changed and status.get("capacity"):
            ops.append({"op": "add", "path": "/status/allocatable", "value": allocatable})
        if not ops:
            return
        # a test of the collection's own writes compares resourceVersions: only write what changed
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": metadata(node)["resourceVersion"]})
        self._wrote("node", name, node, self.core.patch_node_status(name, ops, _preload_content=False))
        if due:
            self._next_status_report[name] = now + self.status_report_interval

    def _unseen(self, kind, name, obj):
        """Whether the stand-in changed obj (as the mirror holds it) and the watch has not brought the change yet (for
        at most AWAIT_SECONDS: a watch that restarts delivers it by its list)."""
        version, until = self._awaiting.get((kind, name), (None, 0))
        return version == metadata(obj).get("resourceVersion") and time.monotonic() < until

    def _wrote(self, kind, name, obj, answer):
        """Note a write's answer: if it changed obj, the next passes skip obj until the watch brings the change."""
        before = metadata(obj).get("resourceVersion")
        after = metadata(json.loads(answer.data)).get("resourceVersion")
        if after != before:
            self._awaiting[(kind, name)] = (before, time.monotonic() + AWAIT_SECONDS)

    # ------------------------------------------------------------ the loop

    def _run(self):
        while not self._stop.is_set():
            self._changed.wait(self.interval)
            self._changed.clear()
            if self._stop.is_set():
                return
            try:
                self.sync()
            except Exception as err:  # pylint: disable=broad-except
                # test equipment: one bad pass (a conflict, a deleted object) must not stop every node's kubelet
                self._note_error(err)

    def _note_error(self, err):
        status = getattr(err, "status", None)     # an ApiException's repr may not say it
        self.errors.append(repr(err) + (" (HTTP %s)" % status if status else ""))
        del self.errors[:-20]

    def sync(self):
        """One pass over the nodes and their pods, as the watches hold them."""
        from kubernetes.client.rest import ApiException

        nodes = dict((n["metadata"]["name"], n) for n in self._node_mirror.objects())
        pods = self._pod_mirror.objects()
        for key in [k for k, (_version, until) in self._awaiting.items() if time.monotonic() >= until]:
            del self._awaiting[key]
        by_node = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in self.node_configs:
                by_node.setdefault(node, []).append(pod)
        uids = set(metadata(p).get("uid") for p in pods)
        self.kubelet.forget_all_but(uids)
        self._deleted &= uids
        for name in self.node_configs:
            node = nodes.get(name)
            if node is None or not self.kubelet.reachable(name):
                continue
            steps = [lambda: self._heartbeat(name, node)]
            if self.kubelet.ready(name):    # a starting kubelet runs no pod yet
                steps += [lambda: self._pods(by_node.get(name, [])), lambda: self._plugins(name, node, by_node.get(name, []))]
            for step in steps:
                try:
                    step()
                except Exception as err:  # pylint: disable=broad-except
                    if isinstance(err, ApiException) and err.status in (404, 409, 422):
                        continue    # raced with another writer: the next pass retries
                    # each node has a kubelet of its own: this one's trouble must not hold back the next ones'
                    # heartbeats (missed for the grace period, the node lifecycle controller marks them Unknown)
                    self._note_error(err)
                    break
        self._slices([p for n, node_pods in by_node.items()
                      if self.kubelet.reachable(n) and self.kubelet.ready(n) for p in node_pods])

    # ------------------------------------------------------------ pods

    def _pods(self, pods):
        now = time.monotonic()
        for pod in pods:
            if self._unseen("pod", metadata(pod).get("uid"), pod):
                continue
            step, _wake = self.kubelet.pod_step(pod, now)
            if step == DELETE:
                self._confirm_deletion(pod)
                continue
            # a pass comes every `interval` at best: steps due one after the other (ContainerCreating, then Running once
            # pod_start_delay is over) go in one write, the last status the pod would have had by now
            status, current = None, pod
            for _attempt in range(3):
                new = self.kubelet.status_for(step, current) if step in STATUS_STEPS else None
                if new is None:
                    break
                status, current = new, dict(current, status=new)
                step, _wake = self.kubelet.pod_step(current, now)
            self._write_status(pod, status)

    def _confirm_deletion(self, pod):
        from kubernetes.client.rest import ApiException

        meta = metadata(pod)
        if meta["uid"] in self._deleted:
            return
        try:
            # no uid precondition in a body: the client's DeleteOptions body then loses the grace period of 0
            read_out(self.core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0,
                                                     _preload_content=False))
        except ApiException as err:
            if err.status not in (404, 409):
                raise
        self._deleted.add(meta["uid"])

    def _write_status(self, pod, status):
        if status is None or status == pod.get("status"):
            return
        body = dict(pod, status=status)
        meta = metadata(pod)
        self._wrote("pod", meta.get("uid"), pod, self.core.replace_namespaced_pod_status(
            meta["name"], meta["namespace"], body, _preload_content=False))

    # ------------------------------------------------------------ device plugins

    def _plugins(self, name, node, pods):
        """Running plugins register their resources (the core's plugin_step and plugin_status), key by key."""
        # before plugin_step, which forgets a resource whose grace period is over: skipped after it, that pass's "0"
        # would never be written
        if self._unseen("node", name, node):
            return
        plan, _wake = self.kubelet.plugin_step(name, pods, time.monotonic())
        status = node.get("status") or {}
        changed = self.kubelet.plugin_status(name, status, plan)
        if changed is None:
            return
        patch = []
        for field, wanted in zip(("capacity", "allocatable"), changed):
            current = status.get(field)
            if wanted is None:
                continue
            if current is None:
                patch.append({"op": "add", "path": "/status/" + field, "value": {}})
            for resource in sorted(wanted):
                if (current or {}).get(resource) != wanted[resource]:
                    key = resource.replace("~", "~0").replace("/", "~1")
                    patch.append({"op": "add", "path": "/status/%s/%s" % (field, key), "value": wanted[resource]})
        self._wrote("node", name, node, self.core.patch_node_status(name, patch, _preload_content=False))

    # ------------------------------------------------------------ DRA kubelet plugins

    def _slices(self, pods):
        from kubernetes.client.rest import ApiException

        wanted = self.kubelet.wanted_slices(pods)
        for obj in wanted.values():
            obj["metadata"]["labels"] = {STANDIN_LABEL: obj["spec"]["nodeName"]}
        # a node whose kubelet is down (unreachable) neither publishes nor removes its slices: they stay as they were
        live = dict((s["metadata"]["name"], s) for s in self._slice_mirror.objects()
                    if s["metadata"]["labels"].get(STANDIN_LABEL) in self.node_configs
                    and self.kubelet.reachable(s["metadata"]["labels"][STANDIN_LABEL]))
        try:
            for name, obj in wanted.items():
                if name in live and self._unseen("slice", name, live[name]):
                    continue
                if name not in live:
                    read_out(self.custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", obj,
                                                                      _preload_content=False))
                elif live[name]["spec"].get("devices") != obj["spec"]["devices"]:
                    body = copy.deepcopy(live[name])
                    body["spec"]["devices"] = obj["spec"]["devices"]
                    body["spec"]["pool"]["generation"] = body["spec"]["pool"].get("generation", 0) + 1
                    self._wrote("slice", name, live[name], self.custom.replace_cluster_custom_object(
                        "resource.k8s.io", "v1", "resourceslices", name, body, _preload_content=False))
            for name in live:
                if name not in wanted:
                    read_out(self.custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name,
                                                                      _preload_content=False))
        except ApiException as err:
            if err.status not in (404, 409):
                raise

    # ------------------------------------------------------------ cleanup

    def _unregister_all(self):
        """Remove what the nodes leave behind: their pods (at once), slices, leases and the Node objects."""
        from kubernetes.client.rest import ApiException

        def ignore_missing(fn, *args, **kwargs):
            try:
                read_out(fn(*args, **kwargs))
            except ApiException as err:
                if err.status != 404:
                    raise

        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") in self.node_configs:
                meta = metadata(pod)
                ignore_missing(self.core.delete_namespaced_pod, meta["name"], meta["namespace"],
                               grace_period_seconds=0, _preload_content=False)
        # one by one: the oldest supported client (24, make min-versions) has no label selector on a collection delete
        slices = json.loads(self.custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", label_selector=STANDIN_LABEL, _preload_content=False).data)
        for item in slices.get("items") or []:
            if item["metadata"]["labels"].get(STANDIN_LABEL) not in self.node_configs:
                continue    # another stand-in's node (a test may run one of its own beside the suite's)
            ignore_missing(self.custom.delete_cluster_custom_object, "resource.k8s.io", "v1", "resourceslices",
                           item["metadata"]["name"], _preload_content=False)
        for name in self.node_configs:
            ignore_missing(self.coordination.delete_namespaced_lease, name, "kube-node-lease", _preload_content=False)
            ignore_missing(self.core.delete_node, name, _preload_content=False)
