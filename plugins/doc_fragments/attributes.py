# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Descriptions of the attributes every module declares; each module sets C(support).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return the changed status it would have, without making any write.
  diff_mode:
    description: Returns the state before and after, for the keys or objects the module manages, when run with C(--diff).
  idempotent:
    description:
      - Running the module twice with the same input reports C(changed=false) the second time and makes no write.
"""

    # The modules of the action group k8s (meta/runtime.yml), every module that talks to the Kubernetes API.
    ACTION_GROUP = r"""
options: {}
attributes:
  action_group:
    description:
      - Use C(group/kubehw.devices.k8s) in C(module_defaults) to set the connection options once for all modules
        of this collection that talk to the Kubernetes API.
    support: full
    membership:
      - kubehw.devices.k8s
"""
