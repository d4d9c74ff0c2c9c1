# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the modules' preset tables, for roles and playbooks: dra_preset_of gives the DRA driver preset of a
device plugin preset, from the tables the modules use (one place to add a vendor). Each filter is documented in the
YAML file of its name beside this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets


def dra_preset_of(device_plugin_preset):
    """The dra_driver_deploy preset for the devices a device_plugin_deploy preset serves ("" where none is)."""
    try:
        return _dra_driver_presets.for_device_plugin(device_plugin_preset)
    except (KeyError, TypeError):
        raise AnsibleFilterError("dra_preset_of: %r is not a device plugin preset; the presets are %s"
                                 % (device_plugin_preset, ", ".join(_device_plugin_presets.PRESET_NAMES)))


class FilterModule(object):
    """dra_preset_of (docs: the YAML file of its name beside this file)."""

    def filters(self):
        return {'dra_preset_of': dra_preset_of}
