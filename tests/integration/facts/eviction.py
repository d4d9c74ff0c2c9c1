# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes of tests/simcluster/FACTS.md: Eviction and pod deletion."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from tests.integration.facts.clusters import MERGE_PATCH
from tests.integration.facts.rows import answer, create_pod, pod_body, row


# -- Eviction and pod deletion

def _bound_pod(t, node, ready=True, labels=None, grace=None):
    """A pod bound to node by spec.nodeName, Running (and Ready) as a kubelet would report it."""
    name = t.name("pod")
    body = pod_body(name, nodeName=node)
    body["metadata"]["labels"] = labels or {"app": name}
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    code, created = create_pod(t, body)
    assert code == 201, created
    t.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (t.namespace, name), {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}, MERGE_PATCH)
    return name


def _evict(t, pod, name=None):
    code, body, _headers = t.req("POST", "/api/v1/namespaces/%s/pods/%s/eviction" % (t.namespace, pod), {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name or pod, "namespace": t.namespace}})
    return code, body


def _pod_state(t, pod):
    code, body, _headers = t.req("GET", "/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))
    if code == 404:
        return "gone"
    return "terminating" if body["metadata"].get("deletionTimestamp") else "present"


def _budget(t, selector, **spec):
    name = t.name("pdb")
    t.ok("POST", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % t.namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": dict(spec, selector={"matchLabels": selector})})
    t.later("DELETE", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s" % (t.namespace, name))
    deadline = time.time() + 20
    while True:   # the disruption controller of a real cluster computes the budget's status a moment later
        budget = t.get("/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s" % (t.namespace, name))
        status = budget.get("status") or {}
        if status.get("observedGeneration", 0) >= budget["metadata"].get("generation", 1) or t.sim is not None:
            return name
        assert time.time() < deadline, "%s: budget %s has no status after 20 s" % (t.kind, name)
        time.sleep(0.2)


def _refused_by_budget(t, pod, budget):
    """The answer to evicting pod, with its causes (budget named <pdb>) and what became of the pod."""
    code, body = _evict(t, pod)
    out = answer(code, body)
    out["causes"] = json.loads(json.dumps((body.get("details") or {}).get("causes")).replace(budget, "<pdb>"))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-name-mismatch-400", {"code": 400, "kind": "Status", "reason": "BadRequest",
                                    "message": "name in URL does not match name in Eviction object", "pod": "present"})
def probe_eviction_name_mismatch_400(t):
    pod = _bound_pod(t, t.node())
    out = answer(*_evict(t, pod, name=pod + "-other"))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-pending-pod-deleted-without-budget", {"code": 201, "kind": "Status", "status": "Success", "pod": "gone"})
def probe_eviction_pending_pod_deleted_without_budget(t):
    name = t.name("pod")
    body = pod_body(name)
    body["metadata"]["labels"] = {"app": name}
    create_pod(t, body)
    _budget(t, {"app": name}, minAvailable=1)
    code, body = _evict(t, name)
    return {"code": code, "kind": body.get("kind"), "status": body.get("status"), "pod": _pod_state(t, name)}


@row("eviction-budget-exhausted-429", {
    "code": 429, "kind": "Status", "reason": "TooManyRequests", "pod": "present",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget <pdb> needs 1 healthy pods and has 1 currently"}]})
def probe_eviction_budget_exhausted_429(t):
    node = t.node()
    pod = _bound_pod(t, node, grace=0)
    budget = _budget(t, {"app": pod}, minAvailable=1)
    return _refused_by_budget(t, pod, budget)


@row("eviction-two-budgets-500", {
    "code": 500, "kind": "Status", "reason": None, "pod": "present",
    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."})
def probe_eviction_two_budgets_500(t):
    pod = _bound_pod(t, t.node(), grace=0)
    _budget(t, {"app": pod}, maxUnavailable=1)
    _budget(t, {"app": pod}, maxUnavailable=1)
    out = answer(*_evict(t, pod))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-unmanaged-pod-max-unavailable-429", {
    "code": 429, "kind": "Status", "reason": "TooManyRequests", "pod": "present",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget <pdb> does not allow evicting pods currently"}]})
def probe_eviction_unmanaged_pod_max_unavailable_429(t):
    pod = _bound_pod(t, t.node(), grace=0)
    budget = _budget(t, {"app": pod}, maxUnavailable=1)
    return _refused_by_budget(t, pod, budget)


@row("eviction-allowed-201-pod-deleted-gracefully", {"code": 201, "kind": "Status", "status": "Success",
                                                     "pod": "terminating", "grace": 30})
def probe_eviction_allowed_201_pod_deleted_gracefully(t):
    pod = _bound_pod(t, t.node())
    _budget(t, {"app": pod}, minAvailable=0)
    code, body = _evict(t, pod)
    state = _pod_state(t, pod)
    grace = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["metadata"].get("deletionGracePeriodSeconds")
    return {"code": code, "kind": body.get("kind"), "status": body.get("status"), "pod": state, "grace": grace}


def _delete_pod(t, pod, query=""):
    code, body, _headers = t.req("DELETE", "/api/v1/namespaces/%s/pods/%s%s" % (t.namespace, pod, query))
    meta = body.get("metadata") or {}
    return {"code": code, "kind": body.get("kind"), "deletionTimestamp": bool(meta.get("deletionTimestamp")),
            "deletionGracePeriodSeconds": meta.get("deletionGracePeriodSeconds"), "pod": _pod_state(t, pod)}


@row("pod-delete-grace-periods", {
    "unbound": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "bound": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 30, "pod": "terminating"},
    "bound-spec-0": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "bound-request-0": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0,
                        "pod": "gone"},
    "bound-negative": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 1,
                       "pod": "terminating"},
    "succeeded": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "watch": ["MODIFIED", "DELETED"]})
def probe_pod_delete_grace_periods(t):
    node = t.node()
    out = {}
    name = t.name("pod")
    create_pod(t, pod_body(name))
    out["unbound"] = _delete_pod(t, name)
    out["bound"] = _delete_pod(t, _bound_pod(t, node))
    spec0 = _bound_pod(t, node, grace=0)
    rv = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, spec0))["metadata"]["resourceVersion"]
    out["bound-spec-0"] = _delete_pod(t, spec0)
    out["bound-request-0"] = _delete_pod(t, _bound_pod(t, node), "?gracePeriodSeconds=0")
    out["bound-negative"] = _delete_pod(t, _bound_pod(t, node), "?gracePeriodSeconds=-5")
    done = _bound_pod(t, node)
    t.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (t.namespace, done), {"status": {"phase": "Succeeded"}},
         MERGE_PATCH)
    out["succeeded"] = _delete_pod(t, done)
    _code, events = t.watch("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s&timeoutSeconds=1&fieldSelector="
                            "metadata.name=%s" % (t.namespace, rv, spec0), seconds=3)
    out["watch"] = [e["type"] for e in events]
    return out
