#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_runtime_class
short_description: Create, update or delete a Kubernetes RuntimeClass
version_added: 1.0.0
description:
  - Manages one cluster-scoped C(RuntimeClass) (C(node.k8s.io/v1)), the name pods give in C(runtimeClassName)
    to run on a runtime handler the nodes configure, such as the C(nvidia) runtime that the
    C(kubehw.devices.nvidia_container_toolkit) role adds to containerd, CRI-O and docker.
  - Reads the RuntimeClass first and writes only when it differs from the task, so a second run with the same
    input sends no write. An update is a C(PUT) carrying the live C(resourceVersion); labels and annotations
    others added are kept.
  - O(node_selector), O(tolerations) and O(overhead) describe the RuntimeClass's whole C(scheduling) and
    C(overhead); leaving one out removes it from a RuntimeClass this module manages.
  - C(handler) is immutable in the Kubernetes API (an update that changes it is refused with
    C(422 Invalid) C(field is immutable)). A RuntimeClass with another handler is therefore never updated in
    place; the task fails and says so, unless O(recreate=true) allows deleting it and creating it again.
  - The RuntimeClass carries the label C(app.kubernetes.io/managed-by=kubehw.devices). One of that name
    without it was made by someone else (a GPU operator, a manifest), so it is left as it is, with a warning
    naming what differs, for O(state=present) and O(state=absent) alike, unless O(adopt=true).
  - Every input is validated before the first request, as the API would (C(handler) a DNS label, labels,
    node selector, tolerations, quantities); a bad value fails with a message naming it and the rule.
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details: Reads the RuntimeClass and reports what would change (the action, the paths, the predicted object); sends no write.
  diff_mode:
    support: full
    details: The RuntimeClass before and after, without server-populated metadata.
  idempotent:
    support: full
options:
  name:
    description:
      - Name of the RuntimeClass, the value pods give in C(runtimeClassName). A lowercase DNS subdomain.
    type: str
    required: true
  state:
    description:
      - V(present) creates the RuntimeClass or brings it to what the task describes.
      - V(absent) deletes it if this module manages it. One that does not exist is not an error.
    type: str
    choices: [present, absent]
    default: present
  handler:
    description:
      - The runtime handler the CRI implementation on the nodes runs pods of this class with, for example
        V(nvidia) (containerd's C(plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia), CRI-O's
        C(crio.runtime.runtimes.nvidia)).
      - A lowercase RFC 1123 DNS label (V(a-z), V(0-9) and V(-), at most 63 characters), as the API requires.
        Immutable once created; see O(recreate).
      - Required with O(state=present).
    type: str
  node_selector:
    description:
      - Node labels a node must have to run pods of this class (C(scheduling.nodeSelector)); the RuntimeClass
        admission adds them to each pod's node selector. Values are strings.
    type: dict
  tolerations:
    description:
      - Tolerations added to each pod of this class (C(scheduling.tolerations)), for example of the taint that
        keeps other pods off GPU nodes.
    type: list
    elements: dict
    suboptions:
      key:
        description: Taint key the toleration matches; empty matches every key (then O(tolerations[].operator=Exists)).
        type: str
      operator:
        description: V(Equal) (the API's default) matches O(tolerations[].value); V(Exists) matches any value.
        type: str
        choices: [Equal, Exists]
      value:
        description: Taint value to match with V(Equal).
        type: str
      effect:
        description: Taint effect to match; empty matches every effect.
        type: str
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
      toleration_seconds:
        description: With O(tolerations[].effect=NoExecute), how long a pod stays bound after the taint appears.
        type: int
        aliases: [tolerationSeconds]
  overhead:
    description:
      - Resources a pod of this class uses beyond its containers' requests (C(overhead.podFixed)), as resource
        name to quantity, for example V(cpu) V(250m) and V(memory) V(120Mi). The scheduler and the kubelet add it to
        every pod of this class. Quantities are compared by value (V(0.25) equals the stored C(250m)).
    type: dict
  labels:
    description:
      - Labels of the RuntimeClass. C(app.kubernetes.io/managed-by) is the module's own and may not be set.
    type: dict
  recreate:
    description:
      - When the RuntimeClass exists with another handler, delete it and create it with O(handler). The
        apiserver refuses to change a handler in place.
      - Pods already running keep the runtime they started with. A pod created between the delete and the
        create is refused by the apiserver (its RuntimeClass does not exist for that moment).
      - Without it, a different handler fails the task before any write, naming both handlers.
    type: bool
    default: false
  adopt:
    description:
      - Manage a RuntimeClass of this name that this module did not create (it lacks the label
        C(app.kubernetes.io/managed-by=kubehw.devices)), updating it (adding the label) or, with O(state=absent),
        deleting it. Without it such a RuntimeClass is left unchanged and the task warns.
    type: bool
    default: false
notes:
  - The identity needs C(get), C(create), C(update) and C(delete) on C(runtimeclasses) in the API group
    C(node.k8s.io) (cluster-scoped, so a ClusterRole).
  - C(scheduling) and C(overhead) are copied into pods when they are created; changing them does not change
    running pods.
seealso:
  - name: Runtime Class
    description: What a RuntimeClass is and how pods select one.
    link: https://kubernetes.io/docs/concepts/containers/runtime-class/
  - name: RuntimeClass API reference
    description: The fields of node.k8s.io/v1 RuntimeClass.
    link: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/runtime-class-v1/
  - module: kubehw.devices.device_plugin_deploy
"""

EXAMPLES = r"""
- name: Let pods ask for the NVIDIA runtime with runtimeClassName nvidia
  kubehw.devices.k8s_runtime_class:
    name: nvidia
    handler: nvidia

- name: Only on GPU nodes, tolerating their taint, with the runtime's own overhead
  kubehw.devices.k8s_runtime_class:
    name: nvidia
    handler: nvidia
    node_selector:
      feature.node.kubernetes.io/pci-10de.present: "true"
    tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule
    overhead:
      cpu: 100m
      memory: 64Mi

- name: Point the class at another handler (deletes and creates it again)
  kubehw.devices.k8s_runtime_class:
    name: nvidia
    handler: nvidia-cdi
    recreate: true

- name: Remove the RuntimeClass this module created
  kubehw.devices.k8s_runtime_class:
    name: nvidia
    state: absent
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made).
  returned: always
  type: bool
