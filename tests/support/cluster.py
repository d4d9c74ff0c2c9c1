# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an integration test sees of its cluster (the `cluster` fixture), the same shape everywhere: a real control
plane of the suite's own (kubelet stand-in and fault proxy), or the cluster of KUBECONFIG. See tests/integration/conftest.py for the fixtures."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import contextlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

import pytest
import yaml

from tests.support.k8s_objects import read_out
from tests.support.identities import IDENTITY_NAMES, least_privilege, suite_identity_names
from tests.support.write_observer import WRITE_METHODS, WriteObserver, LogObserver

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_ID = uuid.uuid4().hex[:6]
OBJECT_PREFIX = "kubehw-it-%s" % RUN_ID
# keeps an object of the suite's own terminating until the test ends (Cluster.owner_object)
KEEP_FINALIZER = "kubehw-it.example.com/keep"
# one counter for the whole run: a real apiserver deletes namespaces asynchronously, so a name must
# never come back in a later test of the same run
_SERIAL = itertools.count(1)


# scripts/cluster_stage.sh sets KUBEHW_CONTROL_PLANE to the folder of Kubernetes binaries (k8s_binaries.locate()): each
# process
# that runs tests (each xdist worker) starts a control plane of its own, so the stand-in nodes of its tests (named as
# in tests/support/node_configs: gpu-1, ...) never meet another worker's.
_OWN_CONTROL_PLANE = {}


