# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options of a DaemonSet deployment that device_plugin_deploy and dra_driver_deploy read in the task base they
    # share (argument spec: _daemonset_task.deployment_spec()): whose DaemonSet it may take, how long it waits, what
    # a rollout over no node means.
    DOCUMENTATION = r"""
options:
  adopt_daemonset:
    description:
      - A DaemonSet O(name) in O(namespace) that this module did not create (one without the label
        C(app.kubernetes.io/managed-by=kubehw.devices), such as a Helm release's, an operator's or one made by
        hand) makes the task fail before any write, with O(state=present) and O(state=absent) alike, naming the
        DaemonSet and its owner.
      - When true, the module takes it over instead; O(state=present) replaces its template and adds the module's
        labels (with a warning), O(state=absent) deletes it. Use it to move a DaemonSet installed otherwise under this
        module, after removing the other installer's claim on it.
    type: bool
    default: false
  allow_empty_rollout:
    description:
      - When the task waits for the rollout (O(wait) other than V(none)), a DaemonSet that selects no node
        (C(desiredNumberScheduled) 0) fails the task, naming the node selector and each node-affinity alternative with
        how many nodes match it, because its pods then run nowhere (no node carries the label, Node Feature Discovery
        is not deployed).
      - Set true when that is expected (nodes not there yet); the task then succeeds with a warning.
      - Nodes that match the selection but are still joining (not Ready yet, or tainted
        C(node.kubernetes.io/not-ready) as every node is at registration) are waited for within O(wait_timeout), also
        when other nodes already run the pods, and named if they never become schedulable; so are nodes that register
        while the rollout runs.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for O(wait) in total; V(0) looks once.
    type: int
    default: 300
"""
