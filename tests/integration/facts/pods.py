# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Pod validation of extended resources, and the admission of pods
(RuntimeClass, ServiceAccount)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.integration.facts.rows import answer, create_pod, pod_body, row


# -- Pod validation of extended resources

def _pod_invalid(*causes):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": list(causes),
            "message": 'Pod "<pod>" is invalid: ' + (
                "%s: %s" % causes[0][1:] if len(causes) == 1 else "[%s]" % ", ".join("%s: %s" % c[1:] for c in causes))}


def _pod_refused(t, resources):
    name = t.name("pod")
    code, body = create_pod(t, pod_body(name, resources))
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(name, "<pod>")
    details = (body.get("details") or {}) if isinstance(body, dict) else {}
    out["causes"] = [(c.get("reason"), c.get("field"), c.get("message")) for c in details.get("causes") or []]
    return out


@row("pod-requests-must-equal-limits", _pod_invalid(
    ("FieldValueInvalid", "spec.containers[0].resources.requests", 'Invalid value: "1": must be equal to example.com/dongle limit of 2')))
def probe_pod_requests_must_equal_limits(t):
    return _pod_refused(t, {"limits": {"example.com/dongle": "2"}, "requests": {"example.com/dongle": "1"}})


@row("pod-requests-without-limits", _pod_invalid(
    ("FieldValueRequired", "spec.containers[0].resources.limits", "Required value: Limit must be set for non overcommitable resources")))
def probe_pod_requests_without_limits(t):
    return _pod_refused(t, {"requests": {"example.com/dongle": "1"}})


@row("pod-fractional-extended-resource", _pod_invalid(
    ("FieldValueInvalid", "spec.containers[0].resources.limits[example.com/dongle]", 'Invalid value: "1500m": must be an integer'),
    ("FieldValueInvalid", "spec.containers[0].resources.requests[example.com/dongle]", 'Invalid value: "1500m": must be an integer')))
def probe_pod_fractional_extended_resource(t):
    return _pod_refused(t, {"limits": {"example.com/dongle": "1.5"}})


@row("pod-resource-without-domain", _pod_invalid(*[
    ("FieldValueInvalid", "spec.containers[0].resources.%s[dongle]" % kind, 'Invalid value: "dongle": ' + detail)
    for kind in ("limits", "requests")
    for detail in ("must be a standard resource type or fully qualified", "must be a standard resource for containers")]))
def probe_pod_resource_without_domain(t):
    return _pod_refused(t, {"limits": {"dongle": "1"}})


@row("pod-limits-copied-to-requests", {"code": 201, "resources": {"limits": {"example.com/dongle": "2"},
                                                                  "requests": {"example.com/dongle": "2"}}})
def probe_pod_limits_copied_to_requests(t):
    code, body = create_pod(t, pod_body(t.name("pod"), {"limits": {"example.com/dongle": "2"}}))
    return {"code": code, "resources": body["spec"]["containers"][0].get("resources")}


QOS_CASES = {
    # only cpu and memory count: a pod that asks for devices alone is BestEffort
    "extended-resource-only": ({"limits": {"example.com/dongle": "1"}}, None),
    "cpu-memory-limits-and-a-device": ({"limits": {"cpu": "1", "memory": "1Gi", "example.com/dongle": "1"}}, None),
    # compared as amounts, after requests default to limits
    "same-memory-other-spelling": ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"memory": "1073741824"}},
                                   None),
    "cpu-request-below-limit": ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}, None),
    "zero-request-only": ({"requests": {"cpu": "0"}}, None),
    # init containers count too
    "init-container-request": (None, {"requests": {"cpu": "100m"}}),
}


@row("pod-qos-class", {"extended-resource-only": "BestEffort", "cpu-memory-limits-and-a-device": "Guaranteed",
                       "same-memory-other-spelling": "Guaranteed", "cpu-request-below-limit": "Burstable",
                       "zero-request-only": "BestEffort", "init-container-request": "Burstable"})
def probe_pod_qos_class(t):
    out = {}
    for case, (resources, init_resources) in sorted(QOS_CASES.items()):
        body = pod_body(t.name("pod"), resources)
        if init_resources is not None:
            body["spec"]["initContainers"] = [{"name": "init", "image": "registry.example/pause:1",
                                               "resources": init_resources}]
        code, answer_body = create_pod(t, body)
        assert code == 201, (case, code, answer_body)
        out[case] = (answer_body.get("status") or {}).get("qosClass")
    return out


@row("pod-missing-runtime-class-403", {
    label: {"code": 403, "kind": "Status", "reason": "Forbidden", "details": {"name": "<pod>" + suffix, "kind": "pods"},
            "message": 'pods "<pod>%s" is forbidden: pod rejected: RuntimeClass "kf-absent-handler" not found' % suffix}
    for label, suffix in (("create", ""), ("dry-run", ""), ("generateName", "-"))})
def probe_pod_missing_runtime_class_403(t):
    name = t.name("pod")
    out = {}
    for label, query in (("create", ""), ("dry-run", "?dryRun=All")):
        code, body = create_pod(t, pod_body(name, runtimeClassName="kf-absent-handler"), query)
        out[label] = json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>"))
    code, body = create_pod(t, dict(pod_body(None, runtimeClassName="kf-absent-handler"),
                                    metadata={"generateName": name + "-"}))
    out["generateName"] = json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>"))
    return out


@row("pod-missing-service-account-403", {
    "code": 403, "kind": "Status", "reason": "Forbidden", "details": {"name": "<pod>", "kind": "pods"},
    "message": 'pods "<pod>" is forbidden: error looking up service account <ns>/kf-absent-account: '
               'serviceaccount "kf-absent-account" not found'})
def probe_pod_missing_service_account_403(t):
    name = t.name("pod")
    code, body = create_pod(t, pod_body(name, serviceAccountName="kf-absent-account"))
    return json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>").replace(t.namespace, "<ns>"))
