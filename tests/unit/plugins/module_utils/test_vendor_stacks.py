# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guards against the vendor stacks' own DaemonSets (vendor_daemonsets.yml, each row from a published
chart or manifest, its version named), in both directions: what serves a resource is a device plugin; what runs from
the same image or under the same labels and serves nothing (feature discovery, the MPS control daemon, AMD's node
labeller) is not; a DRA kubelet plugin is a second installation of the driver it publishes and of no other; and
device_plugin_deploy knows which DRA driver hands out the devices of each plugin."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_presets import NVIDIA

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor_daemonsets.yml")) as _handle:
    ROWS = yaml.safe_load(_handle)

ROW_IDS = [r["source"].split(" ", 1)[0] + "-%d" % i for i, r in enumerate(ROWS)]
# The DRA presets whose devices a device plugin can hand out too (the guards of both modules read them).
GUARDED_PRESETS = sorted(name for name, preset in dra_presets.PRESETS.items() if preset.get("device_plugin"))


def vendor(row):
    return row["source"].split("/", 1)[0].lower()


def test_the_table_has_every_verdict_from_every_vendor():
    assert [r for r in ROWS if r["serves"]] and [r for r in ROWS if not r["serves"] and not r.get("publishes")]
    assert [r for r in ROWS if r.get("publishes")]
    assert set(vendor(r) for r in ROWS) == {"nvidia", "intel", "rocm"}
    assert GUARDED_PRESETS == ["amd", "intel", "nvidia"]


@pytest.mark.parametrize("preset", GUARDED_PRESETS)
@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_the_guard_takes_a_daemonset_for_a_device_plugin_only_when_it_serves_the_presets_devices(row, preset):
    """dra_driver_deploy's guard, per preset: a row is a device plugin of the preset's devices exactly when it serves
    one of their resources (AMD's plugin, from rocm/k8s-device-plugin, is not NVIDIA's nvidia/k8s-device-plugin)."""
    plugin = dra_presets.PRESETS[preset]["device_plugin"]
    found = guard.device_plugin_daemonsets([row["daemonset"]], plugin)
    assert bool(found) == bool(set(row["serves"]) & set(plugin["resources"])), row["source"]


@pytest.mark.parametrize("preset", GUARDED_PRESETS)
@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_a_second_installation_is_found_by_the_driver_it_publishes_and_only_then(row, preset):
    """dra_driver_deploy's other guard, with the image names the module passes (the preset's images, mirrored or
    not): a vendor's chart of the same driver is a second installation; another vendor's driver, a device plugin or a
    helper is not."""
    chosen = dra_presets.PRESETS[preset]
    images = sorted(set(guard.image_name(i) for i in [chosen["image"]] + list(chosen.get("previous_images") or ())))
    found = guard.same_driver_daemonsets([row["daemonset"]], chosen["driver"], images, ("ours", "ours"))
    assert bool(found) == (row.get("publishes") == chosen["driver"]), row["source"]


@pytest.mark.parametrize("row", [r for r in ROWS if r["serves"]], ids=[i for i, r in zip(ROW_IDS, ROWS) if r["serves"]])
def test_device_plugin_deploy_looks_for_the_dra_driver_of_the_same_vendors_devices(row):
    """The other direction: for the resources a plugin row serves, device_plugin_deploy lists the ResourceSlices of
    exactly the DRA drivers the same vendor publishes."""
    expected = sorted(set(r["publishes"] for r in ROWS if r.get("publishes") and vendor(r) == vendor(row)))
    assert guard.dra_drivers_of(row["serves"], dra_presets.PRESETS) == expected, row["source"]


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
