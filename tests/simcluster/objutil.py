# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers on Kubernetes objects for the simulated cluster's controllers and the kubelet core: metadata and
conditions, pod requests, taints and tolerations, node affinity, extended resource names, generated names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import random
import re

from .quantity import quantity_amount as parse_quantity

SCHEDULER_NAME = "default-scheduler"

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

# Alphabet of k8s.io/apimachinery rand.String: no vowels, no confusable characters.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# ---------------------------------------------------------------- small helpers

def is_extended_resource(name):
    """v1helper.IsExtendedResourceName: fully qualified, outside kubernetes.io, valid as requests.<name>."""
    if name.count("/") != 1:
        return False
    domain, short = name.split("/")
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    if not domain or len(domain) > 253 or not _DNS_SUBDOMAIN.match(domain):
        return False
    if not short or len(short) > 63 or not _QUALIFIED_NAME.match(short):
        return False
    return bool(_DNS_SUBDOMAIN.match("requests." + domain))


def _rfc3339_to_epoch(text):
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return 0.0


def random_suffix(n=5):
    return "".join(random.choice(NAME_ALPHABET) for _i in range(n))


def template_hash(template, collision_count=0):
    """A stable controller-revision-hash for a pod template (fnv-1a over its canonical JSON)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode("utf-8")
    h = 0x811C9DC5
    for byte in data + str(collision_count or 0).encode("ascii"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    # encoded like apimachinery's SafeEncodeString so it looks like a real hash label
    return "".join(NAME_ALPHABET[ord(c) % len(NAME_ALPHABET)] for c in str(h))


def _meta(obj):
    return obj.get("metadata") or {}


def _key(obj):
    meta = _meta(obj)
    return (meta.get("namespace"), meta.get("name"))


def _condition(obj, ctype):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def pod_ready(pod):
    cond = _condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True")


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def controller_ref(obj):
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def pod_requests(pod):
    """Effective requests (as Fractions): max(sum of containers, each init container) + overhead.

    A resource with a limit but no request counts the limit, as apiserver defaulting does.
    """
    def container_requests(container):
        res = container.get("resources") or {}
        out = dict((k, parse_quantity(v)) for k, v in (res.get("limits") or {}).items())
        out.update((k, parse_quantity(v)) for k, v in (res.get("requests") or {}).items())
        return out

    spec = pod.get("spec") or {}
    total = {}
    for container in spec.get("containers") or []:
        for k, v in container_requests(container).items():
            total[k] = total.get(k, 0) + v
    for container in spec.get("initContainers") or []:
        for k, v in container_requests(container).items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return total


QOS_RESOURCES = ("cpu", "memory")     # the only resources a QoS class is computed from


def _qos_amounts(resources, kind):
    """{cpu/memory: amount} of a resources map's requests or limits, zero quantities left out (a quantity that does not
    parse counts as absent: the apiserver computes the class before validation refuses the pod)."""
    out = {}
    for name in QOS_RESOURCES:
        value = ((resources or {}).get(kind) or {}).get(name) if isinstance(resources, dict) else None
        try:
            amount = parse_quantity(value) if value is not None else 0
        except (TypeError, ValueError):
            amount = 0
        if amount > 0:
            out[name] = amount
    return out


def qos_class(spec):
    """The QoS class of a pod spec (status.qosClass), as Kubernetes computes it (pkg/apis/core/helper/qos): only cpu
    and memory count (a pod that asks only for nvidia.com/gpu is BestEffort), zero quantities do not, init containers
    do, and pod-level resources (spec.resources) replace the containers'. BestEffort without any request or limit;
    Guaranteed when every container (or the pod) limits both cpu and memory and the summed requests equal the summed
    limits, a request left out defaulting to its limit; else Burstable. The apiserver sets it when a pod is created
    (strategy.py, before validation, so malformed containers are skipped); the DaemonSet controller and the kubelet
    core set it on the pods they make."""
    requests, limits = {}, {}
    guaranteed = True
    if isinstance(spec.get("resources"), dict):
        holders = [spec["resources"]]
    else:
        holders = [c.get("resources") for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
                   if isinstance(c, dict)]
    for resources in holders:
        lim = _qos_amounts(resources, "limits")
        # the apiserver's defaulting: a resource limited but not requested requests its limit
        req = dict(lim, **_qos_amounts(resources, "requests"))
        for totals, amounts in ((requests, req), (limits, lim)):
            for name, amount in amounts.items():
                totals[name] = totals.get(name, 0) + amount
        if set(lim) != set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def toleration_tolerates(tol, taint):
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    if tol.get("key") and tol.get("key") != taint.get("key"):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    return (tol.get("value") or "") == (taint.get("value") or "")


def first_untolerated_taint(taints, tolerations, effects):
    for taint in taints or []:
        if taint.get("effect") not in effects:
            continue
        if not any(toleration_tolerates(t, taint) for t in tolerations or []):
            return taint
    return None


def _match_requirement(req, value, present):
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def node_matches_affinity(pod_spec, node):
    """nodeSelector and required node affinity (NodeAffinity filter / DaemonSet predicates)."""
    labels = _meta(node).get("labels") or {}
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    fields = {"metadata.name": _meta(node).get("name")}
    for term in required.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        field_exprs = term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue    # an empty term matches no node
        if all(_match_requirement(e, labels.get(e.get("key")), e.get("key") in labels) for e in exprs) and \
                all(_match_requirement(e, fields.get(e.get("key")), e.get("key") in fields) for e in field_exprs):
            return True
    return False
