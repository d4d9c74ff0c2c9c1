# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_preset_of: the DRA driver preset of a device plugin preset, from the modules' tables (the accelerator_node
role's default and the teardown playbook read it; they held three copies of the map before)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubehw.devices.plugins.filter.presets import FilterModule
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets, _dra_driver_presets

dra_preset_of = FilterModule().filters()["dra_preset_of"]


@pytest.mark.parametrize("plugin, dra", [("nvidia", "nvidia"), ("intel_gpu", "intel"), ("amd", "amd"),
                                         ("generic", ""), ("custom", "")])
def test_each_device_plugin_preset_has_the_dra_preset_of_the_same_devices(plugin, dra):
    assert dra_preset_of(plugin) == dra


def test_the_dra_preset_found_is_the_one_whose_guard_knows_the_plugin_s_resources():
    for plugin in _device_plugin_presets.PRESET_NAMES:
        dra = dra_preset_of(plugin)
        if dra:
            guarded = _dra_driver_presets.PRESETS[dra]["device_plugin"]["resources"]
            assert set(_device_plugin_presets.PRESETS[plugin]["resources"]) & set(guarded), (plugin, dra)


@pytest.mark.parametrize("name", ["intel", "", None, "NVIDIA"])
def test_a_name_that_is_not_a_device_plugin_preset_is_refused_naming_the_presets(name):
    with pytest.raises(AnsibleFilterError) as err:
        dra_preset_of(name)
    assert "%r is not a device plugin preset" % (name,) in str(err.value)
    assert "nvidia, amd, intel_gpu, generic, custom" in str(err.value)
