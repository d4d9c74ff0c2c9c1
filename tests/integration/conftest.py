# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Integration harness: a cluster (simulated by default, real when KUBECONFIG is set) and a
runner that plays tasks on localhost with the collection from this checkout.

The suite brings what it needs, so the same tests run on the simulated cluster and on any real
one: Node objects of its own (no kubelet behind them, which is enough for status tests), service
accounts with tokens from the TokenRequest API, and RBAC bindings; everything it creates is named
kubehw-it-<run id>-... and deleted after the test. Only the request log and fault injection are
the simulated cluster's alone.

Fixtures:
  cluster   .simulated, .sim (SimCluster or None), .kubeconfig, .core, .apps, .rbac, .mark(),
            .writes(since=None), .require_simulated(reason), .node_names(), .server()
            (URL, CA file), .create_nodes(specs), .service_account(name, ...), .bind(...)
            Mark a test with @pytest.mark.simcluster_config({...}) to start the simulated
            cluster with that configuration instead of the default one.
  kubelet_node  a Ready, schedulable node with a kubelet (pods run there), or a skip naming why
  ansible   ansible(tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None)
            -> PlaybookRun with .rc, .results, .result(name), .stdout, .stderr
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALLBACK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callback_plugins")
CACHED_COLLECTIONS = os.path.join(REPO_ROOT, ".cache", "collections")
WRITE_METHODS = frozenset(["POST", "PUT", "PATCH", "DELETE"])
PLAYBOOK_TIMEOUT = 300
# what this run creates is named kubehw-it-<RUN_ID>-..., so parallel runs and leftovers never collide
RUN_ID = uuid.uuid4().hex[:6]
OBJECT_PREFIX = "kubehw-it-%s" % RUN_ID
# keeps an object of the suite's own terminating until the test ends (Cluster.owner_object)
KEEP_FINALIZER = "kubehw-it.example.com/keep"
# one counter for the whole run: a real apiserver deletes namespaces asynchronously, so a name must
# never come back in a later test of the same run
_SERIAL = itertools.count(1)


def _use_real_cluster():
    return bool(os.environ.get("KUBECONFIG")) and os.environ.get("KUBEHW_SIMCLUSTER") != "1"


# The module suites: their modules always run as the automation identity of playbooks/templates/rbac.yaml.j2
# (the least-privilege identity a platform team runs them as), so a rule the shipped RBAC lacks fails here. They
# used to run twice, as the admin in `make integration` and as the identity in a `make least-privilege` stage; the
# admin may do everything the identity may, so the admin run proved nothing the identity run does not.
# A test file may also mark itself with pytestmark = pytest.mark.least_privilege_identity.
LEAST_PRIVILEGE_SUITES = frozenset([
    "test_k8s_node_extended_resource.py", "test_device_plugin_deploy.py", "test_info_and_smoke_test.py",
])
# KUBEHW_IDENTITY=admin runs the modules of every test as the admin (to tell a missing RBAC rule from a bug);
# KUBEHW_IDENTITY=least-privilege runs the modules of every test as the identity.
IDENTITIES = ("admin", "least-privilege")

# Whether the running test's modules run as the least-privilege identity, set by the cluster fixture (an xdist
# worker runs one test at a time).
_RUNNING = {"least_privilege": False}


def identity_of(node):
    """True when the modules of this test item run as the least-privilege identity (see LEAST_PRIVILEGE_SUITES)."""
    identity = os.environ.get("KUBEHW_IDENTITY", "")
    if identity:
        return identity == "least-privilege"
    return node.get_closest_marker("least_privilege_identity") is not None


def least_privilege():
    """True when the running test's modules run as the least-privilege identity."""
    return _RUNNING["least_privilege"]


# `make real` (scripts/real_stage.sh) sets KUBEHW_CONTROL_PLANE to a folder with up.sh (../shared/k8s): each process
# that runs tests (each xdist worker) starts a control plane of its own, so the stand-in nodes of its tests (named as
# in the simulated cluster's configurations: gpu-1, ...) never meet another worker's.
_OWN_CONTROL_PLANE = {}


