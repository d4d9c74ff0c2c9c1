# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's defaults and tasks loaded as Ansible loads them (trusted templates), and the module arguments of its one
task that calls a given module, rendered by Ansible's own templating: the role unit tests' one way to ask what a
role hands a module, without an ansible-playbook run."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'roles')
OMIT = '__omit_place_holder__'


def load_role(name):
    """(loader, defaults, tasks) of roles/<name>: the tasks of tasks/main.yml and of the files it includes."""
    loader = DataLoader()
    folder = os.path.join(ROLES, name)
    defaults = loader.load_from_file(os.path.join(folder, 'defaults', 'main.yml'), trusted_as_template=True)
    return loader, defaults, _tasks(loader, os.path.join(folder, 'tasks'), 'main.yml', [])


def _tasks(loader, folder, file_name, conditions):
    """The tasks of folder/file_name, each include_tasks or import_tasks replaced by the tasks of its file, which get
    the include's conditions before their own (as Ansible evaluates them: an included task runs only where its include
    ran; an imported one gets the import's conditions)."""
    tasks = []
    for task in loader.load_from_file(os.path.join(folder, file_name), trusted_as_template=True):
        when = task.get('when', [])
        when = conditions + (when if isinstance(when, list) else [when])
        included = task.get('ansible.builtin.include_tasks') or task.get('ansible.builtin.import_tasks')
        if included:
            tasks.extend(_tasks(loader, folder, included, when))
        else:
            tasks.append(dict(task, when=when))
    return tasks


def module_args(role, module, **inventory_vars):
    """The arguments the role's one task of ``module`` gets with these inventory variables (omitted ones as OMIT)."""
    loader, defaults, tasks = load_role(role)
    found = [t for t in tasks if module in t]
    assert len(found) == 1, [t.get('name') for t in tasks]
    variables = dict(defaults, omit=OMIT, **inventory_vars)
    return Templar(loader=loader, variables=variables).template(found[0][module])
