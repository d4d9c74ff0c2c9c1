# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The drift_rows filter: playbooks/drift.yml's comparison, from the check-mode results of the modules site.yml runs,
as one row per node or object that differs. Documented in drift_rows.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib

from ansible_collections.kubehw.devices.plugins.module_utils._deploy_results import diff_entries, pod_template_images
from ansible_collections.kubehw.devices.plugins.module_utils._host_packages import package_differences

# How many characters of a failed task's message a row quotes.
MESSAGE_SHOWN = 300
# How many differing lines a runtime file's row names on each side; the rest are counted.
LINES_SHOWN = 10

# (the accelerator_node role's registered result, the kind of its object, the result's key holding that object,
# what serves the nodes, the role's fact naming the nodes it serves)
GPU_OBJECTS = (
    ("nvidia_container_toolkit_runtime_class_result", "RuntimeClass", "runtime_class", "runtime of the device plugin",
     "accelerator_node_plugin_nodes"),
    ("device_plugin_result", "DaemonSet", "daemonset", "device plugin", "accelerator_node_plugin_nodes"),
    ("dra_driver_result", "DaemonSet", "daemonset", "DRA driver", "accelerator_node_dra_nodes"),
)


def _static_rows(static):
    """A row per node whose extended resources differ, and per node the module could not compare."""
    rows = []
    for batch in (static or {}).get("results") or []:
        if not isinstance(batch, dict):
            continue
        for node in batch.get("nodes") or []:
            if isinstance(node, dict) and node.get("changed"):
                diff = node.get("diff") or {}
                rows.append({"node": node.get("name"), "what": "extended resources",
                             "declared": diff.get("after", {}), "observed": diff.get("before", {})})
        for name in batch.get("failed_nodes") or []:
            rows.append({"node": name, "what": "extended resources",
                         "declared": (batch.get("item") or {}).get("resources", {}),
                         "observed": batch.get("msg", "the node could not be compared")})
    return rows


def _object_row(result, kind, field, serves, nodes):
    """The row of an object the cluster part would write: its images declared and observed, or missing."""
    entries = diff_entries(result, kind)
    missing = any(not entry.get("before") for entry in entries)
    before = ", ".join(pod_template_images(*[entry.get("before") for entry in entries]))
    after = ", ".join(pod_template_images(*[entry.get("after") for entry in entries]))
    meta = (result.get(field) or {}).get("metadata") or {}
    name = "%s %s%s" % (kind, "%s/" % meta["namespace"] if "namespace" in meta else "", meta.get("name", "?"))
    return {"node": name, "what": "%s on %s" % (serves, ", ".join(nodes) or "no node"),
            "declared": {"image": after} if after else "present",
            "observed": "missing" if missing or result.get("action") == "created" else {
                "image": before, "differs in": result.get("changed_paths") or result.get("changed_objects") or []}}


def _coverage_rows(result, field, serves, nodes):
    """A row per node the inventory gives the DaemonSet whose template does not admit it (the DaemonSet's
    selected_nodes): relabelled out of the pool, or tainted by someone else. Not repairable by the run: the
    collection's roles read node labels, they do not write them."""
    if not isinstance(result.get("selected_nodes"), list):
        return []
    meta = (result.get(field) or {}).get("metadata") or {}
    admitted = set(result["selected_nodes"])
    return [{"node": node, "what": "%s DaemonSet %s/%s" % (serves, meta.get("namespace", "?"), meta.get("name", "?")),
             "declared": "served", "observed": "not selected (the node's labels or taints keep its pods away)",
             "repairable": False}
            for node in nodes if node not in admitted]


def _host_rows(hosts):
    """A row per GPU host whose NVIDIA driver or pinned packages differ from the inventory (``hosts``: what the
    accelerator_node role's upgrade_plan entry point read of each, its accelerator_node_upgrade fact). Not repairable
    by the drift run: a driver change means a drain and a reboot, which site.yml does batch by batch (and
    upgrade_plan.yml shows first)."""
    rows = []
    for host in hosts or []:
        if not isinstance(host, dict):
            continue
        node = host.get("node") or host.get("host")
        driver = host.get("driver") or {}
        if driver.get("install"):
            rows.append({"node": node, "what": "NVIDIA driver", "declared": "branch %s" % driver.get("branch"),
                         "observed": driver.get("running") or "none", "repairable": False})
        elif driver.get("reboot"):
            rows.append({"node": node, "what": "NVIDIA driver", "declared": "branch %s loaded" % driver.get("branch"),
                         "observed": "%s installed, not loaded (kernel modules loaded: %s)" % (
                             driver.get("running") or "a driver", ", ".join(driver.get("loaded_modules") or [])
                             or "none"), "repairable": False})
        for name, have, version in package_differences(host.get("packages") or {}, host.get("pinned") or {}):
            rows.append({"node": node, "what": "package %s" % name, "declared": version,
                         "observed": ", ".join(have) or "not installed", "repairable": False})
    return rows