action:
  description:
    - What the task did (in check mode, would do). V(created), V(updated), V(recreated) (deleted and created
      again for a new handler), V(deleted), V(none) (already as described, or absent), or V(skipped) (a
      RuntimeClass someone else made, left unchanged; see O(adopt)).
  returned: always
  type: str
  sample: created
runtime_class:
  description: The RuntimeClass as the server stored it after the task (predicted in check mode); none when absent.
  returned: always
  type: dict
  sample: {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": "nvidia",
           "metadata": {"name": "nvidia", "labels": {"app.kubernetes.io/managed-by": "kubehw.devices"}}}
changed_paths:
  description: JSON pointers of the fields of an existing RuntimeClass that differed from the task.
  returned: when an existing RuntimeClass differs
  type: list
  elements: str
  sample: ["/scheduling/nodeSelector"]
diff:
  description: The RuntimeClass before and after, when run with C(--diff).
  returned: when diff mode is on and something changed
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError, TaskFailed
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ObjectTask,
    label_map,
    run_object_module,
    to_text as _to_text,
    update_body,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    label_key_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    STANDARD_RESOURCES,
    escape_pointer,
    extended_resource_name_problem,
    parse_quantity,
    quantity_value,
)

API_VERSION = "node.k8s.io/v1"
TOLERATION_FIELDS = (("key", "key"), ("operator", "operator"), ("value", "value"), ("effect", "effect"),
                     ("toleration_seconds", "tolerationSeconds"))


# -- validation ------------------------------------------------------------------------------------

def _tolerations(entries):
    """Tolerations in the API's form, checked as the apiserver checks them; empty fields left out."""
    out = []
    seen = {}
    for index, entry in enumerate(entries or []):
        tol = {}
        for option, field in TOLERATION_FIELDS:
            value = entry.get(option)
            if value is not None and value != "":
                tol[field] = value
        where = "tolerations[%d]" % index
        key = tol.get("key")
        operator = tol.get("operator", "Equal")
        problem = label_key_problem(key) if key is not None else None
        if problem:
            raise InputRefused("%s key %r: %s" % (where, key, problem))
        if key is None and operator != "Exists":
            raise InputRefused("%s: operator must be Exists when key is empty (it then matches every taint)"
                               % where)
        if operator == "Exists" and "value" in tol:
            raise InputRefused("%s value %r: value must be empty when operator is Exists" % (where, tol["value"]))
        if operator == "Equal" and "value" in tol and (len(tol["value"]) > 63 or not LABEL_VALUE_RE.match(tol["value"])):
            raise InputRefused("%s value %r must be a valid label value (at most 63 characters of letters, "
                               "digits, '-', '_' or '.', starting and ending with a letter or digit)"
                               % (where, tol["value"]))
        if "tolerationSeconds" in tol and tol.get("effect") != "NoExecute":
            raise InputRefused("%s: toleration_seconds %d needs effect NoExecute, not %s"
                               % (where, tol["tolerationSeconds"], tol.get("effect") or "any effect"))
        identity = (key or "", operator, tol.get("effect") or "")
        if identity in seen:
            # The RuntimeClass validation refuses two tolerations with the same key, operator and effect.
            raise InputRefused("%s repeats tolerations[%d] (same key, operator and effect)"
                               % (where, seen[identity]))
        seen[identity] = index
        out.append(tol)
    return out


