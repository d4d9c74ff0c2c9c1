#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time from rollout-complete to task-return: kubehw.devices.device_plugin_deploy vs kubernetes.core.k8s.

One real control plane, one DaemonSet, one ansible-playbook run whose tasks alternate between the two
modules; every task changes an env var of the same DaemonSet, so each starts a rollout and waits for it.

  rollout complete  the moment an observer watching the DaemonSet first sees the facts-file condition
                    (observedGeneration >= generation, updated == available == desired) for the
                    generation the task wrote
  task return       the moment the task's result reaches ansible-playbook (_returned_at of the kubehw_results
                    callback, tests/support/callback_plugins)

Usage: python benchmarks/daemonset_rollout/run.py [--rounds 5] [--output FILE]
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

from tests.support.playbook_runner import has_test_collection, run_playbook  # noqa: E402  (test equipment, found from the checkout)

NAMESPACE = "bench"
NAME = "nvidia-device-plugin"
CLUSTER = {
    "pod_start_delay": 0.3,
    "nodes": [
        {"name": "gpu-1", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
         "inventory": {"nvidia.com/gpu": 4}},
        {"name": "gpu-2", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
         "inventory": {"nvidia.com/gpu": 8}},
        {"name": "cpu-1"},
    ],
}


class RolloutObserver(threading.Thread):
    """Watches the DaemonSet and notes when each generation's rollout is first complete."""

    def __init__(self, kubeconfig):
        super(RolloutObserver, self).__init__(daemon=True)
        from kubernetes import client, config
        self.api = client.AppsV1Api(config.new_client_from_config(config_file=kubeconfig))
        self.done_at = {}
        self.errors = []
        self.stopped = threading.Event()

    def run(self):
        from kubernetes import watch
        from ansible_collections.kubehw.devices.plugins.module_utils._daemonset_rollout import rollout_done
        while not self.stopped.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(self.api.list_namespaced_daemon_set, NAMESPACE, timeout_seconds=5,
                                      field_selector="metadata.name=%s" % NAME, deserialize=False):
                    obj = event.get("raw_object") or event.get("object") or {}
                    if obj.get("kind") == "Status" or event.get("type") == "BOOKMARK":
                        continue
                    generation = (obj.get("metadata") or {}).get("generation")
                    if generation and generation not in self.done_at and rollout_done(obj):
                        self.done_at[generation] = time.time()
                    if self.stopped.is_set():
                        break
            except Exception as exc:  # pylint: disable=broad-except
                # A dropped watch is restarted; the error is kept for the report.
                self.errors.append(repr(exc))
                time.sleep(0.1)


def tasks_for(rounds, kubeconfig):
    from ansible_collections.kubehw.devices.plugins.module_utils._device_plugin_manifest import build
    common = dict(preset="nvidia", namespace=NAMESPACE)
    tasks = [{"name": "warm-up create", "kubehw.devices.device_plugin_deploy": dict(common, env={"BENCH_ROUND": "init"})}]
    for i in range(rounds):
        tasks.append({"name": "kubehw round %d" % i,
                      "kubehw.devices.device_plugin_deploy": dict(common, env={"BENCH_ROUND": "kubehw-%d" % i},
                                                                  wait="rollout", wait_timeout=120)})
        # The same DaemonSet, built by the same code, handed to kubernetes.core as a manifest.
        definition = build(dict(common, env={"BENCH_ROUND": "k8s-%d" % i}))[0]
        tasks.append({"name": "kubernetes.core round %d" % i,
                      "kubernetes.core.k8s": {"definition": definition, "wait": True, "wait_timeout": 120}})
        # Baseline: how long ansible itself takes to hand back a result once a task's work is over.
        tasks.append({"name": "baseline round %d" % i,
                      "ansible.builtin.command": {"argv": [sys.executable, "-c", "import time; print(repr(time.time()))"]},
                      "changed_when": False})
    return tasks