def _runs_tests(config):
    """False in the xdist controller (its workers run the tests), True in a worker or a run without xdist."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def _start_own_control_plane(config):
    home = os.environ.get("KUBEHW_CONTROL_PLANE")
    if not home or not _runs_tests(config):
        return
    from tests.support.control_plane import ControlPlane

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    plane = ControlPlane(home, os.path.join(REPO_ROOT, ".cache", "real-control-plane", worker)).start()
    _OWN_CONTROL_PLANE["plane"] = plane
    os.environ["KUBECONFIG"] = plane.kubeconfig
    os.environ["KUBEHW_AGENT_KUBECONFIG"] = plane.agent_kubeconfig


def pytest_unconfigure(config):
    del config
    plane = _OWN_CONTROL_PLANE.pop("plane", None)
    if plane is not None:
        plane.stop()


def pytest_configure(config):
    _start_own_control_plane(config)
    config.addinivalue_line(
        "markers", "simcluster_config(config): configuration (dict or YAML path) for the simulated cluster")
    config.addinivalue_line(
        "markers", "least_privilege_identity: the modules run as the shipped least-privilege identity "
                   "(set on the module suites; `pytest -m least_privilege_identity` runs only them)")
    identity = os.environ.get("KUBEHW_IDENTITY", "")
    if identity and identity not in IDENTITIES:
        raise pytest.UsageError("KUBEHW_IDENTITY=%r: must be one of %s or unset" % (identity, ", ".join(IDENTITIES)))


def pytest_collection_modifyitems(config, items):
    del config
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        path = str(item.fspath)   # the unit tests have files of the same names elsewhere
        if os.path.dirname(path) == here and os.path.basename(path) in LEAST_PRIVILEGE_SUITES:
            item.add_marker(pytest.mark.least_privilege_identity)


def pytest_report_header(config):
    if os.environ.get("KUBEHW_CONTROL_PLANE"):
        return "kubehw integration: REAL control plane from %s, one per worker, kubelet stand-in for the test nodes" \
            % os.environ["KUBEHW_CONTROL_PLANE"]
    if _use_real_cluster():
        return "kubehw integration: REAL cluster from KUBECONFIG=%s" % os.environ["KUBECONFIG"]
    return "kubehw integration: simulated cluster (set KUBECONFIG to use a real one)"


class _LogObserver:
    """Writes since it was made, from the simulated cluster's request log (exact: every write request)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.start = len(cluster.sim.requests)

    def writes(self):
        return [(r["method"], r["path"]) for r in self.cluster.writes(self.start)]


