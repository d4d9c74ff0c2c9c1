#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build an inventory of N nodes of a real control plane two ways, side by side in one run, and reach its GPU hosts.

  plugin    ansible-playbook -i bench.k8s_nodes.yml: the kubehw.devices.k8s_nodes inventory plugin lists the
            nodes in pages (limit 500, continue) and groups them; one play on gpu_nodes
  k8s_info  what kubernetes.core tells its users to write since it removed its inventory plugin:
            kubernetes.core.k8s_info kind Node, then ansible.builtin.add_host in a loop over the nodes (groups
            gpu_nodes or cpu_nodes from the NFD label, ansible_host from the first address), then the same play

Both ways end with the same play: `hosts: gpu_nodes`, one debug task run once that prints how many hosts the
group has, which the script checks against the cluster (a quarter of the nodes carry the NVIDIA NFD label).
`ansible-inventory --graph` with the plugin alone is timed too. Wall time is the whole process's, end to end;
request counts come from the request log of the fault proxy in front of the local cluster (kube-apiserver v1.36.2 and
etcd with N Node objects and no kubelet, tests/support/local_cluster.py).

  .venv/bin/python benchmarks/inventory/run.py --nodes 5000 --out benchmarks/results/inventory.json
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.local_cluster import LocalCluster  # noqa: E402  (test equipment, found from the checkout)
from tests.support.playbook_runner import collections_path, run_inventory, run_playbook  # noqa: E402

NVIDIA_LABEL = "feature.node.kubernetes.io/pci-10de.present"
WAYS = ("plugin", "graph", "k8s_info")
COUNTED = re.compile(r'"msg": "gpu_nodes has (\d+) hosts"')


def create_nodes(cluster, count):
    """bench-0000 ... with every fourth labelled an NVIDIA GPU node: Node objects only, no kubelet."""
    names = ["bench-%04d" % i for i in range(count)]
    cluster.create_nodes([n for i, n in enumerate(names) if i % 4 == 0], labels={NVIDIA_LABEL: "true"})
    cluster.create_nodes([n for i, n in enumerate(names) if i % 4 != 0])


REACH_GPU_NODES = {"name": "Reach the GPU nodes", "hosts": "gpu_nodes", "gather_facts": False,
                   "tasks": [{"name": "Count them", "ansible.builtin.debug": {
                       "msg": "gpu_nodes has {{ groups['gpu_nodes'] | length }} hosts"}, "run_once": True}]}


def k8s_info_plays(kubeconfig):
    build = {"name": "Build the inventory with k8s_info and add_host", "hosts": "localhost", "connection": "local",
             "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable},
             "tasks": [
                 {"name": "List the nodes", "kubernetes.core.k8s_info": {"kind": "Node", "kubeconfig": kubeconfig},
                  "register": "bench_nodes"},
                 {"name": "Add a host per node", "ansible.builtin.add_host": {
                     "name": "{{ item.metadata.name }}",
                     "groups": "{{ 'gpu_nodes' if (item.metadata.labels | default({})).get('%s') == 'true' "
                               "else 'cpu_nodes' }}" % NVIDIA_LABEL,
                     "ansible_host": "{{ (item.status.addresses | default([{}]))[0].address | default(omit) }}",
                     "kubehw_node_name": "{{ item.metadata.name }}"},
                  "loop": "{{ bench_nodes.resources }}",
                  "loop_control": {"label": "{{ item.metadata.name }}"}},
             ]}
    return [build, REACH_GPU_NODES]


def checked(run):
    if run.returncode != 0:
        raise RuntimeError("%s failed:\n%s\n%s" % (run.cmd[0], run.stdout[-4000:], run.stderr[-4000:]))
    return run.seconds, run.stdout


def bench(nodes, ways, collections):
    sim = LocalCluster("bench-inventory", request_log=True)
    sim.start()
    create_nodes(sim, nodes)
    workdir = tempfile.mkdtemp(prefix="kubehw-bench-inventory-")
    env = {"ANSIBLE_PYTHON_INTERPRETER": sys.executable, "HOME": workdir}
    config = os.path.join(workdir, "bench.k8s_nodes.yml")
    with open(config, "w") as f:
        yaml.safe_dump({"plugin": "kubehw.devices.k8s_nodes", "kubeconfig": sim.kubeconfig}, f)
    gpu = len([i for i in range(nodes) if i % 4 == 0])
    rows = []
    try:
        for way in ways:
            sim.clear_requests()
            if way == "graph":
                elapsed, out = checked(run_inventory(config, ["--graph", "gpu_nodes"], workdir, collections, env=env,
                                                     timeout=None))
                counted = len(set(re.findall(r"\|--(bench-\d+)", out)))
            else:
                plays = [REACH_GPU_NODES] if way == "plugin" else k8s_info_plays(sim.kubeconfig)
                inventory = config if way == "plugin" else "localhost,"
                # the results callback off: the measurement is the whole process, which writes no results
                elapsed, out = checked(run_playbook(plays, workdir, inventory=inventory, collections=collections, env=env,
                                                    results=False, timeout=None))
                found = COUNTED.search(out)
                counted = int(found.group(1)) if found else None
            if counted != gpu:
                raise RuntimeError("%s found %s GPU hosts, the cluster has %d" % (way, counted, gpu))
            log = sim.requests
            lists = [r for r in log if r["method"].upper() == "GET" and r["path"] == "/api/v1/nodes"]
            rows.append({"way": way, "nodes": nodes, "gpu_hosts": gpu, "seconds": round(elapsed, 2),
                         "requests": len(log), "node_lists": len(lists)})
            sys.stderr.write("done: %s on %d nodes in %.1f s\n" % (way, nodes, elapsed))
    finally:
        sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def table(rows):
    lines = ["| nodes | way | wall time (s) | requests | node list pages |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append("| %d | %s | %.1f | %d | %d |" % (r["nodes"], r["way"], r["seconds"], r["requests"],
                                                       r["node_lists"]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[5000])
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args()
    collections_root = tempfile.mkdtemp(prefix="kubehw-bench-collections-")
    paths = collections_path(collections_root)
    rows = []
    started = time.time()
    load = os.getloadavg()[0]
    try:
        for nodes in args.nodes:
            rows.extend(bench(nodes, args.ways, paths))
    finally:
        shutil.rmtree(collections_root, ignore_errors=True)
    print(table(rows))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        data = {"rows": rows, "machine": "%s, %d CPUs, Python %s, load average %.1f at the start" % (
            platform.platform(), os.cpu_count() or 0, platform.python_version(), load),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))}
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
