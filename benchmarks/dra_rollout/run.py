#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time from the start of a DRA driver's rollout to "every node published its devices": dra_driver_deploy vs
kubernetes.core.k8s (wait: true on the DaemonSet) followed by an until: loop of kubernetes.core.k8s_info on
ResourceSlices (delay 5 s), as users write it.

One local cluster per node count (a real v1.36.2 control plane with the kubelet stand-in's nodes,
tests/support/local_cluster.py), one ansible-playbook run per cluster whose rounds alternate between the two
ways; every round starts from nothing (the previous round's objects deleted and its ResourceSlices gone) and deploys
the DRA example driver (the same objects, built by the module's own code, for both ways).

  start   the moment the first task of the way starts (_started_at of the kubehw_results callback,
          tests/support/callback_plugins)
  end     the moment its last task's result reaches ansible-playbook (_returned_at)
  requests  the fault proxy's request log between the two (the way's requests to the apiserver; the kubelet
            stand-in's go around it)

Usage: python benchmarks/dra_rollout/run.py [--nodes 20 100] [--rounds 3] [--ways kubehw k8s] [--output FILE]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, ".cache", "collections")]

from tests.support.playbook_runner import has_test_collection, run_playbook  # noqa: E402  (test equipment, found from the checkout)

NAMESPACE = "bench"
DEVICES_PER_NODE = 2
SYNC_INTERVAL = 0.5
POD_START_DELAY = 0.3
DRIVER = "gpu.example.com"
POLL_DELAY = 5


def cluster(nodes):
    return {"sync_interval": SYNC_INTERVAL, "pod_start_delay": POD_START_DELAY,
            "nodes": [{"name": "gpu-%03d" % i, "inventory": {"example.com/gpu": DEVICES_PER_NODE}}
                      for i in range(nodes)]}


def manifests():
    """The objects dra_driver_deploy writes for the example preset, built by its own code."""
    from ansible_collections.kubehw.devices.plugins.modules import dra_driver_deploy as mod

    params = dict(preset="example", namespace=NAMESPACE, name=None, image=None, env=None, node_selector=None,
                  tolerations=None, device_classes=True, extended_resource_name=None)
    account, role, binding = mod.build_rbac(params)
    return [account, role, binding] + mod.build_device_classes(params), mod.build_daemonset(params)


def settle(tag):
    """Untimed: wait until the previous round's ResourceSlices are gone."""
    return {"name": "settle %s" % tag,
            "kubernetes.core.k8s_info": {"api_version": "resource.k8s.io/v1", "kind": "ResourceSlice"},
            "register": "left", "until": "left.resources | length == 0", "retries": 300, "delay": 1}


def tasks_for(rounds, nodes, ways=("kubehw", "k8s")):
    others, daemonset = manifests()
    enough = ("(slices.resources | map(attribute='spec.devices') | map('length') | select('ge', %d) | list | length)"
              " >= %d" % (DEVICES_PER_NODE, nodes))
    tasks = []
    for i in range(rounds):
        ours = [
            {"name": "kubehw %d: deploy" % i,
             "kubehw.devices.dra_driver_deploy": {"preset": "example", "namespace": NAMESPACE, "wait": "devices",
                                                  "min_count": DEVICES_PER_NODE, "wait_timeout": 900}},
            {"name": "cleanup kubehw %d" % i,
             "kubehw.devices.dra_driver_deploy": {"preset": "example", "namespace": NAMESPACE, "state": "absent"}},
            settle("kubehw %d" % i)]
        theirs = [
            {"name": "k8s %d: objects" % i, "kubernetes.core.k8s": {"definition": others}},
            {"name": "k8s %d: daemonset" % i,
             "kubernetes.core.k8s": {"definition": daemonset, "wait": True, "wait_timeout": 900}},
            {"name": "k8s %d: slices" % i,
             "kubernetes.core.k8s_info": {"api_version": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                          "field_selectors": ["spec.driver=%s" % DRIVER]},
             "register": "slices", "until": enough, "retries": 180, "delay": POLL_DELAY},
            {"name": "cleanup k8s %d" % i,
             "kubernetes.core.k8s": {"definition": [daemonset] + others, "state": "absent"}},
            settle("k8s %d" % i)]
        tasks += (ours if "kubehw" in ways else []) + (theirs if "k8s" in ways else [])
    return tasks


def by_resource(requests):
    """{resource: {verb: count}} of the requests (request_info of the fault proxy's log: list, watch, get, ...)."""
    from tests.support.fault_proxy_log import request_info

    counts = {}
    for r in requests:
        info = request_info(r["method"], r["path"].split("?")[0], dict((k, [v]) for k, v in r["query"].items()))
        if info is None:
            continue
        resource, _namespace, _name, subresource, verb = info
        key = resource + ("/" + subresource if subresource else "")
        counts.setdefault(key, {}).setdefault(verb, 0)
        counts[key][verb] += 1
    return counts


