#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one task costs that has little to do: CPU seconds and wall time per task, on a real control plane.

Each way is one ansible-playbook run of --tasks tasks of the same module against one Node object of a real
kube-apiserver v1.36.2 (tests/support/local_cluster.py), each task reading the node and changing nothing:

  ping                ansible.builtin.ping: what any task costs (ansible-playbook's work, a Python process)
  extended_resource   kubehw.devices.k8s_node_extended_resource, the resource already set (a no-op re-run)
  info                kubehw.devices.extended_resource_info of the node
  runtime_class       kubehw.devices.k8s_runtime_class state=present, the RuntimeClass already there
  k8s_info            kubernetes.core.k8s_info kind Node name=<node>: what a user would write to read a node

CPU is the user and system time of ansible-playbook and every process it started (getrusage of the children),
divided by the number of tasks; the playbook's own start is spread over them too, so compare ways within a run.
--collection runs the kubehw.devices modules of another checkout (a `git worktree` of an earlier commit), for a
before and after.

  .venv/bin/python benchmarks/task_overhead/run.py --tasks 20 --out benchmarks/results/task_overhead.json
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.local_cluster import LocalCluster  # noqa: E402  (test equipment, found from the checkout)
from tests.support.playbook_runner import collections_path, has_test_collection, run_playbook  # noqa: E402

NODE = "bench-task-node"
RESOURCE = "example.com/dongle"
WAYS = ("ping", "extended_resource", "info", "runtime_class", "k8s_info")


def task(way, kubeconfig):
    """One task of the way."""
    if way == "ping":
        return {"ansible.builtin.ping": {}}
    if way == "extended_resource":
        return {"kubehw.devices.k8s_node_extended_resource": {
            "kubeconfig": kubeconfig, "name": NODE, "resources": {RESOURCE: 2}}}
    if way == "info":
        return {"kubehw.devices.extended_resource_info": {"kubeconfig": kubeconfig, "name": NODE}}
    if way == "runtime_class":
        return {"kubehw.devices.k8s_runtime_class": {"kubeconfig": kubeconfig, "name": "bench-task",
                                                     "handler": "nvidia"}}
    return {"kubernetes.core.k8s_info": {"kubeconfig": kubeconfig, "kind": "Node", "name": NODE}}


def play(way, tasks, kubeconfig):
    return [{"name": "%d tasks: %s" % (tasks, way), "hosts": "localhost", "connection": "local",
             "gather_facts": False, "vars": {"ansible_python_interpreter": sys.executable},
             "tasks": [dict(task(way, kubeconfig), name="%s %d" % (way, i)) for i in range(tasks)]}]


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(ways, tasks, rounds, collections, workdir):
    cluster = LocalCluster("bench-task", request_log=True)
    cluster.start()
    env = {"ANSIBLE_PYTHON_INTERPRETER": sys.executable, "HOME": workdir}
    rows = []
    try:
        cluster.create_nodes([NODE])
        # what the re-run and the present RuntimeClass find: set once, outside the measurement
        for way in ("extended_resource", "runtime_class"):
            if way in ways:
                checked(run_playbook(play(way, 1, cluster.kubeconfig), workdir, collections=collections, env=env,
                                     results=False, timeout=None))
        for round_ in range(rounds):
            for way in ways:
                cluster.clear_requests()
                cpu = children_cpu()
                run = checked(run_playbook(play(way, tasks, cluster.kubeconfig), workdir, collections=collections,
                                           env=env, results=False, timeout=None))
                cpu = children_cpu() - cpu
                if "changed=0" not in run.stdout or "ok=%d" % tasks not in run.stdout:
                    raise RuntimeError("%s changed something or failed:\n%s" % (way, run.stdout[-3000:]))
                rows.append({"way": way, "round": round_ + 1, "tasks": tasks, "seconds": round(run.seconds, 2),
                             "cpu_seconds": round(cpu, 2), "cpu_per_task": round(cpu / tasks, 3),
                             "seconds_per_task": round(run.seconds / tasks, 3), "requests": len(cluster.requests)})
                sys.stderr.write("done: %s, round %d: %.2f CPU-s per task\n" % (way, round_ + 1, cpu / tasks))
    finally:
        cluster.stop()
    return rows


def checked(run):
    if run.returncode != 0:
        raise RuntimeError("%s failed:\n%s\n%s" % (run.cmd[0], run.stdout[-4000:], run.stderr[-4000:]))
    return run


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def table(rows):
    lines = ["| way | CPU-s per task | wall s per task | requests per task |", "|---|---:|---:|---:|"]
    for way in [w for w in WAYS if any(r["way"] == w for r in rows)]:
        mine = [r for r in rows if r["way"] == way]
        lines.append("| %s | %.2f | %.2f | %.1f |" % (
            way, median([r["cpu_per_task"] for r in mine]), median([r["seconds_per_task"] for r in mine]),
            median([r["requests"] / float(r["tasks"]) for r in mine])))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument("--collection", help="run the kubehw.devices modules of this checkout (another commit)")
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args()
    if "k8s_info" in args.ways and not has_test_collection("kubernetes.core"):
        sys.exit("kubernetes.core is not in .cache/collections: run make setup first")
    workdir = tempfile.mkdtemp(prefix="kubehw-bench-task-")
    collections = collections_path(os.path.join(workdir, "collections"), checkout=args.collection or ROOT)
    started = time.time()
    load = os.getloadavg()[0]
    try:
        rows = bench(args.ways, args.tasks, args.rounds, collections, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows))
    if args.out:
        checkout = os.path.abspath(args.collection or ROOT)
        commit = subprocess.run(["git", "-C", checkout, "describe", "--always", "--dirty"], capture_output=True,
                                text=True, check=False).stdout.strip()
        data = {"rows": rows, "collection": "%s (%s)" % (checkout, commit or "not a git checkout"),
                "machine": "%s, %d CPUs, Python %s, load average %.1f at the start" % (
                    platform.platform(), os.cpu_count() or 0, platform.python_version(), load),
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
