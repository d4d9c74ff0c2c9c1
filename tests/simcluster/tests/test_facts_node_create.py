# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Node created through the API without a status, against FACTS.md ("Creating nodes, lists
and watches"): kube-apiserver v1.32 stores `spec: {}` and a status holding the zero values of
its Go structs, so `/status` always exists and only a key-level add into a missing capacity map
answers 422. Integration tests on a real cluster create such kubelet-less nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.simcluster.tests.test_api import Raw, typed_clients

# FACTS.md, "Creating nodes, lists and watches" (measured on kube-apiserver v1.32 by the team, 2026-11-23)
MEASURED_STATUS = {
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
    "nodeInfo": {"architecture": "", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                 "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "", "operatingSystem": "",
                 "osImage": "", "systemUUID": ""},
}
GENERIC = "the server rejected our request due to an error in our request"


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory({"nodes": []}, controllers=False)


def create_bare_node(raw, name):
    code, body, _headers = raw.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                                 "metadata": {"name": name}})
    assert code == 201, body
    return body


def patch_status(raw, name, ops):
    return raw.request("PATCH", "/api/v1/nodes/%s/status" % name, ops, content_type="application/json-patch+json")


# the NodeTaint admission plugin taints every new node (measured on v1.36.2; v1.32's `spec: {}` was without it)
NOT_READY_SPEC = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}


def test_node_created_without_status_is_stored_with_the_measured_zero_values(sim):
    raw = Raw(sim)
    created = create_bare_node(raw, "bare-api")
    assert created["spec"] == NOT_READY_SPEC
    assert created["status"] == MEASURED_STATUS
    code, read, _headers = raw.request("GET", "/api/v1/nodes/bare-api")
    assert code == 200 and read["spec"] == NOT_READY_SPEC and read["status"] == MEASURED_STATUS


def test_node_created_ready_is_not_tainted(sim):
    """Simplified: the node lifecycle controller would remove the taint of a Ready node; nothing here would."""
    raw = Raw(sim)
    code, body, _headers = raw.request("POST", "/api/v1/nodes", {
        "metadata": {"name": "ready-api"}, "spec": {"taints": [{"key": "k", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert code == 201 and body["spec"]["taints"] == [{"key": "k", "effect": "NoExecute"}]


def test_whole_capacity_map_add_answers_200_on_a_bare_node(sim):
    raw = Raw(sim)
    create_bare_node(raw, "bare-api")
    code, body, _headers = patch_status(raw, "bare-api", [{"op": "add", "path": "/status/capacity",
                                                           "value": {"example.com/dongle": "4"}}])
    assert code == 200, body
    assert body["status"]["capacity"] == {"example.com/dongle": "4"}
    # defaulting copies capacity into the absent allocatable; the zero-valued structs stay
    assert body["status"]["allocatable"] == {"example.com/dongle": "4"}
    assert body["status"]["nodeInfo"] == MEASURED_STATUS["nodeInfo"]


def test_key_level_add_still_answers_the_generic_422_while_the_map_is_missing(sim):
    raw = Raw(sim)
    create_bare_node(raw, "bare-api")
    code, body, _headers = patch_status(raw, "bare-api", [{"op": "add", "path": "/status/capacity/example.com~1dongle",
                                                           "value": "4"}])
    assert code == 422 and body["reason"] == "Invalid" and body["message"] == GENERIC, body
    assert "capacity" not in sim.store.get("nodes", None, "bare-api")["status"]


def test_status_patch_cannot_remove_the_structs(sim):
    """The structs are re-serialized on every write: removing them leaves zero values again."""
    raw = Raw(sim)
    create_bare_node(raw, "bare-api")
    code, body, _headers = patch_status(raw, "bare-api", [{"op": "remove", "path": "/status/nodeInfo"}])
    assert code == 200, body
    assert body["status"] == MEASURED_STATUS


def test_typed_client_reads_a_bare_node(sim):
    """kubernetes' generated Node model requires every nodeInfo field: a stored bare node must have them."""
    create_bare_node(Raw(sim), "bare-api")
    core, _apps, api = typed_clients(sim)
    try:
        node = core.read_node("bare-api")
    finally:
        api.close()
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 0
    assert node.status.node_info.kubelet_version == ""
