# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation: what drivers published and which claims are allocated, per node.

``current_pools`` is the one definition of a driver's published devices (the newest generation of each
pool, complete pools only); ``report`` is ``extended_resource_info``'s DRA section; ``published_by_node``,
``nodes_missing_devices`` and ``node_results`` are ``dra_driver_deploy``'s wait for a driver's devices,
``still_published`` and ``describe_published`` its wait for them to go.

Private to the collection: the interface may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils._dra import (
    GROUP,
    VERSION,
    _allocated_node,
    _requests,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import condition


def _attribute_value(attribute):
    """A device attribute ({"string": "a100"}, {"int": 0}, {"bool": true}, {"version": "1.2.3"}) as a plain value."""
    if isinstance(attribute, dict):
        for key in ("string", "int", "bool", "version"):
            if key in attribute:
                return attribute[key]
        for key in ("strings", "ints", "bools", "versions"):
            if key in attribute:
                return attribute[key]
    return attribute


def current_pools(slices):
    """The one definition of what a driver has published: (driver, pool name) -> the pool's newest generation.

    Per pool only the slices of the newest ``spec.pool.generation`` count (older ones are leftovers the scheduler
    ignores), and the pool is complete once as many slices of that generation exist as its
    ``resourceSliceCount`` says; the scheduler uses no device of an incomplete pool, so neither does anything
    that counts devices here. Each value: {"driver", "pool", "generation", "expected", "slices": [v1 slices],
    "complete"}."""
    pools = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver"), pool.get("name"))
        generation = pool.get("generation") or 0
        entry = pools.get(key)
        if entry is None or generation > entry["generation"]:
            entry = pools[key] = {"driver": key[0], "pool": key[1], "generation": generation,
                                  "expected": pool.get("resourceSliceCount") or 1, "slices": []}
        elif generation < entry["generation"]:
            continue
        entry["slices"].append(item)
    for entry in pools.values():
        entry["complete"] = len(entry["slices"]) >= entry["expected"]
    return pools


def published_devices(slices):
    """Node name -> the devices drivers published for it in complete pools (current_pools), sorted by driver, pool
    and name.

    Slices that are not tied to one node (nodeSelector, allNodes) are reported under the key None.
    """
    nodes = {}
    for entry in current_pools(slices).values():
        if not entry["complete"]:
            continue
        for item in entry["slices"]:
            spec = item.get("spec") or {}
            node = spec.get("nodeName") or None
            for device in spec.get("devices") or []:
                nodes.setdefault(node, []).append({
                    "driver": spec.get("driver"),
                    "pool": (spec.get("pool") or {}).get("name"),
                    "device": device.get("name"),
                    "attributes": dict((k, _attribute_value(v)) for k, v in (device.get("attributes") or {}).items()),
                    "capacity": dict((k, (v or {}).get("value") if isinstance(v, dict) else v)
                                     for k, v in (device.get("capacity") or {}).items()),
                })
    for devices in nodes.values():
        devices.sort(key=lambda d: (d["driver"] or "", d["pool"] or "", d["device"] or ""))
    return nodes


def published_by_node(slices, driver):
    """node -> {"pools": {pool: state}, "devices": [names]} for one driver, from current_pools: the devices of
    complete pools only, and each pool's state (generation, slices, expected, complete) so that a wait can say
    what is missing. Slices not tied to one node are skipped."""
    nodes = {}
    for (pool_driver, pool_name), entry in sorted(current_pools(slices).items(),
                                                  key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
        if pool_driver != driver:
            continue
        by_node = {}
        for item in entry["slices"]:
            node = (item.get("spec") or {}).get("nodeName")
            if node:
                by_node.setdefault(node, []).append(item)
        for node, items in by_node.items():
            out = nodes.setdefault(node, {"pools": {}, "devices": []})
            out["pools"][pool_name] = {"generation": entry["generation"], "slices": len(entry["slices"]),
                                       "expected": entry["expected"], "complete": entry["complete"]}
            if entry["complete"]:
                out["devices"].extend(d.get("name") for i in items for d in (i.get("spec") or {}).get("devices") or [])
    for out in nodes.values():
        out["devices"].sort()
    return nodes


def nodes_missing_devices(published, node_names, min_count):
    """{node: what is missing} for the nodes that have not published min_count devices in complete pools."""
    missing = {}
    for node in node_names:
        entry = published.get(node)
        if entry is None:
            missing[node] = "no ResourceSlice"
            continue
        incomplete = ["pool %s has %d of %d slices of generation %d" % (p, s["slices"], s["expected"], s["generation"])
                      for p, s in sorted(entry["pools"].items()) if not s["complete"]]
        if len(entry["devices"]) < min_count:
            text = "%d of %d devices" % (len(entry["devices"]), min_count)
            if incomplete:
                text += " (%s)" % "; ".join(incomplete)
            missing[node] = text
    return missing


def still_published(slices, nodes=None):
    """{node: (ResourceSlices, devices)} of ``nodes`` (every node when None) that still have ResourceSlices among
    ``slices`` (one driver's); a slice of no one node (``allNodes``, a node selector) counts for none."""
    left = {}
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        if node and (nodes is None or node in nodes):
            count, devices = left.get(node, (0, 0))
            left[node] = (count + 1, devices + len(spec.get("devices") or []))
    return left


def describe_published(left):
    """still_published()'s answer as a task message names it: "gpu-2 (4 device(s) in 1 ResourceSlice(s)), ..."."""
    return ", ".join("%s (%d device(s) in %d ResourceSlice(s))" % (node, devices, count)
                     for node, (count, devices) in sorted(left.items()))


def node_results(published, node_names, driver):
    return [{"name": node, "driver": driver, "pools": sorted((published.get(node) or {}).get("pools") or {}),
             "devices": list((published.get(node) or {}).get("devices") or []),
             "device_count": len((published.get(node) or {}).get("devices") or [])}
            for node in sorted(node_names)]


def claim_consumers(pods):
    """(namespace, claim name) -> the pods that use that claim: by ``spec.resourceClaims[].resourceClaimName``
    or, for claims made from a template, by the pod's ``status.resourceClaimStatuses``."""
    users = {}
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        names = set(entry.get("resourceClaimName") for entry in (pod.get("spec") or {}).get("resourceClaims") or [])
        names.update(s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
        extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        names.add(extended)
        for name in names:
            if name:
                users.setdefault((meta.get("namespace"), name), []).append(pod)
    return users


def _scheduling_problem(pod):
    """The pod's PodScheduled=False condition as {pod, reason, message}, or None."""
    cond = condition(pod, "PodScheduled") or {}
    if cond.get("status") == "False":
        return {"pod": (pod.get("metadata") or {}).get("name"), "reason": cond.get("reason"),
                "message": cond.get("message")}
    return None


def claim_report(claims, devices_by_node, consumers=None):
    """(node name -> allocated claims, pending claims) from ResourceClaims in the v1 shape.

    ``consumers`` ((namespace, claim) -> pods, from claim_consumers) names the pods waiting for a pending
    claim and the scheduler's reason (their ``PodScheduled=False`` condition)."""
    device_nodes = {}
    for node, devices in devices_by_node.items():
        for dev in devices:
            device_nodes[(dev["driver"], dev["pool"], dev["device"])] = node
    allocated, pending = {}, []
    for claim in claims:
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        entry = {"namespace": meta.get("namespace"), "name": meta.get("name"),
                 "reserved_for": ["%s/%s" % (r.get("resource"), r.get("name")) for r in status.get("reservedFor") or []]}
        if status.get("allocation"):
            entry["devices"] = ["%s/%s/%s" % (r.get("driver"), r.get("pool"), r.get("device"))
                                for r in ((status["allocation"].get("devices") or {}).get("results") or [])]
            node = _allocated_node(claim, device_nodes)
            entry["node"] = node
            allocated.setdefault(node, []).append(entry)
        else:
            entry["requests"] = [r.get("name") for r in _requests(claim.get("spec")) or []]
            waiting = (consumers or {}).get((meta.get("namespace"), meta.get("name"))) or []
            entry["pods"] = sorted((p.get("metadata") or {}).get("name") for p in waiting)
            problems = [x for x in (_scheduling_problem(p) for p in waiting) if x]
            if problems:
                problems.sort(key=lambda x: x["pod"] or "")
                entry.update(reason=problems[0]["reason"], message=problems[0]["message"])
            pending.append(entry)
    return allocated, pending


def report(api, node_names=None, pods=None, list_pods=None):
    """What DRA drivers published and which claims are allocated, per node (all nodes when node_names is None).

    The pods that wait for a pending claim come from ``pods`` (every pod, when the caller listed them) or,
    only when some claim is pending, from ``list_pods()``. Never fails for a cluster without resource.k8s.io:
    ``served`` is then false.
    """
    if VERSION not in api.served_versions():
        return {"served": False}
    api.version = VERSION
    slices = api.list("resourceslices", what="list ResourceSlices")
    claims = api.list("resourceclaims", what="list ResourceClaims")
    devices = published_devices(slices)
    if pods is None and list_pods is not None and any(not (c.get("status") or {}).get("allocation") for c in claims):
        pods = list_pods()
    allocated, pending = claim_report(claims, devices, claim_consumers(pods))
    wanted = set(node_names) if node_names is not None else set(n for n in list(devices) + list(allocated) if n)
    nodes = dict((name, {"devices": devices.get(name, []), "claims": allocated.get(name, [])})
                 for name in sorted(wanted))
    return {"served": True, "api_version": "%s/%s" % (GROUP, VERSION), "nodes": nodes,
            "pending_claims": pending}
