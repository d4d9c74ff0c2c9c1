#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: extended_resource_info
short_description: Report the extended resources of Kubernetes nodes and the pods that use them
version_added: 1.0.0
description:
  - Reads nodes and reports, per node, the extended resources in C(status.capacity) (advertised)
    and C(status.allocatable) (what the scheduler can hand out), and the pods that request them.
  - Read-only. Makes one list request for nodes and, with O(include_pods=true), one for pods.
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  name:
    description:
      - Name of one node to report. Mutually exclusive with O(names), O(label_selectors) and O(field_selectors).
      - One of O(name), O(names), O(label_selectors), O(field_selectors) or O(all_nodes=true) is required.
      - Must be a valid node name (a lowercase RFC 1123 DNS subdomain); an empty or blank name is refused
        before any request.
    type: str
  names:
    description:
      - Names of the nodes to report. An empty list, or an empty or blank entry, is refused.
    type: list
    elements: str
  label_selectors:
    description:
      - Label selectors, joined with commas, as in C(kubernetes.core.k8s_info).
      - An empty list, or an empty or blank selector, is refused (the apiserver reads it as "every node").
    type: list
    elements: str
  field_selectors:
    description:
      - Field selectors, joined with commas, as in C(kubernetes.core.k8s_info). Refused when empty or blank.
    type: list
    elements: str
  all_nodes:
    description:
      - Report (and with O(wait_allocatable) or O(wait_released), wait for) every node of the cluster. Leaving out the target
        is an error, the same rule as in M(kubehw.devices.k8s_node_extended_resource).
    type: bool
    default: false
  include_pods:
    description:
      - Also list the pods that request extended resources, and the pods that are pending for them.
    type: bool
    default: true
  wait_allocatable:
    description:
      - Wait until every selected node has at least this many of each named resource in
        C(status.allocatable), the point at which the scheduler can place pods asking for them.
      - 'Maps an extended-resource name to a minimum count, for example V({"nvidia.com/gpu": 1}).'
      - Waits by watching the nodes, not by polling.
      - Mutually exclusive with O(wait_released).
    type: dict
  wait_released:
    description:
      - Wait until no selected node offers any of these extended resources any more, that is until each is C(0)
        or absent in the node's status field named by O(wait_released_in).
      - For a stopped device plugin, the kubelet reports its devices unhealthy at once (C(0) allocatable), keeps
        the capacity for its grace period (5 minutes), then writes C(0) there too and forgets the resource; a key
        removed from capacity before that comes back as C(0).
      - Waits by watching the nodes, not by polling. An empty list waits for nothing.
      - Mutually exclusive with O(wait_allocatable).
    type: list
    elements: str
  wait_released_in:
    description:
      - The status field O(wait_released) reads.
      - V(allocatable) (the default) is what the scheduler hands out; C(0) there means no new pod is placed on the
        node for the resource.
      - V(capacity) is what the node advertises; C(0) there means the kubelet has zeroed the resource, after which
        removing the key (O(kubehw.devices.k8s_node_extended_resource#module:state=absent)) is final.
    type: str
    choices: [allocatable, capacity]
    default: allocatable
  wait_timeout:
    description:
      - Seconds to wait for O(wait_allocatable) or O(wait_released).
    type: int
    default: 300
  include_dra:
    description:
      - Also report Dynamic Resource Allocation (C(resource.k8s.io)), in RV(dra), for the reported nodes, that is
        the devices DRA drivers published for each in ResourceSlices (driver, pool, device, attributes such as
        model or memory, capacity), the ResourceClaims allocated there (with the pods they are reserved for, their
        devices and node), and the claims not allocated yet with the pods waiting for them and the scheduler's
        reason (the C(PodScheduled=False) condition of the waiting pod). Two more list requests, and a list of pods
        when a claim is pending and O(include_pods=false); every list is paged. A cluster without the API group is
        reported as not served, not as an error.
    type: bool
    default: false
notes:
  - Every node is reported only with O(all_nodes=true); a task without a target fails before any request.
  - A resource counts as extended when it is not one of C(cpu), C(memory), C(pods),
    C(ephemeral-storage), C(hugepages-*) or C(attachable-volumes-*).
"""

EXAMPLES = r"""
- name: Show what each GPU node advertises and what is in use
  kubehw.devices.extended_resource_info:
    label_selectors:
      - feature.node.kubernetes.io/pci-10de.present=true
  register: gpu_nodes

- name: Print allocatable GPUs per node
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.allocatable['nvidia.com/gpu'] | default('0') }}"
  loop: "{{ gpu_nodes.nodes }}"
  loop_control:
    label: "{{ item.name }}"

