# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test equipment for the molecule scenarios: community.docker's nsenter connection with pipelining.

A task on a systemd-nspawn target otherwise starts one nsenter for each step of a module's life (make a temporary
directory, write the module, make it executable, run it, remove the directory); with pipelining the module goes to
the target's Python on its standard input, in one nsenter. Nothing else differs: the command runs as that plugin
runs it (its exec_command hands the input to the process), so the roles meet the same target."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: kubehw_nsenter
short_description: Run tasks in a booted systemd-nspawn target through nsenter, modules piped to its Python
description:
  - The scenarios' connection to their targets, community.docker.nsenter with pipelining (one nsenter per module).
author: kubehw.devices contributors
options:
  nsenter_pid:
    description: The PID (in this machine's namespace) of the target's init process, whose namespaces tasks enter.
    type: int
    default: 1
    vars:
      - name: ansible_nsenter_pid
  pipelining:
    description: Send modules to the target's Python on its standard input.
    type: bool
    default: true
    vars:
      - name: ansible_pipelining
"""

from ansible_collections.community.docker.plugins.connection.nsenter import Connection as NsenterConnection


class Connection(NsenterConnection):
    """community.docker.nsenter, declared able to pipeline."""

    transport = "kubehw_nsenter"
    has_pipelining = True