def spans(lines, sim_requests):
    """Per round and way: seconds from the way's first task start to its last task return, and requests."""
    out = []
    by_task = dict((line["task"], line) for line in lines)
    rounds = sorted(set(int(t.split()[1].rstrip(":")) for t in by_task if t.startswith(("kubehw ", "k8s "))))
    for i in rounds:
        for way, first, last in (("kubehw.devices.dra_driver_deploy", "kubehw %d: deploy" % i, "kubehw %d: deploy" % i),
                                 ("kubernetes.core k8s + k8s_info until", "k8s %d: objects" % i, "k8s %d: slices" % i)):
            if first not in by_task:
                continue
            start, end = by_task[first]["_started_at"], by_task[last]["_returned_at"]
            requests = [r for r in sim_requests if start <= r.get("time", 0) <= end]
            out.append({"round": i, "way": way, "seconds": round(end - start, 3), "requests": len(requests),
                        "watch_requests": len([r for r in requests if r["query"].get("watch")]),
                        "slice_list_requests": len([r for r in requests if r["path"].endswith("/resourceslices")
                                                    and not r["query"].get("watch")]),
                        "by_resource": by_resource(requests),
                        "poll_attempts": by_task[last].get("attempts")})
    return out


def run_size(nodes, rounds, workdir, ways=("kubehw", "k8s")):
    from tests.support.local_cluster import LocalCluster
    from kubernetes import client, config

    sim = LocalCluster("bench-dra", node_config=cluster(nodes), request_log=True)
    sim.start()
    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=sim.kubeconfig))
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        play = [{"name": "dra rollout benchmark", "hosts": "localhost", "connection": "local", "gather_facts": False,
                 "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks_for(rounds, nodes, ways)}]
        run = run_playbook(play, workdir, kubeconfig=sim.kubeconfig, timeout=3600)
        if run.returncode != 0:
            sys.exit("ansible-playbook failed (rc %d):\n%s\n%s"
                     % (run.returncode, run.stdout[-4000:], run.stderr[-4000:]))
        lines = run.results
        return spans(lines, list(sim.requests))
    finally:
        sim.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", nargs="+", choices=("kubehw", "k8s"), default=["kubehw", "k8s"],
                        help="which ways to run (kubehw alone: the module's requests at a size the other way takes long at)")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "dra_rollout.json"))
    opts = parser.parse_args()
    if not has_test_collection("kubernetes.core"):
        sys.exit("kubernetes.core is missing: run `make setup` (it unpacks it from the PyPI ansible wheel)")
    workdir = tempfile.mkdtemp(prefix="bench-dra-")

    rows, summary = [], {}
    for nodes in opts.nodes:
        started = time.time()
        size_rows = run_size(nodes, opts.rounds, workdir, opts.ways)
        for row in size_rows:
            row["nodes"] = nodes
        rows += size_rows
        for way in sorted(set(r["way"] for r in size_rows)):
            mine = [r for r in size_rows if r["way"] == way]
            summary["%d nodes, %s" % (nodes, way)] = {
                "n": len(mine), "median_s": round(statistics.median(r["seconds"] for r in mine), 3),
                "min_s": min(r["seconds"] for r in mine), "max_s": max(r["seconds"] for r in mine),
                "median_requests": statistics.median(r["requests"] for r in mine)}
        print("%d nodes done in %.0f s" % (nodes, time.time() - started))
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    report = {
        "benchmark": "dra_rollout: rollout start to every node's devices published (wait: devices vs k8s wait + "
                     "k8s_info until loop, delay %d s)" % POLL_DELAY,
        "cluster": "kube-apiserver, kube-controller-manager, kube-scheduler v1.36.2 (tests/support/local_cluster.py), "
                   "N kubelet stand-in nodes with %d example.com/gpu each, pod_start_delay %s s"
                   % (DEVICES_PER_NODE, POD_START_DELAY),
        "kubernetes.core": "from the PyPI ansible==12.3.0 wheel (.cache/collections)",
        "rounds": opts.rounds, "load_average_at_end": load, "summary": summary, "rows": rows,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(opts.output), exist_ok=True)
    with open(opts.output, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    for key, stats in summary.items():
        print("%-60s n=%d median %.2fs (min %.2f, max %.2f), median %s requests"
              % (key, stats["n"], stats["median_s"], stats["min_s"], stats["max_s"], stats["median_requests"]))
    print("written to %s" % opts.output)


if __name__ == "__main__":
    main()
