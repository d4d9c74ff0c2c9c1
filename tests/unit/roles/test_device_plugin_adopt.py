# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device_plugin role hands the module's adopt options over, off by default and from AWX's strings.

Rendered by Ansible's own templating from the role's files (no ansible-playbook run). The module's refusal of a
foreign DaemonSet or ConfigMap is shown against an apiserver in tests/integration/test_device_plugin_deploy.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'roles', 'device_plugin')
DEPLOY = 'kubehw.devices.device_plugin_deploy'


def deploy_args(**inventory_vars):
    loader = DataLoader()
    defaults = loader.load_from_file(os.path.join(ROLE, 'defaults', 'main.yml'), trusted_as_template=True)
    tasks = loader.load_from_file(os.path.join(ROLE, 'tasks', 'main.yml'), trusted_as_template=True)
    task = [t for t in tasks if DEPLOY in t]
    assert len(task) == 1, [t.get('name') for t in tasks]
    variables = dict(defaults, omit='__omit_place_holder__', **inventory_vars)
    return Templar(loader=loader, variables=variables).template(task[0][DEPLOY])


def test_adopting_is_off_unless_asked():
    args = deploy_args()
    assert args['adopt_daemonset'] is False and args['adopt_configmap'] is False


@pytest.mark.parametrize('value, expected', [('true', True), ('True', True), ('false', False), (True, True)])
def test_adopt_options_reach_the_module_as_booleans(value, expected):
    # an AWX survey hands every variable over as a string
    args = deploy_args(device_plugin_adopt_daemonset=value, device_plugin_adopt_configmap=value)
    assert args['adopt_daemonset'] is expected and args['adopt_configmap'] is expected
