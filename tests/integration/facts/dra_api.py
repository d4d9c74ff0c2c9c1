# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Dynamic Resource Allocation: the resource.k8s.io API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.integration.facts.api import _service_account, _token_request
from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.rows import answer, row


# -- Dynamic Resource Allocation: the resource.k8s.io API

DRA = "/apis/resource.k8s.io/v1"


@row("dra-discovery-serves-v1-only", {
    "versions": ["resource.k8s.io/v1"], "preferred": "resource.k8s.io/v1",
    "resources": [("deviceclasses", False, "DeviceClass"), ("resourceclaims", True, "ResourceClaim"),
                  ("resourceclaims/status", True, "ResourceClaim"),
                  ("resourceclaimtemplates", True, "ResourceClaimTemplate"), ("resourceslices", False, "ResourceSlice")],
    "v1beta1": 404})
def probe_dra_discovery_serves_v1_only(t):
    group = t.get("/apis/resource.k8s.io")
    resources = t.get(DRA)["resources"]
    return {"versions": [v["groupVersion"] for v in group["versions"]], "preferred": group["preferredVersion"]["groupVersion"],
            "resources": sorted((r["name"], r["namespaced"], r["kind"]) for r in resources),
            "v1beta1": t.req("GET", "/apis/resource.k8s.io/v1beta1/deviceclasses")[0]}


@row("discovery-any-authenticated-identity", {"get": 200, "get-group": 200, "post": {
    "code": 403, "kind": "Status", "reason": "Forbidden",
    "message": 'forbidden: User "system:serviceaccount:<ns>:<sa>" cannot post path "/apis/"'}})
def probe_discovery_any_authenticated_identity(t):
    account = _service_account(t)
    token = _token_request(t, account)[1]["status"]["token"]
    post = answer(*t.req("POST", "/apis/", {}, token=token)[:2])
    post["message"] = post["message"].replace(account, "<sa>").replace(t.namespace, "<ns>")
    return {"get": t.req("GET", "/apis/", token=token)[0], "get-group": t.req("GET", DRA, token=token)[0], "post": post}


def _device_class(t, spec, query="", name=None):
    name = name or t.name("class")
    code, body, _headers = t.req("POST", "%s/deviceclasses%s" % (DRA, query), {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})
    if code == 201 and not query:
        t.later("DELETE", "%s/deviceclasses/%s" % (DRA, name))
    return name, code, body


def _class_refused(t, spec, name=None, first_line=False):
    name, code, body = _device_class(t, spec, name=name)
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(name, "<class>")
    if first_line:
        out["message"] = out["message"].split("\n")[0]
    out["causes"] = [(c.get("reason"), c.get("field")) for c in ((body.get("details") or {}).get("causes") or [])]
    return out


DNS1123_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                     "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                     "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _class_invalid(field, reason, detail):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [(reason, field)],
            "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: %s: %s' % (field, detail)}


def _cel(expression):
    return {"selectors": [{"cel": {"expression": expression}}]}


@row("dra-cel-syntax-error-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.selectors[0].cel.expression")],
    "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
               '"device.driver == ": compilation failed: ERROR: <input>:1:18: Syntax error: mismatched input \'<EOF>\' '
               "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
               "BYTES, IDENTIFIER}"})
def probe_dra_cel_syntax_error_422(t):
    return _class_refused(t, _cel("device.driver == "), first_line=True)


@row("dra-cel-type-error-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.selectors[0].cel.expression")],
    "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
               '"device.driver + 1": compilation failed: ERROR: <input>:1:15: found no matching overload for \'_+_\' '
               "applied to '(string, int)'"})
def probe_dra_cel_type_error_422(t):
    return _class_refused(t, _cel("device.driver + 1"), first_line=True)


OPERANDS = "'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER"
CEL_OTHER = {
    "x == 1": "ERROR: <input>:1:1: undeclared reference to 'x' (in container '')",
    "device.foo == 1": "ERROR: <input>:1:7: undefined field 'foo'",
    "device.driver == 'a' &&": "ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>' expecting {%s}" % OPERANDS,
    "device.driver(": "ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>' expecting {%s}" % OPERANDS.replace(
        "'(', '.'", "'(', ')', '.'"),
    "device.driver == 1": "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'",
    "device.driver < 1": "ERROR: <input>:1:15: found no matching overload for '_<_' applied to '(string, int)'",
    "!device.driver": "ERROR: <input>:1:1: found no matching overload for '!_' applied to '(string)'",
    "1 - 'a'": "ERROR: <input>:1:3: found no matching overload for '_-_' applied to '(int, string)'",
    "device.attributes": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
                         '"device.attributes": must evaluate to bool or the unknown type, not map(string, map(string, '
                         'google.protobuf.Any))',
}


@row("dra-cel-other-errors", CEL_OTHER)
def probe_dra_cel_other_errors(t):
    return dict((e, _class_refused(t, _cel(e), first_line=True)["message"].split("compilation failed: ")[-1]) for e in CEL_OTHER)


@row("dra-extended-resource-name-422", {
    name: {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.extendedResourceName")],
           "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.extendedResourceName: Invalid value: "%s": '
                      "must be a valid extended resource name" % name}
    for name in ("gpu", "kubernetes.io/gpu")})
def probe_dra_extended_resource_name_422(t):
    return {name: _class_refused(t, {"extendedResourceName": name}) for name in ("gpu", "kubernetes.io/gpu")}


