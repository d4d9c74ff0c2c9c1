# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guards against the vendor stacks' own DaemonSets (vendor_daemonsets.yml, each row from a published
chart or manifest, its version named): what serves a resource is a device plugin; what runs from the same image or
under the same labels and serves nothing (feature discovery, the MPS control daemon) is not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_presets import NVIDIA

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor_daemonsets.yml")) as _handle:
    ROWS = yaml.safe_load(_handle)


def test_the_table_has_both_verdicts():
    assert [r for r in ROWS if r["serves"]] and [r for r in ROWS if not r["serves"]]


@pytest.mark.parametrize("row", ROWS, ids=[r["source"].split(" (")[0].rsplit("/", 1)[-1] + "-%d" % i
                                           for i, r in enumerate(ROWS)])
def test_the_guard_takes_a_daemonset_for_a_device_plugin_only_when_it_serves(row):
    plugin = NVIDIA["device_plugin"]
    found = guard.device_plugin_daemonsets([row["daemonset"]], plugin)
    assert bool(found) == bool(set(row["serves"]) & set(plugin["resources"])), row["source"]


def test_a_helper_renamed_and_relabelled_still_serves_nothing_and_a_plugin_behind_a_wrapper_still_serves():
    """The verdict follows the programs the containers run, not the names: GFD mirrored under another name, and the
    device plugin started through a shell wrapper that names it."""
    gfd = {"metadata": {"name": "features", "namespace": "ops"}, "spec": {"template": {"spec": {"containers": [
        {"name": "x", "image": "mirror.example/nvidia/k8s-device-plugin:v0.20.0",
         "command": ["/usr/bin/gpu-feature-discovery"], "args": ["--oneshot=false"]}]}}}}
    wrapped = {"metadata": {"name": "plugin", "namespace": "ops"}, "spec": {"template": {"spec": {"containers": [
        {"name": "x", "image": "mirror.example/nvidia/k8s-device-plugin:v0.20.0",
         "command": ["sh", "-c"], "args": ["exec nvidia-device-plugin --fail-on-init-error=false"]}]}}}}
    plugin = NVIDIA["device_plugin"]
    assert guard.device_plugin_daemonsets([gfd], plugin) == []
    assert guard.device_plugin_daemonsets([wrapped], plugin) == [wrapped]


def test_the_gpu_operators_driver_container_is_found_among_the_stacks_and_nothing_else_is():
    """The rows whose DaemonSet installs the NVIDIA driver under /run/nvidia/driver (the GPU Operator's driver
    container) are what dra_driver_deploy takes its driver root from; no device plugin or helper row is."""
    found = guard.operator_driver_daemonsets([r["daemonset"] for r in ROWS])
    assert found and found == [r["daemonset"] for r in ROWS if r.get("installs_driver_under") == "/run/nvidia/driver"]