class WriteObserver:
    """Writes since it was made, as any kube-apiserver shows them: each kind the collection writes is listed
    (one object per page is enough: only the list's resourceVersion is kept), and writes() then opens a watch
    from that resourceVersion, which replays every change made after the list (ADDED, MODIFIED, DELETED), ending
    after timeoutSeconds=1 (all kinds at once, so about one second in all).

    On a shared cluster other tests, controllers and kubelets write too, so only the objects a test names count:
    everything in ``namespaces``, and cluster-scoped objects (nodes, namespaces, RuntimeClasses, DeviceClasses,
    ClusterRoles and bindings) named in ``names``. A write that changes nothing (a patch equal to the object)
    stores nothing and is not seen; the simulated cluster's request log sees those too (_LogObserver)."""

    def __init__(self, cluster, namespaces, names):
        from kubernetes import client

        self.cluster = cluster
        self.names = set(names)
        custom = client.CustomObjectsApi(cluster.api_client)
        rbac, core = cluster.rbac, cluster.core
        kinds = [("nodes", True, core.list_node), ("namespaces", True, core.list_namespace),
                 ("runtimeclasses", True, client.NodeV1Api(cluster.api_client).list_runtime_class),
                 ("deviceclasses", True,
                  lambda **kw: custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", **kw)),
                 ("clusterroles", True, rbac.list_cluster_role),
                 ("clusterrolebindings", True, rbac.list_cluster_role_binding)]
        for ns in namespaces:
            kinds += [("%s/pods" % ns, False, lambda ns=ns, **kw: core.list_namespaced_pod(ns, **kw)),
                      ("%s/configmaps" % ns, False, lambda ns=ns, **kw: core.list_namespaced_config_map(ns, **kw)),
                      ("%s/serviceaccounts" % ns, False,
                       lambda ns=ns, **kw: core.list_namespaced_service_account(ns, **kw)),
                      ("%s/daemonsets" % ns, False,
                       lambda ns=ns, **kw: cluster.apps.list_namespaced_daemon_set(ns, **kw))]
            for plural in ("resourceclaims", "resourceclaimtemplates"):
                kinds.append(("%s/%s" % (ns, plural), False, lambda ns=ns, plural=plural, **kw:
                              custom.list_namespaced_custom_object("resource.k8s.io", "v1", ns, plural, **kw)))
        # Nodes change under everyone: kubelets report status, the node lifecycle controller taints a Node object
        # without a kubelet. A node counts as written when what the collection writes on it changed.
        self.nodes = {}
        for name in self.names:
            answer = self._get(lambda **kw: core.read_node(name, **kw))
            if answer is not None:
                self.nodes[name] = self._node_view(json.loads(answer.data))
        self.marks = []
        for what, cluster_scoped, list_fn in kinds:
            answer = self._get(list_fn, limit=1)
            if answer is not None:      # a kind the cluster does not serve (resource.k8s.io before 1.34) is skipped
                self.marks.append((what, cluster_scoped, list_fn, json.loads(answer.data)["metadata"]["resourceVersion"]))

    @staticmethod
    def _get(list_fn, **query):
        from kubernetes.client.rest import ApiException

        try:
            return list_fn(_preload_content=False, **query)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def _events(self, mark):
        what, cluster_scoped, list_fn, version = mark
        answer = self._get(list_fn, watch=True, resource_version=version, timeout_seconds=1)
        found = []
        for line in answer.data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise AssertionError("watch of %s from %s ended with %s" % (what, version, event["object"]))
            if event["type"] == "BOOKMARK":
                continue
            name = event["object"]["metadata"]["name"]
            if what == "nodes" and event["type"] == "MODIFIED" and name in self.nodes \
                    and self._node_view(event["object"]) == self.nodes[name]:
                continue
            if not cluster_scoped or name in self.names:
                found.append((event["type"], "%s/%s" % (what, name)))
        return found

    @staticmethod
    def _node_view(node):
        """What the collection writes on a node: labels, annotations, status capacity and allocatable, cordon."""
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        return (meta.get("labels") or {}, meta.get("annotations") or {}, status.get("capacity") or {},
                status.get("allocatable") or {}, bool((node.get("spec") or {}).get("unschedulable")))

    def writes(self):
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.marks))) as pool:
            return [event for events in pool.map(self._events, self.marks) for event in events]


