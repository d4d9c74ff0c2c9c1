#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: resource_smoke_test
short_description: Prove that pods can request an extended resource, with a pod that is always cleaned up
version_added: 1.0.0
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
  - With O(device_class) instead of O(resource) the proof goes through Dynamic Resource Allocation
    (C(resource.k8s.io/v1), Kubernetes 1.34 and later, checked by discovery as in M(kubehw.devices.dra_device_class)). The module
    creates a C(ResourceClaimTemplate) asking for O(count) devices of that DeviceClass and a pod that
    references it in C(spec.resourceClaims) and uses the claim in its container. It waits, watching, until the
    pod is bound and the claim made for it from the template is allocated on that node and reserved for the
    pod, and returns the allocated devices (driver, pool, device). A claim that cannot be allocated leaves
    the pod unschedulable, and the task reports the scheduler's message.
  - The template, and through it every claim made from it, carries the run label too. The clean-up deletes
    the pod, the claims of the run and the template, and waits (at most 30 seconds) until the claims are gone;
    a claim made from a template is owned by its pod and is deleted with it by the resource claim controller.
  - Every input is validated before the first request; a bad value fails with a message naming it and the rule.
  - Makes no lasting change, so it always reports C(changed=false). In check mode it creates nothing.
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.image_source
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
      - One of O(resource) and O(device_class) is required; they are mutually exclusive.
      - A name a DeviceClass maps with C(extendedResourceName) is served by DRA on nodes that do not
        advertise it, so this also proves the migration path of M(kubehw.devices.dra_device_class).
    type: str
  device_class:
    description:
      - Name of a DeviceClass (C(resource.k8s.io)) to request O(count) devices of, through a
        C(ResourceClaimTemplate) the module creates and deletes. A lowercase DNS subdomain.
      - The DeviceClass is read before anything is created; when it does not exist the module fails naming it
        and creates nothing (the apiserver would store the template, and the scheduler would only keep the pod
        Pending).
      - The identity then also needs C(create), C(list), C(watch) and C(delete) on C(resourceclaimtemplates)
        and C(resourceclaims) in O(namespace).
    type: str
  count:
    description:
      - How many units the pod requests (with O(device_class), how many devices the claim asks for,
        C(allocationMode=ExactCount)).
    type: int
    default: 1
  node:
    description:
      - Pin the pod to this node, by a required node affinity on the node's name (C(matchFields) on
        C(metadata.name), as the DaemonSet controller pins its pods). The C(kubernetes.io/hostname) label is
        not used because it differs from the node name under C(--hostname-override) and on some clouds.
        By default any node may take the pod.
      - Must be a node name (a lowercase RFC 1123 DNS subdomain); an empty or blank value is refused.
    type: str
  namespace:
    description:
      - Namespace of the pod (and of the claim template). A lowercase RFC 1123 DNS label; empty is refused.
    type: str
    default: default
  name_prefix:
    description:
      - Prefix of the pod's generated name (and of the claim template's). At most 58 characters that start a
        lowercase DNS subdomain; empty is refused.
    type: str
    default: kubehw-smoke-
  image:
    description:
      - Container image of the pod. The default is the C(pause) image of the collection's image list, named by tag
        and digest.
    type: str
    default: registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a
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

- name: A pod on gpu-1 gets one device of the DRA example driver through a claim template
  kubehw.devices.resource_smoke_test:
    device_class: gpu.example.com
    node: gpu-1
  register: dra_proof