def _overhead(mapping):
    out = {}
    for name, value in (mapping or {}).items():
        if "/" in name:
            problem = extended_resource_name_problem(name)
            if problem:
                raise InputRefused("overhead resource %r: %s" % (name, problem))
        # an overhead is compute resources: the standard ones but "pods", and huge pages
        elif name == "pods" or (name not in STANDARD_RESOURCES and not name.startswith("hugepages-")):
            raise InputRefused("overhead resource %r must be cpu, memory, ephemeral-storage, "
                               "hugepages-<size> or a domain-qualified name" % name)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise InputRefused("overhead %s %r must be a quantity such as 250m or 64Mi" % (name, value))
        text = _to_text(value)
        try:
            amount = parse_quantity(text)
        except InputRefused as err:
            raise InputRefused("overhead %s: %s" % (name, err))
        if amount < 0:
            raise InputRefused("overhead %s %r must be greater than or equal to 0" % (name, text))
        if "/" in name and amount.denominator != 1:
            raise InputRefused("overhead %s %r must be a whole number (an extended resource)" % (name, text))
        out[name] = text
    return out


def build(params):
    """Validate the task's input; return the RuntimeClass it describes (None for state=absent)."""
    name = params["name"]
    if not name or len(name) > 253 or not DNS1123_SUBDOMAIN_RE.match(name):
        raise InputRefused(
            "name %r must be a lowercase RFC 1123 DNS subdomain (a-z, 0-9, '-' and '.', at most 253 characters, "
            "starting and ending with a letter or digit)" % name)
    if params["state"] == "absent":
        return None
    handler = params["handler"]
    if len(handler) > 63 or not DNS1123_LABEL_RE.match(handler):
        raise InputRefused(
            "handler %r must be a lowercase RFC 1123 DNS label (a-z, 0-9 and '-', at most 63 characters, starting "
            "and ending with a letter or digit), as the RuntimeClass API requires" % handler)
    labels = label_map(params.get("labels"), "labels", InputRefused)
    if MANAGED_BY_LABEL in labels:
        raise InputRefused("labels must not set %r: the module owns it (it marks what it created)"
                           % MANAGED_BY_LABEL)
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    desired = {"apiVersion": API_VERSION, "kind": "RuntimeClass",
               "metadata": {"name": name, "labels": labels}, "handler": handler}
    scheduling = {}
    node_selector = label_map(params.get("node_selector"), "node_selector", InputRefused)
    if node_selector:
        scheduling["nodeSelector"] = node_selector
    tolerations = _tolerations(params.get("tolerations"))
    if tolerations:
        scheduling["tolerations"] = tolerations
    if scheduling:
        desired["scheduling"] = scheduling
    overhead = _overhead(params.get("overhead"))
    if overhead:
        desired["overhead"] = {"podFixed": overhead}
    return desired


# -- comparison ------------------------------------------------------------------------------------

def _stored_tolerations(obj):
    # The apiserver omits empty toleration fields when it answers.
    return [dict((k, v) for k, v in t.items() if v is not None and v != "")
            for t in ((obj.get("scheduling") or {}).get("tolerations") or [])]


def _same_quantities(want, have):
    if set(want) != set(have):
        return False
    return all(quantity_value(_to_text(want[k])) == quantity_value(_to_text(have[k])) for k in want)


