# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Node status (JSON patch on PATCH /api/v1/nodes/<name>/status) and
creating nodes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.rows import DONGLE, answer, generic, patch_status, pod_body, row


# -- Node status: JSON patch on PATCH /api/v1/nodes/<name>/status

@row("node-status-add-key-without-capacity-map-422", generic())
def probe_node_status_add_key_without_capacity_map_422(t):
    node = t.node()
    code, body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "4"}])
    return answer(code, body, "details")


@row("node-status-add-empty-capacity-map-dropped", {"code": 200, "capacity": None, "next_add": generic()})
def probe_node_status_add_empty_capacity_map_dropped(t):
    node = t.node()
    code, body = patch_status(t, node, [{"op": "add", "path": "/status/capacity", "value": {}}])
    capacity = body["status"].get("capacity") if code == 200 else body
    code2, body2 = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "4"}])
    return {"code": code, "capacity": capacity, "next_add": answer(code2, body2, "details")}


@row("node-status-add-whole-capacity-map-200", {
    "code": 200, "capacity": {"example.com/dongle": "4"}, "allocatable": {"example.com/dongle": "4"}})
def probe_node_status_add_whole_capacity_map_200(t):
    node = t.node()
    code, _body = patch_status(t, node, [{"op": "add", "path": "/status/capacity",
                                          "value": {"example.com/dongle": "4"}}])
    stored = t.get("/api/v1/nodes/" + node)["status"]
    return {"code": code, "capacity": stored.get("capacity"), "allocatable": stored.get("allocatable")}


@row("node-status-add-existing-key-replaces", {"code": 200, "capacity": {"example.com/dongle": "6"}})
def probe_node_status_add_existing_key_replaces(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, _body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}])
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("node-status-replace-missing-key-adds", {"code": 200, "capacity": {"example.com/dongle": "4", "example.com/x": "2"}})
def probe_node_status_replace_missing_key_adds(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, _body = patch_status(t, node, [{"op": "replace", "path": "/status/capacity/example.com~1x", "value": "2"}])
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("node-status-remove-missing-key-422", generic())
def probe_node_status_remove_missing_key_422(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "remove", "path": "/status/capacity/example.com~1x"}])
    return answer(code, body, "details")


@row("node-status-test-op-mismatch-422", generic())
def probe_node_status_test_op_mismatch_422(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "test", "path": DONGLE, "value": "5"},
                                        {"op": "replace", "path": DONGLE, "value": "6"}])
    return answer(code, body, "details")


@row("node-status-stale-resourceversion-409", {
    "code": 409, "kind": "Status", "reason": "Conflict", "stored": {"example.com/dongle": "4"},
    "message": 'Operation cannot be fulfilled on nodes "<node>": the object has been modified; please apply your '
               'changes to the latest version and try again'})
def probe_node_status_stale_resourceversion_409(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    stale = t.get("/api/v1/nodes/" + node)["metadata"]["resourceVersion"]
    t.ok("PATCH", "/api/v1/nodes/" + node, {"metadata": {"labels": {"touched": "yes"}}}, MERGE_PATCH)
    code, body = patch_status(t, node, [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale},
                                        {"op": "replace", "path": DONGLE, "value": "6"}])
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(node, "<node>")
    out["stored"] = t.get("/api/v1/nodes/" + node)["status"]["capacity"]
    return out


@row("node-status-patch-body-object-400", {
    "code": 400, "kind": "Status", "reason": "BadRequest",
    "message": "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"})
def probe_node_status_patch_body_object_400(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    return answer(*patch_status(t, node, {"op": "add", "path": DONGLE, "value": "6"}))


def _invalid_value(t, value, name="example.com/dongle"):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "add", "path": "/status/capacity/" + name.replace("/", "~1"),
                                         "value": value}])
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(node, "<node>")
    details = body.get("details") or {} if isinstance(body, dict) else {}
    out["causes"] = [(c.get("reason"), c.get("field")) for c in details.get("causes") or []]
    out["stored"] = t.get("/api/v1/nodes/" + node)["status"]["capacity"]
    return out