- name: Report every node of the cluster
  kubehw.devices.extended_resource_info:
    all_nodes: true
  register: all_nodes_report

- name: Wait until the GPU nodes can hand out at least one GPU each
  kubehw.devices.extended_resource_info:
    names: [gpu-1, gpu-2]
    include_pods: false
    wait_allocatable:
      nvidia.com/gpu: 1
    wait_timeout: 180

- name: Wait until the kubelets have zeroed the GPUs of a removed device plugin
  kubehw.devices.extended_resource_info:
    names: [gpu-1, gpu-2]
    include_pods: false
    wait_released: [nvidia.com/gpu]
    wait_released_in: capacity
    wait_timeout: 420
"""

RETURN = r"""
nodes:
  description: One entry per node, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      sample: gpu-1
    ready:
      description: Status of the node's C(Ready) condition (C(True), C(False) or C(Unknown)).
      type: str
      sample: "True"
    unschedulable:
      description: Whether the node is cordoned.
      type: bool
    capacity:
      description: Extended resources in C(status.capacity).
      type: dict
      sample: {"example.com/dongle": "4"}
    allocatable:
      description: Extended resources in C(status.allocatable).
      type: dict
      sample: {"example.com/dongle": "4"}
    requested:
      description: Sum of the extended-resource requests of the node's running and pending pods.
      type: dict
      sample: {"example.com/dongle": 2}
    pods:
      description: Pods on the node that request extended resources.
      type: list
      elements: dict
      sample: [{"namespace": "default", "name": "dongle-user", "phase": "Running", "requests": {"example.com/dongle": "2"}}]
dra:
  description:
    - Dynamic Resource Allocation per reported node (C(nodes), by name, each with C(devices) and C(claims)),
      C(pending_claims), the C(api_version) used, and C(served) (false when the cluster has no
      C(resource.k8s.io); nothing else is then returned).
    - "Each device: C(driver), C(pool), C(device), C(attributes) (plain values), C(capacity) (quantities)."
    - "Each allocated claim: C(namespace), C(name), C(devices) (C(driver/pool/device)), C(reserved_for)
      (C(pods/<name>)), C(node)."
    - "Each pending claim: C(namespace), C(name), C(requests) (request names), C(reserved_for), C(pods) (the pods
      that use it), and, when one of them is unschedulable, C(reason) and C(message) of its C(PodScheduled)
      condition (the scheduler's reason, for example C(cannot allocate all claims))."
  returned: when O(include_dra=true)
  type: dict
  sample: {"served": true, "api_version": "resource.k8s.io/v1",
           "pending_claims": [{"namespace": "default", "name": "big-device-k2j4d", "requests": ["device"],
                               "reserved_for": [], "pods": ["big"], "reason": "Unschedulable",
                               "message": "0/3 nodes are available: 3 cannot allocate all claims. ..."}],
           "nodes": {"gpu-1": {"devices": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0",
                                            "attributes": {"model": "a100"}, "capacity": {"memory": "40Gi"}}],
                               "claims": [{"namespace": "default", "name": "pod-gpu-x1y2z",
                                           "devices": ["gpu.example.com/gpu-1/gpu-0"], "reserved_for": ["pods/pod"],
                                           "node": "gpu-1"}]}}}
pending_pods:
  description: Pods that request extended resources and are not scheduled, with the scheduler's reason.
  returned: when O(include_pods=true)
  type: list
  elements: dict
  sample: [{"namespace": "default", "name": "too-many", "requests": {"example.com/dongle": "5"},
            "reason": "Unschedulable", "message": "0/3 nodes are available: ..."}]
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._dra import DraApi
from ansible_collections.kubehw.devices.plugins.module_utils._dra_report import report as dra_report
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError, WaitTimedOut, fail_from_error
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
    is_extended_resource,
    quantity_value,
    whole_quantity,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    node_target_problem,
    selector_kwargs as list_selector_kwargs,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import condition


