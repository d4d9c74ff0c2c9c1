# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmarks stay runnable: no stage runs them (each takes minutes on a cluster of its own), so a product
change that renames what they build from went unnoticed until someone ran one (the DRA rollout benchmark still
asked the module for its manifest builders after they moved to module_utils). Here each benchmark is loaded and
builds, without a cluster, the playbook it hands to ansible-playbook, from the product's own code."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
RUNNERS = sorted(name for name in os.listdir(BENCHMARKS) if os.path.isfile(os.path.join(BENCHMARKS, name, "run.py")))


def load(name):
    spec = importlib.util.spec_from_file_location("benchmark_" + name, os.path.join(BENCHMARKS, name, "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", RUNNERS)
def test_each_benchmark_starts_and_explains_its_options(name):
    run = subprocess.run([sys.executable, os.path.join(BENCHMARKS, name, "run.py"), "--help"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout


def test_the_dra_rollout_benchmark_deploys_the_objects_the_module_builds():
    bench = load("dra_rollout")
    tasks = bench.tasks_for(1, 3)
    kinds = set()
    for task in tasks:
        definition = (task.get("kubernetes.core.k8s") or {}).get("definition") or []
        kinds.update(d["kind"] for d in (definition if isinstance(definition, list) else [definition]))
    assert kinds == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DeviceClass", "DaemonSet"}, kinds
    assert any("kubehw.devices.dra_driver_deploy" in t for t in tasks)


def test_the_daemonset_rollout_benchmark_hands_kubernetes_core_the_modules_daemonset():
    bench = load("daemonset_rollout")
    tasks = bench.tasks_for(1, "/nonexistent/kubeconfig")
    definitions = [t["kubernetes.core.k8s"]["definition"] for t in tasks if "kubernetes.core.k8s" in t]
    assert definitions and all(d["kind"] == "DaemonSet" for d in definitions), definitions
