# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`'s script, run as `make demo` runs it, with its output checked."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# two site.yml runs (device plugin, then DRA): about 40 s on a quiet machine, minutes on a loaded one
@pytest.mark.timeout(600)
def test_demo_runs_site_and_shows_scheduling(collections_path):
    """Device plugin first, then the same nodes through DRA."""
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("K8S_AUTH_") and k != "KUBECONFIG")
    env["ANSIBLE_COLLECTIONS_PATH"] = collections_path
    proc = subprocess.run(["bash", os.path.join(REPO_ROOT, "scripts", "demo.sh")], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:] + proc.stderr[-3000:]
    assert "REAL Kubernetes v1.36 control plane" in out
    assert re.search(r"^API server: https://127\.0\.0\.1:\d+ \(kube-apiserver v1\.36\.\d+\)$", out, re.M), out[:3000]
    # the inventory comes from the cluster through the k8s_nodes inventory plugin, not from a hand-written file
    assert "the kubehw.devices.k8s_nodes inventory plugin reads it from" in out
    assert "playbooks/inventory/demo/hosts.yml" not in out
    graph = out[out.index("$ ansible-inventory -i playbooks/inventory/demo_k8s_nodes/demo.k8s_nodes.yml --graph"):
                out.index("$ ansible-playbook")]
    assert re.search(r"\|--@nvidia_gpu_nodes:\n\s+\|  \|  \|--gpu-node-1\n\s+\|  \|  \|--gpu-node-2\n", graph), graph
    assert re.search(r"\|--@static_resource_nodes:\n\s+\|  \|--dongle-node-1\n", graph), graph
    assert "$ ansible-playbook -i playbooks/inventory/demo_k8s_nodes/demo.k8s_nodes.yml kubehw.devices.site" in out
    # after the recap, one line per node saying what the run did there, then the tables
    report = out[out.index("What site.yml did, per node"):out.index("Nodes: advertised (capacity)")]
    assert out.index("PLAY RECAP") < out.index("What site.yml did, per node")
    for node, count in (("gpu-node-1", 4), ("gpu-node-2", 8)):
        assert re.search(r"^%s\s+device plugin \S+/nvidia-device-plugin rolled out \(DaemonSet created\); its pod "
                         r"nvidia-device-plugin-\S+ is ready here; nvidia.com/gpu=%d allocatable" % (node, count),
                         report, re.M), report
    assert re.search(r"^dongle-node-1\s+advertised example.com/dongle=2 \(node status patched\)$", report, re.M), report
    # gpu-node-2's changed=0 in the recap is explained
    assert re.search(r"^gpu-node-2 +: ok=\d+ +changed=0", out, re.M), out
    assert "change of the host it ran for (gpu-node-1) only" in report
    assert re.search(r"^dongle-node-1\s+True\s+example.com/dongle=2\s+example.com/dongle=2$", out, re.M), out
    assert re.search(r"^gpu-node-1\s+True\s+nvidia.com/gpu=4\s+nvidia.com/gpu=4$", out, re.M), out
    assert re.search(r"^gpu-node-2\s+True\s+nvidia.com/gpu=8\s+nvidia.com/gpu=8$", out, re.M), out
    assert "desired 2, updated 2, available 2" in out
    assert re.search(r"wants-2-dongles .* ->  bound to dongle-node-1", out), out
    assert re.search(r"wants-3-dongles .* ->  Pending: 0/3 nodes are available: 3 Insufficient example.com/dongle\.",
                     out), out
    # then the same GPU nodes through DRA: relabelled, site.yml with accelerator_node_allocation=dra removes the device
    # plugin, rolls out NVIDIA's DRA driver preset, and each node publishes its GPUs; a pod's claim is allocated
    # day two: the dongle node's resource removed by hand, found by the drift playbook (exit 2, under --limit too)
    # and repaired by it
    day_two = out[out.index("Day two: drift found and repaired"):out.index("Against a real cluster")]
    assert ("  drift: dongle-node-1: extended resources: declared {\"example.com/dongle\": \"2\"}, observed {}\n"
            "  drift on 1 node(s) or object(s): dongle-node-1. Nothing was written") in day_two, day_two
    assert "(exit status 2: drift, nothing written)" in day_two
    assert "  repaired 1 difference(s)\n(exit status 0)" in day_two, day_two
    dra = out[out.index("The same GPU nodes, served through DRA"):out.index("Day two: drift found and repaired")]
    assert "$ kubectl label node --overwrite gpu-node-1 gpu-node-2 kubehw.devices/gpu-allocation=dra" in dra
    # the plugin reads the label into accelerator_node_allocation: no extra variable says dra
    assert "accelerator_node_allocation=dra" not in dra.split("$ ansible-playbook", 1)[1].split("\n", 1)[0]
    assert re.search(r"^DRA driver gpu.nvidia.com: DaemonSet kubehw-dra-drivers/\S+ rolled out; DeviceClasses gpu.nvidia.com, mig.nvidia.com;"
                     r" site.yml waited until gpu-node-1 published 4, gpu-node-2 published 8$", dra, re.M), dra
    assert re.search(r"^smoke-test pod's claim \(ResourceClaimTemplate, 1 device of DeviceClass gpu.nvidia.com\) was "
                     r"allocated gpu.nvidia.com/gpu-node-1/gpu-\d on gpu-node-1$", dra, re.M), dra
    daemonsets = re.search(r"^DaemonSets now: (.*)$", dra, re.M).group(1)
    assert "kubehw-dra-drivers/" in daemonsets and "device-plugin" not in daemonsets.split(" (")[0], daemonsets
    assert re.search(r"^gpu-node-1\s+4 devices published by gpu.nvidia.com: gpu-0, gpu-1, gpu-2, gpu-3$", dra, re.M), dra
    assert re.search(r"^gpu-node-2\s+8 devices published by gpu.nvidia.com: gpu-0, .*, gpu-7$", dra, re.M), dra
    bound = re.search(r"^pod claims-one-gpu \(ResourceClaimTemplate one-gpu: 1 device of class gpu.nvidia.com\)  ->  "
                      r"bound to (gpu-node-\d)$", dra, re.M)
    assert bound, dra
    assert re.search(r"^claim claims-one-gpu-gpu-\S+ allocated gpu.nvidia.com/%s/gpu-\d, reserved for pods/claims-one-gpu$"
                     % bound.group(1), dra, re.M), dra
    assert "failed=0" in out and "failed=1" not in out
    assert "The demo's control plane has been stopped and its state removed." in out
    # it stops what it started: no control plane of this checkout's demo is left, running or on disk
    # (this checkout's only: another checkout's demo, or the suite's own control planes, may be running)
    state = os.path.join(REPO_ROOT, ".cache", "demo-control-plane")
    assert [name for name in os.listdir(state) if name != "bin"] == []
    left = subprocess.run(["pgrep", "-f", re.escape(state + "/run-")], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == ""
