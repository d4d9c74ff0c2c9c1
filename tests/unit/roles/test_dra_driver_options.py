# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dra_driver role hands the module's env, allow_device_plugin_overlap and adopt_daemonset over: off (or left
out) by default, and as booleans from AWX's strings.

Rendered by Ansible's own templating from the role's files (no ansible-playbook run). What the module does with them
is shown against an apiserver in tests/integration/test_dra_driver_deploy.py and test_dra_presets.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from tests.unit.roles.role_files import OMIT, module_args


def deploy_args(**inventory_vars):
    return module_args('dra_driver', 'kubehw.devices.dra_driver_deploy', **inventory_vars)


def test_the_overrides_are_off_and_env_is_left_to_the_preset_unless_asked():
    args = deploy_args()
    assert args['allow_device_plugin_overlap'] is False and args['adopt_daemonset'] is False
    assert args['env'] == OMIT


@pytest.mark.parametrize('value, expected', [('true', True), ('False', False), (True, True)])
def test_the_overrides_reach_the_module_as_booleans(value, expected):
    # an AWX survey hands every variable over as a string
    args = deploy_args(dra_driver_allow_device_plugin_overlap=value, dra_driver_adopt_daemonset=value)
    assert args['allow_device_plugin_overlap'] is expected and args['adopt_daemonset'] is expected


def test_env_reaches_the_module():
    # MPS: the NVIDIA driver's kubelet plugin reads its sharing settings from the environment
    assert deploy_args(dra_driver_env={'MPS_ROOT': '/run/nvidia/mps'})['env'] == {'MPS_ROOT': '/run/nvidia/mps'}


def test_the_role_offers_every_preset_of_the_module():
    """The role's preset choices are the module's: a preset added to the module (kubernetes_test was) is usable
    from the role too."""
    import os

    import yaml

    from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets

    spec_file = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'roles', 'dra_driver', 'meta',
                             'argument_specs.yml')
    with open(spec_file) as f:
        options = yaml.safe_load(f)['argument_specs']['main']['options']
    assert sorted(options['dra_driver_preset']['choices']) == sorted(presets.PRESET_NAMES)
    assert deploy_args(dra_driver_preset='kubernetes_test', dra_driver_image='registry.example/test-driver:v1')[
        'image'] == 'registry.example/test-driver:v1'
