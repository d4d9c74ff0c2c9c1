# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_nodes
short_description: Kubernetes nodes as inventory hosts, grouped by the accelerators the cluster knows they have
version_added: 1.0.0
description:
  - One host per Kubernetes Node, read in one paged list (C(limit) and C(continue); an expired C(continue) token
    starts the list again), optionally narrowed by label and field selectors and a node name pattern.
  - C(ansible_host) is the first address of the node whose type comes first in O(address_types) (C(InternalIP) by
    default). A node without such an address is listed anyway, without C(ansible_host), and named in a warning.
  - Every host gets C(kubehw_node_name), the variable the roles and playbooks of this collection read to find the
    node of a host, and C(kubehw_node) with the node's labels, annotations, capacity, allocatable, addresses,
    taints and readiness, for O(compose), O(groups) and O(keyed_groups).
  - "Groups that the collection's playbooks use: C(gpu_nodes) (a GPU vendor's NFD PCI label or vendor label, as
    the device-plugin presets of M(kubehw.devices.device_plugin_deploy) select nodes; a GPU extended resource in
    capacity; or the allocation label), with the children C(nvidia_gpu_nodes), C(amd_gpu_nodes),
    C(intel_gpu_nodes) and C(dra_gpu_nodes) (the allocation label says C(dra)), and C(static_resource_nodes)
    (O(static_resource_nodes))."
  - The connection options and their C(K8S_AUTH_*) environment variables are those of the collection's modules
    (and of kubernetes.core), so an AWX inventory source with a Kubernetes credential works unchanged.
  - The configuration file must end in C(k8s_nodes.yml) or C(k8s_nodes.yaml).
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin; makes the file an inventory source of it.
    required: true
    type: str
    choices: [kubehw.devices.k8s_nodes]
  label_selectors:
    description:
      - Only nodes matching all these label selectors (ANDed), as the modules' O(label_selectors) take them,
        e.g. V(node-role.kubernetes.io/gpu) or V(topology.kubernetes.io/zone=zone-a).
      - Leave it out to list every node; an empty list or a blank selector is refused.
    type: list
    elements: str
  field_selectors:
    description:
      - Only nodes matching all these field selectors (ANDed), e.g. V(spec.unschedulable=false).
    type: list
    elements: str
  name_pattern:
    description:
      - Only nodes whose whole name matches this Python regular expression, e.g. V(gpu-.*).
    type: str
  address_types:
    description:
      - Which address of the node becomes C(ansible_host), the first address of the first type in this list the
        node has.
    type: list
    elements: str
    default: [InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname]
  page_size:
    description:
      - Nodes per page of the list (C(limit)); every page is one request.
    type: int
    default: 500
  retry_timeout:
    description:
      - Seconds in all for which a request answered with 429 or 5xx, or whose connection drops after the server
        has answered once, is asked again (with backoff) before the inventory fails. The default rides out an
        apiserver restart, as the modules do; V(0) fails at the first such error.
      - An address that never answered (refused, unknown host, no connection within O(connect_timeout)) is
        reported at once, whatever this says.
    type: float
    default: 45
    env:
      - name: KUBEHW_INVENTORY_RETRY_TIMEOUT
  allocation_label:
    description:
      - The node label that says what serves a GPU node's devices, as the C(kubehw.devices.accelerator_node) role
        reads it (C(accelerator_node_allocation_label)). V(dra) puts the host in C(dra_gpu_nodes) and sets
        C(accelerator_node_allocation=dra); V(device-plugin) sets C(accelerator_node_allocation=device_plugin).
        Either value makes the host a member of C(gpu_nodes).
    type: str
    default: kubehw.devices/gpu-allocation
  static_resources_annotation:
    description:
      - 'A node annotation holding a JSON object of static extended resources, for example
        C({"example.com/dongle": 2}). A valid one becomes the host''s C(extended_resources_static), what the
        role kubehw.devices.extended_resources advertises. An invalid one is named in a warning and ignored.'
    type: str
    default: kubehw.devices/static-resources
  static_resource_nodes:
    description:
      - A Jinja2 conditional, evaluated like an entry of O(groups) after O(compose), that puts a host in
        C(static_resource_nodes). The default takes the nodes whose O(static_resources_annotation) was valid.
      - For example V("'example.com/dongle' in kubehw_node.capacity") or
        V("kubehw_node.labels['example.com/dongles'] | default('') == 'true'") (then give
        C(extended_resources_static) through O(compose) or C(host_vars)).
    type: str
    default: extended_resources_static is defined
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
# gpu.k8s_nodes.yml. With no connection option the K8S_AUTH_* variables are read as the modules read them
# (an AWX inventory source with an "OpenShift or Kubernetes API Bearer Token" credential sets them), then the
# in-cluster service account, then $KUBECONFIG or ~/.kube/config.
plugin: kubehw.devices.k8s_nodes
label_selectors:
  - node-role.kubernetes.io/worker