- name: Show the device the scheduler allocated
  ansible.builtin.debug:
    msg: "{{ dra_proof.allocation[0].driver }} {{ dra_proof.allocation[0].pool }}/{{ dra_proof.allocation[0].device }}"
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
exit_code:
  description:
    - The exit code of the pod's container, with O(wait_for=completed); V(null) when the container never ran to an end.
    - When a pod with O(device_class) fails after its container ran, the message explains that the claim was
      prepared and names what injects the devices (the container runtime's CDI support).
  returned: when completed
  type: int
  sample: 0
deleted:
  description:
    - Whether every pod of the run was deleted at the end; with O(device_class), also its claims (gone, not
      only deleted) and its ResourceClaimTemplate.
  returned: unless check mode
  type: bool
api_version:
  description: The C(resource.k8s.io) version the module talked to (always C(resource.k8s.io/v1)).
  returned: with O(device_class)
  type: str
  sample: resource.k8s.io/v1
template:
  description: Name of the ResourceClaimTemplate the run created (and deleted).
  returned: with O(device_class)
  type: str
  sample: kubehw-smoke-4xk9q
claim:
  description: Name of the ResourceClaim made for the pod from the template.
  returned: with O(device_class), when the pod was scheduled
  type: str
  sample: kubehw-smoke-x7k2p-device-b8w2m
allocation:
  description: The devices allocated to the claim (C(status.allocation.devices.results)).
  returned: with O(device_class), when the pod was scheduled
  type: list
  elements: dict
  contains:
    request:
      description: The claim's request the device serves (always C(device)).
      type: str
    driver:
      description: The DRA driver of the device.
      type: str
      sample: gpu.example.com
    pool:
      description: The pool of the device (for node-local drivers usually the node's name).
      type: str
      sample: gpu-1
    device:
      description: The device's name in its ResourceSlice.
      type: str
      sample: gpu-0
claims_deleted:
  description: Whether the claims of the run were seen gone within 30 seconds after the clean-up.
  returned: with O(device_class)
  type: bool
skipped_reason:
  description: Why nothing ran.
  returned: in check mode
  type: str
"""

import copy
import re
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    object_name_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._images import image_source_spec, mirrored, reference
from ansible_collections.kubehw.devices.plugins.module_utils._images import check_image, check_image_registry
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import check_pull_secrets, check_tolerations, condition
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra import (
    GROUP as DRA_GROUP,
    SMOKE_REQUEST,
    DraApi,
    allocated_node,
    allocation_results,
    claim_template,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra_validation import device_class_name_problem


RUN_LABEL = "kubehw.devices/smoke-test-run"
# Added to the waits in activeDeadlineSeconds: time for the module's own requests and clean-up.
DEADLINE_MARGIN = 60


def active_deadline(params):
    waits = 2 if params["wait_for"] == "completed" else 1
    return params["timeout"] * waits + DEADLINE_MARGIN


# generateName: the apiserver appends 5 random characters to at most 58 of the prefix (63 - 5)
NAME_PREFIX_MAX = 58
# How long the clean-up waits for the claims of the run to be gone once their pod is deleted.
CLAIM_GONE_TIMEOUT = 30


def input_problem(params):
    """Why the task's input is refused before any request (naming the value and the rule), or None."""
    if params["count"] < 1:
        return "count must be a whole number of at least 1, got %s" % params["count"]
    problem = timeout_problem("timeout", params["timeout"], zero_allowed=False)
    if problem:
        return problem
    if params.get("node") is not None:
        problem = object_name_problem(params["node"])
        if problem:
            return "invalid node %r: %s" % (params["node"], problem)
    namespace = params["namespace"]
    if not isinstance(namespace, str) or not namespace.strip():
        return "invalid namespace %r: must not be empty or blank" % (namespace,)
    if not is_dns1123_label(namespace):
        return ("invalid namespace %r: must be a lowercase RFC 1123 DNS label (a-z, 0-9 and '-', starting and ending "
                "with a letter or digit, at most 63 characters)" % namespace)
    prefix = params["name_prefix"]
    if not isinstance(prefix, str) or not prefix.strip():
        return "invalid name_prefix %r: must not be empty or blank" % (prefix,)
    if len(prefix) > NAME_PREFIX_MAX or not is_dns1123_subdomain(prefix + "x"):
        return ("invalid name_prefix %r: must be at most %d characters that start a lowercase RFC 1123 DNS subdomain "
                "(a-z, 0-9, '-' and '.', starting with a letter or digit); the apiserver appends 5 random characters"
                % (prefix, NAME_PREFIX_MAX))
    try:
        check_image(params["image"], ValueError)
        check_image_registry(params.get("image_registry"), ValueError)
        check_pull_secrets(params.get("image_pull_secrets"), ValueError)
        check_tolerations(params["tolerations"], ValueError)
    except ValueError as err:
        return "invalid input: %s" % err
    if params["runtime_class_name"] and not is_dns1123_subdomain(params["runtime_class_name"]):
        return ("invalid runtime_class_name %r: must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                "starting and ending with a letter or digit, at most 253 characters)" % params["runtime_class_name"])
    if params.get("device_class") is not None:
        problem = device_class_name_problem(params["device_class"])
        if problem:
            return "invalid device_class %r: %s" % (params["device_class"], problem)
        return None
    problem = extended_resource_name_problem(params["resource"])
    if problem:
        return "invalid extended resource name %r: %s" % (params["resource"], problem)
    return None


def what_is_asked(params):
    """The request in words, for messages: "2 example.com/dongle" or "1 device of DeviceClass gpu.example.com"."""
    if params.get("device_class"):
        return "%s device%s of DeviceClass %s" % (params["count"], "" if params["count"] == 1 else "s",
                                                  params["device_class"])
    return "%s %s" % (params["count"], params["resource"])


def pod_manifest(params, run_id, template=None):
    """The smoke-test pod: limits on the extended resource, or (with ``template``, the name of the run's
    ResourceClaimTemplate) a pod claim made from that template and used by the container."""
    container = dict(name="smoke", image=mirrored(params["image"], params.get("image_registry")))
    if template:
        container["resources"] = dict(claims=[dict(name=SMOKE_REQUEST)])
    else:
        container["resources"] = dict(limits={params["resource"]: str(params["count"])})
    if params.get("command"):
        container["command"] = params["command"]
    spec = dict(restartPolicy="Never", containers=[container], tolerations=params["tolerations"],
                terminationGracePeriodSeconds=0, activeDeadlineSeconds=active_deadline(params))
    if params.get("image_pull_secrets"):
        spec["imagePullSecrets"] = [dict(name=secret) for secret in params["image_pull_secrets"]]
    if template:
        spec["resourceClaims"] = [dict(name=SMOKE_REQUEST, resourceClaimTemplateName=template)]
    if params.get("runtime_class_name"):
        spec["runtimeClassName"] = params["runtime_class_name"]
    if params.get("node"):
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [params["node"]]}]}]}}}
    return dict(
        apiVersion="v1", kind="Pod",
        metadata=dict(generateName=params["name_prefix"], namespace=params["namespace"], labels=run_labels(run_id)),
        spec=spec,
    )


