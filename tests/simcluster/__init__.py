# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A simulated Kubernetes cluster for tests: an HTTPS API that answers as kube-apiserver v1.36.2 (FACTS.md),
simulated kubelets, a DaemonSet controller and a scheduler. Test equipment, not shipped code.

    from tests.simcluster import SimCluster
    with SimCluster("tests/simcluster/examples/default.yaml") as sim:
        sim.url, sim.kubeconfig_path, sim.ca_cert_path, sim.admin_token, sim.requests
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import secrets
import shutil
import tempfile

from tests.simcluster import auth
from tests.simcluster.config import DEFAULT_CONFIG_PATH, load_config
from tests.simcluster.controllers import Controllers
from tests.simcluster.kubelets import KubeletPlugins
from tests.simcluster.kubeconfig import write_kubeconfig
from tests.simcluster.server import ApiServer
from tests.simcluster.store import Store
from tests.support import kubelet_core

__all__ = ["SimCluster", "DEFAULT_CONFIG_PATH"]

KUBELET_MODES = ("in-process", "stand-in")
AGENT_USER = "agent"        # the kubelet stand-in's user, as ../shared/k8s names it
BASE_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class SimCluster:
    """config: None (examples/default.yaml), a dict, or a YAML path.

    controllers=False serves the API alone (no kubelets, scheduler or DaemonSet controller):
    nodes are still created from the config, but nothing changes them behind a test's back.

    kubelets: where the configured nodes' kubelets run.
      "stand-in": the kubelet stand-in of tests/support/kubelet.py, the one the suite runs on a real control plane,
        talking to this cluster through its API as the user "agent" (system:masters), whose requests are neither in
        the request log nor hit by injected faults (on a real control plane it talks to the apiserver past the fault
        proxy). The integration suite and the demo run so: the kubelet's duties are written once, and carried by the
        same transport on both clusters.
      "in-process" (the default): the same kubelet core on the controller worker, writing to the store without a
        request (tests/simcluster/kubelets.py): for the simulated cluster's own tests and for benchmarks with
        thousands of nodes, where a poll of the whole API per pass would cost more than what is measured.
    """

    def __init__(self, config=None, tls=True, port=0, host="127.0.0.1", controllers=True, kubelets="in-process"):
        if kubelets not in KUBELET_MODES:
            raise ValueError("kubelets must be one of %s, got %r" % (", ".join(KUBELET_MODES), kubelets))
        self.config = load_config(DEFAULT_CONFIG_PATH if config is None else config)
        self.tls = tls
        self.host = host
        self.port = port
        self.store = Store(history_size=self.config["watch_history"])
        self.authenticator = auth.Authenticator(self.config)
        self.admin_token = self.authenticator.admin_token
        self.use_controllers = controllers
        self.kubelets = kubelets
        self.controllers = None
        self.standin = None
        self.agent_kubeconfig_path = None
        self.api = None
        self.url = None
        self.kubeconfig_path = None
        self.ca_cert_path = None
        self._tmpdir = None

    # -- lifecycle
    def start(self):
        self._tmpdir = tempfile.mkdtemp(prefix="simcluster-")
        ssl_context = None
        if self.tls:
            self.ca_cert_path, cert, key = auth.make_tls(os.path.join(self._tmpdir, "pki"))
            # asks for (but does not require) client certificates, as kube-apiserver does
            ssl_context = auth.server_ssl_context(self.ca_cert_path, cert, key)
        for resource, obj in auth.bootstrap_rbac():
            self.store.create(resource, obj)
        in_process = not self._runs_standin
        if self.use_controllers:
            self.controllers = Controllers(self.store, self.config, kubelets=in_process)
            self.controllers.start()
            # DRA drivers' kubelet plugins publish ResourceSlices (tests/simcluster/kubelets.py); the resource claim
            # controller runs there in either mode
            self.dra_plugins = KubeletPlugins(self.store, self.controllers.kubelet, self.config, publish=in_process)
            self.dra_plugins.start()
        self._ensure_base_objects()
        hooks = {"unreachable": self.set_node_unreachable, "fail-pods": self.fail_pod_start}
        self.api = ApiServer(self.store, self.authenticator, ssl_context=ssl_context, host=self.host,
                             port=self.port, bookmark_interval=self.config["bookmark_interval"],
                             admin_hooks=hooks)
        # resource.k8s.io versions served (tests/simcluster/dra_versions.py); default v1
        self.api.dra_versions = self.config.get("dra_versions")
        self.api.start()
        self.port = self.api.port
        self.url = self.api.url
        if self.tls:
            self.kubeconfig_path = write_kubeconfig(os.path.join(self._tmpdir, "kubeconfig"), self.url,
                                                    self.ca_cert_path, self.admin_token)
        else:
            self.kubeconfig_path = self._write_plain_kubeconfig(os.path.join(self._tmpdir, "kubeconfig"))
        if self._runs_standin:
            self._start_standin()
        return self

    @property
    def _runs_standin(self):
        """The configured nodes' kubelet is the stand-in (it needs the controllers: without them no kubelet runs)."""
        return self.use_controllers and self.kubelets == "stand-in"

    def _start_standin(self):
        """The configured nodes' kubelets: the kubelet stand-in, through the API as the user "agent"."""
        from tests.support.kubelet import KubeletStandIn

        token = secrets.token_hex(16)
        self.authenticator.add_token(token, AGENT_USER, ["system:masters"])
        self.api.equipment_users.add(AGENT_USER)
        path = os.path.join(self._tmpdir, "agent.kubeconfig")
        self.agent_kubeconfig_path = (write_kubeconfig(path, self.url, self.ca_cert_path, token) if self.tls
                                      else self._write_plain_kubeconfig(path, token))
        self.standin = KubeletStandIn(self.agent_kubeconfig_path, self.config,
                                      heartbeat_interval=float(self.config.get("heartbeat_interval", 10.0)))
        self.standin.start()
        for node in self.config["nodes"]:
            if node.get("unreachable"):
                self.set_node_unreachable(node["name"], True)

    def stop(self):
        if self.standin is not None:
            self.standin.stop(delete_nodes=False)
            self.standin = None
        if self.api is not None:
            self.api.stop()
            self.api = None
        if getattr(self, "dra_plugins", None) is not None:
            self.dra_plugins.stop()
            self.dra_plugins = None
        if self.controllers is not None:
            self.controllers.stop()
            self.controllers = None
        self.store.close_watches()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_kubeconfig(self, path):
        """Write a kubeconfig for this cluster (admin token) to path; returns path."""
        if not self.tls:
            return self._write_plain_kubeconfig(path)
        return write_kubeconfig(path, self.url, self.ca_cert_path, self.admin_token)

    def _write_plain_kubeconfig(self, path, token=None):
        import yaml
        data = {"apiVersion": "v1", "kind": "Config", "preferences": {},
                "clusters": [{"name": "simcluster", "cluster": {"server": self.url}}],
                "users": [{"name": "simcluster-admin", "user": {"token": token or self.admin_token}}],
                "contexts": [{"name": "simcluster", "context": {"cluster": "simcluster", "user": "simcluster-admin"}}],
                "current-context": "simcluster"}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(data, f, default_flow_style=False)
        return path

    def _ensure_base_objects(self):
        """Namespaces and nodes that the controllers did not create (or all, without controllers)."""
        for ns in BASE_NAMESPACES:
            if self.store.get("namespaces", None, ns) is None:
                self.store.create("namespaces", {"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                                 "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        for node in [] if self._runs_standin else self.config["nodes"]:    # the stand-in registers its own
            if self.store.get("nodes", None, node["name"]) is None:
                self.store.create("nodes", node_object(node))

    # -- test powers
    @property
    def requests(self):
        return self.api.requests if self.api else []

    def clear_requests(self):
        if self.api:
            self.api.clear_requests()

    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        """status: an HTTP status (409, 429, 5xx), "drop", or a fault kind of faults.FAULT_VERBS:
        "commit-504"/"commit-drop" (store the write, then lose the answer), "too-large-rv" and
        "continue-expired" (lists), "watch-expired"/"watch-too-large" (a watch's ERROR event)."""
        self.api.inject_fault(method, path_regex, status=status, count=count, retry_after=retry_after)

    def clear_faults(self):
        self.api.clear_faults()

    @property
    def faults(self):
        """The injected faults not yet used up: [{method, path_regex, status, count}] (as the fault proxy's)."""
        return self.api.pending_faults()

    @property
    def open_watches(self):
        """The watches open now: [{path, resource, since}] (as the fault proxy's, plus the store's resource)."""
        return [{"path": None, "resource": w.resource, "since": id(w)}
                for w in list(self.store._watches)]  # pylint: disable=protected-access

    def compact(self, expire_watches=False):
        """Compact the history: watches and continue tokens from before now answer 410 Expired;
        expire_watches=True also ends every open watch with an ERROR event (410), as after an etcd
        compaction the watch cache could not follow."""
        self.store.compact(expire_watches=expire_watches)

    def add_token(self, token, user, groups=None):
        self.authenticator.add_token(token, user, groups)

    def set_node_unreachable(self, name, unreachable=True):
        """Stop (or restart) the node's kubelet; the node lifecycle's verdict (Unknown, tainted, its pods not ready)
        comes at once."""
        if self.controllers is None:
            raise RuntimeError("set_node_unreachable needs the controllers (SimCluster(controllers=True))")
        if self.standin is not None:
            self.standin.set_node_unreachable(name, unreachable)
        self.controllers.set_node_unreachable(name, unreachable)

    def _kubelets(self, knob):
        if self.controllers is None:
            raise RuntimeError("%s needs the controllers (SimCluster(controllers=True))" % knob)
        return self.standin if self.standin is not None else self.controllers

    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        self._kubelets("fail_pod_start").fail_pod_start(node, reason)

    def set_inventory(self, node, key, count):
        """Change what a node has (a GPU added or lost): its device plugins and DRA drivers publish the new count."""
        if self.standin is not None:
            self.standin.set_inventory(node, key, count)
        elif self.controllers is not None:
            self.controllers.kubelet.set_inventory(node, key, count)

    def allow_pod_start(self, node):
        self._kubelets("allow_pod_start").allow_pod_start(node)

    def delete(self, resource, namespace, name, propagation_policy=None):
        """Delete as the API does (finalizers, owner references), without an HTTP request."""
        return self.api.delete_object(resource, namespace, name, {"propagationPolicy": propagation_policy})


def node_object(node):
    """A Node as a freshly registered, Ready kubelet would have written it (no extended resources)."""
    return kubelet_core.node_object(node, 0, kubelet_core.KUBELET_VERSION)
