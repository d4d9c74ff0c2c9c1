# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A whole local cluster for `make demo` and the benchmarks: a real control plane of its own
(tests/support/control_plane.py), a kubelet stand-in for the nodes of a node configuration
(tests/support/kubelet.py), and, where requests are counted, the fault proxy in front (tests/support/fault_proxy.py)
for its request log.

    with LocalCluster("bench", node_config=None, request_log=True) as cluster:
        cluster.create_nodes(names, labels)   # thousands of Node objects, no kubelet (API-side only)
        LocalCluster(..., controller_manager_args=[...])   # flags for the control plane's controller manager
        cluster.kubeconfig                     # the proxy's (request_log=True) or the admin's
        cluster.url, cluster.ca_cert_path, cluster.token
        cluster.requests, cluster.clear_requests()   # the proxy's log (request_log=True)

The state goes under .cache/<name>-control-plane/run-<pid> and is removed at stop(). The integration suite has its
own fixtures (tests/support/cluster.py); this is for a program that wants one cluster for its whole run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import concurrent.futures
import os
import shutil
import tempfile

import yaml

from tests.support.control_plane import ControlPlane, ControlPlaneError
from tests.support.k8s_binaries import REPO_ROOT, locate
from tests.support.k8s_objects import read_out

# what a node reports before any extended resource is advertised
NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}


class LocalClusterError(RuntimeError):
    pass


class LocalCluster:
    def __init__(self, name, node_config=None, request_log=False, controller_manager_args=()):
        self.name = name
        self.controller_manager_args = list(controller_manager_args)
        self.node_config = node_config
        self.request_log = request_log
        self.plane = None
        self.standin = None
        self.proxy = None
        self.kubeconfig = None
        self.url = None
        self.ca_cert_path = None
        self.token = None
        self._workdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        from tests.support.fault_proxy import FaultProxy
        from tests.support.kubelet import KubeletStandIn

        bin_dir = locate()
        if bin_dir is None:
            raise LocalClusterError("no Kubernetes control-plane binaries: set KUBEHW_K8S_ASSETS to a folder of them, "
                                    "or run make setup, which downloads them (docs/development.md)")
        base = os.path.join(REPO_ROOT, ".cache", "%s-control-plane" % self.name)
        self.plane = ControlPlane(bin_dir, os.path.join(base, "run-%d" % os.getpid()), self.controller_manager_args)
        try:
            self.plane.start()
        except ControlPlaneError as exc:
            raise LocalClusterError("the control plane did not start: %s" % exc)
        try:
            self.kubeconfig = self.plane.kubeconfig
            with open(self.kubeconfig) as f:
                config = yaml.safe_load(f)
            self.url = config["clusters"][0]["cluster"]["server"]
            self.ca_cert_path = self.plane.ca_cert
            self.token = config["users"][0]["user"]["token"]
            if self.node_config is not None:
                self.standin = KubeletStandIn(self.plane.agent_kubeconfig, self.node_config).start()
                self.standin.wait_schedulable()
            if self.request_log:
                self.proxy = FaultProxy(self.plane.kubeconfig).start()
                self._workdir = tempfile.mkdtemp(prefix="kubehw-%s-" % self.name)
                self.kubeconfig = self.proxy.write_kubeconfig(os.path.join(self._workdir, "proxy.kubeconfig"))
                self.url, self.ca_cert_path = self.proxy.url, self.proxy.ca_cert_path
        except Exception:
            self.stop()
            raise
        return self

    def stop(self):
        if self.proxy is not None:
            self.proxy.stop()
        if self.standin is not None:
            self.standin.stop()
        if self.plane is not None:
            self.plane.stop(wipe=True)
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    # -- what the benchmarks count
    @property
    def requests(self):
        return self.proxy.requests

    def clear_requests(self):
        self.proxy.clear_requests()

    def core(self):
        """A CoreV1Api straight to the apiserver (around the proxy: not in the request log)."""
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=self.plane.kubeconfig))

    def create_nodes(self, names, labels=None, capacity=None, threads=16, ready=False):
        """Node objects with that capacity (allocatable the same) and no kubelet: what an API-only benchmark needs.
        Created straight at the apiserver, in `threads` parallel requests. ready: with a Ready condition, so the node
        lifecycle controller lifts the not-ready taint the apiserver gives every new node (and, without heartbeats,
        turns them Unknown after its grace period)."""
        from tests.support.k8s_objects import now_rfc3339
        from tests.support.kubelet_core import node_conditions

        core = self.core()
        status_ops = [{"op": "add", "path": "/status/capacity", "value": dict(capacity or NODE_CAPACITY)},
                      {"op": "add", "path": "/status/allocatable", "value": dict(capacity or NODE_CAPACITY)}]
        if ready:
            stamp = now_rfc3339()
            status_ops.append({"op": "add", "path": "/status/conditions",
                               "value": node_conditions(stamp, stamp, ready=True)})

        def create(name):
            read_out(core.create_node({"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": name, "labels": dict(labels or {})}},
                                      _preload_content=False))
            read_out(core.patch_node_status(name, status_ops, _preload_content=False))
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(create, names))
        return core
