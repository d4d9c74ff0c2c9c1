# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster against tests/simcluster/FACTS.md, row by row.

Node status rows use the official client's CoreV1Api.patch_node_status (JSON patch) and raw
HTTP where the client cannot send the request (an object instead of a list). The cluster runs
without controllers so that no kubelet touches the nodes while a row is checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import kubernetes
import pytest

from tests.simcluster.tests.test_api import Raw, typed_clients

GENERIC = "the server rejected our request due to an error in our request"
QUANTITY_REGEX_MSG = ("quantities must match the regular expression "
                      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
DONGLE = "/status/capacity/example.com~1dongle"


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory(None, controllers=False)


@pytest.fixture
def core(sim):
    core, _apps, api = typed_clients(sim)
    yield core
    api.close()


def patch_error(core, node, ops):
    with pytest.raises(kubernetes.client.ApiException) as info:
        core.patch_node_status(node, ops)
    return info.value.status, json.loads(info.value.body)


def status_of(sim, node):
    return sim.store.get("nodes", None, node)["status"]


def assert_generic_422(code, body):
    assert code == 422
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": GENERIC, "reason": "Invalid", "details": {}, "code": 422}


# ---------------------------------------------------------------- node status table

def test_add_key_without_capacity_map_is_generic_422(sim, core):
    assert "capacity" not in status_of(sim, "bare-1")
    code, body = patch_error(core, "bare-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    assert_generic_422(code, body)
    assert "capacity" not in status_of(sim, "bare-1")


def test_add_empty_capacity_map_is_dropped_and_next_add_still_fails(sim, core):
    node = core.patch_node_status("bare-1", [{"op": "add", "path": "/status/capacity", "value": {}}])
    assert node.status.capacity is None
    assert "capacity" not in status_of(sim, "bare-1")
    code, body = patch_error(core, "bare-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    assert_generic_422(code, body)


def test_add_empty_conditions_list_is_dropped_and_an_append_fails(sim, core):
    """NodeStatus.conditions is omitempty too: kube-apiserver v1.36.2 stores no empty list, so appending to it
    ("/status/conditions/-") answers the generic 422 (a concurrent-writer test seeded [] and got 422 on every write)."""
    core.patch_node_status("bare-1", [{"op": "add", "path": "/status/conditions", "value": []}])
    assert "conditions" not in status_of(sim, "bare-1")
    code, body = patch_error(core, "bare-1", [{"op": "add", "path": "/status/conditions/-",
                                               "value": {"type": "Writer1", "status": "True"}}])
    assert_generic_422(code, body)


def test_add_whole_capacity_map_is_accepted(sim, core):
    rv_before = sim.store.get("nodes", None, "bare-1")["metadata"]["resourceVersion"]
    node = core.patch_node_status("bare-1", [{"op": "add", "path": "/status/capacity",
                                              "value": {"example.com/dongle": "4"}}])
    assert node.status.capacity == {"example.com/dongle": "4"}
    assert int(node.metadata.resource_version) > int(rv_before)
    # defaulting: allocatable starts as a copy of capacity when it is absent
    assert status_of(sim, "bare-1")["allocatable"] == {"example.com/dongle": "4"}


def test_add_existing_key_replaces_value(sim, core):
    core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    node = core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": "6"}])
    assert node.status.capacity["example.com/dongle"] == "6"


def test_replace_of_missing_key_adds_it(sim, core):
    assert "example.com/dongle" not in status_of(sim, "gpu-1")["capacity"]
    node = core.patch_node_status("gpu-1", [{"op": "replace", "path": DONGLE, "value": "2"}])
    assert node.status.capacity["example.com/dongle"] == "2"
    assert node.status.capacity["cpu"] == "8"


def test_remove_of_missing_key_is_generic_422(sim, core):
    code, body = patch_error(core, "gpu-1", [{"op": "remove", "path": DONGLE}])
    assert_generic_422(code, body)


def test_failed_test_op_is_generic_422_and_nothing_applied(sim, core):
    core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    rv = sim.store.get("nodes", None, "gpu-1")["metadata"]["resourceVersion"]
    code, body = patch_error(core, "gpu-1", [{"op": "test", "path": DONGLE, "value": "3"},
                                             {"op": "add", "path": DONGLE, "value": "9"}])
    assert_generic_422(code, body)
    assert code != 409
    after = sim.store.get("nodes", None, "gpu-1")
    assert after["status"]["capacity"]["example.com/dongle"] == "4"
    assert after["metadata"]["resourceVersion"] == rv


def test_passing_test_op_applies_the_rest(sim, core):
    core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    node = core.patch_node_status("gpu-1", [{"op": "test", "path": DONGLE, "value": "4"},
                                            {"op": "add", "path": DONGLE, "value": "5"}])
    assert node.status.capacity["example.com/dongle"] == "5"


def test_stale_resource_version_in_patch_is_409_conflict(sim, core):
    old_rv = sim.store.get("nodes", None, "gpu-1")["metadata"]["resourceVersion"]
    core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    code, body = patch_error(core, "gpu-1", [{"op": "replace", "path": "/metadata/resourceVersion", "value": old_rv},
                                             {"op": "add", "path": DONGLE, "value": "7"}])
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on nodes "gpu-1": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert body["details"] == {"name": "gpu-1", "kind": "nodes"}
    assert status_of(sim, "gpu-1")["capacity"]["example.com/dongle"] == "4"


def test_current_resource_version_in_patch_is_accepted(sim, core):
    rv = sim.store.get("nodes", None, "gpu-1")["metadata"]["resourceVersion"]
    node = core.patch_node_status("gpu-1", [{"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
                                            {"op": "add", "path": DONGLE, "value": "7"}])
    assert node.status.capacity["example.com/dongle"] == "7"
    assert int(node.metadata.resource_version) > int(rv)


def test_object_body_is_400(sim):
    code, body, _h = Raw(sim).request("PATCH", "/api/v1/nodes/gpu-1/status",
                                      {"op": "add", "path": DONGLE, "value": "4"},
                                      content_type="application/json-patch+json")
    assert code == 400
    assert body["reason"] == "BadRequest"
    assert body["message"] == ("error decoding patch: json: cannot unmarshal object into Go value of type "
                               "[]handlers.jsonPatchOp")


@pytest.mark.parametrize("value, shown", [("4.5", "4500m"), ("500m", "500m")])
def test_fraction_for_extended_resource_is_422_must_be_integer(sim, core, value, shown):
    code, body = patch_error(core, "gpu-1", [{"op": "add", "path": DONGLE, "value": value}])
    assert code == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == ('Node "gpu-1" is invalid: status.capacity.example.com/dongle: '
                               'Invalid value: "%s": must be an integer' % shown)
    assert body["details"]["name"] == "gpu-1"
    assert body["details"]["kind"] == "Node"
    assert body["details"]["causes"][0]["field"] == "status.capacity.example.com/dongle"
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"
    assert "example.com/dongle" not in status_of(sim, "gpu-1")["capacity"]


def test_negative_value_is_422(sim, core):
    code, body = patch_error(core, "gpu-1", [{"op": "add", "path": DONGLE, "value": "-1"}])
    assert code == 422
    assert body["message"] == ('Node "gpu-1" is invalid: status.capacity.example.com/dongle: '
                               'Invalid value: "-1": must be greater than or equal to 0')
    assert body["details"]["causes"][0]["field"] == "status.capacity.example.com/dongle"


def test_non_quantity_is_422_with_field_patch(sim, core):
    code, body = patch_error(core, "gpu-1", [{"op": "add", "path": DONGLE, "value": "abc"}])
    assert code == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "patch"
    assert body["details"]["causes"][0]["message"].endswith(QUANTITY_REGEX_MSG)
    assert body["message"].endswith(QUANTITY_REGEX_MSG)
    assert "patch: Invalid value: " in body["message"]


@pytest.mark.parametrize("value, stored", [(4, "4"), ("1Ki", "1Ki")])
def test_json_number_and_binary_suffix_are_accepted(sim, core, value, stored):
    node = core.patch_node_status("gpu-1", [{"op": "add", "path": DONGLE, "value": value}])
    assert node.status.capacity["example.com/dongle"] == stored
    assert status_of(sim, "gpu-1")["capacity"]["example.com/dongle"] == stored


def test_status_patch_to_main_resource_is_200_and_dropped(sim, core):
    before = status_of(sim, "gpu-1")
    code, body, _h = Raw(sim).request("PATCH", "/api/v1/nodes/gpu-1",
                                      [{"op": "add", "path": DONGLE, "value": "4"}],
                                      content_type="application/json-patch+json")
    assert code == 200
    assert "example.com/dongle" not in body["status"]["capacity"]
    assert status_of(sim, "gpu-1") == before
    # the typed client's patch_node behaves the same
    node = core.patch_node("gpu-1", [{"op": "add", "path": DONGLE, "value": "4"}])
    assert "example.com/dongle" not in node.status.capacity


def test_missing_node_is_404(sim, core):
    code, body = patch_error(core, "x", [{"op": "add", "path": DONGLE, "value": "4"}])
    assert code == 404
    assert body["reason"] == "NotFound"
    assert body["message"] == 'nodes "x" not found'
    assert body["details"] == {"name": "x", "kind": "nodes"}


# ---------------------------------------------------------------- names are not validated

@pytest.mark.parametrize("name", ["dongle", "kubernetes.io/foo", "example.com/Dongle_X",
                                  "requests.example.com/dongle", "example.com/bad name", "a/b/c",
                                  "-bad.com/x", "example.com/"])
def test_extended_resource_names_are_not_validated(sim, core, name):
    path = "/status/capacity/" + name.replace("~", "~0").replace("/", "~1")
    node = core.patch_node_status("gpu-1", [{"op": "add", "path": path, "value": "4"}])
    assert node.status.capacity[name] == "4"


def test_integer_rule_applies_only_to_extended_names(sim, core):
    node = core.patch_node_status("gpu-1", [{"op": "add", "path": "/status/capacity/dongle", "value": "4.5"}])
    assert node.status.capacity["dongle"] == "4500m"


# ---------------------------------------------------------------- status.allocatable

def test_allocatable_does_not_follow_capacity_without_kubelet(sim, core):
    core.patch_node_status("bare-1", [{"op": "add", "path": "/status/capacity", "value": {"example.com/dongle": "4"}}])
    node = core.patch_node_status("bare-1", [{"op": "add", "path": DONGLE, "value": "6"}])
    assert node.status.capacity["example.com/dongle"] == "6"
    assert node.status.allocatable["example.com/dongle"] == "4"
