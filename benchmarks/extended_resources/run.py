#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Advertise example.com/dongle: 4 on N simulated nodes three ways, side by side in one run.

  module   one kubehw.devices.k8s_node_extended_resource task with a label selector
  uri      what a user would otherwise write in Ansible: a loop of ansible.builtin.uri PATCH tasks,
           one per node, with a JSON patch to /api/v1/nodes/<n>/status
  kubectl  a loop of `kubectl patch node <n> --subresource=status --type=json -p ...` (ansible.builtin.command)

Each way runs twice against its own fresh simulated cluster: the first run (every node needs
the resource) and the re-run (nothing to change). Wall time is ansible-playbook's, end to end;
request counts come from the simulated cluster's request log.

  python benchmarks/extended_resources/run.py --nodes 10 100 500 --out benchmarks/results/extended_resources.json
prints a Markdown table (the one in benchmarks/extended_resources/README.md).
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

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.simcluster import SimCluster  # noqa: E402  (test equipment, found from the checkout)

RESOURCE = "example.com/dongle"
POINTER = "/status/capacity/example.com~1dongle"
LABEL = "kubehw-bench/dongle=yes"
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def node_names(count):
    return ["bench-%03d" % i for i in range(count)]


def plays(way, sim, names, parallel):
    base = {"hosts": "localhost", "connection": "local", "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable}}
    patch = [{"op": "add", "path": POINTER, "value": "4"}]
    if way == "module":
        task = {"name": "Advertise with the module",
                "kubehw.devices.k8s_node_extended_resource": {
                    "kubeconfig": sim.kubeconfig_path, "label_selectors": [LABEL], "resources": {RESOURCE: 4},
                    "parallel": parallel}}
    elif way == "uri":
        task = {"name": "Advertise with a uri loop",
                "ansible.builtin.uri": {
                    "url": "%s/api/v1/nodes/{{ item }}/status" % sim.url, "method": "PATCH",
                    "headers": {"Authorization": "Bearer %s" % sim.admin_token,
                                "Content-Type": "application/json-patch+json"},
                    "body_format": "json", "body": patch, "ca_path": sim.ca_cert_path, "status_code": 200},
                "loop": names,
                "no_log": True}
    else:
        task = {"name": "Advertise with a kubectl loop",
                "ansible.builtin.command": {
                    "argv": ["kubectl", "--kubeconfig", sim.kubeconfig_path, "patch", "node", "{{ item }}",
                             "--subresource=status", "--type=json", "-p", json.dumps(patch)]},
                "loop": names,
                "changed_when": True}
    return [dict(base, name="Benchmark %s" % way, tasks=[task])]


def run_playbook(workdir, playbook, env):
    path = os.path.join(workdir, "play.yml")
    with open(path, "w") as f:
        yaml.safe_dump(playbook, f, sort_keys=False)
    started = time.monotonic()
    proc = subprocess.run([shutil.which("ansible-playbook") or "ansible-playbook", "-i", "localhost,", path],
                          env=env, cwd=workdir, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError("ansible-playbook failed:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:]))
    return elapsed


def count(requests):
    writes = sum(1 for r in requests if r["method"].upper() in WRITE_METHODS)
    return {"requests": len(requests), "writes": writes, "reads": len(requests) - writes}


def bench(way, nodes, parallel, collections):
    names = node_names(nodes)
    config = {"nodes": [{"name": n, "labels": {"kubehw-bench/dongle": "yes"}} for n in names]}
    # API only: no kubelets writing heartbeats, so the log holds the benchmarked requests alone
    sim = SimCluster(config, controllers=False)
    sim.start()
    workdir = tempfile.mkdtemp(prefix="kubehw-bench-")
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("K8S_AUTH_", "ANSIBLE_")))
    env.update(ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_RETRY_FILES_ENABLED="0",
               HOME=workdir)  # kubectl's discovery cache starts empty, as on a fresh runner
    rows = []
    try:
        for phase in ("first run", "re-run"):
            sim.clear_requests()
            elapsed = run_playbook(workdir, plays(way, sim, names, parallel), env)
            log = [r for r in sim.requests if not r["path"].startswith("/simcluster")]
            row = {"way": way, "nodes": nodes, "phase": phase, "seconds": round(elapsed, 2)}
            row.update(count(log))
            rows.append(row)
        # every way must have left the same state behind, or the comparison is meaningless
        missing = [n for n in names
                   if (sim.store.get("nodes", None, n)["status"].get("capacity") or {}).get(RESOURCE) != "4"]
        if missing:
            raise RuntimeError("%s left %d nodes without %s=4, e.g. %s" % (way, len(missing), RESOURCE, missing[0]))
    finally:
        sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def collections_path():
    root = tempfile.mkdtemp(prefix="kubehw-bench-collections-")
    ns = os.path.join(root, "ansible_collections", "kubehw")
    os.makedirs(ns)
    os.symlink(ROOT, os.path.join(ns, "devices"))
    return root


def table(rows):
    lines = ["| nodes | way | run | wall time (s) | requests | writes | reads |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %d | %s | %s | %.1f | %d | %d | %d |" % (
            r["nodes"], r["way"], r["phase"], r["seconds"], r["requests"], r["writes"], r["reads"]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--ways", nargs="+", default=["module", "uri", "kubectl"], choices=["module", "uri", "kubectl"])
    parser.add_argument("--parallel", type=int, default=10, help="the module's parallel option")
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args()
    collections = collections_path()
    rows = []
    started = time.time()
    try:
        for nodes in args.nodes:
            for way in args.ways:
                rows.extend(bench(way, nodes, args.parallel, collections))
                sys.stderr.write("done: %s on %d nodes\n" % (way, nodes))
    finally:
        shutil.rmtree(collections, ignore_errors=True)
    print(table(rows))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "machine": "%s, %d CPUs, Python %s" % (
                platform.platform(), os.cpu_count() or 0, platform.python_version()),
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "parallel": args.parallel}, f, indent=1)


if __name__ == "__main__":
    main()