def run_labels(run_id):
    return {"app.kubernetes.io/managed-by": "kubehw.devices", "app.kubernetes.io/component": "smoke-test",
            RUN_LABEL: run_id}


def run_selector(run_id):
    return "%s=%s" % (RUN_LABEL, run_id)


def run_pods(client, namespace, run_id):
    """Every pod of this run (the label is unique to it), oldest first."""
    listing = client.list_all(client.core.list_namespaced_pod, namespace, label_selector="%s=%s" % (RUN_LABEL, run_id),
                              what="list the smoke-test pods of run %s in namespace %s" % (run_id, namespace))
    return sorted(listing["items"], key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                   p["metadata"]["name"]))


def create_pod(client, params, run_id, template=None):
    """Create the pod once: after a lost answer, find it by the run label instead of creating another."""
    namespace = params["namespace"]

    def find():
        pods = run_pods(client, namespace, run_id)
        return pods[0] if pods else None

    return client.create_json(client.core.create_namespaced_pod, namespace, pod_manifest(params, run_id, template),
                              find=find, what="create the smoke-test pod in namespace %s" % namespace)


def check_device_class(dra, name):
    """Before anything is created: the apiserver stores a claim naming a DeviceClass that does not exist, and the
    scheduler then only refuses the pod ("device class ... does not exist"), so say it plainly and write nothing."""
    if dra.get("deviceclasses", name, what="read DeviceClass %r" % name) is None:
        raise KubeHwError("DeviceClass %r does not exist (%s/%s): create it first (kubehw.devices.dra_device_class, or "
                          "the DRA driver's preset with kubehw.devices.dra_driver_deploy); nothing was created"
                          % (name, DRA_GROUP, dra.version), status=404, reason="NotFound")


