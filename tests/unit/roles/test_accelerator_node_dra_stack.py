# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What accelerator_node gives a DRA host's node stack: CDI on in the runtime, a driver branch NVIDIA's DRA driver
allocates GPUs with (a lower one refused before anything changes), and the driver root the host really has.

Rendered by Ansible's own templating from the role's files, as test_accelerator_node_dra_smoke.py does; the roles'
molecule scenarios run the toolkit's CDI configuration on a booted Debian root file system."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.template import Templar

from tests.unit.roles.role_files import OMIT
from tests.unit.roles.test_accelerator_node_dra_smoke import play, role, task_named  # noqa: F401 pylint: disable=unused-import

NEEDS = 'Know what the node\'s allocation needs of the host'


def host(role, **inventory_vars):
    """The host's variables after the role's first set_facts (defaults, inventory, then the facts)."""
    loader, defaults, tasks = role
    variables = dict(defaults, inventory_hostname='gpu-node-1', omit=OMIT, accelerator_node_host_setup=True,
                     **inventory_vars)
    variables.update(Templar(loader=loader, variables=variables).template(
        task_named(tasks, NEEDS)['ansible.builtin.set_fact']))
    return variables


def runs(role, variables, name):
    loader, _defaults, tasks = role
    templar = Templar(loader=loader, variables=variables)
    return all(templar.evaluate_conditional(c) for c in task_named(tasks, name).get('when', []))


def included_vars(role, variables, name):
    loader, _defaults, tasks = role
    return Templar(loader=loader, variables=variables).template(task_named(tasks, name).get('vars') or {})


def assertion_holds(role, variables, name):
    loader, _defaults, tasks = role
    templar = Templar(loader=loader, variables=variables)
    that = task_named(tasks, name)['ansible.builtin.assert']['that']
    return all(templar.evaluate_conditional(c) for c in ([that] if isinstance(that, str) else that))


def branch_accepted(role, variables):
    return assertion_holds(role, variables, 'Check that the driver branch')


def test_a_dra_host_gets_cdi_in_its_runtime_and_a_device_plugin_host_keeps_what_the_inventory_says(role):
    toolkit = 'Install the NVIDIA Container Toolkit'
    assert included_vars(role, host(role, accelerator_node_allocation='dra'), toolkit) == {
        'nvidia_container_toolkit_cdi': True}
    assert included_vars(role, host(role), toolkit) == {'nvidia_container_toolkit_cdi': False}
    assert included_vars(role, host(role, nvidia_container_toolkit_cdi='true'), toolkit) == {
        'nvidia_container_toolkit_cdi': True}


def test_a_nvidia_dra_host_gets_a_branch_the_dra_driver_allocates_with_and_a_lower_one_is_refused(role):
    dra = host(role, accelerator_node_allocation='dra')
    assert runs(role, dra, 'Install an NVIDIA driver branch') and not runs(role, dra, 'Install the NVIDIA driver branch')
    assert included_vars(role, dra, 'Install an NVIDIA driver branch') == {'nvidia_driver_branch': '570'}
    assert runs(role, dra, 'Check that the driver branch') and branch_accepted(role, dra)
    for branch, accepted in (('550', False), ('565', True), (580, True), ('open-570', False), ('535-server', False)):
        variables = host(role, accelerator_node_allocation='dra', nvidia_driver_branch=branch)
        assert branch_accepted(role, variables) is accepted, branch
    # the device plugin keeps the driver role's own default; Intel's DRA driver has no such floor
    plugin = host(role)
    assert runs(role, plugin, 'Install the NVIDIA driver branch') and not runs(role, plugin, 'Check that the driver branch')
    intel = host(role, accelerator_node_allocation='dra', accelerator_node_preset='intel_gpu')
    assert not runs(role, intel, 'Check that the driver branch')


@pytest.mark.parametrize('found, root', [(True, '/run/nvidia/driver'), (False, '/')])
def test_the_driver_root_follows_what_the_host_has(role, found, root):
    operator_host = host(role, accelerator_node_allocation='dra', accelerator_node_install_driver=False,
                         accelerator_node_operator_driver={'stat': {'exists': found}})
    assert runs(role, operator_host, 'Look for a driver the NVIDIA GPU Operator')
    loader, _defaults, tasks = role
    facts = Templar(loader=loader, variables=operator_host).template(
        task_named(tasks, 'Know where the NVIDIA driver of the host is')['ansible.builtin.set_fact'])
    assert facts == {'accelerator_node_driver_root_of_node': root}


def test_dra_hosts_whose_driver_roots_differ_are_refused_before_any_write(role):
    hosts = {'gpu-node-3': {'accelerator_node_allocation': 'dra', 'accelerator_node_driver_root_of_node': '/'},
             'gpu-node-4': {'accelerator_node_allocation': 'dra',
                            'accelerator_node_driver_root_of_node': '/run/nvidia/driver'}}
    variables = play(role, hosts)
    assert [s['driver_root'] for s in variables['accelerator_node_dra_settings']] == ['/', '/run/nvidia/driver']
    assert not assertion_holds(role, variables, 'Check the DRA settings')
    same = play(role, dict((name, dict(v, accelerator_node_driver_root_of_node='/run/nvidia/driver'))
                           for name, v in hosts.items()))
    assert assertion_holds(role, same, 'Check the DRA settings')
    assert included_vars(role, same, 'Roll out the DRA driver')['dra_driver_nvidia_driver_root'] == '/run/nvidia/driver'
