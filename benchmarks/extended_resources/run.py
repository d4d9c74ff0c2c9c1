#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Advertise example.com/dongle: 4 on N nodes of a real control plane several ways, side by side in one run.

  module   one kubehw.devices.k8s_node_extended_resource task with a label selector
  bare     a bare concurrent Python client (bare_client.py): a ThreadPoolExecutor of JSON-patch
           PATCHes with the module's `parallel`, no read, no comparison (the 5,000-node baseline)
  uri      what a user would otherwise write in Ansible: a loop of ansible.builtin.uri PATCH tasks,
           one per node, with a JSON patch to /api/v1/nodes/<n>/status
  kubectl  a loop of `kubectl patch node <n> --subresource=status --type=json -p ...` (ansible.builtin.command)

Each way runs twice against its own fresh local cluster (kube-apiserver v1.36.2 and etcd with N Node objects and
no kubelet, tests/support/local_cluster.py): the first run (every node needs the resource) and the re-run (nothing
to change). Wall time is the whole process's, end to end (ansible-playbook's, or the bare client's Python); request
counts come from the request log of the fault proxy every way talks through (nothing else talks to that cluster);
peak memory is the maximum resident set size of the process that talks to the API (the module's, or the bare
client's), measured with /usr/bin/time.

  python benchmarks/extended_resources/run.py --nodes 10 100 500 --out benchmarks/results/extended_resources.json
  python benchmarks/extended_resources/run.py --nodes 5000 --ways module bare --merge \
      --out benchmarks/results/extended_resources.json
print a Markdown table (the ones in benchmarks/extended_resources/README.md).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.local_cluster import LocalCluster  # noqa: E402  (test equipment, found from the checkout)
from tests.support.playbook_runner import ansible_env, collections_path, run_playbook  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WAYS = ["module", "bare", "uri", "kubectl"]
RESOURCE = "example.com/dongle"
POINTER = "/status/capacity/example.com~1dongle"
LABEL = "kubehw-bench/dongle=yes"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def node_names(count):
    return ["bench-%04d" % i if count > 1000 else "bench-%03d" % i for i in range(count)]


def plays(way, sim, names, parallel, interpreter=None):
    base = {"hosts": "localhost", "connection": "local", "gather_facts": False,
            "vars": {"ansible_python_interpreter": interpreter or sys.executable}}
    patch = [{"op": "add", "path": POINTER, "value": "4"}]
    if way == "module":
        task = {"name": "Advertise with the module",
                "kubehw.devices.k8s_node_extended_resource": {
                    "kubeconfig": sim.kubeconfig, "label_selectors": [LABEL], "resources": {RESOURCE: 4},
                    "parallel": parallel}}
    elif way == "uri":
        task = {"name": "Advertise with a uri loop",
                "ansible.builtin.uri": {
                    "url": "%s/api/v1/nodes/{{ item }}/status" % sim.url, "method": "PATCH",
                    "headers": {"Authorization": "Bearer %s" % sim.token,
                                "Content-Type": "application/json-patch+json"},
                    "body_format": "json", "body": patch, "ca_path": sim.ca_cert_path, "status_code": 200},
                "loop": names,
                "no_log": True}
    else:
        task = {"name": "Advertise with a kubectl loop",
                "ansible.builtin.command": {
                    "argv": ["kubectl", "--kubeconfig", sim.kubeconfig, "patch", "node", "{{ item }}",
                             "--subresource=status", "--type=json", "-p", json.dumps(patch)]},
                "loop": names,
                "changed_when": True}
    return [dict(base, name="Benchmark %s" % way, tasks=[task])]


TIME = "/usr/bin/time"


def timed_interpreter(workdir):
    """A python that records its peak RSS (KiB) in a file: the module's process, whatever runs it."""
    rss_file = os.path.join(workdir, "module-rss.txt")
    wrapper = os.path.join(workdir, "python-timed")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec %s -f %%M -a -o %s %s "$@"\n' % (TIME, rss_file, sys.executable))
    os.chmod(wrapper, 0o755)
    return wrapper, rss_file


def peak_rss_mib(rss_file):
    """The largest value recorded (the module process is the only one using the wrapper)."""
    if not os.path.exists(rss_file):
        return None
    with open(rss_file) as f:
        values = [int(line) for line in f if line.strip().isdigit()]
    os.remove(rss_file)
    return round(max(values) / 1024.0, 1) if values else None


def fresh_home(workdir):
    """kubectl's discovery cache starts empty, as on a fresh runner."""
    return {"HOME": workdir}


def run_plays(workdir, plays, collections):
    # the results callback off: the measurement is the whole ansible-playbook process, which writes no results
    run = run_playbook(plays, workdir, collections=collections, env=fresh_home(workdir), results=False, timeout=None)
    if run.returncode != 0:
        raise RuntimeError("ansible-playbook failed:\n%s\n%s" % (run.stdout[-4000:], run.stderr[-4000:]))
    return run.seconds


def run_bare(workdir, sim, names, parallel, env):
    names_file = os.path.join(workdir, "names.txt")
    with open(names_file, "w") as f:
        f.write("\n".join(names) + "\n")
    rss_file = os.path.join(workdir, "bare-rss.txt")
    cmd = [TIME, "-f", "%M", "-o", rss_file, sys.executable, os.path.join(HERE, "bare_client.py"),
           sim.kubeconfig, names_file, str(parallel), RESOURCE, "4"]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError("bare client failed:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:]))
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    if outcome["failed"]:
        raise RuntimeError("bare client: %d patches failed" % outcome["failed"])
    return elapsed, peak_rss_mib(rss_file)


def count(requests):
    writes = sum(1 for r in requests if r["method"].upper() in WRITE_METHODS)
    return {"requests": len(requests), "writes": writes, "reads": len(requests) - writes}


def bench(way, nodes, parallel, collections):
    names = node_names(nodes)
    # API only: Node objects without kubelets, and the fault proxy's log holds the benchmarked requests alone
    sim = LocalCluster("bench-er", request_log=True)
    sim.start()
    core = sim.create_nodes(names, labels={"kubehw-bench/dongle": "yes"})
    workdir = tempfile.mkdtemp(prefix="kubehw-bench-")
    env = ansible_env(collections, workdir, extra=fresh_home(workdir))
    rows = []
    try:
        for phase in ("first run", "re-run"):
            sim.clear_requests()
            peak = None
            if way == "bare":
                elapsed, peak = run_bare(workdir, sim, names, parallel, env)
            elif way == "module":
                interpreter, rss_file = timed_interpreter(workdir)
                elapsed = run_plays(workdir, plays(way, sim, names, parallel, interpreter), collections)
                peak = peak_rss_mib(rss_file)
            else:
                elapsed = run_plays(workdir, plays(way, sim, names, parallel), collections)
            log = sim.requests
            row = {"way": way, "nodes": nodes, "phase": phase, "seconds": round(elapsed, 2)}
            row.update(count(log))
            row["lists"] = sum(1 for r in log if r["method"].upper() == "GET" and r["path"] == "/api/v1/nodes")
            if peak is not None:
                row["peak_rss_mib"] = peak
            rows.append(row)
        # every way must have left the same state behind, or the comparison is meaningless
        stored = dict((n.metadata.name, n.status.capacity or {}) for n in core.list_node(label_selector=LABEL).items)
        missing = [n for n in names if stored.get(n, {}).get(RESOURCE) != "4"]
        if missing:
            raise RuntimeError("%s left %d nodes without %s=4, e.g. %s" % (way, len(missing), RESOURCE, missing[0]))
    finally:
        sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def table(rows):
    lines = ["| nodes | way | run | wall time (s) | requests | writes | reads | list pages | peak RSS (MiB) |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %d | %s | %s | %.1f | %d | %d | %d | %s | %s |" % (
            r["nodes"], r["way"], r["phase"], r["seconds"], r["requests"], r["writes"], r["reads"],
            r.get("lists", "") if "lists" in r else "", r.get("peak_rss_mib", "")))
    return "\n".join(lines)


def ratios(rows):
    """Module wall time over the bare client's, per node count and run (the goal: at most 1.3 at 5,000)."""
    by = dict(((r["way"], r["nodes"], r["phase"]), r["seconds"]) for r in rows)
    result = []
    for (way, nodes, phase), seconds in sorted(by.items()):
        if way == "module" and ("bare", nodes, phase) in by:
            result.append({"nodes": nodes, "phase": phase,
                           "module_over_bare": round(seconds / by[("bare", nodes, phase)], 2)})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--ways", nargs="+", default=["module", "uri", "kubectl"],
                        choices=["module", "bare", "uri", "kubectl"])
    parser.add_argument("--parallel", type=int, default=10, help="the module's parallel option (and the bare client's)")
    parser.add_argument("--out", help="also write the rows as JSON here")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of --out for other node counts and ways (replace only the ones measured now)")
    args = parser.parse_args()
    collections_root = tempfile.mkdtemp(prefix="kubehw-bench-collections-")
    # kubehw.devices alone: the ways use ansible.builtin and the collection under test
    collections = collections_path(collections_root, test_collections=False)
    rows = []
    started = time.time()
    load = os.getloadavg()[0]
    try:
        for nodes in args.nodes:
            for way in args.ways:
                rows.extend(bench(way, nodes, args.parallel, collections))
                sys.stderr.write("done: %s on %d nodes\n" % (way, nodes))
    finally:
        shutil.rmtree(collections_root, ignore_errors=True)
    print(table(rows))
    for ratio in ratios(rows):
        print("module / bare at %(nodes)d nodes, %(phase)s: %(module_over_bare).2f" % ratio)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        run = {"machine": "%s, %d CPUs, Python %s, load average %.1f at the start" % (
            platform.platform(), os.cpu_count() or 0, platform.python_version(), load),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "parallel": args.parallel, "nodes": args.nodes, "ways": args.ways}
        data = {"rows": rows, "runs": [run]}
        if args.merge and os.path.exists(args.out):
            with open(args.out) as f:
                old = json.load(f)
            measured = set((r["way"], r["nodes"]) for r in rows)
            kept = [r for r in old.get("rows", []) if (r["way"], r["nodes"]) not in measured]
            runs = old.get("runs") or [dict((k, old[k]) for k in ("machine", "started", "parallel") if k in old)]
            data = {"rows": kept + rows, "runs": runs + [run]}
        data["rows"].sort(key=lambda r: (r["nodes"], WAYS.index(r["way"]), r["phase"] != "first run"))
        data["module_over_bare"] = ratios(data["rows"])
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