def create_template(dra, params, run_id):
    """Create the run's ResourceClaimTemplate once (found by the run label after a lost answer)."""
    namespace = params["namespace"]

    def find():
        found = sorted(dra.list_namespaced("resourceclaimtemplates", namespace, label_selector=run_selector(run_id),
                                           what="list the ResourceClaimTemplates of smoke-test run %s" % run_id),
                       key=lambda t: ((t.get("metadata") or {}).get("creationTimestamp") or "", t["metadata"]["name"]))
        return found[0] if found else None

    body = claim_template(params["name_prefix"], namespace, run_labels(run_id), params["device_class"],
                          params["count"])
    return dra.create_namespaced("resourceclaimtemplates", namespace, body, find=find,
                                 what="create the smoke-test ResourceClaimTemplate in namespace %s" % namespace)


def delete_run_objects(module, list_names, delete, kind, namespace, run_id, known=None):
    """Delete every object of a kind that carries the run label (and ``known``); False when one could not be."""
    names = set([known]) if known else set()
    try:
        names.update(list_names())
    except KubeHwError as err:
        module.warn("Could not list the smoke-test %ss of run %s: %s" % (kind, run_id, err.msg))
    deleted = True
    for name in sorted(names):
        try:
            delete(name)
        except KubeHwError as err:
            if err.status != 404:
                deleted = False
                module.warn("The smoke-test %s %s/%s could not be deleted: %s (delete the %ss labelled %s=%s)"
                            % (kind, namespace, name, err.msg, kind, RUN_LABEL, run_id))
    return deleted


def clean_up(module, client, namespace, run_id, name, result, dra=None, template=None):
    """Delete the pod and any other pod of the run (a create whose answer was lost may have stored one);
    with DRA, also the run's claims (made from the template, so they carry the run label) and its template,
    and wait until the claims are gone."""
    deleted = delete_run_objects(
        module, lambda: [p["metadata"]["name"] for p in run_pods(client, namespace, run_id)],
        lambda pod: client.call(client.core.delete_namespaced_pod, pod, namespace, grace_period_seconds=0,
                                what="delete the smoke-test pod %s/%s" % (namespace, pod)),
        "pod", namespace, run_id, name)
    if dra is not None:
        def claims():
            return dra.list_namespaced("resourceclaims", namespace, label_selector=run_selector(run_id),
                                       what="list the ResourceClaims of smoke-test run %s" % run_id)

        # A claim made from a template is owned by its pod and goes with it (the resource claim controller
        # deletes it once the pod is gone); deleting it here as well leaves nothing behind if that controller lags.
        deleted = delete_run_objects(
            module, lambda: [c["metadata"]["name"] for c in claims()],
            lambda claim: dra.delete_namespaced("resourceclaims", namespace, claim,
                                                what="delete the smoke-test ResourceClaim %s/%s" % (namespace, claim)),
            "ResourceClaim", namespace, run_id) and deleted
        deleted = delete_run_objects(
            module, lambda: [t["metadata"]["name"] for t in dra.list_namespaced(
                "resourceclaimtemplates", namespace, label_selector=run_selector(run_id),
                what="list the ResourceClaimTemplates of smoke-test run %s" % run_id)],
            lambda tmpl: dra.delete_namespaced("resourceclaimtemplates", namespace, tmpl,
                                               what="delete the smoke-test ResourceClaimTemplate %s/%s"
                                               % (namespace, tmpl)),
            "ResourceClaimTemplate", namespace, run_id, template) and deleted
        # An allocated claim keeps its finalizer until the controller has seen its pod go: wait for that.
        try:
            dra.watch_namespaced("resourceclaims", namespace, lambda objs: not objs, CLAIM_GONE_TIMEOUT,
                                 what="see the ResourceClaims of smoke-test run %s gone" % run_id,
                                 label_selector=run_selector(run_id))
            result["claims_deleted"] = True
        except KubeHwError as err:
            result["claims_deleted"] = False
            deleted = False
            module.warn("The ResourceClaims of smoke-test run %s are not gone yet: %s (they are deleted with their "
                        "pod; check the ResourceClaims labelled %s=%s)" % (run_id, err.msg, RUN_LABEL, run_id))
    result["deleted"] = deleted