def extended_only(resources):
    return dict((k, v) for k, v in (resources or {}).items() if is_extended_resource(k))


def pod_extended_requests(pod):
    """Effective extended-resource requests of a pod (limits stand in for absent requests)."""
    total = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        asked = dict(res.get("limits") or {})
        asked.update(res.get("requests") or {})
        for key, value in extended_only(asked).items():
            total[key] = total.get(key, 0) + _int_quantity(value)
    return total


def _int_quantity(value):
    # By value, as the apiserver stores it ("1Ki" is 1024); an unparseable value counts as none.
    number = quantity_value(value)
    return int(number) if number is not None else 0


def node_ready(node):
    cond = condition(node, "Ready")
    return cond.get("status") if cond is not None else "Unknown"


def summarize(nodes, pods):
    by_node = dict((n["metadata"]["name"], []) for n in nodes)
    pending = []
    for pod in pods:
        requests = pod_extended_requests(pod)
        if not requests:
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            continue
        node_name = (pod.get("spec") or {}).get("nodeName")
        entry = dict(namespace=pod["metadata"].get("namespace"), name=pod["metadata"]["name"],
                     phase=phase, requests=dict((k, str(v)) for k, v in requests.items()))
        if node_name:
            if node_name in by_node:
                by_node[node_name].append(entry)
            continue
        cond = condition(pod, "PodScheduled") or {}
        if cond.get("status") == "False":
            entry["reason"] = cond.get("reason")
            entry["message"] = cond.get("message")
        pending.append(entry)
    result = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        requested = {}
        for pod in by_node[name]:
            for key, value in pod["requests"].items():
                requested[key] = requested.get(key, 0) + int(value)
        result.append(dict(
            name=name,
            ready=node_ready(node),
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            capacity=extended_only(status.get("capacity")),
            allocatable=extended_only(status.get("allocatable")),
            requested=requested,
            pods=sorted(by_node[name], key=lambda p: (p["namespace"], p["name"])),
        ))
    return result, sorted(pending, key=lambda p: (p["namespace"], p["name"]))


def missing_allocatable(node, wanted):
    """The resources of ``wanted`` the node cannot hand out yet, with what it has."""
    have = (node.get("status") or {}).get("allocatable") or {}
    return dict((key, have.get(key, "0")) for key, count in wanted.items()
                if _int_quantity(have.get(key, "0")) < count)


def still_offered(node, resources, field):
    """The resources of ``resources`` above zero in the node's status ``field``, with their values."""
    have = (node.get("status") or {}).get(field) or {}
    return dict((key, have[key]) for key in resources if _int_quantity(have.get(key, "0")) > 0)


def wait_for_nodes(client, params, nodes, pending, what, left):
    """Watch the selected nodes until ``pending(node)`` (a dict of resource: value) is empty on each of them, and
    return them as they are then. A timeout names each node still pending, after ``left``, with its values."""
    names = set(n["metadata"]["name"] for n in nodes)

    def ready(objects):
        return all(not pending(objects[name]) for name in names if name in objects)

    if ready(dict((n["metadata"]["name"], n) for n in nodes)):
        return nodes
    try:
        objects = client.watch(client.core.list_node, ready, params["wait_timeout"],
                               what="%s on %d node(s)" % (what, len(names)), **selector_kwargs(params))
    except WaitTimedOut as err:
        seen = err.objects or {}
        short = ["%s (has %s)" % (name, ", ".join("%s=%s" % kv for kv in sorted(pending(seen[name]).items())))
                 for name in sorted(names) if name in seen and pending(seen[name])]
        err.msg += ": %s on %s" % (left, "; ".join(short))
        raise
    return [objects[name] for name in sorted(names) if name in objects]


def wait_allocatable(client, params, nodes):
    wanted = params["wait_allocatable"]
    return wait_for_nodes(client, params, nodes, lambda node: missing_allocatable(node, wanted),
                          "see %s allocatable" % ", ".join(sorted(wanted)), "not allocatable yet")


