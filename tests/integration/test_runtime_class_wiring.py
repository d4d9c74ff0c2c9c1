# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default accelerator_node run gives the device plugin a runtime that exists on the node.

The cluster part of kubehw.devices.accelerator_node runs in check mode (no write, no wait), on a
cluster (the suite's own real control plane, or the cluster of KUBECONFIG): the RuntimeClass it would create and the DaemonSet
it would roll out are read from its results, and the RuntimeClass's handler is looked up among the
runtimes of the configurations the toolkit role produces, for containerd (the drop-in over a real
config dump) and CRI-O (the drop-in over the packaged files), parsed as the runtimes load them.
The molecule scenarios check the same handler against `containerd config dump` on a booted host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tomllib

import pytest

from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins
from tests.support.node_configs import NO_NODES

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO_ROOT, "tests", "unit", "roles", "fixtures")
# check mode, with a node name of its own: no node of the stand-in is needed
pytestmark = pytest.mark.node_config(NO_NODES)


def _read(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as f:
        return f.read()


def containerd_runtimes():
    dropin = runtime_dropins.containerd_nvidia_dropin(
        _read("containerd", "1.6-crun-default.dump.toml"), main_config=_read("containerd", "1.6-crun-default.main.toml"))
    # containerd 1.x takes the drop-in's CRI table whole (it repeats the host's runtimes)
    return tomllib.loads(dropin["content"])["plugins"][dropin["plugin"]]["containerd"]["runtimes"]


def crio_runtimes():
    files = [{"path": "10-crio.conf", "content": _read("crio", "packaged", "crio.conf.d", "10-crio.conf")}]
    dropin = runtime_dropins.crio_nvidia_dropin(files)
    return runtime_dropins.merge_files(files + [{"path": "99-nvidia.conf", "content": dropin["content"]}])["crio"]["runtime"]["runtimes"]


def test_default_run_plugin_runtime_class_handler_is_a_configured_runtime(cluster, ansible):
    run = ansible([{
        "name": "Run the cluster part of accelerator_node with its defaults",
        "ansible.builtin.include_role": {"name": "kubehw.devices.accelerator_node"},
        "vars": {"accelerator_node_host_setup": False, "accelerator_node_smoke_test": False,
                 "kubehw_node_name": "gpu-node-1", "device_plugin_namespace": "kube-system"},
    }], check=True)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    runtime_classes = [r["runtime_class"] for r in run.results if isinstance(r.get("runtime_class"), dict)]
    daemonsets = [r["daemonset"] for r in run.results if isinstance(r.get("daemonset"), dict)]
    assert len(runtime_classes) == 1 and len(daemonsets) == 1, run.results

    runtime_class, daemonset = runtime_classes[0], daemonsets[0]
    pod_runtime_class = daemonset["spec"]["template"]["spec"].get("runtimeClassName")
    # the plugin names the RuntimeClass the run creates, before the plugin rolls out
    assert pod_runtime_class == runtime_class["metadata"]["name"] == "nvidia"
    handler = runtime_class["handler"]
    for runtime, runtimes in (("containerd", containerd_runtimes()), ("CRI-O", crio_runtimes())):
        assert handler in runtimes, "%s has no runtime %r for RuntimeClass %r: %s" % (
            runtime, handler, pod_runtime_class, sorted(runtimes))
    assert containerd_runtimes()[handler]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert crio_runtimes()[handler]["runtime_path"] == "/usr/bin/nvidia-container-runtime"


def test_no_runtime_class_when_none_is_wanted(cluster, ansible):
    base = {"accelerator_node_host_setup": False, "accelerator_node_smoke_test": False,
            "kubehw_node_name": "gpu-node-1", "device_plugin_namespace": "kube-system"}
    run = ansible([{
        "name": "Run accelerator_node " + name,
        "ansible.builtin.include_role": {"name": "kubehw.devices.accelerator_node"},
        "vars": dict(base, **more),
    } for name, more in (
        # nodes whose default runtime is nvidia already
        ("with an empty RuntimeClass name", {"accelerator_node_runtime_class_name": ""}),
        # a plugin that needs no NVIDIA runtime
        ("with the amd preset", {"accelerator_node_preset": "amd", "accelerator_node_resource": "amd.com/gpu"}),
    )], check=True)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert not [r for r in run.results if isinstance(r.get("runtime_class"), dict)]
    daemonsets = [r["daemonset"] for r in run.results if isinstance(r.get("daemonset"), dict)]
    assert len(daemonsets) == 2
    for daemonset in daemonsets:
        assert "runtimeClassName" not in daemonset["spec"]["template"]["spec"]