def scheduling_outcome(pod):
    """('scheduled', node) / ('unschedulable', condition) / None while undecided."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return "scheduled", node
    cond = condition(pod, "PodScheduled") or {}
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
        return "unschedulable", cond
    return None


def finished(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def exit_code(pod):
    """The exit code of the pod's container, or None when it never ran to an end (not started, still waiting)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") is not None:
            return terminated["exitCode"]
    return None


TOOLKIT_CDI = "the kubehw.devices.nvidia_container_toolkit role writes it with nvidia_container_toolkit_cdi: true"


# containerRuntimeVersion as kubelets write it: <runtime>://<version>. Read from the cluster, so only this much of it
# is ever put in a message.
RUNTIME_VERSION_RE = re.compile(r"(containerd|cri-o|docker)://(v?[0-9][0-9A-Za-z.+~-]{0,63})")


# What a kubelet writes there when its runtime did not answer (pkg/kubelet/nodestatus/setters.go, VersionInfo).
RUNTIME_UNREACHED_RE = re.compile(r"(containerd|cri-o|docker)://Unknown")


def runtime_name(runtime):
    """(runtime, version) of a node's containerRuntimeVersion, or (None, None) for one not of that form."""
    match = RUNTIME_VERSION_RE.fullmatch(runtime or "")
    return (match.group(1), match.group(2)) if match else (None, None)


def runtime_cdi_text(runtime):
    """What the node's container runtime (status.nodeInfo.containerRuntimeVersion, e.g. containerd://2.1.4) does with
    the CDI devices a DRA driver hands over (the kubelet passes them in the CRI's CDIDevices field; a runtime that does
    not read it starts the container without them, silently), or None when it injects them whatever its
    configuration says (CRI-O has done so since 1.23, with no setting to turn it off)."""
    name, version = runtime_name(runtime)
    if name == "cri-o":
        return None
    match = re.match(r"v?(\d+)\.(\d+)", version) if name == "containerd" else None
    if not match:
        text = ("a DRA driver hands devices over as CDI devices, which containerd injects only from version 1.7 on and "
                "with enable_cdi = true in its CRI configuration (containerd 2.x has it on unless a configuration "
                "turns it off; %s)" % TOOLKIT_CDI)
        unreached = RUNTIME_UNREACHED_RE.fullmatch(runtime or "")
        if unreached:
            text += (". The node's kubelet reports its runtime as %s: it could not reach %s when it last updated the "
                     "node's status (the runtime down or restarting)" % (unreached.group(0), unreached.group(1)))
        return text
    version = "containerd %s" % version
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) < (1, 7):
        return ("a DRA driver hands devices over as CDI devices, and the node runs %s, which does not inject CDI "
                "devices at all: containerd 1.7 or newer with enable_cdi = true in its CRI configuration does"
                % version)
    if major < 2:
        return ("a DRA driver hands devices over as CDI devices, and the node runs %s, which injects them only with "
                "enable_cdi = true in its CRI configuration (off by default before containerd 2.0; %s)"
                % (version, TOOLKIT_CDI))
    return ("a DRA driver hands devices over as CDI devices, and the node runs %s, which injects them unless its "
            "configuration sets enable_cdi = false (the CRI plugin's setting, on by default since containerd 2.0): look "
            "for it in the node's config.toml and the files it imports; enable_cdi = true in a drop-in read after it "
            "turns CDI back on (%s)" % (version, TOOLKIT_CDI))


