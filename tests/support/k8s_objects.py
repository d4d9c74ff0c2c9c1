# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers on Kubernetes objects for the kubelet stand-in (tests/support/kubelet.py, kubelet_core.py):
metadata and conditions, pod phases and owners, extended resource names, the QoS class, timestamps; and reading an
API answer out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from tests.support.quantity import quantity_amount as parse_quantity

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def read_out(answer):
    """Read a streamed answer (``_preload_content=False``) whole and return it: only then does its connection go
    back to the client's pool; one left unread keeps it, and the next request opens a TLS connection of its own."""
    getattr(answer, "data", None)   # urllib3 reads the body at the first look at .data, and keeps it
    return answer


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def metadata(obj):
    return obj.get("metadata") or {}


def condition(obj, ctype):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def pod_ready(pod):
    cond = condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True")


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def controller_ref(obj):
    for ref in metadata(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


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
    (before validation, so malformed containers are skipped); the kubelet core sets it on the pods it makes."""
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
