# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What accelerator_node's DRA smoke test asks for, rendered by Ansible's own templating from the role's files.

No ansible-playbook run (tens of CPU seconds): the role's defaults and tasks are loaded as Ansible loads them
(trusted templates), the two set_fact tasks that sort the hosts are rendered per host and for the play as the
play would, and then the arguments and the conditions of the smoke-test tasks. The playbook run on the suite's real
control plane (tests/integration/test_playbooks.py, site) shows the same tasks against an apiserver.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.template import Templar

from tests.unit.roles.role_files import OMIT, load_role

SMOKE = 'kubehw.devices.resource_smoke_test'
# What kubehw.devices.dra_driver registers for the nvidia preset (dra_driver_deploy's device_classes: the main
# class first, see plugins/module_utils/_dra_driver_presets.py)
NVIDIA_DRIVER_RESULT = {'changed': True, 'device_classes': ['gpu.nvidia.com', 'mig.nvidia.com']}


@pytest.fixture(scope='module')
def role():
    return load_role('accelerator_node')


def task_named(tasks, start):
    found = [t for t in tasks if t['name'].startswith(start)]
    assert len(found) == 1, [t['name'] for t in tasks]
    return found[0]


def play(role, hosts, **play_vars):
    """The variables of the play's first host after the role's set_fact tasks; hosts: {name: inventory vars}."""
    loader, defaults, tasks = role
    hostvars = {}
    for name, inventory_vars in hosts.items():
        variables = dict(defaults, inventory_hostname=name, omit=OMIT, **inventory_vars)
        for start in ('Know the Kubernetes node name', 'Know how the devices of the node are served'):
            facts = Templar(loader=loader, variables=variables).template(task_named(tasks, start)['ansible.builtin.set_fact'])
            variables.update(facts)
        hostvars[name] = variables
    first = dict(hostvars[next(iter(hosts))], ansible_play_hosts=list(hosts), hostvars=hostvars, **play_vars)
    # the play's node lists, then (after the plugin's rollout, whose result play_vars may give) those it selects
    for start in ('Know the nodes the device plugin serves', "Know the device-plugin nodes the plugin's DaemonSet"):
        task = task_named(tasks, start)
        first.update(Templar(loader=loader, variables=dict(first, **task['vars'])).template(task['ansible.builtin.set_fact']))
    return first


def rendered(role, variables, module, on):
    """(arguments without omitted ones, whether every `when` holds) of the task of `module` whose node is `on`'s first.

    As Ansible does, the conditions first: the arguments of a task that does not run are not rendered (None)."""
    loader, _defaults, tasks = role
    found = [t for t in tasks if module in t and on in str(t[module].get('node', ''))]
    assert len(found) == 1, [t['name'] for t in tasks]
    templar = Templar(loader=loader, variables=variables)
    if not all(templar.evaluate_conditional(c) for c in found[0].get('when', [])):
        return None, False
    return dict((k, v) for k, v in templar.template(found[0][module]).items() if v != OMIT), True


MIXED = {'gpu-node-1': {}, 'gpu-node-3': {'accelerator_node_allocation': 'dra'}, 'gpu-node-4': {'accelerator_node_allocation': 'dra'}}


def test_dra_nodes_are_proved_through_a_claim_template_of_the_presets_main_device_class(role):
    variables = play(role, MIXED, dra_driver_result=NVIDIA_DRIVER_RESULT)
    assert variables['accelerator_node_dra_nodes'] == ['gpu-node-3', 'gpu-node-4']
    args, runs = rendered(role, variables, SMOKE, 'accelerator_node_dra_nodes')
    # without accelerator_node_dra_extended_resource_name too: DRA itself needs no DRAExtendedResource gate
    assert runs
    assert args['device_class'] == 'gpu.nvidia.com'
    assert 'resource' not in args, args
    assert args['node'] == 'gpu-node-3'
    # the DRA driver hands the GPU to the container through CDI: no RuntimeClass
    assert 'runtime_class_name' not in args, args
    assert args['wait_for'] == 'completed' and args['command'] == ['nvidia-smi', '-L']
    # the device-plugin node keeps its smoke test asking for the plugin's resource under the NVIDIA runtime
    args, runs = rendered(role, variables, SMOKE, 'accelerator_node_plugin_nodes')
    assert runs
    assert (args['resource'], args['node'], args['runtime_class_name']) == ('nvidia.com/gpu', 'gpu-node-1', 'nvidia')


def test_an_extended_resource_name_does_not_change_what_the_dra_smoke_test_claims(role):
    hosts = dict(MIXED, **{'gpu-node-3': {'accelerator_node_allocation': 'dra',
                                          'accelerator_node_dra_extended_resource_name': 'nvidia.com/gpu'}})
    hosts['gpu-node-4'] = dict(hosts['gpu-node-3'])
    args, runs = rendered(role, play(role, hosts, dra_driver_result=NVIDIA_DRIVER_RESULT), SMOKE, 'accelerator_node_dra_nodes')
    assert runs
    assert args['device_class'] == 'gpu.nvidia.com' and 'resource' not in args, args


def test_a_named_device_class_is_claimed_and_must_be_the_same_on_every_dra_host(role):
    loader, _defaults, tasks = role
    dra = {'accelerator_node_allocation': 'dra', 'accelerator_node_dra_device_class': 'mig.nvidia.com'}
    variables = play(role, {'gpu-node-3': dra, 'gpu-node-4': dra}, dra_driver_result=NVIDIA_DRIVER_RESULT)
    args, runs = rendered(role, variables, SMOKE, 'accelerator_node_dra_nodes')
    assert runs and args['device_class'] == 'mig.nvidia.com'

    # one DRA driver serves the play: hosts naming different classes are refused before any write
    check = task_named(tasks, 'Check the DRA settings')['ansible.builtin.assert']
    variables = play(role, {'gpu-node-3': dra, 'gpu-node-4': {'accelerator_node_allocation': 'dra'}})
    templar = Templar(loader=loader, variables=variables)
    assert not all(templar.evaluate_conditional(c) for c in check['that'])
    assert 'accelerator_node_dra_device_class' in templar.template(check['fail_msg'])


def test_no_dra_smoke_test_without_dra_nodes_or_with_the_smoke_test_off(role):
    assert not rendered(role, play(role, {'gpu-node-1': {}}), SMOKE, 'accelerator_node_dra_nodes')[1]
    variables = play(role, MIXED, dra_driver_result=NVIDIA_DRIVER_RESULT, accelerator_node_smoke_test=False)
    assert not rendered(role, variables, SMOKE, 'accelerator_node_dra_nodes')[1]