def _runs_tests(config):
    """False in the xdist controller (its workers run the tests), True in a worker or a run without xdist."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def start_own_control_plane(config):
    bin_dir = os.environ.get("KUBEHW_CONTROL_PLANE")
    if not bin_dir or not _runs_tests(config):
        return
    from tests.support.control_plane import ControlPlane

    # state per process: two runs side by side never stop each other's
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = os.path.join(REPO_ROOT, ".cache", "real-control-plane")
    plane = ControlPlane(bin_dir, os.path.join(base, "%s-%d" % (worker, os.getpid()))).start()
    _OWN_CONTROL_PLANE["plane"] = plane
    os.environ["KUBECONFIG"] = plane.kubeconfig
    os.environ["KUBEHW_AGENT_KUBECONFIG"] = plane.agent_kubeconfig


def stop_own_control_plane():
    plane = _OWN_CONTROL_PLANE.pop("plane", None)
    if plane is not None:
        plane.stop(wipe=True)


class Cluster:
    """What a test sees of the cluster, the same shape on a control plane of the suite's own and on KUBECONFIG's."""

    def __init__(self, kubeconfig, controls=None):
        from kubernetes import client, config

        # on a control plane of the suite's own: the fault proxy and the kubelet stand-in (tests/support/real_cluster.py)
        self.controls = controls
        # the suite controls the cluster: its configured nodes exist, every request is logged, faults can be injected
        self.controlled = self.controls is not None
        self.kubeconfig = kubeconfig
        # KUBECONFIG may list several files; the official client reads the first one
        self.api_client = config.new_client_from_config(config_file=kubeconfig.split(os.pathsep)[0])
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)
        self._mark = 0
        self._cleanups = []     # (description, fn), undone last first by close()
        self._workdir = None
        self.identity_names = None    # suite_identity_names()
        self.standin = None           # the kubelet stand-in serving the configured nodes
        if least_privilege():
            names = suite_identity_names(self)
            IDENTITY_NAMES.update(kubehw_rbac_namespace=names["kubehw_rbac_namespace"],
                                  kubehw_rbac_service_account=names["kubehw_rbac_service_account"])

    # ------------------------------------------------------------ what the suite brings along

    def unique_name(self, what):
        """kubehw-it-<run>-<what>-<n>: a DNS label no other test or run uses."""
        return "%s-%s-%d" % (OBJECT_PREFIX, what, next(_SERIAL))

    def workdir(self):
        if self._workdir is None:
            self._workdir = tempfile.mkdtemp(prefix="kubehw-it-")
        return self._workdir

    def on_close(self, description, fn):
        self._cleanups.append((description, fn))

    def server(self):
        """(URL, CA file or None) of KUBECONFIG's current context, for tests that connect by host."""
        if self.controlled:
            return self.controls.url, self.controls.ca_cert_path
        with open(self.kubeconfig.split(os.pathsep)[0]) as f:
            data = yaml.safe_load(f)
        ctx = next(c["context"] for c in data["contexts"] if c["name"] == data["current-context"])
        entry = next(c["cluster"] for c in data["clusters"] if c["name"] == ctx["cluster"])
        ca = entry.get("certificate-authority")
        if entry.get("certificate-authority-data"):
            ca = os.path.join(self.workdir(), "ca.crt")
            with open(ca, "wb") as f:
                f.write(base64.b64decode(entry["certificate-authority-data"]))
        return entry["server"], ca

    def create_nodes(self, specs, threads=1):
        """Create Node objects (no kubelet: nothing copies capacity to allocatable later) and return
        their names; deleted at the end of the test. Each spec: {"labels", "taints", "capacity", "allocatable"}.
        A node created without status is stored with an empty one, so the whole capacity map can be
        added (as kube-apiserver does); allocatable is then defaulted
        to a copy of capacity unless given."""
        if threads > 1:
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
                return [name for names in pool.map(lambda spec: self.create_nodes([spec]), specs) for name in names]
        names = []
        for spec in specs:
            name = self.unique_name(spec.get("what", "node"))
            meta = {"name": name, "labels": dict(spec.get("labels") or {})}
            body = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
            if spec.get("taints"):
                body["spec"] = {"taints": list(spec["taints"])}
            read_out(self.core.create_node(body, _preload_content=False))
            self.on_close("delete node %s" % name, lambda n=name: self.core.delete_node(n, _preload_content=False))
            ops = []
            if spec.get("capacity") is not None:
                ops.append({"op": "add", "path": "/status/capacity", "value": spec["capacity"]})
            if spec.get("allocatable") is not None:
                ops.append({"op": "add", "path": "/status/allocatable", "value": spec["allocatable"]})
            if ops:
                read_out(self.core.patch_node_status(name, ops, _preload_content=False))
            names.append(name)
        return names

    def kubelets(self, nodes, **settings):
        """Nodes of the test's own with kubelets: a kubelet stand-in (tests/support/kubelet.py) of the test's own,
        started, for nodes given as rows of a node configuration (tests/support/node_configs.py: labels, taints,
        starting...) whose names get the run's prefix; settings are the configuration's other keys. It writes as the
        suite's stand-in does (past the fault proxy, so the request log and write observers leave it out), or with
        KUBECONFIG on another cluster; stopped, its nodes and their pods removed, at the end of the test. Returns
        (stand-in, [node names in the order given]); the nodes are registered, not yet schedulable (wait_schedulable)."""
        from tests.support.kubelet import KubeletStandIn

        names = [self.unique_name(node["name"]) for node in nodes]
        config = dict(settings, nodes=[dict(node, name=name) for node, name in zip(nodes, names)])
        kubeconfig = self.controls.standin.kubeconfig if self.controlled else self.kubeconfig.split(os.pathsep)[0]
        standin = KubeletStandIn(kubeconfig, config).start()
        self.on_close("stop the kubelet stand-in of %s" % ", ".join(names), standin.stop)
        return standin, names

    def create_pod(self, name, node, labels=None, annotations=None, owner=None, phase=None, ready=False):
        """A pod of this test's namespace bound to `node` by spec.nodeName (no scheduler), returned as the API
        stored it. On a node of create_nodes() no kubelet runs it, so `phase` (and `ready`: the Ready condition)
        write its status as a kubelet would. terminationGracePeriodSeconds 0: a bound pod with a grace period
        stays Terminating until its kubelet confirms, forever on such a node; with 0 the apiserver deletes it at
        once (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, v1.32: lastGraceful 0).
        `owner` (an ownerReference) must name an object that exists: the garbage collector deletes a pod whose
        owners are all absent."""
        namespace = self.namespace()
        meta = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        if owner:
            meta["ownerReferences"] = [owner]
        read_out(self.core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.example/kubehw-it:1"}]}}, _preload_content=False))
        if phase:
            status = {"phase": phase}
            if ready:
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": now}]
            read_out(self.core.patch_namespaced_pod_status(name, namespace, {"status": status}, _preload_content=False))
        return json.loads(self.core.read_namespaced_pod(name, namespace, _preload_content=False).data)

    def report_ready(self, node):
        """Write Ready=True into a node's status as its kubelet would (a node of create_nodes() has no kubelet)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        read_out(self.core.patch_node_status(node, [{"op": "add", "path": "/status/conditions", "value": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
            "lastTransitionTime": now}]}], _preload_content=False))

    def owner_object(self, kind="ConfigMap", node=None):
        """An object of this test's namespace that a pod of create_pod() can name as its controller, and an
        ownerReference to it. It exists, so the garbage collector keeps the pod, and no controller touches the pod:
        ConfigMap, which no controller manages dependents of; DaemonSet, one kept terminating by a finalizer of the
        test (the DaemonSet controller leaves a DaemonSet with a deletionTimestamp alone, pkg/controller/daemon/
        daemon_controller.go syncDaemonSet, v1.32). ``node`` (DaemonSet): the node its pod goes to, which must carry a
        NoSchedule taint the DaemonSet does not tolerate (create_nodes' "taints"): the template selects that node by
        name, so a sync that still saw the DaemonSet undeleted (its informer behind the pod's) keeps the pod there
        (NodeShouldRunDaemonPod: a NoSchedule taint lets a running pod continue) and starts none of its own; a
        template that selected no node had the controller delete the test's pod in such a sync."""
        namespace, name = self.namespace(), self.unique_name(kind.lower())
        if kind == "DaemonSet":
            labels = {"kubehw-it/owner": name}
            where = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                        "values": [node]}]}]}}}} if node else {"nodeSelector": labels}
            body = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": name, "finalizers": [KEEP_FINALIZER]},
                    "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {"type": "OnDelete"},
                             "template": {"metadata": {"labels": labels}, "spec": dict(where, containers=[
                                 {"name": "c", "image": "registry.example/kubehw-it:1"}])}}}
            created = json.loads(self.apps.create_namespaced_daemon_set(namespace, body, _preload_content=False).data)
            self.on_close("remove the finalizer of daemonset %s" % name, lambda: self.apps.patch_namespaced_daemon_set(
                name, namespace, [{"op": "remove", "path": "/metadata/finalizers"}], _preload_content=False))
            read_out(self.apps.delete_namespaced_daemon_set(name, namespace, _preload_content=False))
            api_version = "apps/v1"
        else:
            created = json.loads(self.core.create_namespaced_config_map(namespace, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}, _preload_content=False).data)
            api_version = "v1"
        return {"apiVersion": api_version, "kind": kind, "name": name, "uid": created["metadata"]["uid"],
                "controller": True}

    def advertise(self, node, resources):
        """Add extended resources to the node's status.capacity (key by key); removed after the test."""
        paths = ["/status/capacity/" + key.replace("~", "~0").replace("/", "~1") for key in sorted(resources)]
        read_out(self.core.patch_node_status(node, [{"op": "add", "path": path, "value": resources[key]}
                                                    for path, key in zip(paths, sorted(resources))],
                                             _preload_content=False))
        self.on_close("remove %s from node %s" % (", ".join(sorted(resources)), node), lambda: [
            read_out(self.core.patch_node_status(node, [{"op": "remove", "path": path}], _preload_content=False))
            for path in paths])

    def namespace(self):
        """A namespace of this test's own (created once, deleted with everything in it)."""
        if getattr(self, "_namespace", None) is None:
            name = self.unique_name("ns")
            read_out(self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                                _preload_content=False))
            self.on_close("delete namespace %s" % name,
                          lambda: self.core.delete_namespace(name, _preload_content=False))
            self._namespace = name
        return self._namespace

    def service_account(self, name, namespace=None):
        """A ServiceAccount and a token for it from the TokenRequest API: returns (user, token)."""
        namespace = namespace or self.namespace()
        read_out(self.core.create_namespaced_service_account(namespace, {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}, _preload_content=False))
        return "system:serviceaccount:%s:%s" % (namespace, name), self.request_token(name, namespace)

    def request_token(self, name, namespace, seconds=3600, bound_pod=None):
        """A token of an existing ServiceAccount from the TokenRequest API (bound to a pod when given one)."""
        spec = {"expirationSeconds": seconds}
        if bound_pod is not None:
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": bound_pod["metadata"]["name"],
                                      "uid": bound_pod["metadata"]["uid"]}
        answer = self.core.create_namespaced_service_account_token(name, namespace, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}, _preload_content=False)
        return json.loads(answer.data)["status"]["token"]

    def bind(self, rules, subjects):
        """A ClusterRole with these rules bound to the subjects ({"kind", "name", "namespace"}); deleted after."""
        name = self.unique_name("role")
        read_out(self.rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                                "metadata": {"name": name}, "rules": rules}, _preload_content=False))
        self.on_close("delete clusterrole %s" % name,
                      lambda: self.rbac.delete_cluster_role(name, _preload_content=False))
        read_out(self.rbac.create_cluster_role_binding({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects}, _preload_content=False))
        self.on_close("delete clusterrolebinding %s" % name,
                      lambda: self.rbac.delete_cluster_role_binding(name, _preload_content=False))
        return name

    def token_kubeconfig(self, token, filename=None):
        """A kubeconfig for KUBECONFIG's cluster with this bearer token instead of its user."""
        from tests.support.kubeconfig import write_kubeconfig

        url, ca = self.server()
        path = os.path.join(self.workdir(), filename or "token-%d.kubeconfig" % len(os.listdir(self.workdir())))
        if ca is None:
            raise RuntimeError("KUBECONFIG's cluster has no CA; the suite needs one to connect by token")
        return write_kubeconfig(path, url, ca, token)

    def watch_added(self, resource, label):
        """A list that fills with the names of the objects of `resource` ("pods", "daemonsets" in any namespace, or
        "deviceclasses") carrying `label` (None: all) that are created from now on, as a watch straight to the apiserver sees them: not through
        the fault proxy, so the test's faults and request log stay the collection's alone."""
        import threading

        from kubernetes import client, config, watch

        api_client = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
        custom = client.CustomObjectsApi(api_client)
        list_fn = {"pods": client.CoreV1Api(api_client).list_pod_for_all_namespaces,
                   "daemonsets": client.AppsV1Api(api_client).list_daemon_set_for_all_namespaces,
                   "deviceclasses": lambda **kw: custom.list_cluster_custom_object(
                       "resource.k8s.io", "v1", "deviceclasses", **kw)}[resource]
        since = json.loads(list_fn(limit=1, _preload_content=False).data)["metadata"]["resourceVersion"]
        added, watcher = [], watch.Watch()

        def run():
            try:
                query = {"label_selector": label} if label else {}
                for event in watcher.stream(list_fn, resource_version=since, timeout_seconds=600, **query):
                    if event["type"] == "ADDED":
                        obj = event["object"]
                        added.append(obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name)
            except Exception:  # pylint: disable=broad-except
                pass    # closed by the test's end
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.on_close("stop the watch of %s" % resource, lambda: (watcher.stop(), api_client.close()))
        return added

    def when_watching(self, resource, *steps):
        """In a thread: before each step, wait until a module holds a watch on `resource` (the fault proxy's open
        watches) that the previous step did not end (a watch opened since: after a relist, one may start at the
        resourceVersion the ended one started at), then run the step. Returns the started thread."""
        import threading

        self.require_controlled("waits for the watches the fault proxy relays")

        def open_watches():
            return [w["id"] for w in self.controls.open_watches if w["resource"] == resource]

        def run():
            seen = set()
            for step in steps:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not [w for w in open_watches() if w not in seen]:
                    time.sleep(0.05)
                seen.update(open_watches())
                step()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def require_controlled(self, reason):
        """Skip unless the suite controls the cluster (a control plane of its own behind the fault proxy and the kubelet
        stand-in): a cluster named by KUBECONFIG has neither the request log nor faults."""
        if not self.controlled:
            pytest.skip("needs a control plane of the suite's own (not KUBECONFIG's cluster): %s" % reason)

    def mark(self):
        """Remember the current end of the request log; writes() counts from here."""
        self._mark = len(self.controls.requests) if self.controlled else 0
        return self._mark

    def requests(self, since=None):
        self.require_controlled("reads the request log")
        start = self._mark if since is None else since
        return list(self.controls.requests)[start:]

    def writes(self, since=None):
        """Logged POST/PUT/PATCH/DELETE requests since the mark (or since the given index)."""
        return [r for r in self.requests(since) if r["method"].upper() in WRITE_METHODS]

    def observe_writes(self, namespaces=(), names=(), by_watch=None):
        """Start observing writes for a test whose point is "writes nothing": returns a WriteObserver whose
        writes() lists what was written since. On a control plane of the suite's own it reads the fault proxy's request
        log (every POST/PUT/PATCH/DELETE); on KUBECONFIG's cluster (or with by_watch=True) it watches, see
        WriteObserver."""
        if by_watch is None:
            by_watch = not self.controlled
        return WriteObserver(self, namespaces, names) if by_watch else LogObserver(self)

    def node_names(self):
        # raw JSON: the generated models would also judge the node's unrelated fields
        resp = self.core.list_node(_preload_content=False)
        return sorted(n["metadata"]["name"] for n in json.loads(resp.data)["items"])

    def close(self):
        from kubernetes.client.rest import ApiException

        try:
            while self._cleanups:
                description, fn = self._cleanups.pop()
                try:
                    read_out(fn())
                except ApiException as err:
                    if err.status != 404:
                        sys.stderr.write("kubehw integration: could not %s: %s %s\n"
                                         % (description, err.status, err.reason))
        finally:
            IDENTITY_NAMES.clear()
            self.api_client.close()
            if self._workdir:
                shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def _real_control_plane(config):
    """A real control plane of this worker's own (KUBEHW_AGENT_KUBECONFIG set): the nodes of the test's node
    configuration (tests/support/node_configs/default.yaml unless the test names another) registered and served by a
    kubelet stand-in writing as the agent, and everything the test created removed after it."""
    from tests.support.node_configs import DEFAULT_CONFIG_PATH
    from tests.support.fault_proxy import FaultProxy
    from tests.support.kubelet import KubeletStandIn
    from tests.support.leftovers import Snapshot
    from tests.support.real_cluster import RealControls

    from kubernetes import config as kube_config

    before = Snapshot(kube_config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    standin = KubeletStandIn(os.environ["KUBEHW_AGENT_KUBECONFIG"], DEFAULT_CONFIG_PATH if config is None else config)
    proxy = FaultProxy(os.environ["KUBECONFIG"])
    cluster = None
    try:
        standin.start()
        proxy.start()
        workdir = tempfile.mkdtemp(prefix="kubehw-proxy-")
        cluster = Cluster(proxy.write_kubeconfig(os.path.join(workdir, "admin.kubeconfig")),
                          controls=RealControls(proxy, standin))
        cluster.on_close("remove %s" % workdir, lambda: shutil.rmtree(workdir, ignore_errors=True))
        cluster.standin = standin
        standin.wait_schedulable()
        yield cluster
    finally:
        try:
            if cluster is not None:
                cluster.close()
            left = before.remove_newer()
            if left:
                sys.stderr.write("kubehw integration: namespaces still terminating after the test: %s\n" % left)
        finally:
            standin.stop()
            if standin.errors:
                # shown with the test's report if it fails: what went wrong in the nodes' kubelets meanwhile
                sys.stderr.write("kubehw integration: the kubelet stand-in's errors: %s\n" % standin.errors)
            proxy.stop()
            before.api_client.close()


@contextlib.contextmanager
def open_cluster(config=None):
    """Yield a Cluster: a control plane of this worker's own (scripts/cluster_stage.sh), else KUBECONFIG's cluster."""
    if not os.environ.get("KUBECONFIG"):
        pytest.fail("no cluster: run the suite through make integration (a control plane of its own from "
                    "Kubernetes binaries, tests/support/k8s_binaries.py), or set KUBECONFIG")
    if os.environ.get("KUBEHW_AGENT_KUBECONFIG"):
        with _real_control_plane(config) as cluster:
            yield cluster
        return
    cluster = Cluster(os.environ["KUBECONFIG"])
    try:
        yield cluster
    finally:
        cluster.close()


def node_runs_pods(node):
    """Ready, schedulable, no NoSchedule/NoExecute taint, room for pods: the scheduler may use it."""
    status, spec = node.get("status") or {}, node.get("spec") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return ready and not spec.get("unschedulable") and not taints and (status.get("allocatable") or {}).get("pods")


def wait_for(predicate, timeout=30, interval=0.2, what="a condition"):
    """Poll predicate() until it returns something true; fail the test naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)
