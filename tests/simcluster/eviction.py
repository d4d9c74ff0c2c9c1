# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Eviction subresource (POST /api/v1/namespaces/<ns>/pods/<name>/eviction) and PodDisruptionBudgets.

Follows kube-apiserver v1.32, pkg/registry/core/pod/storage/eviction.go (EvictionREST.Create):
- the body must be an Eviction whose metadata.name is the pod's name (400 otherwise);
- a pod that is Succeeded, Failed, Pending or already terminating is deleted without a budget check
  (canIgnorePDB);
- more than one matching budget answers 500 "This pod has more than one PodDisruptionBudget, which the
  eviction subresource does not support.";
- a budget with disruptionsAllowed 0 answers 429 TooManyRequests "Cannot evict pod as it would violate the
  pod's disruption budget." with a DisruptionBudget cause "The disruption budget <name> needs <desired>
  healthy pods and has <current> currently"; a pod that is not Ready may go while currentHealthy >=
  desiredHealthy;
- success deletes the pod gracefully and answers 201 with a Status of status Success (handlers/create.go
  sets the code of a Status result to 201).

The real disruption controller writes each budget's status (currentHealthy, desiredHealthy,
disruptionsAllowed) asynchronously and the eviction handler reads that status; here the status is
computed when the eviction arrives, as a controller that is always up to date would have written it
(pkg/controller/disruption/disruption.go: expected pods = pods the selector matches, healthy = Ready and
not terminating; minAvailable and maxUnavailable percentages round up). A budget whose selector is empty
matches nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math

from tests.simcluster.store import StoreError, not_found

EVICTION_KINDS = ("policy/v1", "policy/v1beta1")
TOO_MANY_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_BUDGETS_MESSAGE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def _ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _scaled(value, total):
    """intstr.GetScaledValueFromIntOrPercent with roundUp=true."""
    if isinstance(value, str) and value.endswith("%"):
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    return int(value)


def budget_status(budget, pods):
    """(currentHealthy, desiredHealthy, disruptionsAllowed) the disruption controller would write."""
    spec = budget.get("spec") or {}
    expected = len(pods)
    if spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str):
        # getExpectedScale: only pods with a controller count (simplified: one each, not the controller's scale);
        # a pod without one is unmanaged and ignored (measured on v1.36.2: expectedPods 0, disruptionsAllowed 0)
        expected = sum(1 for p in pods if any(ref.get("controller") for ref in
                                              (p.get("metadata") or {}).get("ownerReferences") or []))
    healthy = sum(1 for p in pods if _ready(p) and not (p.get("metadata") or {}).get("deletionTimestamp"))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    # updatePdbStatus: no disruption is allowed while no pod is expected
    return healthy, desired, max(0, healthy - desired) if expected > 0 else 0


def evict(api, req, namespace, name, selector_matches):
    """Answer an eviction request as (code, body, headers)."""
    try:
        body = json.loads(req.body.decode("utf-8") if req.body else "")
    except ValueError as e:
        raise StoreError(400, "BadRequest", "error decoding request body: %s" % e)
    if not isinstance(body, dict) or body.get("kind") != "Eviction" or body.get("apiVersion") not in EVICTION_KINDS:
        raise StoreError(400, "BadRequest", "not a Eviction object: %s" % type(body).__name__)
    if (body.get("metadata") or {}).get("name") != name:
        raise StoreError(400, "BadRequest", "name in URL does not match name in Eviction object")
    pod = api.store.get("pods", namespace, name)
    if pod is None:
        raise not_found("pods", name)
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    ignore_budgets = phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp")
    if not ignore_budgets:
        labels = pod["metadata"].get("labels") or {}
        budgets = []
        for pdb in api.store.list("poddisruptionbudgets", namespace)[0]:
            selector = (pdb.get("spec") or {}).get("selector") or {}
            if not (selector.get("matchLabels") or selector.get("matchExpressions")):
                continue
            if selector_matches(selector, labels):
                budgets.append(pdb)
        if len(budgets) > 1:
            return (500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": MANY_BUDGETS_MESSAGE, "code": 500}, {})
        if budgets:
            pdb = budgets[0]
            selector = pdb["spec"]["selector"]
            covered = [p for p in api.store.list("pods", namespace)[0]
                       if selector_matches(selector, (p.get("metadata") or {}).get("labels") or {})
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            healthy, desired, allowed = budget_status(pdb, covered)
            unready_may_go = not _ready(pod) and healthy >= desired and desired > 0
            if allowed == 0 and not unready_may_go:
                cause = "The disruption budget %s needs %d healthy pods and has %d currently" % (
                    pdb["metadata"]["name"], desired, healthy)
                if healthy > desired:   # measured on v1.36.2 (no pod expected: 1 healthy, 0 desired)
                    cause = "The disruption budget %s does not allow evicting pods currently" % pdb["metadata"]["name"]
                status = StoreError(429, "TooManyRequests", TOO_MANY_MESSAGE,
                                    {"causes": [{"reason": "DisruptionBudget", "message": cause}]})
                raise status
    api.delete_object("pods", namespace, name, (body.get("deleteOptions") or {}))
    return (201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, {})