def generation_of(result):
    if "generation" in result and isinstance(result["generation"], dict):
        return result["generation"].get("after")
    return ((result.get("result") or {}).get("metadata") or {}).get("generation")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "daemonset_rollout.json"))
    opts = parser.parse_args()

    from tests.support.local_cluster import LocalCluster
    from kubernetes import client, config

    if not has_test_collection("kubernetes.core"):
        sys.exit("kubernetes.core is missing: run `make setup` (it unpacks it from the PyPI ansible wheel)")
    workdir = tempfile.mkdtemp(prefix="bench-ds-")

    sim = LocalCluster("bench-ds", node_config=CLUSTER)
    sim.start()
    try:
        api = config.new_client_from_config(config_file=sim.kubeconfig)
        client.CoreV1Api(api).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        # the nvidia preset's pods name RuntimeClass nvidia, which device_plugin_deploy requires to exist
        client.NodeV1Api(api).create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                                    "metadata": {"name": "nvidia"}, "handler": "nvidia"})
        observer = RolloutObserver(sim.kubeconfig)
        observer.start()
        play = [{"name": "daemonset rollout benchmark", "hosts": "localhost", "connection": "local",
                 "gather_facts": False, "vars": {"ansible_python_interpreter": sys.executable},
                 "tasks": tasks_for(opts.rounds, sim.kubeconfig)}]
        run = run_playbook(play, workdir, kubeconfig=sim.kubeconfig, timeout=1800)
        elapsed = run.seconds
        time.sleep(0.2)
        observer.stopped.set()
        if run.returncode != 0:
            sys.exit("ansible-playbook failed (rc %d):\n%s\n%s" % (run.returncode, run.stdout[-4000:], run.stderr[-4000:]))
        lines = run.results
    finally:
        sim.stop()

    samples = {"kubehw.devices.device_plugin_deploy": [], "kubernetes.core.k8s": [], "baseline": []}
    rows = []
    for line in lines:
        if line["task"].startswith("warm-up"):
            continue
        if line["task"].startswith("baseline"):
            latency = line["_returned_at"] - float(line["stdout"])
            samples["baseline"].append(latency)
            rows.append({"task": line["task"], "work_done_to_return_s": round(latency, 3)})
            continue
        tool = "kubehw.devices.device_plugin_deploy" if line["task"].startswith("kubehw") else "kubernetes.core.k8s"
        generation = generation_of(line)
        done = observer.done_at.get(generation)
        if done is None:
            sys.exit("no rollout-complete time for generation %s (task %s); seen %r; watch errors %r"
                     % (generation, line["task"], observer.done_at, observer.errors[-3:]))
        latency = line["_returned_at"] - done
        samples[tool].append(latency)
        rows.append({"task": line["task"], "generation": generation, "rollout_complete_to_return_s": round(latency, 3)})

    summary = {}
    for tool, values in samples.items():
        summary[tool] = {"n": len(values), "median_s": round(statistics.median(values), 3),
                         "min_s": round(min(values), 3), "max_s": round(max(values), 3)}
    report = {
        "benchmark": "daemonset_rollout: rollout-complete to task-return",
        "cluster": "kube-apiserver, kube-controller-manager, kube-scheduler v1.36.2 (tests/support/local_cluster.py), "
                   "2 GPU nodes + 1 CPU node of the kubelet stand-in, pod_start_delay 0.3 s",
        "kubernetes.core": "from the PyPI ansible==12.3.0 wheel (.cache/collections), wait: true, default wait_sleep",
        "baseline": "ansible.builtin.command printing time.time(): time from its last instruction to the task return",
        "rounds": opts.rounds,
        "playbook_seconds": round(elapsed, 1),
        "summary": summary,
        "tasks": rows,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(opts.output), exist_ok=True)
    with open(opts.output, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    for tool, stats in summary.items():
        print("%-38s n=%d median %.3fs  min %.3fs  max %.3fs"
              % (tool, stats["n"], stats["median_s"], stats["min_s"], stats["max_s"]))
    print("written to %s" % opts.output)


if __name__ == "__main__":
    main()