@row("dra-device-class-dry-run-stores-nothing", {"code": 201, "generation": 1, "uid": True, "stored": 404})
def probe_dra_device_class_dry_run_stores_nothing(t):
    name, code, body = _device_class(t, _cel('device.driver == "gpu.example.com"'), query="?dryRun=All")
    return {"code": code, "generation": body["metadata"].get("generation"), "uid": bool(body["metadata"].get("uid")),
            "stored": t.req("GET", "%s/deviceclasses/%s" % (DRA, name))[0]}


@row("dra-device-class-name-dns-subdomain", _class_invalid("metadata.name", "FieldValueInvalid",
                                                           'Invalid value: "<class>": ' + DNS1123_SUBDOMAIN))
def probe_dra_device_class_name_dns_subdomain(t):
    return _class_refused(t, {}, name="Bad_Class")


@row("dra-device-class-limits", {
    "selectors": _class_invalid("spec.selectors", "FieldValueTooMany", "Too many: 33: must have at most 32 items"),
    "long": _class_invalid("spec.selectors[0].cel.expression", "FieldValueTooLong", "Too long: may not be more than 10240 bytes"),
    "no-cel": _class_invalid("spec.selectors[0].cel", "FieldValueRequired", "Required value")})
def probe_dra_device_class_limits(t):
    many = {"selectors": [{"cel": {"expression": "true"}}] * 33}
    long_expression = _cel("device.driver == '%s'" % ("x" * 10240))
    return {"selectors": _class_refused(t, many), "long": _class_refused(t, long_expression),
            "no-cel": _class_refused(t, {"selectors": [{}]})}


@row("dra-device-class-config", {
    "no-opaque": _class_invalid("spec.config[0].opaque", "FieldValueRequired", "Required value"),
    "bad-driver": _class_invalid("spec.config[0].opaque.driver", "FieldValueInvalid", 'Invalid value: "Bad_Driver": ' + DNS1123_SUBDOMAIN),
    "no-parameters": _class_invalid("spec.config[0].opaque.parameters", "FieldValueRequired", "Required value")})
def probe_dra_device_class_config(t):
    return {"no-opaque": _class_refused(t, {"config": [{}]}),
            "bad-driver": _class_refused(t, {"config": [{"opaque": {"driver": "Bad_Driver", "parameters": {}}}]}),
            "no-parameters": _class_refused(t, {"config": [{"opaque": {"driver": "gpu.example.com"}}]})}


@row("dra-device-class-generation-grows-with-spec", {"created": 1, "relabelled": 1, "spec-changed": 2})
def probe_dra_device_class_generation_grows_with_spec(t):
    name, _code, body = _device_class(t, _cel("true"))
    path = "%s/deviceclasses/%s" % (DRA, name)
    relabelled = t.ok("PATCH", path, {"metadata": {"labels": {"a": "b"}}}, MERGE_PATCH)
    changed = t.ok("PATCH", path, {"spec": _cel('device.driver == "x"')}, MERGE_PATCH)
    return {"created": body["metadata"].get("generation"), "relabelled": relabelled["metadata"].get("generation"),
            "spec-changed": changed["metadata"].get("generation")}


def _slice(t, driver, node):
    name = t.name("slice")
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": {
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                     "capacity": {"memory": {"value": "40Gi"}}}]}}
    code, created, _headers = t.req("POST", DRA + "/resourceslices", body)
    if code == 201:
        t.later("DELETE", "%s/resourceslices/%s" % (DRA, name))
    return name, code, created


@row("dra-resource-slice-v1-shape", {"code": 201, "spec": {
    "driver": "gpu.example.com", "nodeName": "<node>", "pool": {"name": "<node>", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                 "capacity": {"memory": {"value": "40Gi"}}}]}})
def probe_dra_resource_slice_v1_shape(t):
    node = t.node()
    name, code, _created = _slice(t, "gpu.example.com", node)
    stored = t.get("%s/resourceslices/%s" % (DRA, name))
    return {"code": code, "spec": json.loads(json.dumps(stored["spec"]).replace(node, "<node>"))}


@row("dra-resource-slice-field-selectors", {"driver": ["a"], "node": ["a"], "both": ["b"]})
def probe_dra_resource_slice_field_selectors(t):
    node, other = t.node(), t.node()
    driver_a, driver_b = t.name("a") + ".example.com", t.name("b") + ".example.com"
    names = {_slice(t, driver_a, node)[0]: "a", _slice(t, driver_b, other)[0]: "b"}

    def listed(selector):
        items = t.get("%s/resourceslices?fieldSelector=%s" % (DRA, selector))["items"]
        return sorted(names[i["metadata"]["name"]] for i in items if i["metadata"]["name"] in names)
    return {"driver": listed("spec.driver=" + driver_a), "node": listed("spec.nodeName=" + node),
            "both": listed("spec.driver=%s,spec.nodeName=%s" % (driver_b, other))}


@row("dra-claim-and-template-v1-shape-class-not-checked", {
    "claim": 201, "template": 201,
    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1, "allocationMode": "ExactCount"}}],
    "template_requests": [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1,
                                                      "allocationMode": "ExactCount"}}]})
def probe_dra_claim_and_template_v1_shape_class_not_checked(t):
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1}}]
    claim, template = t.name("claim"), t.name("template")
    base = "%s/namespaces/%s" % (DRA, t.namespace)
    code, body, _headers = t.req("POST", base + "/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
        "spec": {"devices": {"requests": requests}}})
    t.later("DELETE", "%s/resourceclaims/%s" % (base, claim))
    code2, body2, _headers = t.req("POST", base + "/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": requests}}}})
    t.later("DELETE", "%s/resourceclaimtemplates/%s" % (base, template))
    return {"claim": code, "template": code2, "requests": body["spec"]["devices"]["requests"],
            "template_requests": body2["spec"]["spec"]["devices"]["requests"]}
