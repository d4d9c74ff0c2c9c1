#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_node_extended_resource
short_description: Advertise extended resources on Kubernetes nodes, idempotently
version_added: 1.0.0
description:
  - Sets, updates or removes extended resources (such as C(example.com/dongle)) in the
    C(status.capacity) of Kubernetes nodes, which is how a cluster learns that a node has
    special hardware that no device plugin reports.
  - Sends key-level JSON-patch operations to the C(status) subresource
    (C(PATCH /api/v1/nodes/<name>/status)). It never replaces the whole status and never touches
    a key the task did not name, except under O(state=exact) in the declared O(domain) or O(managed_prefixes).
  - Every value it replaces or removes is first checked with a C(test) operation, so a concurrent
    change by another writer is never overwritten; the node is read again and the patch recomputed.
  - Names and quantities are validated before the first request. The apiserver does not check
    extended-resource names on node status, so a typo would otherwise be stored.
  - Quantities are compared by value, so V(1Ki) on a node equals V(1024) in the task and is not rewritten.
author:
  - kubehw.devices contributors (@kubehw)
requirements:
  - jsonpatch >= 1.32
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads nodes (and, when a change would undo a device plugin's work, the node's pods) but sends no write.
  diff_mode:
    support: full
    details:
      - Per node, the managed keys of C(status.capacity) before and after.
  idempotent:
    support: full
options:
  name:
    description:
      - Name of one node. A node that does not exist is an error naming it.
      - Exactly one of O(name), O(names), O(all_nodes=true), or O(label_selectors) and/or O(field_selectors)
        is required.
      - Must be a valid node name (a lowercase RFC 1123 DNS subdomain). An empty or blank name (for example an
        undefined inventory variable rendered to V("")), or one with a trailing newline, is refused before
        any request; it never widens the task to other nodes.
    type: str
  names:
    description:
      - Names of several nodes. Each missing node is reported as failed; the others are still changed.
      - Each entry follows the rules of O(name); an empty list is refused (it never means every node).
    type: list
    elements: str
  label_selectors:
    description:
      - Label selectors (joined with commas, as in C(kubernetes.core.k8s_info)) choosing the nodes.
      - A selector that matches no node returns C(changed=false) and an empty O(ignore:nodes) list,
        unless O(require_match=true).
      - An empty list, an empty or blank selector, an empty term between commas, or a control character
        (such as a newline) is refused before any request, because the apiserver reads an empty selector
        as "every node".
    type: list
    elements: str
  field_selectors:
    description:
      - Field selectors (joined with commas) choosing the nodes, for example C(metadata.name=gpu-1).
      - Refused when empty or blank, as O(label_selectors).
    type: list
    elements: str
  all_nodes:
    description:
      - Target every node of the cluster. This is the only way to do so; leaving out the target, or giving an
        empty one, is an error.
      - Cannot be combined with O(name), O(names), O(label_selectors) or O(field_selectors).
      - The string answers of an AWX survey (V("false"), V("yes")) are read as booleans.
    type: bool
    default: false
  require_match:
    description:
      - Fail when O(label_selectors)/O(field_selectors) match no node.
    type: bool
    default: false
  resources:
    description:
      - Extended resources, as a dictionary of name to quantity.
      - A name has exactly one C(/), a lowercase DNS-subdomain domain that does not end in C(kubernetes.io)
        (Kubernetes treats any name containing C(kubernetes.io/) as native), and a name part of at most 63
        letters, digits, C(-), C(_) or C(.) that starts and ends with a letter or digit, for example
        C(example.com/dongle). The whole string must match, so a trailing newline, a space or another
        control character is refused.
      - A quantity is a non-negative whole number, as an integer or a Kubernetes quantity string
        such as V("4"), V("1Ki") (1024) or V("2k") (2000).
      - With O(state=absent), the values are ignored and a list of names is accepted too.
      - With O(state=exact), an empty dictionary removes every key in the declared scope.
    type: raw
    required: true
  state:
    description:
      - V(present) adds or updates the listed keys and leaves every other key alone.
      - V(absent) removes the listed keys; keys that are not there are not an error.
      - V(exact) sets the listed keys and removes every other key under O(domain) or O(managed_prefixes).
        Keys in other domains, and C(cpu), C(memory), C(pods) and the like, are never touched.
    type: str
    choices: [present, absent, exact]
    default: present
  domain:
    description:
      - With O(state=exact), the domains the task owns, such as V(example.com). A key belongs to a
        domain when the part before its C(/) equals it exactly (subdomains are separate domains).
      - Every key in O(resources) must belong to a declared domain or prefix.
    type: list
    elements: str
    aliases: [domains]
  managed_prefixes:
    description:
      - With O(state=exact), key prefixes the task owns, such as V(example.com/dongle-). Each has
        exactly one C(/) and a valid domain before it.
    type: list
    elements: str
  wait:
    description:
      - V(none) returns after the patch.
      - V(advertised) makes sure C(status.capacity) holds the values (usually already true in the
        patch answer).
      - V(allocatable) waits until C(status.allocatable) holds them too, which the kubelet does at
        its next status update; only then can the scheduler place pods that request them.
        A node without a running kubelet never gets there.
      - Waiting watches the nodes; it does not poll.
    type: str
    choices: [none, advertised, allocatable]
    default: advertised
  wait_timeout:
    description:
      - Seconds to wait for O(wait) before failing the nodes that have not got there.
    type: int
    default: 120
  parallel:
    description:
      - How many nodes to read and patch at the same time, from 1 to 100.
    type: int
    default: 10