class Cluster:
    """What a test sees of the cluster, the same shape for simulated and real clusters."""

    def __init__(self, kubeconfig, sim=None, controls=None):
        from kubernetes import client, config

        # the simulated cluster, or on a real control plane of the suite's own the same controls served by the fault
        # proxy and the kubelet stand-in (tests/support/real_cluster.py)
        self.sim = sim if sim is not None else controls
        self.simulated = sim is not None
        # the suite controls the cluster: its configured nodes exist, every request is logged, faults can be injected
        self.controlled = self.sim is not None
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
        self.standin = None           # the kubelet stand-in serving this test's nodes on a real control plane
        if least_privilege():
            names = suite_identity_names(self)
            _IDENTITY.update(kubehw_rbac_namespace=names["kubehw_rbac_namespace"],
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
            return self.sim.url, self.sim.ca_cert_path
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
        their names; deleted at the end of the test. Each spec: {"labels", "capacity", "allocatable"}.
        A node created without status is stored with an empty one, so the whole capacity map can be
        added (as kube-apiserver v1.32 does, tests/simcluster/FACTS.md); allocatable is then defaulted
        to a copy of capacity unless given."""
        if threads > 1:
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
                return [name for names in pool.map(lambda spec: self.create_nodes([spec]), specs) for name in names]
        names = []
        for spec in specs:
            name = self.unique_name(spec.get("what", "node"))
            meta = {"name": name, "labels": dict(spec.get("labels") or {})}
            self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta}, _preload_content=False)
            self.on_close("delete node %s" % name, lambda n=name: self.core.delete_node(n, _preload_content=False))
            ops = []
            if spec.get("capacity") is not None:
                ops.append({"op": "add", "path": "/status/capacity", "value": spec["capacity"]})
            if spec.get("allocatable") is not None:
                ops.append({"op": "add", "path": "/status/allocatable", "value": spec["allocatable"]})
            if ops:
                self.core.patch_node_status(name, ops, _preload_content=False)
            names.append(name)
        return names

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
        self.core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.example/kubehw-it:1"}]}}, _preload_content=False)
        if phase:
            status = {"phase": phase}
            if ready:
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": now}]
            self.core.patch_namespaced_pod_status(name, namespace, {"status": status}, _preload_content=False)
        return json.loads(self.core.read_namespaced_pod(name, namespace, _preload_content=False).data)

    def report_ready(self, node):
        """Write Ready=True into a node's status as its kubelet would (a node of create_nodes() has no kubelet)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.core.patch_node_status(node, [{"op": "add", "path": "/status/conditions", "value": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
            "lastTransitionTime": now}]}], _preload_content=False)

    def owner_object(self, kind="ConfigMap"):
        """An object of this test's namespace that a pod of create_pod() can name as its controller, and an
        ownerReference to it. It exists, so the garbage collector keeps the pod, and no controller touches the pod:
        ConfigMap, which no controller manages dependents of; DaemonSet, one kept terminating by a finalizer of the
        test (the DaemonSet controller leaves a DaemonSet with a deletionTimestamp alone, pkg/controller/daemon/
        daemon_controller.go syncDaemonSet, v1.32; it selects no node, so it never ran a pod of its own)."""
        namespace, name = self.namespace(), self.unique_name(kind.lower())
        if kind == "DaemonSet":
            labels = {"kubehw-it/owner": name}
            body = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": name, "finalizers": [KEEP_FINALIZER]},
                    "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {"type": "OnDelete"},
                             "template": {"metadata": {"labels": labels}, "spec": {
                                 "nodeSelector": labels,
                                 "containers": [{"name": "c", "image": "registry.example/kubehw-it:1"}]}}}}
            created = json.loads(self.apps.create_namespaced_daemon_set(namespace, body, _preload_content=False).data)
            self.on_close("remove the finalizer of daemonset %s" % name, lambda: self.apps.patch_namespaced_daemon_set(
                name, namespace, [{"op": "remove", "path": "/metadata/finalizers"}], _preload_content=False))
            self.apps.delete_namespaced_daemon_set(name, namespace, _preload_content=False)
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
        self.core.patch_node_status(node, [{"op": "add", "path": path, "value": resources[key]}
                                           for path, key in zip(paths, sorted(resources))], _preload_content=False)
        self.on_close("remove %s from node %s" % (", ".join(sorted(resources)), node), lambda: [
            self.core.patch_node_status(node, [{"op": "remove", "path": path}], _preload_content=False)
            for path in paths])

    def namespace(self):
        """A namespace of this test's own (created once, deleted with everything in it)."""
        if getattr(self, "_namespace", None) is None:
            name = self.unique_name("ns")
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                       _preload_content=False)
            self.on_close("delete namespace %s" % name,
                          lambda: self.core.delete_namespace(name, _preload_content=False))
            self._namespace = name
        return self._namespace

    def service_account(self, name, namespace=None):
        """A ServiceAccount and a token for it from the TokenRequest API: returns (user, token)."""
        namespace = namespace or self.namespace()
        self.core.create_namespaced_service_account(namespace, {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}, _preload_content=False)
        answer = self.core.create_namespaced_service_account_token(name, namespace, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
            _preload_content=False)
        return "system:serviceaccount:%s:%s" % (namespace, name), json.loads(answer.data)["status"]["token"]

    def bind(self, rules, subjects):
        """A ClusterRole with these rules bound to the subjects ({"kind", "name", "namespace"}); deleted after."""
        name = self.unique_name("role")
        self.rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                       "metadata": {"name": name}, "rules": rules}, _preload_content=False)
        self.on_close("delete clusterrole %s" % name,
                      lambda: self.rbac.delete_cluster_role(name, _preload_content=False))
        self.rbac.create_cluster_role_binding({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects}, _preload_content=False)
        self.on_close("delete clusterrolebinding %s" % name,
                      lambda: self.rbac.delete_cluster_role_binding(name, _preload_content=False))
        return name

    def token_kubeconfig(self, token, filename=None):
        """A kubeconfig for KUBECONFIG's cluster with this bearer token instead of its user."""
        from tests.simcluster.kubeconfig import write_kubeconfig

        url, ca = self.server()
        path = os.path.join(self.workdir(), filename or "token-%d.kubeconfig" % len(os.listdir(self.workdir())))
        if ca is None:
            raise RuntimeError("KUBECONFIG's cluster has no CA; the suite needs one to connect by token")
        return write_kubeconfig(path, url, ca, token)

    def wait_nodes_schedulable(self, names, timeout=30):
        """Wait until the node lifecycle controller has lifted the not-ready taint of these (stand-in) nodes, as it
        does once their kubelet reports Ready; nodes configured with taints of their own keep those."""
        def ready():
            nodes = json.loads(self.core.list_node(_preload_content=False).data)["items"]
            tainted = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] in names and any(
                t.get("key") == "node.kubernetes.io/not-ready" for t in (n.get("spec") or {}).get("taints") or [])]
            present = set(n["metadata"]["name"] for n in nodes)
            return not tainted and set(names) <= present
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError("stand-in nodes %s still not schedulable after %ss" % (names, timeout))
            time.sleep(0.2)

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

    def require_simulated(self, reason):
        if not self.simulated:
            pytest.skip("needs the simulated cluster: %s" % reason)

    def require_controlled(self, reason):
        """Skip unless the suite controls the cluster (simulated, or a real control plane of its own behind the fault
        proxy and the kubelet stand-in): a cluster named by KUBECONFIG has neither the request log nor faults."""
        if not self.controlled:
            pytest.skip("needs a cluster the suite controls (simulated, or make real's own control plane): %s" % reason)

    def mark(self):
        """Remember the current end of the request log; writes() counts from here."""
        self._mark = len(self.sim.requests) if self.controlled else 0
        return self._mark

    def requests(self, since=None):
        self.require_controlled("reads the request log")
        start = self._mark if since is None else since
        return [r for r in list(self.sim.requests)[start:] if not r["path"].startswith("/simcluster")]

    def writes(self, since=None):
        """Logged POST/PUT/PATCH/DELETE requests since the mark (or since the given index)."""
        return [r for r in self.requests(since) if r["method"].upper() in WRITE_METHODS]

    def observe_writes(self, namespaces=(), names=(), by_watch=None):
        """Start observing writes for a test whose point is "writes nothing": returns a WriteObserver whose
        writes() lists what was written since. On the simulated cluster it reads the request log (every
        POST/PUT/PATCH/DELETE); on any other cluster (or with by_watch=True) it watches, see WriteObserver."""
        if by_watch is None:
            by_watch = not self.controlled
        return WriteObserver(self, namespaces, names) if by_watch else _LogObserver(self)

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
                    fn()
                except ApiException as err:
                    if err.status != 404:
                        sys.stderr.write("kubehw integration: could not %s: %s %s\n"
                                         % (description, err.status, err.reason))
        finally:
            _IDENTITY.clear()
            self.api_client.close()
            if self._workdir:
                shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def _real_control_plane(config):
    """A real control plane of this worker's own (KUBEHW_AGENT_KUBECONFIG set): the nodes of the test's simulated
    cluster configuration (the default one unless the test names another) registered and served by a kubelet
    stand-in writing as the agent, and everything the test created removed after it."""
    from tests.simcluster.config import DEFAULT_CONFIG_PATH
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
        cluster.wait_nodes_schedulable(sorted(standin.node_configs))
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
            proxy.stop()
            before.api_client.close()


