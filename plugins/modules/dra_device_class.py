#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_device_class
short_description: Create, update or delete a Dynamic Resource Allocation DeviceClass
version_added: 1.0.0
description:
  - Manages one cluster-scoped C(DeviceClass) of the API group C(resource.k8s.io) (Dynamic Resource
    Allocation). A DeviceClass holds the CEL selectors a device must satisfy to be allocated through it, the opaque
    configuration passed to the driver for each such device, and the extended resource name that lets pods
    which still ask for, say, one C(nvidia.com/gpu) be served by a DRA driver.
  - Speaks C(resource.k8s.io/v1), served by default from Kubernetes 1.34 on. Discovery checks that the cluster
    serves it; where it does not (the betas of 1.32 and 1.33 are not supported), the task fails before any write,
    naming what the cluster offers and the Kubernetes version needed.
  - Reads the DeviceClass first and writes only when it differs from the task, so a second run with the same
    input sends no write. An update is a C(PUT) carrying the live C(resourceVersion); labels and annotations
    others added are kept.
  - O(selectors), O(config) and O(extended_resource_name) describe the whole spec; leaving one out removes it
    from a DeviceClass this module manages.
  - Every input is validated before the first request (the DeviceClass name, driver names, extended resource
    name, the API's size limits). CEL selectors are checked for syntax locally when the Python library
    C(cel-python) is installed on the controller; type errors (such as C(device.driver + 1)) and, without that
    library, syntax errors too are found by the apiserver, whose message the task reports.
  - The DeviceClass carries the label C(app.kubernetes.io/managed-by=kubehw.devices). One of that name without
    it was made by someone else (a driver's Helm chart, a manifest), so it is left as it is, with a warning,
    for O(state=present) and O(state=absent) alike, unless O(adopt=true).
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details:
      - A create or update is sent as a server-side dry run (C(dryRun=All)), so the apiserver validates it (an
        invalid CEL expression fails the task with the apiserver's message) and nothing is stored. A delete is
        only predicted; no request is sent for it.
  diff_mode:
    support: full
    details: The DeviceClass before and after, without server-populated metadata.
  idempotent:
    support: full
options:
  name:
    description:
      - Name of the DeviceClass, the value claims give in C(deviceClassName). A lowercase DNS subdomain.
    type: str
    required: true
  state:
    description:
      - V(present) creates the DeviceClass or brings it to what the task describes.
      - V(absent) deletes it if this module manages it. One that does not exist is not an error.
    type: str
    choices: [present, absent]
    default: present
  selectors:
    description:
      - CEL expressions, each of which a device must satisfy to be allocated through this class
        (C(spec.selectors[].cel.expression)). The variable C(device) has C(driver), C(attributes) and
        C(capacity), for example V(device.driver == "gpu.example.com").
      - At most 32, each at most 10240 characters, as the API allows. Order matters to the API and is kept.
    type: list
    elements: str
  config:
    description:
      - Opaque configuration for the driver, passed to its kubelet plugin for each device allocated through this
        class (C(spec.config[].opaque)). The scheduler does not read it. At most 32 entries.
    type: list
    elements: dict
    suboptions:
      driver:
        description:
          - Name of the DRA driver the parameters are for, for example V(gpu.nvidia.com). A lowercase DNS
            subdomain of at most 63 characters.
        type: str
        required: true
      parameters:
        description:
          - The driver's configuration object, in the driver's own format (often with C(apiVersion) and
            C(kind)). At most 10240 bytes as JSON. Compared as data, so key order does not matter.
        type: dict
        required: true
  extended_resource_name:
    description:
      - Extended resource name (C(spec.extendedResourceName)) that pods may request, as in C(limits),
        to be served by a device of this class, for example V(example.com/gpu). Follows the rules for extended
        resource names (C(domain/name), not in C(kubernetes.io)).
      - Needs Kubernetes 1.34 or later with the C(DRAExtendedResource) feature gate (beta and on by default
        from 1.36). An apiserver without it drops the field; the task then fails, naming the gate, instead of
        reporting a change it could not make.
    type: str
  labels:
    description:
      - Labels of the DeviceClass. C(app.kubernetes.io/managed-by) is the module's own and may not be set.
    type: dict
  adopt:
    description:
      - Manage a DeviceClass of this name that this module did not create (it lacks the label
        C(app.kubernetes.io/managed-by=kubehw.devices)), updating it (adding the label) or, with O(state=absent),
        deleting it. Without it such a DeviceClass is left unchanged and the task warns.
    type: bool
    default: false
notes:
  - The identity needs C(get), C(create), C(update) and C(delete) on C(deviceclasses) in the API group
    C(resource.k8s.io) (cluster-scoped, so a ClusterRole), and read access to discovery (C(/apis), given to
    every authenticated user by default).
  - Claims are allocated with the class as it is at allocation time; changing a class does not change devices
    already allocated.
seealso:
  - name: Dynamic Resource Allocation
    description: The concepts of DRA (DeviceClass, ResourceSlice, ResourceClaim).
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/
  - name: DeviceClass API reference
    description: The fields of resource.k8s.io/v1 DeviceClass.
    link: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/device-class-v1/
  - module: kubehw.devices.k8s_runtime_class
"""

EXAMPLES = r"""
- name: A class of every GPU the example driver publishes
  kubehw.devices.dra_device_class:
    name: gpu.example.com
    selectors:
      - device.driver == "gpu.example.com"

- name: Large NVIDIA GPUs only, with driver configuration, also serving pods that ask for nvidia.com/gpu
  kubehw.devices.dra_device_class:
    name: big-gpu
    selectors:
      - device.driver == "gpu.nvidia.com"
      - device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
    config:
      - driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: TimeSlicing
    extended_resource_name: nvidia.com/gpu

- name: Remove the class
  kubehw.devices.dra_device_class:
    name: big-gpu
    state: absent
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made).
  returned: always
  type: bool
action:
  description:
    - What the task did (in check mode, would do). V(created), V(updated), V(deleted), V(none) (already as
      described, or absent), or V(skipped) (a DeviceClass someone else made, left unchanged; see O(adopt)).
  returned: always
  type: str
  sample: created
api_version:
  description: The C(resource.k8s.io) version the module talked to (always C(resource.k8s.io/v1)).
  returned: when the API group is served
  type: str
  sample: resource.k8s.io/v1
device_class:
  description:
    - The DeviceClass as the server stored it after the task; in check mode, as the server's dry run answered
      (or the live object for a predicted delete). None when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": "gpu.example.com", "labels": {"app.kubernetes.io/managed-by": "kubehw.devices"}},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}
changed_paths:
  description: JSON pointers of the fields of an existing DeviceClass that differed from the task.
  returned: when an existing DeviceClass differs
  type: list
  elements: str
  sample: ["/spec/selectors"]
cel_validation:
  description:
    - Who checked the CEL selectors. V(server) (the apiserver, when it stored the class) or V(server dry run)
      (check mode), preceded by V(local syntax check (cel-python) and ) when that library is installed on the
      controller.
  returned: with O(state=present)
  type: str
  sample: local syntax check (cel-python) and server
diff:
  description: The DeviceClass before and after, when run with C(--diff).
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import run_object_module
# The DeviceClass code lives in module_utils so other modules (dra_driver_deploy) manage classes with it too.
from ansible_collections.kubehw.devices.plugins.module_utils._dra import DraApi
from ansible_collections.kubehw.devices.plugins.module_utils._dra_device_class import (
    DeviceClassTask,
    build_device_class,
)


def argument_spec():
    spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        selectors=dict(type="list", elements="str"),
        config=dict(type="list", elements="dict", options=dict(
            driver=dict(type="str", required=True),
            parameters=dict(type="dict", required=True),
        )),
        extended_resource_name=dict(type="str"),
        labels=dict(type="dict"),
        adopt=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    run_object_module(module, build_device_class, InputRefused,
                      lambda: DeviceClassTask(DraApi(KubeClient(module)), module.params, module.check_mode),
                      invalid_suffix=". Nothing was sent to the cluster.")


if __name__ == "__main__":
    main()
