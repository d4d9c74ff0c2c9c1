# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that turn what playbooks/upgrade_plan.yml read (each GPU host's planned driver and packages, a dry-run
drain of each node that would reboot, the cluster part's check-mode results) into the plan a reviewer approves.

serial_batches splits hosts into the batches a play with that ``serial`` runs, as ansible-playbook does;
upgrade_plan assembles the whole plan, with one line per step for people and the same data for AWX.
Each filter is documented in the YAML file of its name beside this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.six import string_types
from ansible.utils.helpers import pct_to_int

from ansible_collections.kubehw.devices.plugins.module_utils._deploy_results import diff_entries, pod_template_images
from ansible_collections.kubehw.devices.plugins.module_utils._host_packages import package_differences


def serial_batches(hosts, serial=None):
    """The hosts in the batches of a play with this ``serial`` (a number, a percentage such as "25%", or a list of
    them, the last one repeated), as ansible-playbook forms them (PlaybookExecutor._get_serialized_batches):
    all hosts at once for none, 0 or a percentage below one host is at least one host."""
    hosts = list(hosts or [])
    steps = serial if isinstance(serial, (list, tuple)) else [serial]
    steps = [s for s in steps if s is not None and s != ""] or [0]
    for step in steps:
        text = step.strip() if isinstance(step, string_types) else step
        if isinstance(text, string_types) and not (text.rstrip("%").isdigit() and text.count("%") <= 1):
            raise AnsibleFilterError("serial_batches: %r is neither a number of hosts nor a percentage such as "
                                     "'25%%'" % (step,))
    total, batches, index = len(hosts), [], 0
    while hosts:
        step = steps[index].strip() if isinstance(steps[index], string_types) else steps[index]
        size = pct_to_int(step, total)
        if size <= 0:
            batches.append(hosts)
            break
        batches.append(hosts[:size])
        hosts = hosts[size:]
        index = min(index + 1, len(steps) - 1)
    return batches


def _daemonset_change(what, result):
    """What the cluster part's check-mode result says of its DaemonSet: created, updated (images and update strategy
    from -> to) or unchanged; None when the task did not run."""
    if not isinstance(result, dict) or result.get("skipped") or "changed" not in result:
        return None
    daemonset = result.get("daemonset") or {}
    meta = daemonset.get("metadata") or {}
    name = "%s/%s" % (meta.get("namespace"), meta.get("name")) if meta.get("name") else what
    change = {"what": what, "daemonset": name, "action": "unchanged", "images": {"from": [], "to": []},
              "update_strategy": (daemonset.get("spec") or {}).get("updateStrategy")}
    for entry in diff_entries(result, "DaemonSet"):
        before, after = entry.get("before") or {}, entry.get("after") or {}
        change["images"] = {"from": pod_template_images(before), "to": pod_template_images(after)}
        change["update_strategy"] = (after.get("spec") or {}).get("updateStrategy") or change["update_strategy"]
        if result.get("changed"):
            change["action"] = "updated" if before else "created"
    if result.get("changed") and change["action"] == "unchanged":
        change["action"] = "updated"
    return change


def _package_steps(installed, pinned):
    """A step per pinned package whose installed version differs."""
    return [("%s %s -> %s" % (name, ", ".join(have), version)) if have else ("install %s %s" % (name, version))
            for name, have, version in package_differences(installed, pinned)]


def _others_cordon(drain):
    """The node was cordoned before the run by someone else (not by an earlier drain of this collection)."""
    return bool(drain.get("cordoned")) and not drain.get("own_cordon")


def _after_reboot(drain):
    if _others_cordon(drain):
        return "stays cordoned (cordoned before the run)"
    if drain.get("cordoned"):
        return "uncordon once Ready (cordoned by an earlier run that stopped)"
    return "uncordon once Ready"