def _shown(lines):
    """At most LINES_SHOWN lines, the rest counted."""
    lines = list(lines)
    if len(lines) > LINES_SHOWN:
        return lines[:LINES_SHOWN] + ["... %d more line(s)" % (len(lines) - LINES_SHOWN)]
    return lines


def _file_diff(result):
    """(path, before, after) of a file write as it reported itself in check and diff mode (copy's and lineinfile's
    shapes: a list of diffs, the content's with before and after texts, the file attributes' with dicts). before and
    after are texts when the content differs, dicts of the attributes when only those do, None when the write gave no
    diff (diff mode off, a file too large to diff)."""
    diffs = result.get("diff")
    diffs = [d for d in (diffs if isinstance(diffs, list) else [diffs]) if isinstance(d, dict)]
    path = result.get("dest") or result.get("path")
    for diff in diffs:
        header = diff.get("after_header") or diff.get("before_header") or ""
        path = path or (header[:-len(" (content)")] if header.endswith(" (content)") else header) or None
        if isinstance(diff.get("before"), str) and isinstance(diff.get("after"), str):
            return path, diff["before"], diff["after"]
    for diff in diffs:
        if isinstance(diff.get("before"), dict) and isinstance(diff.get("after"), dict):
            return path, diff["before"], diff["after"]
    return path, None, None


def _runtime_rows(runtime):
    """A row per runtime configuration file or CDI specification a run of the host part would write (``runtime``:
    the accelerator_node role's runtime_drift entry point's accelerator_node_runtime_drift of each GPU host): the lines
    the host lacks and the lines it has that the run would drop, or missing. Not repairable by the drift run: site.yml
    writes the file and restarts the runtime."""
    rows = []
    for host in runtime or []:
        if not isinstance(host, dict):
            continue
        if host.get("unreadable"):
            # what the roles' failed task said (its runtime not installed, nvidia-ctk missing): the files unknown
            rows.append({"node": host.get("node") or host.get("host"), "what": "container runtime configuration",
                         "declared": "as the run writes it",
                         "observed": "not worked out: %s" % " ".join(str(host["unreadable"]).split())[:MESSAGE_SHOWN],
                         "repairable": False})
            continue
        for entry in host.get("files") or []:
            result = (entry or {}).get("result") if isinstance(entry, dict) else None
            if not isinstance(result, dict) or not result.get("changed"):
                continue
            path, before, after = _file_diff(result)
            row = {"node": host.get("node") or host.get("host"),
                   "what": ("%s %s" % (entry.get("what"), path or "")).strip(), "repairable": False}
            if before is None:
                row.update(declared="as the run writes it", observed="differs")
            elif isinstance(before, dict):
                row.update(declared={"file attributes": after}, observed={"file attributes": before})
            elif not before.strip():
                row.update(declared="present", observed="missing")
            else:
                changes = list(difflib.ndiff(before.splitlines(), after.splitlines()))
                row.update(declared={"lines the host lacks": _shown(c[2:] for c in changes if c.startswith("+ "))},
                           observed={"lines not declared": _shown(c[2:] for c in changes if c.startswith("- "))})
            rows.append(row)
    return rows


def drift_rows(static, gpu=None, hosts=None, runtime=None):
    """The differences the check-mode run of the extended_resources role (``static``, its registered result), of
    the accelerator_node role (``gpu``, the host variables of a GPU node after it) and, where the run read the hosts,
    the hosts' driver and packages (``hosts``, accelerator_node_upgrade of each) and the runtime files a run would
    write (``runtime``, accelerator_node_runtime_drift of each) found, one dict a row."""
    rows = _static_rows(static) + _host_rows(hosts) + _runtime_rows(runtime)
    gpu = gpu or {}
    for key, kind, field, serves, nodes_fact in GPU_OBJECTS:
        result = gpu.get(key) or {}
        if not isinstance(result, dict):
            continue
        nodes = list(gpu.get(nodes_fact) or [])
        if result.get("changed"):
            rows.append(_object_row(result, kind, field, serves, nodes))
        if kind == "DaemonSet":
            rows += _coverage_rows(result, field, serves, nodes)
    return rows


class FilterModule(object):
    """drift_rows (docs: drift_rows.yml beside this file)."""

    def filters(self):
        return {"drift_rows": drift_rows}
