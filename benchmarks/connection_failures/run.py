#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a task takes to fail when the API address is wrong: every kubehw.devices module that talks to
Kubernetes, the k8s_nodes inventory plugin, and kubernetes.core.k8s_info, side by side, per kind of address:

  refused    127.0.0.1, a port nothing listens on (a typo in the port, a stopped apiserver)
  unknown    a host name that does not resolve (RFC 6761 .invalid: a typo in the name)
  blackhole  a port whose connections are never completed (a firewall that drops packets, a wrong network):
             a local listener whose accept queue is full, so the kernel drops every new SYN
  silent     a port that accepts connections and never says a word (a wrong service behind a load balancer)

Each task runs with its module's defaults (no timeout option set), as a user with a typo in host would run it; Ansible's
task timeout stops a task still waiting after TASK_LIMIT seconds. The
seconds are the task's own (from the task's start to its failed result, read through the kubehw_results callback),
not ansible-playbook's start. --collection runs the kubehw.devices modules of another checkout (a `git worktree` of an
earlier commit), for a before and after. No cluster is needed: nothing here reaches one.

  .venv/bin/python benchmarks/connection_failures/run.py --out benchmarks/results/connection_failures.json
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.playbook_runner import collections_path, has_test_collection, run_inventory, run_playbook  # noqa: E402

UNKNOWN_HOST = "kubehw-benchmark-no-such-host.invalid"
TASKS = {
    "k8s_node_extended_resource": {"name": "bench-node", "resources": {"example.com/dongle": 1}},
    "device_plugin_deploy": {"preset": "nvidia", "wait": "none"},
    "dra_device_class": {"name": "bench.example.com", "selectors": ['device.driver == "gpu.example.com"']},
    "dra_driver_deploy": {"preset": "example", "wait": "none"},
    "extended_resource_info": {"name": "bench-node"},
    "k8s_node_drain": {"name": "bench-node", "state": "uncordoned"},
    "resource_smoke_test": {"resource": "example.com/dongle", "node": "bench-node"},
    "k8s_runtime_class": {"name": "bench", "handler": "nvidia"},
}
CORE_K8S_INFO = ("kubernetes.core.k8s_info", {"kind": "Node", "name": "bench-node"})
# Ansible's task timeout: a task that has not failed by then is stopped and counted as this many seconds ("stopped").
TASK_LIMIT = 180


class Addresses(object):
    """The four kinds of wrong address, on this machine only."""

    def __init__(self):
        self.sockets = []
        probe = self._listener(1)
        self.refused_port = probe.getsockname()[1]
        probe.close()
        self.sockets.remove(probe)
        # Backlog 0: the kernel keeps one completed connection waiting; two fill the queue, and SYNs after that
        # are dropped, so a client's connect never completes (what a firewall that drops packets looks like).
        blackhole = self._listener(0)
        for _filler in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(blackhole.getsockname())
            self.sockets.append(filler)
        time.sleep(0.2)
        self.blackhole_port = blackhole.getsockname()[1]
        self.silent_port = self._listener(64).getsockname()[1]

    def _listener(self, backlog):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(backlog)
        self.sockets.append(sock)
        return sock

    def hosts(self):
        return {
            "refused": "https://127.0.0.1:%d" % self.refused_port,
            "unknown": "https://%s:6443" % UNKNOWN_HOST,
            "blackhole": "https://127.0.0.1:%d" % self.blackhole_port,
            "silent": "https://127.0.0.1:%d" % self.silent_port,
        }

    def close(self):
        for sock in self.sockets:
            sock.close()


def plays(host, modules):
    tasks = []
    for module in modules:
        fqcn, args = CORE_K8S_INFO if module == "k8s_info" else ("kubehw.devices." + module, TASKS[module])
        tasks.append({"name": module, fqcn: dict(args, host=host, api_key="benchmark-token"), "ignore_errors": True,
                      "timeout": TASK_LIMIT})
    return [{"name": "wrong address", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks}]


def inventory_seconds(host, workdir, collections):
    source = os.path.join(workdir, "bench.k8s_nodes.yml")
    with open(source, "w") as f:
        f.write("plugin: kubehw.devices.k8s_nodes\nhost: %s\napi_key: benchmark-token\n" % host)
    run = run_inventory(source, ["--list"], workdir, collections=collections,
                        env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})
    return round(run.seconds, 2), run.returncode != 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--kinds", nargs="+", default=["refused", "unknown", "blackhole", "silent"])
    parser.add_argument("--collection", default=ROOT, help="the kubehw.devices checkout to run (default: this one)")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--out", help="merge the rows into this JSON file")
    args = parser.parse_args()

    modules = sorted(TASKS) + (["k8s_info"] if has_test_collection("kubernetes.core") else [])
    addresses = Addresses()
    workdir = tempfile.mkdtemp(prefix="bench-connection-")
    rows = []
    try:
        collections = collections_path(os.path.join(workdir, "collections"), checkout=args.collection)
        for kind in args.kinds:
            host = addresses.hosts()[kind]
            run = run_playbook(plays(host, modules), workdir, collections=collections, timeout=1800)
            for result in run.results:
                seconds = round(result["_returned_at"] - result["_started_at"], 2)
                message = result.get("msg") or ""
                if result.get("timedout"):
                    message = "stopped by the task timeout (%d s): still waiting" % TASK_LIMIT
                rows.append({"collection": args.label, "kind": kind, "task": result["task"], "seconds": seconds,
                             "failed": bool(result.get("failed")), "message": message[:300]})
                print("%-10s %-28s %7.2f s  %s" % (kind, result["task"], seconds, message[:110]), flush=True)
            seconds, failed = inventory_seconds(host, workdir, collections)
            rows.append({"collection": args.label, "kind": kind, "task": "k8s_nodes inventory", "seconds": seconds,
                         "failed": failed, "message": ""})
            print("%-10s %-28s %7.2f s  (whole ansible-inventory run)" % (kind, "k8s_nodes inventory", seconds),
                  flush=True)
    finally:
        addresses.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.out:
        data = {"rows": []}
        if os.path.exists(args.out):
            with open(args.out) as f:
                data = json.load(f)
        data["rows"] = [r for r in data["rows"]
                        if (r["collection"], r["kind"]) not in set((args.label, kind) for kind in args.kinds)] + rows
        data["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