notes:
  - The identity needs C(get) and C(list) on C(nodes), C(patch) on C(nodes/status), C(watch) on C(nodes)
    for O(wait=allocatable), and (optional, for the device-plugin warning) C(list) on C(pods).
  - A device plugin running on the node re-advertises its own resources. Removing or changing one it
    serves only lasts until the kubelet's next registration, so the module warns when it sees such a plugin
    (a running pod with the annotation C(devices.kubehw.io/resources) naming the resource, or a known
    device-plugin image).
  - The kubelet owns C(status.allocatable); this module only writes C(status.capacity).
seealso:
  - name: Advertise extended resources for a node
    description: The Kubernetes task this module automates.
    link: https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/
  - module: kubehw.devices.extended_resource_info
"""

EXAMPLES = r"""
- name: Advertise four dongles on node k8s-node-1 (the Kubernetes documentation's example)
  kubehw.devices.k8s_node_extended_resource:
    name: k8s-node-1
    resources:
      example.com/dongle: 4

- name: Advertise one FPGA per node on every node labelled for it, and wait until pods can use it
  kubehw.devices.k8s_node_extended_resource:
    label_selectors:
      - hardware.example.com/fpga=true
    resources:
      example.com/fpga: 1
    wait: allocatable
    wait_timeout: 60
    parallel: 20

- name: Make example.com resources on these nodes exactly the dongles, removing any other example.com key
  kubehw.devices.k8s_node_extended_resource:
    names: [k8s-node-1, k8s-node-2]
    state: exact
    domain: example.com
    resources:
      example.com/dongle: 4

- name: Stop advertising dongles
  kubehw.devices.k8s_node_extended_resource:
    name: k8s-node-1
    state: absent
    resources:
      - example.com/dongle

- name: Remove every example.com resource from every node of the cluster (all_nodes is the only way to say it)
  kubehw.devices.k8s_node_extended_resource:
    all_nodes: true
    state: exact
    domain: example.com
    resources: {}
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made) to any node.
  returned: always
  type: bool