def differences(desired, live):
    """JSON pointers where the live RuntimeClass differs from the one the task describes."""
    paths = []
    if live.get("handler") != desired["handler"]:
        paths.append("/handler")
    want_sched, have_sched = desired.get("scheduling") or {}, live.get("scheduling") or {}
    if (want_sched.get("nodeSelector") or {}) != (have_sched.get("nodeSelector") or {}):
        paths.append("/scheduling/nodeSelector")
    if _stored_tolerations(desired) != _stored_tolerations(live):
        paths.append("/scheduling/tolerations")
    if not _same_quantities((desired.get("overhead") or {}).get("podFixed") or {},
                            (live.get("overhead") or {}).get("podFixed") or {}):
        paths.append("/overhead/podFixed")
    live_labels = (live.get("metadata") or {}).get("labels") or {}
    for key, value in sorted(desired["metadata"]["labels"].items()):
        if live_labels.get(key) != value:
            paths.append("/metadata/labels/%s" % escape_pointer(key))
    return paths


# -- the task --------------------------------------------------------------------------------------

class RuntimeClassTask(ObjectTask):
    """One RuntimeClass: the ObjectTask skeleton with a handler that cannot change in place; every request through
    ``client``. Check mode reads and predicts, and writes nothing."""

    kind = "RuntimeClass"
    result_key = "runtime_class"

    def __init__(self, module, client):
        super(RuntimeClassTask, self).__init__(module.params["name"], module.params, module.check_mode)
        self.module = module
        self.client = client
        self.wrote = False

    def read(self):
        try:
            return self.client.call_json(self.client.node_api.read_runtime_class, self.name, what="read " + self.label)
        except KubeHwError as err:
            if err.status == 404:
                return None
            raise

    def differences(self, desired, live):
        return differences(desired, live)

    def run(self, desired):
        try:
            super(RuntimeClassTask, self).run(desired)
        finally:
            # A write made before a later failure (the delete of a recreate) is still a change.
            self.result["changed"] = self.result["changed"] or self.wrote

    def _plan(self, action, predicted):
        """Record what the task does; True when it is to be done now (not in check mode)."""
        self.result.update(action=action, runtime_class=predicted, changed=self.check_mode)
        return not self.check_mode

    def _written(self, obj=None):
        self.wrote = True
        self.result["changed"] = True
        return obj

    def create(self, desired):
        if self._plan("created", desired):
            self.result["runtime_class"] = self._create(desired)

    def update(self, desired, live, paths):
        if "/handler" in paths:
            if not self.params["recreate"]:
                raise TaskFailed(
                    "%s has handler %r and the task asks for handler %r, but handler is immutable (the apiserver "
                    "refuses the update: 422 Invalid, field is immutable). Set recreate: true to delete it and "
                    "create it again, or choose another name. Nothing was changed."
                    % (self.label, live.get("handler"), desired["handler"]))
            self.set_diff(live, desired)
            if self._plan("recreated", desired):
                self._delete(live)
                self.result["runtime_class"] = self._create(desired, after_delete=True)
            return
        body = update_body(desired, live)
        self.set_diff(live, body)
        if self._plan("updated", body):
            self.result["runtime_class"] = self._written(self.client.replace_json(
                self.client.node_api.replace_runtime_class, self.name, body, what="replace " + self.label))

    def delete(self, live):
        if self._plan("deleted", None) and not self._delete(live):
            # Someone else deleted it in between: not our change.
            self.result["action"] = "none"

    def _create(self, desired, after_delete=False):
        what = "create " + self.label
        if after_delete:
            what = "create %s again (it was deleted for the new handler)" % self.label
        return self._written(self.client.create_json(self.client.node_api.create_runtime_class, desired, what=what))

    def _delete(self, live):
        """Delete the RuntimeClass that was read (its uid as precondition); False when it was already gone."""
        try:
            self.client.call_json(self.client.node_api.delete_runtime_class, self.name,
                                  body={"preconditions": {"uid": live["metadata"].get("uid")}},
                                  what="delete " + self.label)
        except KubeHwError as err:
            if err.status == 404:
                return False
            raise
        self._written()
        return True


def argument_spec():
    spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        handler=dict(type="str"),
        node_selector=dict(type="dict"),
        tolerations=dict(type="list", elements="dict", options=dict(
            key=dict(type="str", no_log=False),
            operator=dict(type="str", choices=["Equal", "Exists"]),
            value=dict(type="str"),
            effect=dict(type="str", choices=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
            toleration_seconds=dict(type="int", aliases=["tolerationSeconds"]),
        )),
        overhead=dict(type="dict"),
        labels=dict(type="dict"),
        recreate=dict(type="bool", default=False),
        adopt=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("state", "present", ("handler",))],
        supports_check_mode=True,
    )
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    run_object_module(module, build, InputRefused, lambda: RuntimeClassTask(module, KubeClient(module)))


if __name__ == "__main__":
    main()
