# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation: the DeviceClass task (``dra_device_class``, and any module that manages one):
its input, the comparison with the live class and the writes.

Private to the collection: the interface may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubehw.devices.plugins.module_utils import _dra_validation
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, TaskFailed
from ansible_collections.kubehw.devices.plugins.module_utils._dra import GROUP
from ansible_collections.kubehw.devices.plugins.module_utils._dra_validation import (
    DEVICE_CONFIG_MAX,
    DEVICE_SELECTORS_MAX,
    cel_problem,
    device_class_name_problem,
    driver_name_problem,
    extended_name_problem,
    parameters_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import escape_pointer
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ObjectTask,
    label_map,
    update_body,
)


# -- DeviceClasses: the task's input, comparison and writes (dra_device_class, and any module that manages one) --
# Other modules (dra_driver_deploy) call manage_device_class(DraApi(client), params, check_mode) with the same
# params as dra_device_class's options; it raises InputRefused before any request for a bad input.

DEVICE_CLASSES = "deviceclasses"
DEVICE_CLASS_SPEC_FIELDS = ("selectors", "config", "extendedResourceName")
GATE_MESSAGE = ("the apiserver dropped spec.extendedResourceName %r from %s: it needs Kubernetes 1.34 or later with "
                "the DRAExtendedResource feature gate on (beta and on by default from 1.36). Nothing was stored.")


def _device_class_labels(mapping):
    out = label_map(mapping, "labels", InputRefused)
    if MANAGED_BY_LABEL in out:
        raise InputRefused("labels must not set %r: the module owns it (it marks what it created)"
                           % MANAGED_BY_LABEL)
    out[MANAGED_BY_LABEL] = MANAGED_BY
    return out


def build_device_class(params, cel_compile=None):
    """Validate a DeviceClass task's input (dra_device_class's options: name, state, selectors, config,
    extended_resource_name, labels); return the DeviceClass (v1 shape) it describes, None for state=absent."""
    name = params["name"]
    problem = device_class_name_problem(name)
    if problem:
        raise InputRefused("name %r %s" % (name, problem))
    if params.get("state", "present") == "absent":
        return None
    spec = {}
    selectors = params.get("selectors") or []
    if len(selectors) > DEVICE_SELECTORS_MAX:
        raise InputRefused("selectors has %d entries; the API allows at most %d"
                           % (len(selectors), DEVICE_SELECTORS_MAX))
    for index, expression in enumerate(selectors):
        problem = cel_problem(expression, compile_fn=cel_compile)
        if problem:
            raise InputRefused("selectors[%d] %r %s" % (index, expression, problem))
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    config = params.get("config") or []
    if len(config) > DEVICE_CONFIG_MAX:
        raise InputRefused("config has %d entries; the API allows at most %d" % (len(config), DEVICE_CONFIG_MAX))
    entries = []
    for index, entry in enumerate(config):
        problem = driver_name_problem(entry.get("driver"))
        if problem:
            raise InputRefused("config[%d].driver %r %s" % (index, entry.get("driver"), problem))
        problem = parameters_problem(entry.get("parameters"))
        if problem:
            raise InputRefused("config[%d].parameters %s" % (index, problem))
        entries.append({"opaque": {"driver": entry["driver"], "parameters": copy.deepcopy(entry["parameters"])}})
    if entries:
        spec["config"] = entries
    extended = params.get("extended_resource_name")
    if extended is not None:
        problem = extended_name_problem(extended)
        if problem:
            raise InputRefused("extended_resource_name %r %s" % (extended, problem))
        spec["extendedResourceName"] = extended
    return {"apiVersion": "%s/v1" % GROUP, "kind": "DeviceClass",
            "metadata": {"name": name, "labels": _device_class_labels(params.get("labels"))}, "spec": spec}


def _canonical(value):
    # Parameters are data: compare them as JSON with sorted keys; empty lists and absent fields are the same.
    return json.dumps(value or None, sort_keys=True)