nodes:
  description: One entry per node the task targeted, in the order given (names) or by name (selectors).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      sample: k8s-node-1
    changed:
      description: Whether this node was (or in check mode would be) changed.
      type: bool
    failed:
      description: Whether this node failed; O(ignore:msg) says why.
      type: bool
    msg:
      description: Why this node failed.
      type: str
      returned: when failed
    capacity:
      description: The node's C(status.capacity) after the task (predicted in check mode).
      type: dict
      sample: {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/dongle": "4"}
    allocatable:
      description: The node's C(status.allocatable) as last seen.
      type: dict
      sample: {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/dongle": "4"}
    patch:
      description: The JSON-patch operations sent (or, in check mode, that would be sent); empty when none was needed.
      type: list
      elements: dict
      sample: [{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}]
    attempts:
      description: How many times the node was patched, counting retries after a concurrent change.
      type: int
      sample: 1
    diff:
      description: The managed keys of C(status.capacity) before and after.
      type: dict
      returned: in diff mode
      sample: {"before": {}, "after": {"example.com/dongle": "4"}}
changed_nodes:
  description: Names of the nodes that were (or would be) changed.
  returned: always
  type: list
  elements: str
  sample: [k8s-node-1]
failed_nodes:
  description: Names of the nodes that failed. The changes made on the other nodes stay applied.
  returned: always
  type: list
  elements: str
  sample: []
waited_for:
  description: What the task waited for (V(none), V(advertised) or V(allocatable)); V(none) in check mode.
  returned: always
  type: str
  sample: allocatable
"""

import threading
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.kubehw.devices.plugins.module_utils._client import PAGE_SIZE, KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError, WaitTimedOut, timed_out
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    HAS_JSONPATCH,
    JSONPATCH_IMPORT_ERROR,
    apply_patch,
    changed_resources,
    check_exact_scope,
    compute_patch,
    holds,
    managed_keys,
    normalize_resources,
    plugin_pods_serving,
    validate_scope,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import node_target_problem, selector_kwargs
from ansible_collections.kubehw.devices.plugins.module_utils._rest_api import JSON_PATCH

MAX_PARALLEL = 100
# A test op that no longer holds means someone else changed the node: re-read and recompute, a few times.
MAX_ATTEMPTS = 5
RBAC_HINTS = {
    "patch": "the identity needs the RBAC permission 'patch' on 'nodes/status'",
    "read": "the identity needs the RBAC permission 'get' on 'nodes'",
    "list": "the identity needs the RBAC permission 'list' on 'nodes'",
    "watch": "the identity needs the RBAC permissions 'list' and 'watch' on 'nodes'",
}


def with_hint(err, action):
    if err.status == 403 and action in RBAC_HINTS:
        err.msg = "%s (%s)" % (err.msg, RBAC_HINTS[action])
    return err


def is_lost_update(err):
    """409, or a 422 without field causes: the answer to a failed test op (the body does not say which)."""
    if err.status == 409:
        return True
    if err.status != 422:
        return False
    details = (err.body or {}).get("details") or {}
    return not details.get("causes")


def capacity_of(node):
    return dict(((node or {}).get("status") or {}).get("capacity") or {})


def allocatable_of(node):
    return dict(((node or {}).get("status") or {}).get("allocatable") or {})


def view(capacity, keys):
    return dict((k, capacity[k]) for k in keys if k in capacity)


class ExtendedResourceTask(object):
    def __init__(self, module, client, resources, domains, prefixes):
        self.module = module
        self.client = client
        params = module.params
        self.state = params["state"]
        self.resources = resources
        self.domains = domains
        self.prefixes = prefixes
        self.check_mode = module.check_mode
        self.diff = module._diff
        self.wait = params["wait"]
        self.wait_timeout = params["wait_timeout"]
        self.parallel = params["parallel"]
        self.warnings = []
        self._lock = threading.Lock()

    def warn(self, text):
        with self._lock:
            self.warnings.append(text)

    def scope(self):
        return dict(resources=self.resources, state=self.state, domains=self.domains, prefixes=self.prefixes)

    # -- targets ---------------------------------------------------------------
    def selector_kwargs(self):
        return selector_kwargs(self.module.params.get("label_selectors"), self.module.params.get("field_selectors"))

    def targets(self):
        """(name, node or None) pairs: None means read it in the worker (one GET per named node).

        Selected nodes come page by page (see listed_nodes), so patching starts with the first page.
        """
        params = self.module.params
        if params.get("name") is not None:
            return [(params["name"], None)]
        if params.get("names") is not None:
            seen, result = set(), []
            for name in params["names"]:
                if name not in seen:
                    seen.add(name)
                    result.append((name, None))
            return result
        if not (params.get("all_nodes") or self.selector_kwargs()):
            # validate_targets refuses this before any request; never let a gap widen to every node
            raise KubeHwError("no target: refusing to list every node without all_nodes=true", reason="NoTarget")
        return self.listed_nodes()

    def listed_nodes(self):
        """Yield (name, node) for the selected nodes, one page (limit/continue, 500) at a time.

        KubeClient.list_pages, node by node: the workers patch the nodes of one page while
        the next page is read, instead of waiting for the whole list (5,000 nodes are 10 pages). A 410 on
        an expired continue token restarts the list within the retry deadline; a node already yielded is
        not yielded again.
        """
        seen = set()
        pages = self.client.list_pages(self.client.core.list_node, what="list nodes", limit=PAGE_SIZE,
                                       **self.selector_kwargs())
        try:
            for page, _restarted in pages:
                for node in sorted(page.get("items") or [], key=lambda n: n["metadata"]["name"]):
                    name = node["metadata"]["name"]
                    if name not in seen:
                        seen.add(name)
                        yield name, node
        except KubeHwError as err:
            raise with_hint(err, "list")

    # -- one node ----------------------------------------------------------------
    def read(self, name):
        try:
            return self.client.call_json(self.client.core.read_node, name, what='read node "%s"' % name)
        except KubeHwError as err:
            raise with_hint(err, "read")

    def check_plugins(self, name, node):
        touched = changed_resources(capacity_of(node), **self.scope())
        if not touched:
            return
        try:
            pods = self.client.list_all(
                self.client.core.list_pod_for_all_namespaces, field_selector="spec.nodeName=%s" % name,
                what='list pods on node "%s"' % name).get("items") or []
        except KubeHwError as err:
            self.warn('Node %s: could not look for device plugins serving %s: %s' % (name, ", ".join(touched), err.msg))
            return
        for resource in touched:
            serving = plugin_pods_serving(pods, resource)
            if serving:
                self.warn(
                    "Node %s: %s %s is served by the running device plugin %s; the kubelet will advertise it "
                    "again at the plugin's next registration." % (
                        name, "removing" if self.state == "absent" or resource not in self.resources else "changing",
                        resource, ", ".join(serving)))

    def process(self, name, node):
        result = {"name": name, "changed": False, "failed": False, "patch": [], "attempts": 0}
        try:
            if node is None:
                node = self.read(name)
            first = node
            plugins_checked = False
            wrote = False
            while True:
                ops = compute_patch(node.get("status"), resource_version=(node.get("metadata") or {}).get(
                    "resourceVersion"), **self.scope())
                if not ops:
                    break
                if not plugins_checked:
                    self.check_plugins(name, node)
                    plugins_checked = True
                result["patch"] = ops
                if self.check_mode:
                    node = apply_patch(node, ops)
                    break
                result["attempts"] += 1
                try:
                    node = self.client.call_json(
                        self.client.core.patch_node_status, name, ops, _content_type=JSON_PATCH,
                        what='patch status of node "%s"' % name)
                    wrote = True
                    break
                except KubeHwError as err:
                    if not is_lost_update(err) or result["attempts"] >= MAX_ATTEMPTS:
                        if is_lost_update(err):
                            err.msg += " (gave up after %d attempts: the node kept changing under us)" % result["attempts"]
                        raise with_hint(err, "patch")
                    node = self.read(name)
            keys = sorted(set(managed_keys(capacity_of(first), **self.scope()))
                          | set(managed_keys(capacity_of(node), **self.scope())))
            before, after = view(capacity_of(first), keys), view(capacity_of(node), keys)
            # a write whose answer was lost (5xx after it was stored) still counts if the node moved
            result["changed"] = wrote or (bool(result["patch"]) and self.check_mode) or before != after
            if self.diff:
                result["diff"] = {"before": before, "after": after}
        except KubeHwError as err:
            result.update(failed=True, msg=err.msg)
            return result, None
        except Exception as exc:  # a bug must still name the node and not lose the others' results
            result.update(failed=True, msg="Unexpected error on node %s: %s" % (name, to_native(exc)))
            return result, None
        result["capacity"] = capacity_of(node)
        result["allocatable"] = allocatable_of(node)
        return result, node

    # -- waiting -------------------------------------------------------------------
    def wait_for(self, results):
        field = "capacity" if self.wait == "advertised" else "allocatable"
        getter = capacity_of if field == "capacity" else allocatable_of
        # each result holds the node's capacity and allocatable as last seen
        pending = [r["name"] for r in results if not r["failed"] and not holds(r.get(field), **self.scope())]
        if not pending:
            return
        pending_set = set(pending)

        def done(objects):
            return all(n in objects and holds(getter(objects[n]), **self.scope()) for n in pending_set)

        kwargs = self.selector_kwargs()
        if not kwargs and len(pending) == 1:
            kwargs = {"field_selector": "metadata.name=%s" % pending[0]}
        try:
            objects = self.client.watch(
                self.client.core.list_node, predicate=done, timeout=self.wait_timeout,
                what="wait for status.%s of %d node(s)" % (field, len(pending)), **kwargs)
            error = None
        except KubeHwError as err:
            objects = (err.objects if isinstance(err, WaitTimedOut) else None) or {}
            error = with_hint(err, "watch")
        by_name = dict((r["name"], r) for r in results)
        for name in pending:
            result = by_name[name]
            obj = objects.get(name)
            if obj is not None:
                result["capacity"] = capacity_of(obj)
                result["allocatable"] = allocatable_of(obj)
            if obj is not None and holds(getter(obj), **self.scope()):
                continue
            if isinstance(error, WaitTimedOut):
                if self.state == "absent":
                    wanted = "none of %s" % ", ".join(sorted(self.resources))
                else:
                    wanted = ", ".join("%s=%s" % kv for kv in sorted(self.resources.items())) or "no key in scope"
                have = view(getter(obj), managed_keys(getter(obj), **self.scope()))
                hint = "; the kubelet copies capacity into allocatable: is it running on the node?" if (
                    field == "allocatable") else ""
                result.update(failed=True, msg=timed_out(self.wait_timeout, "waiting for status.%s of node %s to hold %s "
                                                         "(it has %s)%s" % (field, name, wanted, have, hint)))
            else:
                result.update(failed=True, msg="Node %s: %s" % (
                    name, error.msg if error is not None else "the node disappeared while waiting"))

    # -- all nodes -----------------------------------------------------------------
    def run(self):
        # before the first request: urllib3 sizes a host's pool when it first connects
        self._size_connection_pool()
        params = self.module.params
        named = params.get("name") is not None or params.get("names") is not None
        targets = self.targets()
        results = []
        error = None
        # only the results are kept, not the nodes: 5,000 node objects are most of the module's memory
        if self.parallel == 1 or (named and len(targets) == 1):
            try:
                for name, node in targets:
                    results.append(self.process(name, node)[0])
            except KubeHwError as err:
                error = err
        else:
            with ThreadPoolExecutor(max_workers=self.parallel) as pool:
                futures = []
                try:
                    for name, node in targets:
                        futures.append(pool.submit(self.process, name, node))
                except KubeHwError as err:
                    error = err  # a later page failed: the nodes already submitted are still reported
                results = [future.result()[0] for future in futures]
        if not named:
            results.sort(key=lambda r: r["name"])
        if error is not None:
            error.results = results
            raise error
        if not results and params.get("require_match"):
            raise KubeHwError("No node matches %s" % ", ".join(
                "%s=%s" % (k, v) for k, v in sorted(self.selector_kwargs().items())), reason="NoMatch")
        if self.wait != "none" and not self.check_mode and any(not r["failed"] for r in results):
            self.wait_for(results)
        return results

    def _size_connection_pool(self):
        # urllib3 keeps cpu_count*5 connections per host by default; more threads would open and drop extras.
        pool = getattr(getattr(self.client.api_client, "rest_client", None), "pool_manager", None)
        kw = getattr(pool, "connection_pool_kw", None)
        if isinstance(kw, dict) and (kw.get("maxsize") or 1) < self.parallel:
            kw["maxsize"] = self.parallel


def validate(module):
    params = module.params
    try:
        resources = normalize_resources(params["resources"], params["state"])
        domains, prefixes = [], []
        if params["state"] == "exact":
            domains, prefixes = validate_scope(params.get("domain"), params.get("managed_prefixes"))
            check_exact_scope(resources, domains, prefixes)
        elif params.get("domain") or params.get("managed_prefixes"):
            raise InputRefused("domain and managed_prefixes only apply to state=exact")
    except InputRefused as err:
        problem = to_native(err)
    else:
        problem = None
    if problem:
        # failed outside the except block: ansible-core 2.19 would attach the traceback of an active exception
        module.fail_json(msg=problem, changed=False, nodes=[], changed_nodes=[], failed_nodes=[])
    if params["parallel"] < 1:
        module.fail_json(msg="parallel must be at least 1, got %d" % params["parallel"])
    problem = timeout_problem("wait_timeout", params["wait_timeout"], zero_allowed=True)
    if problem:
        module.fail_json(msg=problem)
    if params["parallel"] > MAX_PARALLEL:
        module.fail_json(msg="parallel must be at most %d (each is a thread and a connection to the apiserver), got %d"
                         % (MAX_PARALLEL, params["parallel"]))
    return resources, domains, prefixes


def validate_targets(module):
    """Before any request: an empty or blank target is an error, never "every node"."""
    problem = node_target_problem(module.params)
    if problem:
        module.fail_json(msg=problem, changed=False, nodes=[], changed_nodes=[], failed_nodes=[])


def argument_spec():
    spec = dict(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str"),
        names=dict(type="list", elements="str"),
        label_selectors=dict(type="list", elements="str"),
        field_selectors=dict(type="list", elements="str"),
        all_nodes=dict(type="bool", default=False),
        require_match=dict(type="bool", default=False),
        resources=dict(type="raw", required=True),
        state=dict(type="str", choices=["present", "absent", "exact"], default="present"),
        domain=dict(type="list", elements="str", aliases=["domains"]),
        managed_prefixes=dict(type="list", elements="str"),
        wait=dict(type="str", choices=["none", "advertised", "allocatable"], default="advertised"),
        wait_timeout=dict(type="int", default=120),
        parallel=dict(type="int", default=10),
    )
    return spec


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[("name", "names", "label_selectors"), ("name", "names", "field_selectors")],
        supports_check_mode=True,
    )
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    if not HAS_JSONPATCH:
        module.fail_json(msg=missing_required_lib("jsonpatch"), exception=JSONPATCH_IMPORT_ERROR)
    validate_targets(module)
    resources, domains, prefixes = validate(module)
    result = dict(changed=False, nodes=[], changed_nodes=[], failed_nodes=[], waited_for="none")
    error = None
    try:
        client = KubeClient(module)
        task = ExtendedResourceTask(module, client, resources, domains, prefixes)
        nodes = task.run()
    except KubeHwError as err:
        error = err
    if error is not None:
        done = getattr(error, "results", None) or []
        if done:  # a list page failed after earlier pages were patched: say what was changed
            result.update(nodes=done, changed=any(n["changed"] for n in done),
                          changed_nodes=[n["name"] for n in done if n["changed"]],
                          failed_nodes=[n["name"] for n in done if n["failed"]])
        module.fail_json(msg=error.msg, status=error.status, reason=error.reason, **result)
    for text in task.warnings:
        module.warn(text)
    result["nodes"] = nodes
    result["changed"] = any(n["changed"] for n in nodes)
    result["changed_nodes"] = [n["name"] for n in nodes if n["changed"]]
    result["failed_nodes"] = [n["name"] for n in nodes if n["failed"]]
    if not module.check_mode:
        result["waited_for"] = module.params["wait"]
    if module._diff:
        result["diff"] = [dict(before_header="node %s" % n["name"], after_header="node %s" % n["name"],
                               before=n["diff"]["before"], after=n["diff"]["after"])
                          for n in nodes if n.get("diff") and n["changed"]]
    if result["failed_nodes"]:
        failed = [n for n in nodes if n["failed"]]
        result["msg"] = "Failed on %d of %d node(s)%s: %s" % (
            len(failed), len(nodes),
            " (changed and kept: %s)" % ", ".join(result["changed_nodes"]) if result["changed_nodes"] else "",
            "; ".join(n["msg"] for n in failed))
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
