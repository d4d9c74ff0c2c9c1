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

On a large cluster the GPU nodes are a pool among many others: --background-nodes adds that many Node objects the
driver does not select (API-only, no kubelet: only their size in every Node list and watch counts), and --joining
makes that many GPU nodes join during the rollout: their kubelet (stand-in) posts Ready False, as a node whose
network plugin has not started, so the node lifecycle controller taints them not-ready, until --join-after seconds
after the driver's DaemonSet appears. --collection runs the module of another checkout (a `git worktree` of an
older commit: the "before" of a change).

Usage: python benchmarks/dra_rollout/run.py [--nodes 20 100] [--rounds 3] [--ways kubehw k8s] [--output FILE]
                                            [--background-nodes N] [--joining K --join-after S] [--collection DIR]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, ".cache", "collections")]

from tests.support.playbook_runner import collections_path, has_test_collection, run_playbook  # noqa: E402  (test equipment, found from the checkout)

NAMESPACE = "bench"
DEVICES_PER_NODE = 2
POD_START_DELAY = 0.3
DRIVER = "gpu.example.com"
POLL_DELAY = 5
# the driver runs on the GPU nodes only: on a large cluster they are a pool among others
GPU_LABEL = {"bench.kubehw.io/gpu": "true"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
# With thousands of nodes the controller manager's default API rate (20 requests/s) leaves it minutes behind (lifting
# the not-ready taint of each new node is one request), and nodes without a kubelet would turn Unknown after 40 s:
# a large cluster's steady state is nodes that are Ready, and a controller manager sized for them.
LARGE_CLUSTER_KCM_ARGS = ["--kube-api-qps=1000", "--kube-api-burst=2000", "--node-monitor-grace-period=1h"]


def gpu_node_names(nodes):
    return ["gpu-%03d" % i for i in range(nodes)]


def cluster(nodes):
    return {"pod_start_delay": POD_START_DELAY,
            "nodes": [{"name": name, "labels": dict(GPU_LABEL), "inventory": {"example.com/gpu": DEVICES_PER_NODE}}
                      for name in gpu_node_names(nodes)]}


def manifests():
    """The objects dra_driver_deploy writes for the example preset, built by its own code."""
    from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as mod

    params = dict(preset="example", namespace=NAMESPACE, name=None, image=None, env=None,
                  node_selector=dict(GPU_LABEL), tolerations=None, device_classes=True, extended_resource_name=None)
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
                                                  "node_selector": dict(GPU_LABEL),
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
    """{resource: {verb: count}} of the requests (request_info of the fault proxy's log: list, watch, get, ...); the
    later pages of a list (a continue token) count apart, as "list page": one list of 5,000 Nodes is 10 requests."""
    from tests.support.fault_proxy_log import request_info

    counts = {}
    for r in requests:
        info = request_info(r["method"], r["path"].split("?")[0], dict((k, [v]) for k, v in r["query"].items()))
        if info is None:
            continue
        resource, _namespace, _name, subresource, verb = info
        key = resource + ("/" + subresource if subresource else "")
        if verb == "list" and r["query"].get("continue"):
            verb = "list page"
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
                        # the nodes whose devices the task had seen when it returned (dra_driver_deploy's result)
                        "nodes_reported": len(by_task[last].get("nodes") or {}) if "kubehw" in first else None,
                        "poll_attempts": by_task[last].get("attempts")})
    return out


def wait_for_taint(core, names, present, selector="bench.kubehw.io/gpu=true", timeout=180):
    """Until every node of ``names`` has (present) or lacks the not-ready taint; read around the request log."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = json.loads(core.list_node(label_selector=selector, _preload_content=False).data)
        tainted = set(n["metadata"]["name"] for n in nodes["items"]
                      if any(t.get("key") == NOT_READY_TAINT for t in (n.get("spec") or {}).get("taints") or []))
        if all((name in tainted) == present for name in names):
            return
        if time.monotonic() > deadline:
            sys.exit("nodes %s did not %s the %s taint within %d s" % (names, "get" if present else "lose",
                                                                       NOT_READY_TAINT, timeout))
        time.sleep(1)


def join_later(sim, names, after, stop):
    """Once the driver's DaemonSet exists, wait ``after`` seconds and let the nodes turn Ready (a thread)."""
    from kubernetes import client, config

    apps = client.AppsV1Api(config.new_client_from_config(config_file=sim.plane.kubeconfig))

    def run():
        while not stop.is_set():
            listing = json.loads(apps.list_namespaced_daemon_set(NAMESPACE, _preload_content=False).data)
            if listing["items"]:
                break
            stop.wait(0.2)
        if stop.wait(after):
            return
        for name in names:
            sim.standin.set_node_starting(name, False)
    thread = threading.Thread(target=run, name="join", daemon=True)
    thread.start()
    return thread


