# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device_plugin role hands the module's adopt options over, off by default and from AWX's strings.

Rendered by Ansible's own templating from the role's files (no ansible-playbook run). The module's refusal of a
foreign DaemonSet or ConfigMap is shown against an apiserver in tests/integration/test_device_plugin_deploy.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from tests.unit.roles.role_files import module_args


def deploy_args(**inventory_vars):
    return module_args('device_plugin', 'kubehw.devices.device_plugin_deploy', **inventory_vars)


def test_adopting_is_off_unless_asked():
    args = deploy_args()
    assert args['adopt_daemonset'] is False and args['adopt_configmap'] is False


@pytest.mark.parametrize('value, expected', [('true', True), ('True', True), ('false', False), (True, True)])
def test_adopt_options_reach_the_module_as_booleans(value, expected):
    # an AWX survey hands every variable over as a string
    args = deploy_args(device_plugin_adopt_daemonset=value, device_plugin_adopt_configmap=value)
    assert args['adopt_daemonset'] is expected and args['adopt_configmap'] is expected