def node_runtime(client, node):
    """The node's container runtime as its kubelet reports it, or None when the node cannot be read (the message is
    worded without it)."""
    try:
        found = client.call_json(client.core.read_node, node, what='read node "%s"' % node)
    except KubeHwError:
        return None
    return ((found.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion")


def failure_message(params, result, runtime=None):
    """Why the smoke-test pod failed, with what the module knows about the devices' way into the container.
    ``runtime``: the node's containerRuntimeVersion, when it could be read."""
    message = "The smoke-test pod failed on %s" % result.get("node")
    if result.get("exit_code") is not None:
        message += ": its container exited with code %s" % result["exit_code"]
    if params.get("device_class") and result.get("exit_code") is not None and result.get("allocation"):
        devices = ", ".join("%s %s/%s" % (d.get("driver"), d.get("pool"), d.get("device"))
                            for d in result["allocation"])
        message += (
            ". Its claim %s was allocated (%s) and prepared by the driver before the container started (the kubelet "
            "starts no container of a pod whose claims it could not prepare)" % (result.get("claim"), devices))
        cdi = runtime_cdi_text(runtime)
        if cdi:
            message += (". If the command looked for the device and did not find it, the node's container runtime "
                        "did not inject it: %s" % cdi)
        else:
            message += (". The node runs %s %s, which injects a claim's CDI devices whatever its configuration: the "
                        "command's own output says what it missed" % runtime_name(runtime))
    return "%s. Its log: %s" % (message, result.get("log", ""))


def pod_claim_name(pod):
    """The name of the ResourceClaim made for the pod's claim from the template, once the controller made it."""
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == SMOKE_REQUEST and status.get("resourceClaimName"):
            return status["resourceClaimName"]
    return None


def wait_allocated(dra, params, pod, node, deadline, result):
    """Watch the pod's claim until it is allocated (on ``node``) and reserved for the pod; record it."""
    namespace = params["namespace"]
    name = pod_claim_name(pod)
    if name is None:
        raise KubeHwError("Pod %s/%s was scheduled but names no ResourceClaim for its claim %r in "
                          "status.resourceClaimStatuses" % (namespace, pod["metadata"]["name"], SMOKE_REQUEST),
                          reason="NoClaim")
    result["claim"] = name

    def allocated(objs):
        claim = objs.get("%s/%s" % (namespace, name))
        return claim is not None and bool(allocation_results(claim)) and any(
            r.get("uid") == pod["metadata"].get("uid") for r in (claim.get("status") or {}).get("reservedFor") or [])

    claims = dra.watch_namespaced("resourceclaims", namespace, allocated, max(1, deadline.left()),
                                  what="see ResourceClaim %s/%s allocated" % (namespace, name),
                                  field_selector="metadata.name=%s" % name)
    claim = claims["%s/%s" % (namespace, name)]
    result["allocation"] = allocation_results(claim)
    where = allocated_node(claim)
    if where not in (None, node):
        raise KubeHwError("ResourceClaim %s/%s was allocated on node %s, but its pod was bound to %s"
                          % (namespace, name, where, node), reason="WrongNode")


def run(module, client):
    params = module.params
    namespace = params["namespace"]
    run_id = uuid.uuid4().hex[:16]
    deadline = Deadline(params["timeout"])
    dra = None
    template = None
    if params.get("device_class"):
        dra = DraApi(client)
        dra.discover()
        check_device_class(dra, params["device_class"])
    try:
        if dra is not None:
            template = create_template(dra, params, run_id)["metadata"]["name"]
        created = create_pod(client, params, run_id, template)
    except KubeHwError:
        # the create may have been stored although it failed: leave no object of this run behind
        clean_up(module, client, namespace, run_id, None, {}, dra, template)
        raise
    name = created["metadata"]["name"]
    result = dict(changed=False, pod=name, run_id=run_id, scheduled=False, deleted=False)
    if dra is not None:
        result.update(template=template, api_version="%s/%s" % (DRA_GROUP, dra.version))
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
            if dra is not None:
                wait_allocated(dra, params, pod, detail, deadline, result)
            if params["wait_for"] == "completed":
                pods = client.watch(client.core.list_namespaced_pod, lambda objs: any(
                    finished(p) for p in objs.values()), params["timeout"],
                    what="see pod %s/%s finish" % (namespace, name), namespace=namespace, field_selector=selector)
                finished_pod = list(pods.values())[0]
                result["phase"] = finished_pod["status"]["phase"]
                result["exit_code"] = exit_code(finished_pod)
                try:
                    result["log"] = client.call_text(client.core.read_namespaced_pod_log, name, namespace,
                                                     what="read the log of pod %s/%s" % (namespace, name))
                except KubeHwError as err:
                    # The outcome is known from the phase; a log we cannot read is worth a warning only.
                    module.warn(err.msg)
                    result["log"] = ""
        else:
            result.update(reason=detail.get("reason"), message=detail.get("message"))
    finally:
        clean_up(module, client, namespace, run_id, name, result, dra, template)
    return result


def main():
    argument_spec = copy.deepcopy(AUTH_ARG_SPEC)
    argument_spec.update(image_source_spec())
    argument_spec.update(
        resource=dict(type="str"),
        device_class=dict(type="str"),
        count=dict(type="int", default=1),
        node=dict(type="str"),
        namespace=dict(type="str", default="default"),
        name_prefix=dict(type="str", default="kubehw-smoke-"),
        image=dict(type="str", default=reference("pause")),
        command=dict(type="list", elements="str"),
        tolerations=dict(type="list", elements="dict", default=[]),
        runtime_class_name=dict(type="str"),
        expect=dict(type="str", choices=["scheduled", "unschedulable", "any"], default="scheduled"),
        wait_for=dict(type="str", choices=["scheduled", "completed"], default="scheduled"),
        timeout=dict(type="int", default=120),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           mutually_exclusive=[("resource", "device_class")],
                           required_one_of=[("resource", "device_class")])
    protect_kubeconfig_secrets(module)
    params = module.params
    problem = input_problem(params)
    if problem:
        module.fail_json(msg=problem, changed=False)
    if module.check_mode:
        module.exit_json(changed=False, skipped_reason="check mode: no pod was created")
    try:
        client = KubeClient(module)
        result = run(module, client)
    except KubeHwError as err:
        module.fail_json(msg=err.msg, status=err.status, reason=err.reason, changed=False)
    if params["expect"] == "scheduled" and not result["scheduled"]:
        module.fail_json(msg="The pod requesting %s was not scheduled: %s" % (
            what_is_asked(params), result.get("message") or "no reason given"), **result)
    if params["expect"] == "unschedulable" and result["scheduled"]:
        module.fail_json(msg="The pod requesting %s was expected to stay Pending but was bound to %s" % (
            what_is_asked(params), result["node"]), **result)
    if params["wait_for"] == "completed" and result.get("phase") == "Failed":
        runtime = node_runtime(client, result["node"]) if result.get("allocation") else None
        module.fail_json(msg=failure_message(params, result, runtime), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
