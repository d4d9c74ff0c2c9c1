# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`'s script, run as `make demo` runs it, with its output checked."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_demo_runs_site_and_shows_scheduling(collections_path):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("K8S_AUTH_") and k != "KUBECONFIG")
    env["ANSIBLE_COLLECTIONS_PATH"] = collections_path
    proc = subprocess.run(["bash", os.path.join(REPO_ROOT, "scripts", "demo.sh")], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:] + proc.stderr[-3000:]
    assert "SIMULATED Kubernetes cluster" in out
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
    assert "failed=0" in out and "failed=1" not in out
    assert "The simulated cluster has been stopped." in out
    # it stops what it started: no simulated cluster process is left behind
    # (this checkout's demo cluster only: another checkout's demo may be running on the same machine)
    config = os.path.join(REPO_ROOT, "tests", "simcluster", "examples", "demo.yaml")
    left = subprocess.run(["pgrep", "-f", "tests.simcluster --config %s" % re.escape(config)], capture_output=True,
                          text=True, check=False)
    assert left.stdout.strip() == ""