def run_size(nodes, rounds, workdir, ways=("kubehw", "k8s"), background=0, joining=0, join_after=10.0,
             collections=None):
    from tests.support.local_cluster import LocalCluster
    from kubernetes import client, config

    sim = LocalCluster("bench-dra", node_config=cluster(nodes), request_log=True,
                       controller_manager_args=LARGE_CLUSTER_KCM_ARGS if background else ())
    sim.start()
    stop = threading.Event()
    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=sim.kubeconfig))
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        if background:
            started = time.monotonic()
            names = ["cpu-%05d" % i for i in range(background)]
            sim.create_nodes(names, labels={"bench.kubehw.io/pool": "cpu"}, ready=True)
            wait_for_taint(sim.core(), names, present=False, selector="bench.kubehw.io/pool=cpu", timeout=600)
            print("%d background nodes created and Ready in %.0f s" % (background, time.monotonic() - started))
        starting = gpu_node_names(nodes)[:joining]
        if starting:
            for name in starting:
                sim.standin.set_node_starting(name)
            started = time.monotonic()
            wait_for_taint(sim.core(), starting, present=True)
            print("%d GPU nodes not ready (tainted) after %.0f s" % (len(starting), time.monotonic() - started))
            join_later(sim, starting, join_after, stop)
        sim.clear_requests()
        play = [{"name": "dra rollout benchmark", "hosts": "localhost", "connection": "local", "gather_facts": False,
                 "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks_for(rounds, nodes, ways)}]
        run = run_playbook(play, workdir, kubeconfig=sim.kubeconfig, timeout=3600, collections=collections)
        if run.returncode != 0:
            sys.exit("ansible-playbook failed (rc %d):\n%s\n%s"
                     % (run.returncode, run.stdout[-4000:], run.stderr[-4000:]))
        lines = run.results
        return spans(lines, list(sim.requests))
    finally:
        stop.set()
        sim.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", nargs="+", choices=("kubehw", "k8s"), default=["kubehw", "k8s"],
                        help="which ways to run (kubehw alone: the module's requests at a size the other way takes long at)")
    parser.add_argument("--background-nodes", type=int, default=0,
                        help="Node objects the driver does not select (API-only), beside the GPU nodes")
    parser.add_argument("--joining", type=int, default=0,
                        help="GPU nodes still joining when the rollout starts, Ready --join-after s after it started")
    parser.add_argument("--join-after", type=float, default=10.0)
    parser.add_argument("--collection", help="run the module of this checkout (another commit) instead")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "dra_rollout.json"))
    opts = parser.parse_args()
    if opts.joining and (opts.rounds != 1 or len(opts.ways) != 1):
        parser.error("--joining lets nodes join once: use it with --rounds 1 and one way")
    if not has_test_collection("kubernetes.core"):
        sys.exit("kubernetes.core is missing: run `make setup` (it unpacks it from the PyPI ansible wheel)")
    workdir = tempfile.mkdtemp(prefix="bench-dra-")
    collections = collections_path(os.path.join(workdir, "collections-other"), checkout=opts.collection) \
        if opts.collection else None

    rows, summary = [], {}
    for nodes in opts.nodes:
        started = time.time()
        size_rows = run_size(nodes, opts.rounds, workdir, opts.ways, opts.background_nodes, opts.joining,
                             opts.join_after, collections)
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
        "background_nodes": opts.background_nodes, "joining": opts.joining, "join_after_s": opts.join_after,
        "collection": os.path.abspath(opts.collection) if opts.collection else ROOT,
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