def _invalid_capacity(value, detail, field="status.capacity.example.com/dongle", reason="FieldValueInvalid"):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [(reason, field)],
            "stored": {"example.com/dongle": "4"},
            "message": 'Node "<node>" is invalid: %s: Invalid value: %s: %s' % (field, value, detail)}


@row("node-status-fractional-value-4.5-422", _invalid_capacity('"4500m"', "must be an integer"))
def probe_node_status_fractional_value_4_5_422(t):
    return _invalid_value(t, "4.5")


@row("node-status-fractional-value-500m-422", _invalid_capacity('"500m"', "must be an integer"))
def probe_node_status_fractional_value_500m_422(t):
    return _invalid_value(t, "500m")


@row("node-status-negative-value-422", _invalid_capacity('"-1"', "must be greater than or equal to 0"))
def probe_node_status_negative_value_422(t):
    return _invalid_value(t, "-1")


def _patched_object(out):
    """The 'patch' error quotes the whole patched object: keep what it says about capacity."""
    found = re.match(r'^(.*Invalid value: )"(.*)"(: quantities .*)$', out["message"], re.S)
    if found:
        out["message"] = found.group(1) + '"<the patched node>"' + found.group(3)
        out["patched_capacity"] = json.loads(json.loads('"%s"' % found.group(2)))["status"].get("capacity")
    return out


@row("node-status-unparsable-value-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "patch")],
    "stored": {"example.com/dongle": "4"}, "patched_capacity": {"example.com/dongle": "abc"},
    "message": ' "" is invalid: patch: Invalid value: "<the patched node>": quantities must match the regular expression '
               "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"})
def probe_node_status_unparsable_value_422(t):
    return _patched_object(_invalid_value(t, "abc"))


@row("node-status-number-and-1Ki-accepted", {
    "codes": [200, 200], "capacity": {"example.com/dongle": "4", "example.com/big": "1Ki"}})
def probe_node_status_number_and_1ki_accepted(t):
    node = t.node_with_capacity({"example.com/dongle": "1"})
    first = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": 4}])[0]
    second = patch_status(t, node, [{"op": "add", "path": "/status/capacity/example.com~1big", "value": "1Ki"}])[0]
    return {"codes": [first, second], "capacity": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


@row("node-status-patch-on-main-resource-drops-status", {
    "code": 200, "answered": {"example.com/dongle": "4"}, "stored": {"example.com/dongle": "4"}})
def probe_node_status_patch_on_main_resource_drops_status(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}], sub="")
    return {"code": code, "answered": body["status"]["capacity"],
            "stored": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


@row("node-status-missing-node-404", {"code": 404, "kind": "Status", "reason": "NotFound",
                                      "message": 'nodes "<node>" not found', "details": {"name": "<node>", "kind": "nodes"}})
def probe_node_status_missing_node_404(t):
    node = t.name("absent")
    out = answer(*patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}]), "details")
    return json.loads(json.dumps(out).replace(node, "<node>"))


@row("node-status-quantities-canonical", {"capacity": {"cpu": "4", "memory": "1536Mi", "dongle": "4500m",
                                                       "example.com/dongle": "4", "example.com/big": "2k"}})
