# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Lists and watches, service account tokens (TokenRequest), and field
validation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from tests.integration.facts.clusters import make_namespace
from tests.integration.facts.rows import answer, row


# -- Lists and watches

def _digits(text, *keep):
    """Numbers in a message are resourceVersions of the cluster at hand: <n>, except those kept."""
    return re.sub(r"\d+", lambda m: m.group(0) if m.group(0) in keep else "<n>", text or "")


@row("watch-from-future-rv-sends-nothing", {"code": 200, "events": []})
def probe_watch_from_future_rv_sends_nothing(t):
    code, events = t.watch("/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=99999999&timeoutSeconds=2"
                           % t.namespace, seconds=3)
    return {"code": code, "events": events}


@row("list-from-future-rv-504", {
    "code": 504, "kind": "Status", "reason": "Timeout", "message": "Timeout: Too large resource version: 99999999, current: <n>",
    "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1}})
def probe_list_from_future_rv_504(t):
    out = answer(*t.req("GET", "/api/v1/namespaces/%s/configmaps?resourceVersion=99999999" % t.namespace)[:2], "details")
    out["message"] = _digits(out["message"], "99999999")
    return out


@row("list-limit-pages-with-continue", {"first": {"items": 2, "remainingItemCount": 1, "continue": True},
                                        "second": {"items": 1, "remainingItemCount": None, "continue": False},
                                        "names": ["s-0", "s-1", "s-2"]})
def probe_list_limit_pages_with_continue(t):
    namespace = make_namespace(t)
    t.later("DELETE", "/api/v1/namespaces/" + namespace)
    for index in range(3):
        t.ok("POST", "/api/v1/namespaces/%s/secrets" % namespace, {"metadata": {"name": "s-%d" % index}})
    first = t.get("/api/v1/namespaces/%s/secrets?limit=2" % namespace)
    second = t.get("/api/v1/namespaces/%s/secrets?limit=2&continue=%s" % (namespace, first["metadata"].get("continue")))

    def page(body):
        return {"items": len(body["items"]), "remainingItemCount": body["metadata"].get("remainingItemCount"),
                "continue": bool(body["metadata"].get("continue"))}
    return {"first": page(first), "second": page(second),
            "names": [i["metadata"]["name"] for i in first["items"] + second["items"]]}


# -- Service account tokens (TokenRequest)

def _service_account(t, name=None):
    name = name or t.name("sa")
    t.ok("POST", "/api/v1/namespaces/%s/serviceaccounts" % t.namespace, {"metadata": {"name": name}})
    t.later("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (t.namespace, name))
    return name


def _token_request(t, account, spec=None):
    return t.req("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (t.namespace, account),
                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec or {}})[:2]


@row("tokenrequest-201-defaulted", {"code": 201, "kind": "TokenRequest", "expirationSeconds": 3600, "audiences": 1,
                                    "token": True, "expires_in": 3600})
def probe_tokenrequest_201_defaulted(t):
    code, body = _token_request(t, _service_account(t))
    expires = time.mktime(time.strptime(body["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    return {"code": code, "kind": body.get("kind"), "expirationSeconds": body["spec"].get("expirationSeconds"),
            "audiences": len(body["spec"].get("audiences") or []), "token": bool(body["status"].get("token")),
            "expires_in": int(round((expires - time.time()) / 60.0)) * 60}


@row("tokenrequest-missing-account-404", {"code": 404, "kind": "Status", "reason": "NotFound",
                                          "message": 'serviceaccounts "<sa>" not found'})
def probe_tokenrequest_missing_account_404(t):
    account = t.name("absent")
    out = answer(*_token_request(t, account))
    out["message"] = out["message"].replace(account, "<sa>")
    return out


@row("tokenrequest-under-ten-minutes-422", {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [
    ("FieldValueInvalid", "spec.expirationSeconds")], "details": ["causes", "group", "kind"],
    "message": 'TokenRequest.authentication.k8s.io "" is invalid: '
    'spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes'})
def probe_tokenrequest_under_ten_minutes_422(t):
    account = _service_account(t)
    code, body = _token_request(t, account, {"expirationSeconds": 599})
    out = answer(code, body)
    out["message"] = out["message"].replace(account, "<sa>")
    out["causes"] = [(c.get("reason"), c.get("field")) for c in (body.get("details") or {}).get("causes") or []]
    out["details"] = sorted(body.get("details") or {})
    return out


@row("tokenrequest-token-authenticates-until-account-deleted", {
    "forbidden": {"code": 403, "kind": "Status", "reason": "Forbidden",
                  "message": 'nodes is forbidden: User "system:serviceaccount:<ns>:<sa>" cannot list resource "nodes" '
                             'in API group "" at the cluster scope'},
    "after_delete": {"code": 401, "kind": "Status", "reason": "Unauthorized", "message": "Unauthorized"}})
def probe_tokenrequest_token_authenticates_until_account_deleted(t):
    account = _service_account(t)
    token = _token_request(t, account)[1]["status"]["token"]
    code, body, _headers = t.req("GET", "/api/v1/nodes", token=token)
    forbidden = answer(code, body)
    forbidden["message"] = forbidden["message"].replace(account, "<sa>").replace(t.namespace, "<ns>")
    t.ok("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (t.namespace, account))
    deadline = time.time() + 10
    while True:   # a real apiserver caches a verified token for a few seconds
        code, body, _headers = t.req("GET", "/api/v1/nodes", token=token)
        if code == 401 or time.time() > deadline:
            break
        time.sleep(0.3)
    return {"forbidden": forbidden, "after_delete": answer(code, body)}


# -- Field validation

def _configmap_with_unknown_fields(t, directive):
    name = t.name("cm")
    query = "?fieldValidation=" + directive if directive else ""
    code, body, headers = t.req("POST", "/api/v1/namespaces/%s/configmaps%s" % (t.namespace, query), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "colour": "red"}, "data": {"a": "b"},
        "spec": {"foo": 1}})
    if code == 201:
        t.later("DELETE", "/api/v1/namespaces/%s/configmaps/%s" % (t.namespace, name))
    warnings = headers.getlist("Warning") if hasattr(headers, "getlist") else [headers.get("Warning")]
    return {"code": code, "reason": body.get("reason"), "message": body.get("message"),
            "warnings": sorted(w for w in warnings if w),
            "stored": sorted(body) if code == 201 else None}


@row("field-validation-strict-400", {
    "code": 400, "reason": "BadRequest", "warnings": [], "stored": None,
    "message": 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
               'unknown field "metadata.colour", unknown field "spec"'})
def probe_field_validation_strict_400(t):
    return _configmap_with_unknown_fields(t, "Strict")


@row("field-validation-warn-by-default", {
    "code": 201, "reason": None, "message": None, "stored": ["apiVersion", "data", "kind", "metadata"],
    "warnings": ['299 - "unknown field \\"metadata.colour\\""', '299 - "unknown field \\"spec\\""']})
def probe_field_validation_warn_by_default(t):
    return _configmap_with_unknown_fields(t, None)


@row("field-validation-ignore-silent", {"code": 201, "reason": None, "message": None, "warnings": [],
                                        "stored": ["apiVersion", "data", "kind", "metadata"]})
def probe_field_validation_ignore_silent(t):
    return _configmap_with_unknown_fields(t, "Ignore")


@row("openapi-v3-patch-operation-has-fieldValidation", {"listed": True, "gvk": {"group": "", "version": "v1",
                                                                                "kind": "Pod"}, "fieldValidation": True})
def probe_openapi_v3_patch_operation_has_fieldvalidation(t):
    index = t.get("/openapi/v3")
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    doc = t.get(url)
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    params = [p.get("name") for p in patch.get("parameters") or []]
    params += [p.get("name") for p in doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"].get("parameters") or []]
    return {"listed": url.startswith("/openapi/v3/api/v1"), "gvk": patch.get("x-kubernetes-group-version-kind"),
            "fieldValidation": "fieldValidation" in params}
