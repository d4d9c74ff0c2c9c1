# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""accelerator_node after the device plugin's rollout: a device-plugin node of the play that the DaemonSet does not
select (device_plugin_deploy's selected_nodes) fails the play naming it, or, with accelerator_node_require_selected
false (the drift playbook), is left out of the allocatable wait and the smoke test.

Rendered by Ansible's own templating from the role's files, as test_accelerator_node_dra_smoke.py does; the drift
playbook's run on the real control plane is tests/integration/test_drift.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.template import Templar

from tests.unit.roles.test_accelerator_node_dra_smoke import SMOKE, play, rendered, role, task_named  # noqa: F401 pylint: disable=unused-import
from tests.unit.roles.test_accelerator_node_dra_stack import assertion_holds, runs

REFUSE = "Fail where the plugin's DaemonSet does not select a device-plugin node of the play"
WAIT = "Wait until the resource is allocatable on every node the device plugin serves"
HOSTS = {'gpu-node-1': {}, 'gpu-node-2': {}}
DAEMONSET = {'metadata': {'namespace': 'kubehw-device-plugins', 'name': 'nvidia-device-plugin'}}


def after_rollout(role, selected, **play_vars):
    """The first host's variables once the plugin's task registered selected_nodes and the role knew what it selects
    (a run without --check unless play_vars say otherwise)."""
    return play(role, HOSTS, device_plugin_result={'changed': False, 'daemonset': DAEMONSET, 'selected_nodes': selected},
                **dict(dict(ansible_check_mode=False), **play_vars))


def test_a_node_the_daemonset_does_not_select_fails_the_play_naming_it(role):
    variables = after_rollout(role, ['gpu-node-1', 'gpu-node-3'])
    assert variables['accelerator_node_plugin_nodes_unselected'] == ['gpu-node-2']
    assert runs(role, variables, REFUSE) and not assertion_holds(role, variables, REFUSE)
    # under --check nothing waits, so nothing is refused (a node not in the cluster yet is not selected either)
    assert not runs(role, dict(variables, ansible_check_mode=True), REFUSE)
    loader, _defaults, tasks = role
    message = Templar(loader=loader, variables=variables).template(
        task_named(tasks, REFUSE)['ansible.builtin.assert']['fail_msg'])
    assert ("The device plugin DaemonSet kubehw-device-plugins/nvidia-device-plugin does not select node(s) gpu-node-2 "
            "of this play") in message, message

    everyone = after_rollout(role, ['gpu-node-1', 'gpu-node-2'])
    assert everyone['accelerator_node_plugin_nodes_unselected'] == [] and assertion_holds(role, everyone, REFUSE)
    assert everyone['accelerator_node_plugin_nodes_served'] == ['gpu-node-1', 'gpu-node-2']


def test_without_the_requirement_the_node_is_left_out_of_the_wait_and_the_smoke_test(role):
    variables = after_rollout(role, ['gpu-node-2'], accelerator_node_require_selected=False)
    assert not runs(role, variables, REFUSE)
    loader, _defaults, tasks = role
    wait = Templar(loader=loader, variables=variables).template(
        task_named(tasks, WAIT)['kubehw.devices.extended_resource_info'])
    assert wait['names'] == ['gpu-node-2']
    smoke, smoke_runs = rendered(role, variables, SMOKE, 'accelerator_node_plugin_nodes_served')
    assert smoke_runs and smoke['node'] == 'gpu-node-2'
    # nothing selected at all: neither a wait nor a smoke test
    none = after_rollout(role, [], accelerator_node_require_selected=False)
    assert none['accelerator_node_plugin_nodes_served'] == [] and not runs(role, none, WAIT)