def probe_node_status_quantities_canonical(t):
    node = t.node_with_capacity({"cpu": 4, "memory": "1.5Gi", "dongle": "4.5", "example.com/dongle": 4,
                                 "example.com/big": "2000"})
    return {"capacity": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


ODD_NAMES = ["dongle", "kubernetes.io/foo", "example.com/Dongle_X", "requests.example.com/dongle",
             "example.com/bad name", "a/b/c", "-bad.com/x", "example.com/"]


@row("node-status-resource-names-not-validated", {"code": 200, "capacity": dict.fromkeys(ODD_NAMES, "1")})
def probe_node_status_resource_names_not_validated(t):
    node = t.node()
    code = patch_status(t, node, [{"op": "add", "path": "/status/capacity", "value": dict.fromkeys(ODD_NAMES, "1")}])[0]
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("allocatable-defaulted-once-never-follows", {
    "first": {"example.com/dongle": "4"}, "after": {"example.com/dongle": "4"}, "capacity": {"example.com/dongle": "6"}})
def probe_allocatable_defaulted_once_never_follows(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    first = t.get("/api/v1/nodes/" + node)["status"].get("allocatable")
    patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}])
    status = t.get("/api/v1/nodes/" + node)["status"]
    return {"first": first, "after": status.get("allocatable"), "capacity": status.get("capacity")}


def _without_taints(spec):
    return dict((k, v) for k, v in (spec or {}).items() if k != "taints")


@row("status-subresource-stores-labels-and-annotations", dict.fromkeys(
    ["node", "pod", "daemonset", "namespace"], {"code": 200, "labels": {"touched": "yes"}, "annotations": {"an": "x"},
                                                "spec_kept": True, "rv_bumped": True}))
def probe_status_subresource_stores_labels_and_annotations(t):
    out = {}
    namespaced = "/api/v1/namespaces/%s" % t.namespace
    ds_labels = {"app": t.name("ds")}
    for kind, path, body in (
            ("node", "/api/v1/nodes", {"metadata": {"name": t.name("node")}}),
            ("pod", namespaced + "/pods", pod_body(t.name("pod"))),
            ("daemonset", "/apis/apps/v1/namespaces/%s/daemonsets" % t.namespace, {"metadata": {"name": t.name("ds")}, "spec": {
                "selector": {"matchLabels": ds_labels}, "template": {"metadata": {"labels": ds_labels}, "spec": {
                    "containers": [{"name": "c", "image": "registry.example/pause:1"}]}}}}),
            ("namespace", "/api/v1/namespaces", {"metadata": {"name": t.name("ns")}})):
        created = t.ok("POST", path, body)
        url = "%s/%s" % (path, created["metadata"]["name"])
        t.later("DELETE", url + ("?gracePeriodSeconds=0" if kind == "pod" else ""))
        code, patched, _headers = t.req("PATCH", url + "/status", {
            "metadata": {"labels": {"touched": "yes"}, "annotations": {"an": "x"}}, "spec": {"unschedulable": True}},
            MERGE_PATCH)
        meta = patched.get("metadata") or {}
        out[kind] = {"code": code, "labels": {"touched": (meta.get("labels") or {}).get("touched")},
                     "annotations": {"an": (meta.get("annotations") or {}).get("an")},
                     # taints aside: the node lifecycle controller changes a new node's taints on its own time
                     "spec_kept": _without_taints(patched.get("spec")) == _without_taints(created.get("spec")),
                     "rv_bumped": int(meta.get("resourceVersion", 0)) > int(created["metadata"]["resourceVersion"])}
    return out


# -- Creating nodes

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
ZERO_NODE_STATUS = {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                    "nodeInfo": dict.fromkeys(["architecture", "bootID", "containerRuntimeVersion", "kernelVersion",
                                               "kubeProxyVersion", "kubeletVersion", "machineID", "operatingSystem",
                                               "osImage", "systemUUID"], "")}


@row("node-create-without-status-stores-zero-values", {
    "code": 201, "spec": {"taints": [NOT_READY_TAINT]}, "status": ZERO_NODE_STATUS,
    "stored_spec": {"taints": [NOT_READY_TAINT]}, "stored_status": ZERO_NODE_STATUS})
def probe_node_create_without_status_stores_zero_values(t):
    name = t.name("node")
    code, body, _headers = t.req("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    t.later("DELETE", "/api/v1/nodes/" + name)
    stored = t.get("/api/v1/nodes/" + name)
    return {"code": code, "spec": body.get("spec"), "status": body.get("status"), "stored_spec": stored.get("spec"),
            "stored_status": stored.get("status")}
