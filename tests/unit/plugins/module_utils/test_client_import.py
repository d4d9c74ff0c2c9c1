# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubernetes library is imported when the first client is built, not when a module starts.

A task whose input is refused before any request never imports it (most of such a task's CPU time); a task
that needs a client where the library is missing still fails with Ansible's missing-library message. Each case
runs in a fresh interpreter, since the test process has imported kubernetes long before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, sys
if sys.argv[1] == "without-kubernetes":
    sys.modules["kubernetes"] = None    # as if it were not installed: importing it raises ImportError
from tests.unit.plugins.modules.module_harness import patch_module_args
import importlib
module = importlib.import_module("ansible_collections.kubehw.devices.plugins.modules." + sys.argv[3])
with patch_module_args(json.loads(sys.argv[2])):
    try:
        module.main()
    except SystemExit:
        pass
imported = sorted(set(name.split(".")[0] for name in sys.modules if sys.modules[name] is not None))
sys.stderr.write("\nIMPORTED " + json.dumps([name for name in imported if name in ("kubernetes", "urllib3")]) + "\n")
"""


def run(mode, args, module="k8s_node_extended_resource"):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, json.dumps(args), module], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert "Traceback" not in proc.stderr.split("\nIMPORTED ")[0], proc.stderr
    result = json.loads(proc.stdout)
    imported = json.loads(proc.stderr.rsplit("\nIMPORTED ", 1)[1])
    return result, imported


def test_refused_input_never_imports_kubernetes():
    result, imported = run("with-kubernetes", {"name": "Bad-Node", "resources": {"example.com/dongle": 1}})
    assert result["failed"] is True and "'Bad-Node'" in result["msg"] and "lowercase" in result["msg"], result
    assert imported == [], imported


def test_refused_drain_input_never_imports_kubernetes():
    """k8s_node_drain imported kubernetes and urllib3 at module level; it now uses the client's lazy import."""
    result, imported = run("with-kubernetes", {"name": "Bad Node"}, module="k8s_node_drain")
    assert result["failed"] is True and "'Bad Node'" in result["msg"], result
    assert imported == [], imported


def test_missing_library_is_reported_when_a_client_is_needed(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result, imported = run("without-kubernetes", {"name": "node-1", "resources": {"example.com/dongle": 1},
                                                  "kubeconfig": str(kubeconfig)})
    assert result["failed"] is True, result
    assert "Failed to import the required Python library (kubernetes)" in result["msg"], result
    assert "kubernetes" not in imported


API_SCRIPT = r"""
import json, sys
import kubernetes
# kubernetes 35+ imports an API module when its class is first used; older releases (the floor, 24.2.0) import all
# of them with the package: what the library imports by itself is left out of what the client made
library = set(name for name in sys.modules if name.startswith("kubernetes.client.api."))
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
client = KubeClient(params={"host": "https://api.example:6443", "api_key": "t"})
client.core.read_node, client.apps.read_namespaced_daemon_set, client.custom.list_cluster_custom_object
client._find_by_name({"kind": "RuntimeClass", "metadata": {"name": "nvidia"}})
made = sorted(name.rsplit(".", 1)[1] for name in set(sys.modules) - library if name.startswith("kubernetes.client.api."))
import gc
print(json.dumps([made, gc.isenabled()]))
"""


def test_no_generated_api_class_is_imported():
    """The requests go out without the generated API classes, each of which imports its models (CoreV1Api about
    0.4 CPU-s with kubernetes 37): a client that made every API's methods has imported none of them."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", API_SCRIPT], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    made, gc_enabled = json.loads(proc.stdout)
    assert made == []
    assert gc_enabled is True   # paused only while the library was imported
