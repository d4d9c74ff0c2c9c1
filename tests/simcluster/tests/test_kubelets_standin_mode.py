# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SimCluster(kubelets="stand-in"): the kubelet stand-in of tests/support/kubelet.py is the configured nodes' kubelet,
through the API as the user "agent", and what it sends stays out of the request log and the faults."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

import pytest

from tests.support.kubelet import STANDIN_LABEL

CONFIG = {"sync_interval": 0.2, "pod_start_delay": 0.1, "heartbeat_interval": 1.0,
          "nodes": [{"name": "n1", "inventory": {"example.com/dongle": 2}}, {"name": "n2", "unreachable": True}]}


def wait_for(predicate, timeout=15, what="a condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory(CONFIG, kubelets="stand-in")


@pytest.fixture
def core(sim):
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=sim.kubeconfig_path)
    yield client.CoreV1Api(api_client)
    api_client.close()


def pod(name, node):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "c", "image": "registry.example/pause:1"}]}}


def read(core, name):
    return json.loads(core.read_namespaced_pod(name, "default", _preload_content=False).data)


def ready(node):
    return [c["status"] for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]


def test_the_stand_in_registers_the_nodes_through_the_api_as_its_own_user(sim, core):
    assert sim.standin is not None and sim.controllers.kubelets_in_process is False
    nodes = dict((n["metadata"]["name"], n) for n in json.loads(core.list_node(_preload_content=False).data)["items"])
    assert sorted(nodes) == ["n1", "n2"]
    assert nodes["n1"]["metadata"]["labels"][STANDIN_LABEL] == "true"
    # a Lease renewed in kube-node-lease, as a kubelet's heartbeat
    leases = sim.store.list("leases", "kube-node-lease")[0]
    assert sorted(item["metadata"]["name"] for item in leases) == ["n1", "n2"]
    # n1 Ready and schedulable; n2 was configured unreachable: Unknown and tainted by the node lifecycle
    assert ready(wait_for(lambda: not core.read_node("n1").spec.taints and sim.store.get("nodes", None, "n1"),
                          what="n1 untainted")) == ["True"]
    n2 = sim.store.get("nodes", None, "n2")
    assert ready(n2) == ["Unknown"]
    assert sorted((t["key"], t["effect"]) for t in n2["spec"]["taints"]) == [
        ("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/unreachable", "NoSchedule")]
    # none of that is in the request log, which is the tests' (and the collection's) own: only the list above
    assert set((r["method"], r["path"]) for r in sim.requests) == {("GET", "/api/v1/nodes"), ("GET", "/api/v1/nodes/n1")}


def test_pods_run_and_deletions_are_confirmed_past_injected_faults(sim, core):
    mark = len(sim.requests)
    # every request to the pods answers 500 for the test's own client: the stand-in's requests are not faulted
    sim.inject_fault("*", r"/pods", status=500, count=1000)
    sim.store.create("pods", pod("p1", "n1"))
    assert wait_for(lambda: (sim.store.get("pods", "default", "p1").get("status") or {}).get("phase") == "Running",
                    what="p1 Running")
    from kubernetes.client.rest import ApiException
    with pytest.raises(ApiException) as err:
        read(core, "p1")
    assert err.value.status == 500
    sim.clear_faults()
    # a graceful delete leaves it Terminating until its kubelet (the stand-in) confirms
    core.delete_namespaced_pod("p1", "default", _preload_content=False)
    assert sim.store.get("pods", "default", "p1")["metadata"].get("deletionTimestamp")
    wait_for(lambda: sim.store.get("pods", "default", "p1") is None, what="p1 gone")
    logged = [(r["method"], r["path"]) for r in sim.requests[mark:]]
    assert logged == [("GET", "/api/v1/namespaces/default/pods/p1"), ("DELETE", "/api/v1/namespaces/default/pods/p1")]


def test_unreachable_and_back(sim, core):
    wait_for(lambda: not core.read_node("n1").spec.taints, what="n1 untainted")
    sim.store.create("pods", pod("p1", "n1"))
    wait_for(lambda: (sim.store.get("pods", "default", "p1").get("status") or {}).get("phase") == "Running",
             what="p1 Running")
    sim.set_node_unreachable("n1")
    assert ready(sim.store.get("nodes", None, "n1")) == ["Unknown"]
    # the node lifecycle marks its pods not ready; no heartbeat comes while the stand-in is stopped for it
    wait_for(lambda: [c["status"] for c in sim.store.get("pods", "default", "p1")["status"]["conditions"]
                      if c["type"] == "Ready"] == ["False"], what="p1 not ready")
    lease = sim.store.get("leases", "kube-node-lease", "n1")["spec"]["renewTime"]
    time.sleep(2.5)
    assert sim.store.get("leases", "kube-node-lease", "n1")["spec"]["renewTime"] == lease
    assert ready(sim.store.get("nodes", None, "n1")) == ["Unknown"]
    sim.set_node_unreachable("n1", False)
    wait_for(lambda: sim.store.get("leases", "kube-node-lease", "n1")["spec"]["renewTime"] != lease, what="a heartbeat")
    node = sim.store.get("nodes", None, "n1")
    assert ready(node) == ["True"] and not node["spec"].get("taints")


def test_without_the_controllers_no_stand_in_runs_and_the_nodes_are_still_made(simcluster_factory):
    sim = simcluster_factory(CONFIG, controllers=False, kubelets="stand-in")
    assert sim.standin is None
    assert sorted(n["metadata"]["name"] for n in sim.store.list("nodes")[0]) == ["n1", "n2"]