name_pattern: "gpu-.*|lab-.*"
address_types: [ExternalIP, InternalIP]
compose:
  ansible_user: "'ansible'"
keyed_groups:
  - key: kubehw_node.labels['topology.kubernetes.io/zone'] | default('')
    prefix: zone
# No cache: moving a node to DRA is a relabel and a run, and a cached list would hide the new label until it expired.
# On a large fleet, turn it on (cache: true, cache_plugin: ansible.builtin.jsonfile, cache_connection: ~/.cache/kubehw-inventory)
# and run with --flush-cache after relabelling a node.
"""

import json
import re

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.kubehw.devices.plugins.module_utils import _client
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    TIMEOUT_FLOORS,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem, quantity_value, whole_quantity)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import label_key_problem, selector_problem
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import condition

# Everything read from the cluster is wrapped unsafe before Ansible sees it: a node annotation or address that reads
# "{{ lookup('pipe', ...) }}" must stay a string on every supported ansible-core (2.17 and 2.18 template any string not
# so marked; 2.19 templates only trusted strings, and wrap_var keeps those untrusted).
from ansible.utils.unsafe_proxy import wrap_var as make_unsafe

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 templates every string
    def trust_as_template(value):
        return value

ADDRESS_TYPES = ("InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname")
GPU_GROUP = "gpu_nodes"
DRA_GROUP = "dra_gpu_nodes"
STATIC_GROUP = "static_resource_nodes"
# The allocation label's values (as the accelerator_node role reads them) and what they set.
ALLOCATIONS = {"dra": "dra", "device-plugin": "device_plugin"}
# Warnings list at most this many node names; 5,000 nodes without an address make one readable line.
NAMES_SHOWN = 10
CONDITION_READY = "Ready"
# The default static_resource_nodes rule. Design choice: it is decided in Python, with the same meaning, because
# compiling the Jinja2 conditional once per host took most of the time at 5,000 nodes (about 3 ms a host); a rule
# of the user's is evaluated by Ansible's templar, as an entry of groups is.
DEFAULT_STATIC_RULE = "extended_resources_static is defined"


def _vendor(key, group, preset):
    """One GPU vendor, from its device-plugin preset: the same label alternatives the preset's DaemonSet selects
    (Design choice: without the preset's kubernetes.io/arch term; the upstream image is built for amd64 only, but
    an arm64 node with an AMD GPU still has one) and the domains of the resources its plugin registers."""
    terms = []
    for term in preset["node_terms"]:
        hardware = tuple((label, value) for label, value in term if label != presets.AMD64[0])
        if hardware and hardware not in terms:
            terms.append(hardware)
    domains = tuple(sorted(set(name.split("/", 1)[0] + "/" for name in preset["resources"])))
    return {"key": key, "group": group, "terms": tuple(terms), "domains": domains}


# One source of truth: the label forms are those the device-plugin presets accept, imported, not copied.
VENDORS = (
    _vendor("nvidia", "nvidia_gpu_nodes", presets.NVIDIA),
    _vendor("amd", "amd_gpu_nodes", presets.AMD),
    _vendor("intel", "intel_gpu_nodes", presets.INTEL_GPU),
)


# -- pure functions (unit tested) ----------------------------------------------------------------------------------

def check_options(options):
    """Refuse what cannot work, before the first request. ``options`` maps option name to value (None when unset).
    Returns the options with the compiled name pattern under ``name_regex``."""
    checked = dict(options)
    _check_selectors(options)
    checked["name_regex"] = _name_regex(options.get("name_pattern"))
    _check_address_types(options.get("address_types"))
    _check_page_size(options.get("page_size"))
    _check_keys_and_grouping_rule(options)
    _check_connection_options(options)
    return checked


def _check_selectors(options):
    for option in ("label_selectors", "field_selectors"):
        value = options.get(option)
        if value is None:
            continue
        if not value:
            raise InputRefused("%s is an empty list: leave it out to list every node (an empty selector never "
                               "means every node here)" % option)
        for term in value:
            problem = selector_problem(term)
            if problem:
                raise InputRefused("%s entry %r %s" % (option, term, problem))


def _name_regex(pattern):
    """name_pattern compiled, or None when it is not set."""
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern.strip():
        raise InputRefused("name_pattern %r must be a non-blank regular expression; leave it out to take every "
                           "node name" % (pattern,))
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InputRefused("name_pattern %r is not a Python regular expression: %s" % (pattern, exc))


def _check_address_types(types):
    if not types:
        raise InputRefused("address_types must list at least one of %s" % ", ".join(ADDRESS_TYPES))
    for kind in types:
        if kind not in ADDRESS_TYPES:
            raise InputRefused("address_types entry %r is not a node address type: use %s (case matters)"
                               % (kind, ", ".join(ADDRESS_TYPES)))
    if len(set(types)) != len(types):
        raise InputRefused("address_types %s names a type twice" % list(types))


def _check_page_size(page_size):
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise InputRefused("page_size %r must be a whole number of at least 1" % (page_size,))


def _check_keys_and_grouping_rule(options):
    """allocation_label and static_resources_annotation, and the static_resource_nodes conditional."""
    for option in ("allocation_label", "static_resources_annotation"):
        problem = label_key_problem(options.get(option))
        if problem:
            raise InputRefused("%s %r is not a label or annotation key: %s" % (option, options.get(option), problem))
    rule = options.get("static_resource_nodes")
    if not isinstance(rule, str) or not rule.strip():
        raise InputRefused("static_resource_nodes %r must be a Jinja2 conditional, e.g. "
                           "'extended_resources_static is defined'" % (rule,))


def _check_connection_options(options):
    """The timeouts and proxy_headers (the other connection options are the client's to check)."""
    for option, _zero_allowed in TIMEOUT_FLOORS:
        problem = options.get(option) is not None and timeout_problem(option, options[option])
        if problem:
            raise InputRefused(problem)
    # Ansible checks the type of a dict option, not its keys; the client would fail on an unknown one
    headers = options.get("proxy_headers") or {}
    allowed = sorted(AUTH_ARG_SPEC["proxy_headers"]["options"])
    unknown = sorted(key for key in headers if key not in allowed)
    if unknown:
        raise InputRefused("proxy_headers has unknown key%s %s: use %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown), ", ".join(allowed)))


def unknown_keys(config, known):
    """Keys of the configuration file that are no option (or alias) of the plugin, sorted."""
    return sorted(key for key in config if key not in known)


def choose_address(addresses, types):
    """(address, type) of the first address whose type comes first in ``types``, or (None, None)."""
    by_type = {}
    for entry in addresses or []:
        if not isinstance(entry, dict):
            continue
        kind, address = entry.get("type"), entry.get("address")
        if kind and isinstance(address, str) and address.strip() and kind not in by_type:
            by_type[kind] = address.strip()
    for kind in types:
        if kind in by_type:
            return by_type[kind], kind
    return None, None


def _positive(value):
    amount = quantity_value(value)
    return amount is not None and amount > 0


def gpu_vendors(labels, capacity):
    """Keys of the vendors whose GPUs the node shows: a label alternative of the vendor's device-plugin preset
    holds (NFD PCI labels, GPU Feature Discovery's nvidia.com/gpu.present, Intel's NFD rule), or a resource of
    the vendor's domain in capacity is above zero (nvidia.com/gpu, MIG and time-sliced names; amd.com/gpu;
    gpu.intel.com/i915 and xe)."""
    labels = labels or {}
    capacity = capacity or {}
    found = []
    for vendor in VENDORS:
        by_label = any(all(labels.get(label) == value for label, value in term) for term in vendor["terms"])
        by_capacity = any(name.startswith(vendor["domains"]) and _positive(amount)
                          for name, amount in capacity.items())
        if by_label or by_capacity:
            found.append(vendor["key"])
    return found


def allocation_of(labels, label):
    """(accelerator_node_allocation, problem): from the allocation label; (None, None) when the node has none."""
    value = (labels or {}).get(label)
    if value is None:
        return None, None
    if value in ALLOCATIONS:
        return ALLOCATIONS[value], None
    return None, "label %s=%s is neither %s" % (label, value, " nor ".join(sorted(ALLOCATIONS)))


def static_resources_of(annotations, annotation):
    """(resources, problem) from the static-resources annotation: ({name: int}, None), (None, None) when the node
    has none, (None, why) when it cannot be used."""
    raw = (annotations or {}).get(annotation)
    if raw is None:
        return None, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, "annotation %s is not JSON: %s" % (annotation, exc)
    if not isinstance(value, dict):
        return None, "annotation %s must be a JSON object of resource names and counts" % annotation
    resources = {}
    for name, amount in value.items():
        problem = extended_resource_name_problem(name)
        if problem:
            return None, "annotation %s: %r is not an extended resource name: %s" % (annotation, name, problem)
        try:
            resources[name] = whole_quantity(amount, name)
        except InputRefused as exc:
            return None, "annotation %s: %s" % (annotation, exc)
    return resources, None


def node_record(node):
    """What the inventory keeps of a Node object (and what the cache stores): JSON-serialisable."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    info = status.get("nodeInfo") or {}
    cond = condition(node, CONDITION_READY)
    ready = cond.get("status") == "True" if cond is not None else None
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
        "capacity": dict(status.get("capacity") or {}),
        "allocatable": dict(status.get("allocatable") or {}),
        "addresses": [dict(a) for a in status.get("addresses") or [] if isinstance(a, dict)],
        "taints": [dict(t) for t in spec.get("taints") or [] if isinstance(t, dict)],
        "unschedulable": bool(spec.get("unschedulable")),
        "ready": ready,
        "provider_id": spec.get("providerID"),
        "architecture": info.get("architecture") or None,
        "os_image": info.get("osImage") or None,
        "kernel_version": info.get("kernelVersion") or None,
        "kubelet_version": info.get("kubeletVersion") or None,
        "container_runtime_version": info.get("containerRuntimeVersion") or None,
    }


def host_plan(record, options):
    """What one node becomes: its variables, the plugin's own groups, and the problems to warn about."""
    name = record["name"]
    variables = {"kubehw_node_name": name}
    problems = []
    address, kind = choose_address(record["addresses"], options["address_types"])
    node = dict(record, address=address, address_type=kind)
    variables["kubehw_node"] = node
    if address:
        variables["ansible_host"] = address
    vendors = gpu_vendors(record["labels"], record["capacity"])
    variables["kubehw_gpu_vendors"] = vendors
    groups = [v["group"] for v in VENDORS if v["key"] in vendors]
    allocation, problem = allocation_of(record["labels"], options["allocation_label"])
    if problem:
        problems.append(problem)
    if allocation:
        variables["accelerator_node_allocation"] = allocation
        if allocation == "dra":
            groups.append(DRA_GROUP)
    if vendors or allocation:
        groups.insert(0, GPU_GROUP)
    static, problem = static_resources_of(record["annotations"], options["static_resources_annotation"])
    if problem:
        problems.append(problem)
    if static is not None:
        variables["extended_resources_static"] = static
    return {"name": name, "variables": variables, "groups": groups, "problems": problems, "address": address}


def name_list(names):
    shown = ", ".join(names[:NAMES_SHOWN])
    if len(names) > NAMES_SHOWN:
        shown += " and %d more" % (len(names) - NAMES_SHOWN)
    return shown


def explain_error(err, server, path):
    """One line for a failed list: what happened and what to fix."""
    status = getattr(err, "status", None)
    reason = getattr(err, "reason", None)
    where = "the API server at %s" % (server or "(unknown)")
    detail = to_native(err).replace("\n", " ")
    if status == 401:
        return ("%s: %s answered 401 Unauthorized: its credentials were not accepted; fix api_key (K8S_AUTH_API_KEY), "
                "client_cert/client_key or the kubeconfig user (the token may have expired)" % (path, where))
    if status == 403:
        return ("%s: %s answered 403 Forbidden: this identity may not list nodes; grant it get and list on nodes "
                "(cluster-wide), or use another identity. Server said: %s" % (path, where, detail))
    if reason == "ConnectionError":
        return ("%s: %s could not be reached; check host (K8S_AUTH_HOST) or the kubeconfig's server, and that the "
                "cluster is up. %s" % (path, where, detail))
    if status == 400:
        return ("%s: %s refused the list: check label_selectors and field_selectors. %s" % (path, where, detail))
    # TLS (names ca_cert and validate_certs), connection settings (ConfigError), a missing library: the client's
    # message already says what to fix
    return "%s: %s" % (path, detail)


# -- the plugin ----------------------------------------------------------------------------------------------------

class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "kubehw.devices.k8s_nodes"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and \
            to_native(path).endswith(("k8s_nodes.yml", "k8s_nodes.yaml"))

    def _known_keys(self):
        from ansible import constants as C
        definitions = C.config.get_configuration_definitions("inventory", self._load_name) or {}
        known = set(definitions)
        for definition in definitions.values():
            known.update(definition.get("aliases") or [])
        return known

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path)
        config = self._read_config_data(path)
        unknown = unknown_keys(config, self._known_keys())
        if unknown:
            raise AnsibleParserError("%s: unknown option%s %s (see ansible-doc -t inventory %s)" % (
                path, "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown), self.NAME))
        names = ("label_selectors", "field_selectors", "name_pattern", "address_types", "page_size",
                 "allocation_label", "static_resources_annotation", "static_resource_nodes", "request_timeout",
                 "connect_timeout", "proxy_headers", "retry_timeout")
        try:
            options = check_options(dict((name, self.get_option(name)) for name in names))
        except InputRefused as exc:
            raise AnsibleParserError("%s: %s" % (path, exc))

        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache")
        records = None
        if use_cache and cache:
            try:
                records = self._cache[cache_key]
            except KeyError:
                records = None
        if records is None:
            records = self._list_nodes(path, options)
            if use_cache:
                self._cache[cache_key] = records
        self._populate(records, options)

    def _auth_params(self):
        # The modules' option set; unset options stay None so the client reads K8S_AUTH_* as the modules do.
        return dict((name, self.get_option(name)) for name in AUTH_ARG_SPEC)

    def _list_nodes(self, path, options):
        server = None
        try:
            client = _client.KubeClient(params=self._auth_params())
            server = client.configuration.host
            kwargs = {"limit": options["page_size"], "what": "list nodes"}
            if options.get("label_selectors"):
                kwargs["label_selector"] = ",".join(options["label_selectors"])
            if options.get("field_selectors"):
                kwargs["field_selector"] = ",".join(options["field_selectors"])
            records = []
            for page, restarted in client.list_pages(client.core.list_node, **kwargs):
                if restarted:
                    # the continue token expired (410): the list started again from the first page
                    records = []
                for node in page.get("items") or []:
                    records.append(node_record(node))
        except KubeHwError as err:
            raise AnsibleParserError(explain_error(err, server, path))
        regex = options.get("name_regex")
        if regex is not None:
            records = [r for r in records if r["name"] and regex.fullmatch(r["name"])]
        return sorted(records, key=lambda r: r["name"] or "")

    def _populate(self, records, options):
        strict = self.get_option("strict")
        compose = self.get_option("compose")
        groups = self.get_option("groups")
        keyed_groups = self.get_option("keyed_groups")
        default_rule = options["static_resource_nodes"].strip() == DEFAULT_STATIC_RULE
        rule = {STATIC_GROUP: trust_as_template(options["static_resource_nodes"])}
        for group in (GPU_GROUP, STATIC_GROUP):
            self.inventory.add_group(group)
        for vendor_group in [v["group"] for v in VENDORS] + [DRA_GROUP]:
            self.inventory.add_group(vendor_group)
            self.inventory.add_child(GPU_GROUP, vendor_group)
        without_address, problems = [], []
        for record in records:
            plan = host_plan(record, options)
            host = make_unsafe(plan["name"])
            self.inventory.add_host(host)
            for key, value in plan["variables"].items():
                self.inventory.set_variable(host, key, make_unsafe(value))
            for group in plan["groups"]:
                self.inventory.add_child(group, host)
            if not plan["address"]:
                without_address.append(host)
            problems.extend("%s: %s" % (host, p) for p in plan["problems"])
            variables = self.inventory.get_host(host).get_vars()
            self._set_composite_vars(compose, variables, host, strict=strict)
            variables = self.inventory.get_host(host).get_vars()
            if not default_rule:
                self._add_host_to_composed_groups(rule, variables, host, strict=strict)
            elif "extended_resources_static" in variables:
                self.inventory.add_child(STATIC_GROUP, host)
            self._add_host_to_composed_groups(groups, variables, host, strict=strict)
            self._add_host_to_keyed_groups(keyed_groups, variables, host, strict=strict)
        if without_address:
            count = len(without_address)
            self.display.warning(
                "k8s_nodes: %d node%s without an address of type %s, listed without ansible_host (Ansible connects "
                "to the node name): %s" % (count, "s" if count > 1 else "", ", ".join(options["address_types"]),
                                           name_list(without_address)))
        if problems:
            more = "; and %d more" % (len(problems) - NAMES_SHOWN) if len(problems) > NAMES_SHOWN else ""
            self.display.warning("k8s_nodes: %d node label or annotation%s ignored: %s%s" % (
                len(problems), "s" if len(problems) > 1 else "", "; ".join(problems[:NAMES_SHOWN]), more))