@contextlib.contextmanager
def open_cluster(config=None):
    """Yield a Cluster: the real one from KUBECONFIG, or a freshly started SimCluster."""
    if _use_real_cluster():
        agent = os.environ.get("KUBEHW_AGENT_KUBECONFIG")
        if not agent:
            cluster = Cluster(os.environ["KUBECONFIG"])
            try:
                yield cluster
            finally:
                cluster.close()
            return
        with _real_control_plane(config) as cluster:
            yield cluster
        return
    from tests.simcluster import SimCluster

    sim = SimCluster(config)
    sim.start()
    try:
        cluster = Cluster(sim.kubeconfig_path, sim)
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        sim.stop()


@pytest.fixture
def cluster(request):
    marker = request.node.get_closest_marker("simcluster_config")
    config = marker.args[0] if marker and marker.args else None
    _RUNNING["least_privilege"] = identity_of(request.node)
    try:
        with open_cluster(config) as c:
            yield c
    finally:
        _RUNNING["least_privilege"] = False


def _node_runs_pods(node):
    """Ready, schedulable, no NoSchedule/NoExecute taint, room for pods: the scheduler may use it."""
    status, spec = node.get("status") or {}, node.get("spec") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return ready and not spec.get("unschedulable") and not taints and (status.get("allocatable") or {}).get("pods")


