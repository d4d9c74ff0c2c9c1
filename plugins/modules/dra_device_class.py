#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_device_class
short_description: Create, update or delete a Dynamic Resource Allocation DeviceClass
version_added: 0.2.0
description:
  - Manages one cluster-scoped C(DeviceClass) of the API group C(resource.k8s.io) (Dynamic Resource
    Allocation). A DeviceClass holds the CEL selectors a device must satisfy to be allocated through it, the opaque
    configuration passed to the driver for each such device, and the extended resource name that lets pods
    which still ask for, say, one C(nvidia.com/gpu) be served by a DRA driver.
  - Finds the version the apiserver serves by discovery, preferring C(v1) (Kubernetes 1.34 and later), then
    C(v1beta2) (1.33), then C(v1beta1) (1.32). A DeviceClass has the same fields in all three, so only its
    C(apiVersion) changes. Where none is served, the task fails before any write, naming the group and the
    Kubernetes version needed.
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
  description: The C(resource.k8s.io) version the module talked to, found by discovery.
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

import copy
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import (
    AUTH_ARG_SPEC,
    KubeClient,
    KubeHwError,
    protect_kubeconfig_secrets,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    TaskFailed,
    clean,
    to_text,
    update_body,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra import (
    DEVICE_CONFIG_MAX,
    DEVICE_SELECTORS_MAX,
    GROUP,
    HAS_CEL,
    DraApi,
    cel_problem,
    device_class_from_version,
    device_class_name_problem,
    device_class_to_version,
    driver_name_problem,
    extended_name_problem,
    parameters_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import escape_pointer
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    LABEL_VALUE_RE,
    label_key_problem,
)

PLURAL = "deviceclasses"
SPEC_FIELDS = ("selectors", "config", "extendedResourceName")
GATE_MESSAGE = ("the apiserver dropped spec.extendedResourceName %r from %s: it needs Kubernetes 1.34 or later with "
                "the DRAExtendedResource feature gate on (beta and on by default from 1.36). Nothing was stored.")


class DeviceClassSpecError(ValueError):
    """Invalid input: the message names the offending value and the rule it breaks."""


# -- validation ------------------------------------------------------------------------------------

def _labels(mapping):
    out = {}
    for key, value in (mapping or {}).items():
        problem = label_key_problem(key)
        if problem:
            raise DeviceClassSpecError("labels key %r: %s" % (key, problem))
        text = to_text(value)
        if len(text) > 63 or not LABEL_VALUE_RE.match(text):
            raise DeviceClassSpecError(
                "labels value %r of %r must be empty or at most 63 characters of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit" % (text, key))
        out[key] = text
    if MANAGED_BY_LABEL in out:
        raise DeviceClassSpecError("labels must not set %r: the module owns it (it marks what it created)"
                                   % MANAGED_BY_LABEL)
    out[MANAGED_BY_LABEL] = MANAGED_BY
    return out


def build(params, cel_compile=None):
    """Validate the task's input; return the DeviceClass (v1 shape) it describes, None for state=absent."""
    name = params["name"]
    problem = device_class_name_problem(name)
    if problem:
        raise DeviceClassSpecError("name %r %s" % (name, problem))
    if params["state"] == "absent":
        return None
    spec = {}
    selectors = params.get("selectors") or []
    if len(selectors) > DEVICE_SELECTORS_MAX:
        raise DeviceClassSpecError("selectors has %d entries; the API allows at most %d"
                                   % (len(selectors), DEVICE_SELECTORS_MAX))
    for index, expression in enumerate(selectors):
        problem = cel_problem(expression, compile_fn=cel_compile)
        if problem:
            raise DeviceClassSpecError("selectors[%d] %r %s" % (index, expression, problem))
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    config = params.get("config") or []
    if len(config) > DEVICE_CONFIG_MAX:
        raise DeviceClassSpecError("config has %d entries; the API allows at most %d" % (len(config), DEVICE_CONFIG_MAX))
    entries = []
    for index, entry in enumerate(config):
        problem = driver_name_problem(entry.get("driver"))
        if problem:
            raise DeviceClassSpecError("config[%d].driver %r %s" % (index, entry.get("driver"), problem))
        problem = parameters_problem(entry.get("parameters"))
        if problem:
            raise DeviceClassSpecError("config[%d].parameters %s" % (index, problem))
        entries.append({"opaque": {"driver": entry["driver"], "parameters": copy.deepcopy(entry["parameters"])}})
    if entries:
        spec["config"] = entries
    extended = params.get("extended_resource_name")
    if extended is not None:
        problem = extended_name_problem(extended)
        if problem:
            raise DeviceClassSpecError("extended_resource_name %r %s" % (extended, problem))
        spec["extendedResourceName"] = extended
    return {"apiVersion": "%s/v1" % GROUP, "kind": "DeviceClass",
            "metadata": {"name": name, "labels": _labels(params.get("labels"))}, "spec": spec}


# -- comparison ------------------------------------------------------------------------------------

def managed_here(obj):
    return ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def _canonical(value):
    # Parameters are data: compare them as JSON with sorted keys; empty lists and absent fields are the same.
    return json.dumps(value or None, sort_keys=True)


def differences(desired, live):
    """JSON pointers where the live DeviceClass (v1 shape) differs from the one the task describes."""
    paths = []
    want, have = desired.get("spec") or {}, live.get("spec") or {}
    for field in SPEC_FIELDS:
        if _canonical(want.get(field)) != _canonical(have.get(field)):
            paths.append("/spec/%s" % field)
    live_labels = (live.get("metadata") or {}).get("labels") or {}
    for key, value in sorted(desired["metadata"]["labels"].items()):
        if live_labels.get(key) != value:
            paths.append("/metadata/labels/%s" % escape_pointer(key))
    return paths


def replace_body(desired, live):
    """A PUT body: our spec (whole), our labels over the live metadata, guarded by its resourceVersion."""
    body = update_body(desired, live)
    body["spec"] = copy.deepcopy(desired.get("spec") or {})
    return body


# -- the task --------------------------------------------------------------------------------------

class DeviceClassTask(object):
    """One task: discover, read, compare, write if needed; every request through self.api."""

    def __init__(self, module, api):
        self.module = module
        self.api = api
        self.params = module.params
        self.check_mode = module.check_mode
        self.name = self.params["name"]
        self.label = 'DeviceClass "%s"' % self.name
        self.result = {}
        self.diff = None
        self.warnings = []

    def read(self):
        live = self.api.get(PLURAL, self.name, what="read " + self.label)
        return device_class_from_version(live) if live is not None else None

    def run(self, desired):
        version = self.api.discover()
        # A 409 means someone wrote in between (or created it first): read again and decide again.
        for _attempt in range(3):
            self.result = dict(changed=False, action="none", device_class=None,
                               api_version="%s/%s" % (GROUP, version))
            if desired is not None:
                self.result["cel_validation"] = (
                    "local syntax check (cel-python) and server" if HAS_CEL else "server")
                if self.check_mode:
                    self.result["cel_validation"] += " dry run"
            self.diff = None
            try:
                if desired is None:
                    self.absent()
                else:
                    self.present(desired)
                return
            except KubeHwError as err:
                if err.status != 409 or self.check_mode:
                    raise
        raise KubeHwError("Failed to write %s: it kept changing under us (409 Conflict three times)" % self.label,
                          status=409, reason="Conflict")

    def _set_diff(self, before, after):
        self.diff = dict(before_header=self.label, after_header=self.label,
                         before=clean(before) or {}, after=clean(after) or {})

    def _foreign(self, live, paths):
        differs = "; it differs from the task in %s" % ", ".join(paths) if paths else ""
        self.warnings.append(
            "%s exists but was not created by kubehw.devices (no label %s=%s): left unchanged%s. "
            "Set adopt: true to manage it." % (self.label, MANAGED_BY_LABEL, MANAGED_BY, differs))
        self.result.update(action="skipped", device_class=live)

    def _check_kept(self, desired, answer):
        """Fail when the server dropped extendedResourceName (its feature gate is off)."""
        wanted = (desired.get("spec") or {}).get("extendedResourceName")
        if wanted is not None and ((answer or {}).get("spec") or {}).get("extendedResourceName") != wanted:
            raise TaskFailed(GATE_MESSAGE % (wanted, self.label))

    def _write(self, action, desired, send):
        """Dry run first where the answer decides (check mode, extendedResourceName), then the write."""
        if self.check_mode or (desired.get("spec") or {}).get("extendedResourceName") is not None:
            answer = send(True)
            self._check_kept(desired, answer)
            if self.check_mode:
                self.result.update(action=action, changed=True, device_class=answer)
                return
        answer = send(False)
        self.result.update(action=action, changed=True, device_class=answer)
        self._check_kept(desired, answer)

    def present(self, desired):
        version = self.api.version
        live = self.read()
        if live is None:
            self._set_diff(None, desired)
            body = device_class_to_version(desired, version)
            self._write("created", desired, lambda dry: self.api.create(
                PLURAL, body, what=("validate (dry run) " if dry else "create ") + self.label, dry_run=dry))
            return
        paths = differences(desired, live)
        if not managed_here(live):
            if not self.params["adopt"]:
                self._foreign(live, [p for p in paths if p != "/metadata/labels/" + escape_pointer(MANAGED_BY_LABEL)])
                return
            self.warnings.append("%s was not created by kubehw.devices; adopt: true makes it managed by it" % self.label)
        self.result["device_class"] = live
        if not paths:
            return
        self.result["changed_paths"] = paths
        body = device_class_to_version(replace_body(desired, live), version)
        self._set_diff(live, body)
        self._write("updated", desired, lambda dry: self.api.replace(
            PLURAL, self.name, body, what=("validate (dry run) an update of " if dry else "replace ") + self.label,
            dry_run=dry))

    def absent(self):
        live = self.read()
        if live is None:
            return
        if not managed_here(live) and not self.params["adopt"]:
            self._foreign(live, [])
            return
        self._set_diff(live, None)
        self.result.update(action="deleted", changed=True, device_class=None)
        if self.check_mode:
            return
        if not self.api.delete(PLURAL, self.name, (live.get("metadata") or {}).get("uid"), what="delete " + self.label):
            # Someone else deleted it in between: not our change.
            self.result.update(action="none", changed=False)


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
    problem = None
    desired = None
    try:
        desired = build(module.params)
    except DeviceClassSpecError as err:
        problem = "Invalid input: %s. Nothing was sent to the cluster." % err
    if problem:
        # failed outside the except block: ansible-core 2.19 would attach the active exception's traceback
        module.fail_json(msg=problem, changed=False)

    task = None
    error = None
    try:
        task = DeviceClassTask(module, DraApi(KubeClient(module)))
        task.run(desired)
    except (KubeHwError, TaskFailed) as err:
        error = err
    result = dict(task.result) if task is not None else dict(changed=False)
    if task is not None and module._diff and task.diff:
        result["diff"] = task.diff
    for text in (task.warnings if task is not None else []):
        module.warn(text)
    if error is not None:
        module.fail_json(msg=error.msg, status=getattr(error, "status", None),
                         reason=getattr(error, "reason", None), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