def _node_plan(host):
    """One host's part of the plan: its steps in the order the run takes them, and what blocks them."""
    driver = host.get("driver") or {}
    drain = host.get("drain") or {}
    steps, blocked = [], list(drain.get("blocked") or [])
    if not host.get("host_setup", True):
        return dict(host, steps=[], blocked=[], stays_cordoned=False, changes=False)
    if driver.get("install"):
        running = driver.get("running") or "none"
        steps.append("install NVIDIA driver branch %s (running: %s)" % (driver.get("branch"), running))
    if driver.get("reboot") and not driver.get("reboot_by_the_run"):
        steps.append("left for a reboot by hand (nvidia_driver_reboot is false): the new driver runs only after it")
    elif driver.get("reboot"):
        why = "new driver" if driver.get("install") else "driver module not loaded (loaded: %s)" % (
            ", ".join(driver.get("loaded_modules") or []) or "none")
        if driver.get("drain"):
            evicts = drain.get("evicted") or []
            steps.append("cordon and drain: evict %s" % (", ".join(evicts) if evicts else "no pod"))
            if drain.get("failed"):
                blocked.append({"pod": None, "message": drain.get("msg")})
        steps.append("reboot (%s)" % why)
        steps.append(_after_reboot(drain))
    package_steps = _package_steps(host.get("packages") or {}, host.get("pinned") or {})
    steps.extend(package_steps)
    if not steps:
        steps.append("no change: driver %s (branch %s)" % (driver.get("running") or "not managed", driver.get("branch"))
                     if driver else "no change")
    # a node the run does not drain: its cordon as it is (the driver role lifts one an earlier run left)
    cordon = {} if driver.get("reboot") else (host.get("cordon") or {})
    held = _others_cordon(cordon)
    if held:
        steps.append("stays cordoned (cordoned before the run)")
    elif cordon.get("cordoned"):
        steps.append("uncordon (cordoned by an earlier run that stopped)")
    return dict(host, steps=steps, blocked=blocked, stays_cordoned=_others_cordon(drain) or held,
                changes=bool(driver.get("install") or driver.get("reboot") or package_steps or cordon.get("own_cordon")))


def upgrade_plan(hosts, serial=None, cluster=None):
    """The plan: batches of node plans in the order site.yml prepares the hosts, the DaemonSets the cluster part
    would create or roll, the nodes something blocks, and one line per step (``lines``)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("upgrade_plan takes the list of the hosts' plans, not %r" % (hosts,))
    plans = [_node_plan(dict(h)) for h in hosts if isinstance(h, dict)]
    batches = serial_batches(plans, serial)
    daemonsets = [c for c in (_daemonset_change(what, result) for what, result in (cluster or [])) if c]
    lines = []
    for number, batch in enumerate(batches, 1):
        for plan in batch:
            lines.append("batch %d: %s: %s" % (number, plan.get("node"), "; ".join(plan["steps"])))
            lines.extend("batch %d: %s: BLOCKED: %s%s" % (number, plan.get("node"), "%s: " % b["pod"] if b.get("pod")
                                                          else "", b.get("message")) for b in plan["blocked"])
    for change in daemonsets:
        if change["action"] == "unchanged":
            lines.append("then: %s DaemonSet %s: unchanged (%s)" % (change["what"], change["daemonset"],
                                                                    ", ".join(change["images"]["to"] or
                                                                              change["images"]["from"]) or "as it is"))
        else:
            lines.append("then: %s DaemonSet %s: %s, image %s -> %s, update strategy %s" % (
                change["what"], change["daemonset"], change["action"], ", ".join(change["images"]["from"]) or "none",
                ", ".join(change["images"]["to"]) or "none", change["update_strategy"] or "the API's default"))
    return {"batches": [[p.get("node") for p in batch] for batch in batches],
            "nodes": dict((p.get("node"), p) for p in plans),
            "daemonsets": daemonsets,
            "blocked": sorted(p.get("node") for p in plans if p["blocked"]),
            "stays_cordoned": sorted(p.get("node") for p in plans if p["stays_cordoned"]),
            "unchanged": sorted(p.get("node") for p in plans if not p["changes"]),
            "lines": lines}


class FilterModule(object):
    """serial_batches and upgrade_plan (docs: the YAML file of each name beside this file)."""

    def filters(self):
        return {
            'serial_batches': serial_batches,
            'upgrade_plan': upgrade_plan,
        }