@pytest.fixture
def kubelet_node(cluster):
    """The name of a node whose kubelet runs pods and copies extended resources from capacity to
    allocatable. A real node: advertise there with cluster.advertise(), which removes what it added
    after the test, and give each test its own resource name (xdist runs tests side by side)."""
    nodes = json.loads(cluster.core.list_node(_preload_content=False).data)["items"]
    usable = sorted(n["metadata"]["name"] for n in nodes if _node_runs_pods(n))
    if not usable:
        pytest.skip("the cluster has no Ready, untainted, schedulable node for a test pod")
    return usable[0]


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


# ---------------------------------------------------------------- ansible-playbook

class PlaybookRun:
    def __init__(self, rc, results, stdout, stderr, playbook):
        self.rc = rc
        self.results = results
        self.stdout = stdout
        self.stderr = stderr
        self.playbook = playbook

    def result(self, name):
        """The result of the task with this name (the last one if it ran more than once)."""
        for res in reversed(self.results):
            if res.get("task") == name:
                return res
        ran = [r.get("task") for r in self.results]
        raise KeyError("no task named %r ran; tasks: %r\n%s" % (name, ran, self.output()))

    def output(self):
        return "--- playbook\n%s\n--- stdout\n%s\n--- stderr\n%s" % (self.playbook, self.stdout, self.stderr)

    def __repr__(self):
        return "<PlaybookRun rc=%d tasks=%r>" % (self.rc, [(r.get("task"), r.get("_outcome")) for r in self.results])


@pytest.fixture(scope="session")
def collections_path(tmp_path_factory):
    """ansible_collections/kubehw/devices pointing at this checkout (plus the cached test deps)."""
    root = tmp_path_factory.mktemp("collections")
    ns = root / "ansible_collections" / "kubehw"
    ns.mkdir(parents=True)
    os.symlink(REPO_ROOT, str(ns / "devices"))
    paths = [str(root)]
    if os.path.isdir(CACHED_COLLECTIONS):
        paths.append(CACHED_COLLECTIONS)
    return os.pathsep.join(paths)


class AnsibleRunner:
    def __init__(self, workdir, collections, kubeconfig):
        self.workdir = workdir
        self.collections = collections
        self.kubeconfig = kubeconfig
        self.runs = 0

    def env(self, extra=None):
        env = dict(os.environ)
        # nothing from the developer's shell may point the modules at another cluster
        for key in list(env):
            if key.startswith("K8S_AUTH_") or key in ("KUBECONFIG",) or key.startswith("ANSIBLE_"):
                del env[key]
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": self.collections,
            "ANSIBLE_CALLBACK_PLUGINS": CALLBACK_DIR,
            "ANSIBLE_CALLBACKS_ENABLED": "kubehw_results",
            "ANSIBLE_NOCOLOR": "1",
            # local connection: pipelining skips writing each module to a temp file first
            "ANSIBLE_PIPELINING": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCALHOST_WARNING": "0",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "ANSIBLE_LOCAL_TEMP": os.path.join(self.workdir, "ansible-tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if self.kubeconfig:
            env["K8S_AUTH_KUBECONFIG"] = self.kubeconfig
        for key, value in (extra or {}).items():
            # None removes a variable, e.g. {"K8S_AUTH_KUBECONFIG": None}
            if value is None:
                env.pop(key, None)
            else:
                env[key] = str(value)
        return env

    def __call__(self, tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None,
                 verbosity=0):
        self.runs += 1
        rundir = tempfile.mkdtemp(prefix="run%d-" % self.runs, dir=self.workdir)
        play = {
            "name": "Integration test play",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": tasks,
        }
        if module_defaults:
            play["module_defaults"] = module_defaults
        playbook_text = yaml.safe_dump([play], default_flow_style=False, sort_keys=False)
        playbook = os.path.join(rundir, "playbook.yml")
        with open(playbook, "w") as f:
            f.write(playbook_text)
        results_file = os.path.join(rundir, "results.jsonl")
        cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", playbook]
        if not os.path.exists(cmd[0]):
            cmd[0] = "ansible-playbook"
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if verbosity:
            cmd.append("-" + "v" * verbosity)
        if extra_vars:
            vars_file = os.path.join(rundir, "extra_vars.json")
            with open(vars_file, "w") as f:
                json.dump(extra_vars, f)
            cmd += ["-e", "@" + vars_file]
        run_env = self.env(env)
        run_env["KUBEHW_RESULTS_FILE"] = results_file
        proc = subprocess.run(cmd, env=run_env, cwd=rundir, capture_output=True, text=True, check=False,
                              timeout=PLAYBOOK_TIMEOUT)
        results = []
        if os.path.exists(results_file):
            with open(results_file) as f:
                results = [json.loads(line) for line in f if line.strip()]
        return PlaybookRun(proc.returncode, results, proc.stdout, proc.stderr, playbook_text)


