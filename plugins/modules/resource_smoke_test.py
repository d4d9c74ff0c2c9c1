#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: resource_smoke_test
short_description: Prove that pods can request an extended resource, with a pod that is always cleaned up
version_added: 0.1.0
description:
  - Creates one pod that requests O(count) units of O(resource) (as a limit, which the apiserver
    copies into requests), waits until the scheduler binds it or reports why it cannot, optionally
    waits for it to finish and collects its log, and deletes it in every case.
  - Every pod of a run carries the label C(kubehw.devices/smoke-test-run) with a value unique to the run.
    When the answer to the create is lost (a 5xx or a dropped connection after the apiserver may have
    stored the pod) the module looks the pod up by that label instead of creating a second one, and the
    clean-up deletes every pod carrying it, so no pod of the run is left holding a device.
  - The pod has C(activeDeadlineSeconds) (O(timeout), twice with O(wait_for=completed), plus 60 seconds), so
    even if the controller dies before the clean-up the kubelet stops a running pod and frees the device.
  - The answer tells whether the resource is schedulable, not only advertised.
  - Makes no lasting change, so it always reports C(changed=false). In check mode it creates nothing.
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details: Nothing is created in check mode; the result says the test was skipped.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  resource:
    description:
      - Extended-resource name to request, for example C(nvidia.com/gpu) or C(example.com/dongle).
    type: str
    required: true
  count:
    description:
      - How many units the pod requests.
    type: int
    default: 1
  node:
    description:
      - Pin the pod to this node, by a required node affinity on the node's name (C(matchFields) on
        C(metadata.name), as the DaemonSet controller pins its pods). The C(kubernetes.io/hostname) label is
        not used because it differs from the node name under C(--hostname-override) and on some clouds.
        By default any node may take the pod.
    type: str
  namespace:
    description:
      - Namespace of the pod.
    type: str
    default: default
  name_prefix:
    description:
      - Prefix of the pod's generated name.
    type: str
    default: kubehw-smoke-
  image:
    description:
      - Container image of the pod.
    type: str
    default: registry.k8s.io/pause:3.10
  command:
    description:
      - Command of the container, for example V([nvidia-smi, -L]). Without it the image's entrypoint runs.
    type: list
    elements: str
  tolerations:
    description:
      - Tolerations of the pod, for example for a C(nvidia.com/gpu:NoSchedule) taint.
    type: list
    elements: dict
    default: []
  runtime_class_name:
    description:
      - Runtime class of the pod (C(runtimeClassName)), for example V(nvidia), the RuntimeClass the
        C(kubehw.devices.nvidia_container_toolkit) role creates. An image such as CUDA's needs the NVIDIA runtime to
        see the GPU when it is not the node's default runtime.
      - Left out or empty, the pod uses the node's default runtime.
      - Must be a DNS-1123 subdomain; the RuntimeClass must exist, or the apiserver refuses the pod.
    type: str
  expect:
    description:
      - V(scheduled) fails the task unless the pod is bound to a node.
      - V(unschedulable) fails the task unless the scheduler refuses the pod (for example to show that a
        request larger than any node's allocatable stays Pending).
      - V(any) reports the outcome without judging it.
    type: str
    choices: [scheduled, unschedulable, any]
    default: scheduled
  wait_for:
    description:
      - V(scheduled) returns once the pod is bound (or refused).
      - V(completed) also waits for the pod to finish (C(Succeeded) or C(Failed)) and returns its log;
        use it with a O(command) that exits, such as C(nvidia-smi).
    type: str
    choices: [scheduled, completed]
    default: scheduled
  timeout:
    description:
      - Seconds to wait for the outcome.
    type: int
    default: 120
"""

EXAMPLES = r"""
- name: A pod can get one GPU on gpu-1, and nvidia-smi runs in it
  kubehw.devices.resource_smoke_test:
    resource: nvidia.com/gpu
    node: gpu-1
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    command: [nvidia-smi, -L]
    runtime_class_name: nvidia
    tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule
    wait_for: completed

- name: Asking for more dongles than any node has stays Pending
  kubehw.devices.resource_smoke_test:
    resource: example.com/dongle
    count: 100
    expect: unschedulable
  register: too_many

- name: Show the scheduler's reason
  ansible.builtin.debug:
    msg: "{{ too_many.message }}"
"""

RETURN = r"""
pod:
  description: Name of the pod that was created and deleted.
  returned: unless check mode
  type: str
  sample: kubehw-smoke-x7k2p
run_id:
  description: Value of the C(kubehw.devices/smoke-test-run) label on the pod of this run.
  returned: unless check mode
  type: str
  sample: 3f2a9c0e7d1b4a55
scheduled:
  description: Whether the scheduler bound the pod.
  returned: unless check mode
  type: bool
node:
  description: Node the pod was bound to.
  returned: when scheduled
  type: str
  sample: dongle-1
phase:
  description: Last phase of the pod.
  returned: unless check mode
  type: str
  sample: Succeeded
reason:
  description: Reason of the C(PodScheduled) condition when the pod was refused (C(Unschedulable)).
  returned: when not scheduled
  type: str
message:
  description: The scheduler's message when the pod was refused.
  returned: when not scheduled
  type: str
  sample: "0/3 nodes are available: 1 Insufficient example.com/dongle, ..."
log:
  description: The container's log, with O(wait_for=completed).
  returned: when completed
  type: str
deleted:
  description: Whether every pod of the run was deleted at the end.
  returned: unless check mode
  type: bool
skipped_reason:
  description: Why nothing ran.
  returned: in check mode
  type: str
"""

import copy
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import (
    AUTH_ARG_SPEC,
    KubeClient,
    KubeHwError,
    protect_kubeconfig_secrets,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import is_dns1123_subdomain
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
)


RUN_LABEL = "kubehw.devices/smoke-test-run"
# Added to the waits in activeDeadlineSeconds: time for the module's own requests and clean-up.
DEADLINE_MARGIN = 60


def active_deadline(params):
    waits = 2 if params["wait_for"] == "completed" else 1
    return params["timeout"] * waits + DEADLINE_MARGIN


def pod_manifest(params, run_id):
    container = dict(
        name="smoke",
        image=params["image"],
        resources=dict(limits={params["resource"]: str(params["count"])}),
    )
    if params.get("command"):
        container["command"] = params["command"]
    spec = dict(restartPolicy="Never", containers=[container], tolerations=params["tolerations"],
                terminationGracePeriodSeconds=0, activeDeadlineSeconds=active_deadline(params))
    if params.get("runtime_class_name"):
        spec["runtimeClassName"] = params["runtime_class_name"]
    if params.get("node"):
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [params["node"]]}]}]}}}
    return dict(
        apiVersion="v1", kind="Pod",
        metadata=dict(generateName=params["name_prefix"], namespace=params["namespace"],
                      labels={"app.kubernetes.io/managed-by": "kubehw.devices",
                              "app.kubernetes.io/component": "smoke-test",
                              RUN_LABEL: run_id}),
        spec=spec,
    )


def run_pods(client, namespace, run_id):
    """Every pod of this run (the label is unique to it), oldest first."""
    listing = client.list_all(client.core.list_namespaced_pod, namespace, label_selector="%s=%s" % (RUN_LABEL, run_id),
                              what="list the smoke-test pods of run %s in namespace %s" % (run_id, namespace))
    return sorted(listing["items"], key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                   p["metadata"]["name"]))


def create_pod(client, params, run_id):
    """Create the pod once: after a lost answer, find it by the run label instead of creating another."""
    namespace = params["namespace"]

    def find():
        pods = run_pods(client, namespace, run_id)
        return pods[0] if pods else None

    return client.create_json(client.core.create_namespaced_pod, namespace, pod_manifest(params, run_id), find=find,
                              what="create the smoke-test pod in namespace %s" % namespace)


def clean_up(module, client, namespace, run_id, name, result):
    """Delete the pod and any other pod of the run (a create whose answer was lost may have stored one)."""
    names = set([name]) if name else set()
    try:
        names.update(p["metadata"]["name"] for p in run_pods(client, namespace, run_id))
    except KubeHwError as err:
        module.warn("Could not list the smoke-test pods of run %s: %s" % (run_id, err.msg))
    deleted = True
    for pod in sorted(names):
        try:
            client.call(client.core.delete_namespaced_pod, pod, namespace, grace_period_seconds=0,
                        what="delete the smoke-test pod %s/%s" % (namespace, pod))
        except KubeHwError as err:
            if err.status != 404:
                deleted = False
                module.warn("The smoke-test pod %s/%s could not be deleted: %s (delete the pods labelled %s=%s)"
                            % (namespace, pod, err.msg, RUN_LABEL, run_id))
    result["deleted"] = deleted


def scheduling_outcome(pod):
    """('scheduled', node) / ('unschedulable', condition) / None while undecided."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return "scheduled", node
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            return "unschedulable", cond
    return None


def finished(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def run(module, client):
    params = module.params
    namespace = params["namespace"]
    run_id = uuid.uuid4().hex[:16]
    try:
        created = create_pod(client, params, run_id)
    except KubeHwError:
        # the create may have been stored although it failed: leave no pod of this run behind
        clean_up(module, client, namespace, run_id, None, {})
        raise
    name = created["metadata"]["name"]
    result = dict(changed=False, pod=name, run_id=run_id, scheduled=False, deleted=False)
    selector = "metadata.name=%s" % name
    try:
        pods = client.watch(client.core.list_namespaced_pod, lambda objs: any(
            scheduling_outcome(p) for p in objs.values()), params["timeout"],
            what="see pod %s/%s scheduled" % (namespace, name), namespace=namespace, field_selector=selector)
        pod = list(pods.values())[0]
        outcome, detail = scheduling_outcome(pod)
        result["phase"] = (pod.get("status") or {}).get("phase")
        if outcome == "scheduled":
            result.update(scheduled=True, node=detail)
            if params["wait_for"] == "completed":
                pods = client.watch(client.core.list_namespaced_pod, lambda objs: any(
                    finished(p) for p in objs.values()), params["timeout"],
                    what="see pod %s/%s finish" % (namespace, name), namespace=namespace, field_selector=selector)
                result["phase"] = list(pods.values())[0]["status"]["phase"]
                try:
                    log = client.call(client.core.read_namespaced_pod_log, name, namespace,
                                      what="read the log of pod %s/%s" % (namespace, name))
                    result["log"] = log if isinstance(log, str) else ""
                except KubeHwError as err:
                    # The outcome is known from the phase; a log we cannot read is worth a warning only.
                    module.warn(err.msg)
                    result["log"] = ""
        else:
            result.update(reason=detail.get("reason"), message=detail.get("message"))
    finally:
        clean_up(module, client, namespace, run_id, name, result)
    return result


def main():
    argument_spec = copy.deepcopy(AUTH_ARG_SPEC)
    argument_spec.update(
        resource=dict(type="str", required=True),
        count=dict(type="int", default=1),
        node=dict(type="str"),
        namespace=dict(type="str", default="default"),
        name_prefix=dict(type="str", default="kubehw-smoke-"),
        image=dict(type="str", default="registry.k8s.io/pause:3.10"),
        command=dict(type="list", elements="str"),
        tolerations=dict(type="list", elements="dict", default=[]),
        runtime_class_name=dict(type="str"),
        expect=dict(type="str", choices=["scheduled", "unschedulable", "any"], default="scheduled"),
        wait_for=dict(type="str", choices=["scheduled", "completed"], default="scheduled"),
        timeout=dict(type="int", default=120),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    protect_kubeconfig_secrets(module)
    params = module.params
    if params["count"] < 1:
        module.fail_json(msg="count must be a whole number of at least 1, got %s" % params["count"])
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be a whole number of seconds of at least 1, got %s" % params["timeout"])
    if params["runtime_class_name"] and not is_dns1123_subdomain(params["runtime_class_name"]):
        module.fail_json(msg="invalid runtime_class_name %r: must be a DNS-1123 subdomain (lowercase letters, digits, "
                         "'-' and '.', starting and ending with a letter or digit, at most 253 characters)"
                         % params["runtime_class_name"])
    problem = extended_resource_name_problem(params["resource"])
    if problem:
        module.fail_json(msg="invalid extended resource name %r: %s" % (params["resource"], problem))
    if module.check_mode:
        module.exit_json(changed=False, skipped_reason="check mode: no pod was created")
    try:
        client = KubeClient(module)
        result = run(module, client)
    except KubeHwError as err:
        module.fail_json(msg=err.msg, status=err.status, reason=err.reason, changed=False)
    if params["expect"] == "scheduled" and not result["scheduled"]:
        module.fail_json(msg="The pod requesting %s %s was not scheduled: %s" % (
            params["count"], params["resource"], result.get("message") or "no reason given"), **result)
    if params["expect"] == "unschedulable" and result["scheduled"]:
        module.fail_json(msg="The pod requesting %s %s was expected to stay Pending but was bound to %s" % (
            params["count"], params["resource"], result["node"]), **result)
    if params["wait_for"] == "completed" and result.get("phase") == "Failed":
        module.fail_json(msg="The smoke-test pod failed on %s; its log: %s" % (
            result.get("node"), result.get("log", "")), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