def wait_released(client, params, nodes):
    resources, field = params["wait_released"], params["wait_released_in"]
    return wait_for_nodes(client, params, nodes, lambda node: still_offered(node, resources, field),
                          "see %s at 0 or gone in %s" % (", ".join(sorted(resources)), field),
                          "still above 0 in %s" % field)


def selector_kwargs(params):
    kwargs = list_selector_kwargs(params.get("label_selectors"), params.get("field_selectors"))
    if params.get("name") is not None:
        kwargs["field_selector"] = "metadata.name=%s" % params["name"]
    return kwargs


def read_nodes(client, params):
    if params.get("name") is not None or params.get("names") is not None:
        names = [params["name"]] if params.get("name") is not None else params["names"]
        nodes = []
        for name in names:
            nodes.append(client.call_json(client.core.read_node, name, what='read node "%s"' % name))
        return nodes
    return client.list_all(client.core.list_node, what="list nodes", **selector_kwargs(params)).get("items") or []


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[("name", "names", "label_selectors"), ("name", "names", "field_selectors"),
                            ("wait_allocatable", "wait_released")],
        supports_check_mode=True,
    )
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    check_input(module)
    try:
        result = report(KubeClient(module), module.params)
    except KubeHwError as err:
        fail_from_error(module, err, changed=False)
    module.exit_json(**result)


def argument_spec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str"),
        names=dict(type="list", elements="str"),
        label_selectors=dict(type="list", elements="str"),
        field_selectors=dict(type="list", elements="str"),
        all_nodes=dict(type="bool", default=False),
        include_pods=dict(type="bool", default=True),
        wait_allocatable=dict(type="dict"),
        wait_released=dict(type="list", elements="str"),
        wait_released_in=dict(type="str", choices=["allocatable", "capacity"], default="allocatable"),
        wait_timeout=dict(type="int", default=300),
        include_dra=dict(type="bool", default=False),
    )
    return spec


def check_input(module):
    """Fail the module on input it can refuse without a cluster; wait_allocatable's counts become whole numbers."""
    problem = node_target_problem(module.params)
    if problem:
        module.fail_json(msg=problem, changed=False)
    problem = timeout_problem("wait_timeout", module.params["wait_timeout"], zero_allowed=True)
    if problem:
        module.fail_json(msg=problem, changed=False)
    wanted = module.params["wait_allocatable"] or {}
    for key, count in wanted.items():
        problem = extended_resource_name_problem(key)
        if problem:
            module.fail_json(msg="wait_allocatable: invalid extended resource name %r: %s" % (key, problem))
        try:
            wanted[key] = whole_quantity(count, key=key)
        except InputRefused as err:
            module.fail_json(msg="wait_allocatable: the count for %s must be a whole number >= 0: %s" % (key, err))
    for key in module.params["wait_released"] or []:
        problem = extended_resource_name_problem(key)
        if problem:
            module.fail_json(msg="wait_released: invalid extended resource name %r: %s" % (key, problem))


def report(client, params):
    """The module's result: the nodes' resources and users, the pods pending for them, and the DRA report."""
    nodes = read_nodes(client, params)
    if params["wait_allocatable"]:
        nodes = wait_allocatable(client, params, nodes)
    elif params["wait_released"]:
        nodes = wait_released(client, params, nodes)
    pods = []
    if params["include_pods"]:
        pods = client.list_all(client.core.list_pod_for_all_namespaces, what="list pods").get("items") or []
    summary, pending = summarize(nodes, pods)
    result = dict(changed=False, nodes=summary)
    if params["include_pods"]:
        result["pending_pods"] = pending
    if params["include_dra"]:
        # the pods waiting for a pending claim carry the scheduler's reason: listed here only if not yet
        result["dra"] = dra_report(DraApi(client), [n["name"] for n in summary],
                                   pods=pods if params["include_pods"] else None,
                                   list_pods=lambda: client.list_all(client.core.list_pod_for_all_namespaces,
                                                                     what="list pods").get("items") or [])
    return result


if __name__ == "__main__":
    main()