# The least-privilege identity (LEAST_PRIVILEGE_SUITES): the modules run as the automation identity of
# playbooks/templates/rbac.yaml.j2 and nothing more.
# The objects are created and a token requested (TokenRequest) on any cluster, so KUBECONFIG is the admin's.
RBAC_TEMPLATE = os.path.join(REPO_ROOT, "playbooks", "templates", "rbac.yaml.j2")
# The DaemonSets the module suites write, as an inventory declaring them would (playbooks/rbac.yml): every preset's
# default name and gpu-plugin (test_device_plugin_deploy's switch tests). The identity may change no other
# DaemonSet, and no ConfigMap but their <name>-config.
SUITE_PLUGIN_DAEMONSETS = ["amdgpu-device-plugin", "generic-device-plugin", "gpu-plugin", "intel-gpu-plugin",
                           "nvidia-device-plugin"]
RBAC_VARS = {"kubehw_rbac_namespace": "kubehw", "kubehw_rbac_service_account": "automation",
             "kubehw_rbac_plugin_namespace": "kubehw-device-plugins", "kubehw_rbac_smoke_test_namespace": "default",
             "kubehw_rbac_plugin_daemonsets": SUITE_PLUGIN_DAEMONSETS}


# The least-privilege identity of the running test (least_privilege_kubeconfig): its ServiceAccount namespace and
# name, which rbac_objects() binds to unless told otherwise, so a fixture granting the identity more (a plugin or DRA
# namespace of a test's own) binds the identity the test's modules run as. Reset by Cluster.close().
_IDENTITY = {}


def rbac_objects(**overrides):
    import jinja2

    from ansible.module_utils.parsing.convert_bool import boolean

    env = jinja2.Environment()
    # The template uses Jinja's own filters and Ansible's bool. Not ansible's whole filter set: its `default`
    # (ansible-core 2.19) does not see plain Jinja's Undefined, so `x | default(true) | bool` became false.
    env.filters["bool"] = lambda value: boolean(value, strict=False)
    with open(RBAC_TEMPLATE) as f:
        variables = dict(RBAC_VARS, **_IDENTITY)
        variables.update(overrides)
        docs = [d for d in yaml.safe_load_all(env.from_string(f.read()).render(**variables)) if d]
    problems = [d for d in docs if d["kind"] == "KubehwRbacProblems"]
    assert not problems, problems   # playbooks/rbac.yml stops on these
    return docs


def _deleter(cluster, doc):
    kind, meta = doc["kind"], doc["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    calls = {
        "Namespace": lambda: cluster.core.delete_namespace(name, _preload_content=False),
        "ServiceAccount": lambda: cluster.core.delete_namespaced_service_account(name, namespace, _preload_content=False),
        "ClusterRole": lambda: cluster.rbac.delete_cluster_role(name, _preload_content=False),
        "ClusterRoleBinding": lambda: cluster.rbac.delete_cluster_role_binding(name, _preload_content=False),
        "Role": lambda: cluster.rbac.delete_namespaced_role(name, namespace, _preload_content=False),
        "RoleBinding": lambda: cluster.rbac.delete_namespaced_role_binding(name, namespace, _preload_content=False),
    }
    return calls[kind]


def create_objects(cluster, docs):
    """Create these objects as the admin (namespaces that exist are left alone); deleted after the test."""
    from kubernetes import utils

    existing = set(ns.metadata.name for ns in cluster.core.list_namespace().items)
    for doc in docs:
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] in existing:
            continue
        try:
            utils.create_from_dict(cluster.api_client, doc)
        except utils.FailToCreateError as err:
            if any(e.status != 409 for e in err.api_exceptions):
                raise
            continue    # made earlier in this test (the least-privilege identity of the run): left to that
        cluster.on_close("delete %s %s" % (doc["kind"], doc["metadata"]["name"]), _deleter(cluster, doc))