def device_class_differences(desired, live):
    """JSON pointers where the live DeviceClass (v1 shape) differs from the one the task describes."""
    paths = []
    want, have = desired.get("spec") or {}, live.get("spec") or {}
    for field in DEVICE_CLASS_SPEC_FIELDS:
        if _canonical(want.get(field)) != _canonical(have.get(field)):
            paths.append("/spec/%s" % field)
    live_labels = (live.get("metadata") or {}).get("labels") or {}
    for key, value in sorted(desired["metadata"]["labels"].items()):
        if live_labels.get(key) != value:
            paths.append("/metadata/labels/%s" % escape_pointer(key))
    return paths


def device_class_replace_body(desired, live):
    """A PUT body: our spec (whole), our labels over the live metadata, guarded by its resourceVersion."""
    body = update_body(desired, live)
    body["spec"] = copy.deepcopy(desired.get("spec") or {})
    return body


class DeviceClassTask(ObjectTask):
    """One DeviceClass: check that resource.k8s.io/v1 is served, then the ObjectTask skeleton; every request through
    ``api`` (a DraApi). Check mode sends creates and updates as server-side dry runs; a delete is predicted."""

    kind = "DeviceClass"
    result_key = "device_class"

    def __init__(self, api, params, check_mode):
        super(DeviceClassTask, self).__init__(params["name"], params, check_mode)
        self.api = api
        self.version = None
        self.wants = True

    def fresh_result(self):
        result = super(DeviceClassTask, self).fresh_result()
        result["api_version"] = "%s/%s" % (GROUP, self.version)
        if self.wants:
            result["cel_validation"] = "local syntax check (cel-python) and server" if _dra_validation.HAS_CEL else "server"
            if self.check_mode:
                result["cel_validation"] += " dry run"
        return result

    def run(self, desired):
        # A DraApi that has discovered (dra_driver_deploy's, before its classes) keeps its answer: one GET /apis a run
        self.version = self.api.version or self.api.discover()
        self.wants = desired is not None
        super(DeviceClassTask, self).run(desired)

    def read(self):
        return self.api.get(DEVICE_CLASSES, self.name, what="read " + self.label)

    def differences(self, desired, live):
        return device_class_differences(desired, live)

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

    def create(self, desired):
        body = desired
        self._write("created", desired, lambda dry: self.api.create(
            DEVICE_CLASSES, body, what=("validate (dry run) " if dry else "create ") + self.label, dry_run=dry))

    def update(self, desired, live, paths):
        body = device_class_replace_body(desired, live)
        self.set_diff(live, body)
        self._write("updated", desired, lambda dry: self.api.replace(
            DEVICE_CLASSES, self.name, body,
            what=("validate (dry run) an update of " if dry else "replace ") + self.label, dry_run=dry))

    def delete(self, live):
        self.result.update(action="deleted", changed=True, device_class=None)
        if self.check_mode:
            return
        if not self.api.delete(DEVICE_CLASSES, self.name, (live.get("metadata") or {}).get("uid"),
                               what="delete " + self.label):
            # Someone else deleted it in between: not our change.
            self.result.update(action="none", changed=False)


def manage_device_class(api, params, check_mode=False):
    """Bring one DeviceClass to what ``params`` (dra_device_class's options: name, state, selectors, config,
    extended_resource_name, labels, adopt) describe, through ``api`` (a DraApi on a KubeClient).

    Returns the finished DeviceClassTask: ``.result`` (changed, action, device_class, api_version, changed_paths,
    cel_validation), ``.diff`` (before/after) and ``.warnings`` (for module.warn). Raises InputRefused
    before any request for a bad input, KubeHwError or TaskFailed for what the cluster answered.
    """
    desired = build_device_class(params)
    task = DeviceClassTask(api, params, check_mode)
    task.run(desired)
    return task