def grant_plugin_namespace(cluster, namespace):
    """In least-privilege runs, the shipped plugin Role and its binding, in another plugin namespace."""
    if not least_privilege():
        return
    names = suite_identity_names(cluster)
    role = "%s-plugins" % names["kubehw_rbac_name"]
    create_objects(cluster, [doc for doc in rbac_objects(**dict(names, kubehw_rbac_plugin_namespace=namespace))
                             if doc["metadata"]["name"] == role])


def own_rbac_names(cluster, **overrides):
    """Template variables that give the shipped RBAC names of this test's own (identity namespace, role prefix,
    plugin and DRA namespaces, smoke-test namespace), so a test that changes or deletes them touches nothing another
    test, run or the cluster's own kubehw identity uses."""
    variables = {"kubehw_rbac_name": cluster.unique_name("rbac"), "kubehw_rbac_namespace": cluster.unique_name("id"),
                 "kubehw_rbac_plugin_namespace": cluster.unique_name("plugins"),
                 "kubehw_rbac_dra_namespace": cluster.unique_name("dra"),
                 "kubehw_rbac_smoke_test_namespace": cluster.namespace(),
                 # the DRA drivers' own ClusterRoles are named after their DaemonSets, shared by the whole cluster
                 "kubehw_rbac_dra_presets": []}
    variables.update(overrides)
    return variables


def rbac_identity_kubeconfig(cluster, filename, **overrides):
    """Create the shipped RBAC objects (playbooks/templates/rbac.yaml.j2 rendered with RBAC_VARS and
    overrides) as the admin; return a kubeconfig of a TokenRequest token of the automation account."""
    create_objects(cluster, rbac_objects(**overrides))
    params = dict(RBAC_VARS, **overrides)
    answer = cluster.core.create_namespaced_service_account_token(
        params["kubehw_rbac_service_account"], params["kubehw_rbac_namespace"],
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        _preload_content=False)
    return cluster.token_kubeconfig(json.loads(answer.data)["status"]["token"], filename)


def suite_identity_names(cluster):
    """The template variables of the running test's least-privilege identity: RBAC_VARS (the smoke tests' namespace
    default, the DaemonSets the suites write) under names of the test's own (own_rbac_names: ClusterRoles,
    bindings, the identity's namespace, the plugin namespace), so two tests, xdist workers or runs on one real
    cluster never share, and never delete, each other's identity, and the cluster's own kubehw identity is never
    touched. The ServiceAccount keeps its name, automation, in that namespace of the test's own."""
    if cluster.identity_names is None:
        # no request here: the Cluster sets the identity up when it opens (_IDENTITY), before any fixture grants it
        # more. The DRA presets stay the template's default, as the DRA suites' grants expect (their drivers'
        # ClusterRoles are named after the DaemonSets, so shared on a real cluster).
        cluster.identity_names = dict(RBAC_VARS, kubehw_rbac_name=cluster.unique_name("rbac"),
                                      kubehw_rbac_namespace=cluster.unique_name("id"),
                                      kubehw_rbac_plugin_namespace=cluster.unique_name("plugins"),
                                      kubehw_rbac_dra_namespace=cluster.unique_name("dra"))
    return cluster.identity_names


def identity_user(cluster):
    """The user name the least-privilege identity of the running test authenticates as."""
    names = suite_identity_names(cluster)
    return "system:serviceaccount:%s:%s" % (names["kubehw_rbac_namespace"], names["kubehw_rbac_service_account"])


def least_privilege_kubeconfig(cluster, directory):
    """The least-privilege identity of the shipped RBAC (any cluster: objects created, token requested), under
    names of the test's own (suite_identity_names)."""
    del directory  # kept for callers; the kubeconfig lives in the cluster's own work directory
    return rbac_identity_kubeconfig(cluster, "least-privilege.kubeconfig", **suite_identity_names(cluster))


@pytest.fixture
def ansible(cluster, collections_path, tmp_path):
    kubeconfig = cluster.kubeconfig
    if least_privilege():
        kubeconfig = least_privilege_kubeconfig(cluster, str(tmp_path))
    return AnsibleRunner(str(tmp_path), collections_path, kubeconfig)
