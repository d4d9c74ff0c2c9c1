# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k8s_nodes inventory plugin's pure functions (grouping, address choice, configuration checks), its list
(pages, an expired continue token, errors) with a fake API, and how it fills an inventory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

import pytest

from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19: a configuration's strings are templates as they are
    def trust_as_template(value):
        return value

from ansible_collections.kubehw.devices.plugins.inventory import k8s_nodes
from ansible_collections.kubehw.devices.plugins.inventory.k8s_nodes import (
    InventoryModule, allocation_of, check_options, choose_address, explain_error, gpu_vendors,
    host_plan, node_record, static_resources_of, unknown_keys)
from ansible_collections.kubehw.devices.plugins.module_utils import _client
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils._connection import AUTH_ARG_SPEC, resolve_auth_params
from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused, KubeHwError

DEFAULTS = {
    "label_selectors": None, "field_selectors": None, "name_pattern": None,
    "address_types": ["InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname"],
    "page_size": 500, "allocation_label": "kubehw.devices/gpu-allocation",
    "static_resources_annotation": "kubehw.devices/static-resources",
    "static_resource_nodes": "extended_resources_static is defined", "request_timeout": 30.0,
    "retry_timeout": 45.0,
}


def options(**overrides):
    return check_options(dict(DEFAULTS, **overrides))


def node(name, labels=None, capacity=None, addresses=None, annotations=None):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {},
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {},
            "status": {"capacity": capacity or {}, "addresses": addresses or [],
                       "conditions": [{"type": "Ready", "status": "True"}], "images": [{"names": ["x"]}]}}


# -- address ---------------------------------------------------------------------------------------------------------

ADDRESSES = [{"type": "Hostname", "address": "gpu-a"}, {"type": "ExternalIP", "address": "203.0.113.7"},
             {"type": "InternalIP", "address": "10.0.0.7"}, {"type": "InternalIP", "address": "10.0.0.8"}]


def test_internal_ip_first_by_default_whatever_the_order_the_node_lists():
    assert choose_address(ADDRESSES, DEFAULTS["address_types"]) == ("10.0.0.7", "InternalIP")


def test_address_order_is_configurable():
    assert choose_address(ADDRESSES, ["ExternalIP", "InternalIP"]) == ("203.0.113.7", "ExternalIP")
    assert choose_address(ADDRESSES, ["Hostname"]) == ("gpu-a", "Hostname")


def test_no_address_of_the_wanted_types_or_blank_ones_gives_none():
    assert choose_address(ADDRESSES, ["InternalDNS"]) == (None, None)
    assert choose_address([{"type": "InternalIP", "address": " "}], ["InternalIP"]) == (None, None)
    assert choose_address(None, ["InternalIP"]) == (None, None)


# -- vendors ---------------------------------------------------------------------------------------------------------

PRESET_OF = {"nvidia": presets.NVIDIA, "amd": presets.AMD, "intel": presets.INTEL_GPU}


@pytest.mark.parametrize("vendor,term", [(v, t) for v in sorted(PRESET_OF) for t in PRESET_OF[v]["node_terms"]],
                         ids=lambda x: x if isinstance(x, str) else "+".join("%s=%s" % pair for pair in x))
def test_every_label_form_a_device_plugin_preset_accepts_makes_the_vendor(vendor, term):
    labels = dict(term)
    assert gpu_vendors(labels, {}) == [vendor]
    plan = host_plan(node_record(node("n", labels=labels)), options())
    assert plan["groups"] == ["gpu_nodes", "%s_gpu_nodes" % vendor]


def test_the_architecture_term_is_not_needed_for_the_vendor():
    # the AMD preset's DaemonSet also selects kubernetes.io/arch=amd64; the hardware is AMD on arm64 too
    assert gpu_vendors({"feature.node.kubernetes.io/pci-0380_1002.present": "true", "kubernetes.io/arch": "arm64"},
                       {}) == ["amd"]


def test_a_label_with_another_value_is_no_vendor():
    assert gpu_vendors({"feature.node.kubernetes.io/pci-10de.present": "false", "nvidia.com/gpu.present": ""}, {}) == []
    assert gpu_vendors({"feature.node.kubernetes.io/pci-8086.present": "true"}, {}) == []  # no preset term


@pytest.mark.parametrize("capacity,vendors", [
    ({"nvidia.com/gpu": "4"}, ["nvidia"]),
    ({"nvidia.com/mig-1g.5gb": "7"}, ["nvidia"]),
    ({"amd.com/gpu": "1"}, ["amd"]),
    ({"gpu.intel.com/xe": "2"}, ["intel"]),
    ({"gpu.intel.com/i915": "1Ki"}, ["intel"]),
    ({"nvidia.com/gpu": "0"}, []),
    ({"example.com/dongle": "2", "cpu": "8"}, []),
    ({"nvidia.com/gpu": "2", "amd.com/gpu": "1"}, ["nvidia", "amd"]),
])
def test_extended_resources_in_capacity_make_the_vendor(capacity, vendors):
    assert gpu_vendors({}, capacity) == vendors


# -- allocation label and static resources ---------------------------------------------------------------------------

def test_allocation_label_values_as_the_role_reads_them():
    label = DEFAULTS["allocation_label"]
    assert allocation_of({label: "dra"}, label) == ("dra", None)
    assert allocation_of({label: "device-plugin"}, label) == ("device_plugin", None)
    assert allocation_of({}, label) == (None, None)
    allocation, problem = allocation_of({label: "device_plugin"}, label)
    assert allocation is None and "device_plugin" in problem and "device-plugin" in problem


def test_dra_label_alone_makes_a_gpu_node_in_dra_gpu_nodes_with_its_allocation():
    plan = host_plan(node_record(node("n", labels={DEFAULTS["allocation_label"]: "dra"})), options())
    assert plan["groups"] == ["gpu_nodes", "dra_gpu_nodes"]
    assert plan["variables"]["accelerator_node_allocation"] == "dra"
    plan = host_plan(node_record(node("n", labels={DEFAULTS["allocation_label"]: "device-plugin",
                                                   "nvidia.com/gpu.present": "true"})), options())
    assert plan["groups"] == ["gpu_nodes", "nvidia_gpu_nodes"]
    assert plan["variables"]["accelerator_node_allocation"] == "device_plugin"


def test_static_resources_annotation():
    key = DEFAULTS["static_resources_annotation"]
    assert static_resources_of({key: '{"example.com/dongle": 2, "example.com/key": "1"}'}, key) == (
        {"example.com/dongle": 2, "example.com/key": 1}, None)
    assert static_resources_of({}, key) == (None, None)
    for raw, words in (("{", "not JSON"), ("[1]", "JSON object"), ('{"dongle": 1}', "not an extended resource name"),
                       ('{"example.com/d": -1}', "greater than or equal to 0"),
                       ('{"example.com/d": 1.5}', "whole numbers")):
        resources, problem = static_resources_of({key: raw}, key)
        assert resources is None and words in problem and key in problem, (raw, problem)


def test_host_plan_variables_and_problems():
    record = node_record(node("gpu-a", labels={"nvidia.com/gpu.present": "true", DEFAULTS["allocation_label"]: "x"},
                              addresses=ADDRESSES,
                              annotations={DEFAULTS["static_resources_annotation"]: '{"example.com/d": 2}'}))
    plan = host_plan(record, options())
    variables = plan["variables"]
    assert variables["kubehw_node_name"] == "gpu-a"
    assert variables["ansible_host"] == "10.0.0.7"
    assert variables["kubehw_node"]["address_type"] == "InternalIP"
    assert variables["kubehw_gpu_vendors"] == ["nvidia"]
    assert variables["extended_resources_static"] == {"example.com/d": 2}
    assert "accelerator_node_allocation" not in variables
    assert plan["problems"] == ["label kubehw.devices/gpu-allocation=x is neither device-plugin nor dra"]
    # what is kept is small and JSON (the cache stores it): no managedFields, no images
    assert "managedFields" not in json.dumps(record) and "images" not in json.dumps(record)
    assert record["ready"] is True


def test_a_plain_node_is_in_no_group_of_the_plugin_and_has_no_ansible_host():
    plan = host_plan(node_record(node("cpu-1")), options())
    assert plan["groups"] == [] and "ansible_host" not in plan["variables"] and plan["address"] is None


# -- configuration ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides,words", [
    ({"label_selectors": []}, "label_selectors is an empty list"),
    ({"label_selectors": ["a=b", " "]}, "label_selectors entry ' ' must not be empty or blank"),
    ({"field_selectors": ["spec.unschedulable=false\n"]}, "field_selectors entry"),
    ({"name_pattern": ""}, "name_pattern '' must be a non-blank"),
    ({"name_pattern": "gpu-("}, "name_pattern 'gpu-(' is not a Python regular expression"),
    ({"address_types": []}, "address_types must list at least one"),
    ({"address_types": ["internalip"]}, "address_types entry 'internalip' is not a node address type"),
    ({"address_types": ["InternalIP", "InternalIP"]}, "names a type twice"),
    ({"page_size": 0}, "page_size 0 must be a whole number of at least 1"),
    ({"allocation_label": "bad label"}, "allocation_label 'bad label' is not a label or annotation key"),
    ({"static_resources_annotation": ""}, "static_resources_annotation '' is not a label or annotation key"),
    ({"static_resource_nodes": " "}, "static_resource_nodes ' ' must be a Jinja2 conditional"),
    ({"request_timeout": 0}, "request_timeout 0 must be a number of seconds above 0"),
    ({"connect_timeout": -2}, "connect_timeout -2 must be a number of seconds above 0"),
    ({"retry_timeout": -1}, "retry_timeout -1 must be a number of seconds 0 or more"),
    ({"retry_timeout": True}, "retry_timeout True must be a number of seconds 0 or more"),
    ({"proxy_headers": {"user_agent": "x", "proxy_auth": "u:p"}},
     "proxy_headers has unknown key 'proxy_auth': use basic_auth, proxy_basic_auth, user_agent"),
])
def test_config_checks_name_the_option(overrides, words):
    with pytest.raises(InputRefused) as err:
        options(**overrides)
    assert words in str(err.value)


def test_config_accepts_the_defaults_and_compiles_the_pattern():
    checked = options(name_pattern="gpu-.*", label_selectors=["a=b"], field_selectors=["spec.unschedulable=false"])
    assert checked["name_regex"].fullmatch("gpu-1") and not checked["name_regex"].fullmatch("cpu-gpu-1")
    assert options()["name_regex"] is None


def test_unknown_keys_are_named():
    assert unknown_keys({"plugin": 1, "lable_selectors": 2, "kubeconfig": 3, "verify_ssl": 4},
                        {"plugin", "label_selectors", "kubeconfig", "validate_certs", "verify_ssl"}) == ["lable_selectors"]


# -- errors ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("err,words", [
    (KubeHwError("Failed to list nodes: 401 Unauthorized", status=401, reason="Unauthorized"),
     "answered 401 Unauthorized: its credentials were not accepted; fix api_key"),
    (KubeHwError("Failed to list nodes: 403 Forbidden: nodes is forbidden", status=403, reason="Forbidden"),
     "may not list nodes; grant it get and list on nodes"),
    (KubeHwError("Failed to list nodes: connection to x failed:\nrefused", reason="ConnectionError"),
     "could not be reached; check host (K8S_AUTH_HOST)"),
    (KubeHwError("Failed to list nodes: 400 Bad Request: unable to parse requirement", status=400,
                 reason="BadRequest"), "check label_selectors and field_selectors"),
])
def test_errors_are_one_line_naming_what_to_fix(err, words):
    line = explain_error(err, "https://k8s.example:6443", "site.k8s_nodes.yml")
    assert words in line and "\n" not in line and line.startswith("site.k8s_nodes.yml: ")


# -- the list, with a fake API ---------------------------------------------------------------------------------------

class FakeCore(object):
    def list_node(self, **kwargs):
        raise AssertionError("called through call_json only")


class FakeClient(_client.KubeClient):
    """KubeClient's own list_pages over canned answers: a list of pages or KubeHwErrors, in order."""

    def __init__(self, answers):  # pylint: disable=super-init-not-called
        self.answers = list(answers)
        self.calls = []
        self.retry_deadline = 45.0
        self.configuration = type("Cfg", (), {"host": "https://fake:6443"})()
        self.core = FakeCore()

    def call_json(self, fn, *args, **kwargs):
        self.calls.append(dict(kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def page(names, token=None):
    return {"items": [node(n) for n in names], "metadata": {"continue": token} if token else {}}


def plugin_with(monkeypatch, answers, **option_values):
    fake = FakeClient(answers)
    monkeypatch.setattr(k8s_nodes._client, "KubeClient", lambda params: fake)
    plugin = InventoryModule()
    plugin._options = dict((name, None) for name in AUTH_ARG_SPEC)
    plugin._options.update(option_values)
    return plugin, fake


def test_pages_follow_continue_and_an_expired_token_relists_from_the_start(monkeypatch):
    expired = KubeHwError("Failed to list nodes: 410 Gone: continue parameter is too old", status=410,
                          reason="Expired")
    plugin, fake = plugin_with(monkeypatch, [page(["a", "b"], "t1"), expired, page(["a", "b"], "t2"),
                                             page(["c"])])
    records = plugin._list_nodes("x.k8s_nodes.yml", options(page_size=2, label_selectors=["a=b", "c"]))
    assert [r["name"] for r in records] == ["a", "b", "c"]   # the first page's nodes are not listed twice
    assert [c.get("_continue") for c in fake.calls] == [None, "t1", None, "t2"]
    assert all(c["limit"] == 2 and c["label_selector"] == "a=b,c" for c in fake.calls)


def test_name_pattern_matches_the_whole_name(monkeypatch):
    plugin, _fake = plugin_with(monkeypatch, [page(["gpu-1", "gpu-10", "cpu-gpu-1", "gpu-1x"])])
    records = plugin._list_nodes("x.k8s_nodes.yml", options(name_pattern="gpu-[0-9]+"))
    assert [r["name"] for r in records] == ["gpu-1", "gpu-10"]


def test_a_refused_list_is_one_parser_error(monkeypatch):
    plugin, _fake = plugin_with(monkeypatch, [KubeHwError("Failed to list nodes: 403 Forbidden: no",
                                                          status=403, reason="Forbidden")])
    with pytest.raises(AnsibleParserError) as err:
        plugin._list_nodes("x.k8s_nodes.yml", options())
    assert "https://fake:6443 answered 403 Forbidden" in str(err.value)


@pytest.mark.parametrize("retry_timeout", [None, 0, 1.5])
def test_an_unreachable_server_is_one_parser_error_naming_the_host_option_at_once(retry_timeout):
    # the real client against a port nobody listens on: an address that never answered is not asked again, whatever
    # retry_timeout says (the default, 45, included)
    plugin = InventoryModule()
    plugin._options = dict((name, None) for name in AUTH_ARG_SPEC)
    plugin._options.update(host="https://127.0.0.1:9", request_timeout=5.0, retry_timeout=retry_timeout)
    # the client library imported first: its import (about a second on a loaded CI machine, where it once made this
    # 1.59 s) is not what the bound is about; the requests are
    _kubernetes_library.import_kubernetes()
    started = time.monotonic()
    with pytest.raises(AnsibleParserError) as err:
        plugin._list_nodes("x.k8s_nodes.yml", options(retry_timeout=retry_timeout))
    assert time.monotonic() - started < 1.5
    message = str(err.value)
    assert "the API server at https://127.0.0.1:9 could not be reached; check host (K8S_AUTH_HOST)" in message
    assert "\n" not in message


def test_the_timeouts_reach_the_client(monkeypatch):
    seen = []
    monkeypatch.setattr(k8s_nodes._client, "KubeClient", lambda params: seen.append(
        dict((k, v) for k, v in resolve_auth_params(params).items() if k.endswith("_timeout")))
        or FakeClient([page(["a"])]))
    plugin = InventoryModule()
    plugin._options = dict((name, None) for name in AUTH_ARG_SPEC)
    plugin._options.update(retry_timeout=3, connect_timeout=2.5)
    plugin._list_nodes("x.k8s_nodes.yml", options(retry_timeout=3, connect_timeout=2.5))
    plugin._options.update(retry_timeout=None, connect_timeout=None)
    plugin._list_nodes("x.k8s_nodes.yml", options())
    assert seen == [{"request_timeout": 30.0, "connect_timeout": 2.5, "retry_timeout": 3},
                    {"request_timeout": 30.0, "connect_timeout": 5.0, "retry_timeout": 45.0}]


def test_connection_options_come_from_k8s_auth_variables_as_in_the_modules(monkeypatch):
    seen = {}

    def client(params):
        seen.update(resolve_auth_params(params))
        raise KubeHwError("stop", reason="ConfigError")
    monkeypatch.setattr(k8s_nodes._client, "KubeClient", client)
    monkeypatch.setenv("K8S_AUTH_HOST", "https://env.example:6443")
    monkeypatch.setenv("K8S_AUTH_API_KEY", "env-token")
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "no")
    plugin = InventoryModule()
    plugin._options = dict((name, None) for name in AUTH_ARG_SPEC)
    plugin._options["context"] = "from-file"
    with pytest.raises(AnsibleParserError):
        plugin._list_nodes("x.k8s_nodes.yml", options())
    assert seen["host"] == "https://env.example:6443" and seen["api_key"] == "env-token"
    assert seen["validate_certs"] is False and seen["context"] == "from-file"


# -- filling the inventory -------------------------------------------------------------------------------------------

def populated(monkeypatch, records, **option_values):
    warnings = []
    plugin = InventoryModule()
    plugin._options = {"strict": True, "compose": {}, "groups": {}, "keyed_groups": [], "use_extra_vars": False,
                       "leading_separator": True}
    # what _read_config_data loads from the configuration file is trusted as templates
    plugin._options.update(trusted(option_values))
    inventory = InventoryData()
    super(InventoryModule, plugin).parse(inventory, DataLoader(), "x.k8s_nodes.yml")
    monkeypatch.setattr(plugin.display, "warning", warnings.append)
    plugin._populate(records, options(static_resource_nodes=option_values.get(
        "static_rule", DEFAULTS["static_resource_nodes"])))
    return inventory, warnings


def trusted(value):
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return trust_as_template(value) if isinstance(value, str) else value


def members(inventory, group):
    return sorted(h.name for h in inventory.groups[group].get_hosts())


def test_populate_groups_compose_keyed_groups_and_the_static_rule(monkeypatch):
    static = DEFAULTS["static_resources_annotation"]
    records = [
        node_record(node("gpu-a", labels={"feature.node.kubernetes.io/pci-0302_10de.present": "true",
                                          "zone": "z1"}, addresses=ADDRESSES)),
        node_record(node("gpu-b", labels={"kubehw.devices/gpu-allocation": "dra", "zone": "z2"},
                         capacity={"gpu.intel.com/i915": "1"})),
        node_record(node("lab-1", annotations={static: '{"example.com/dongle": 2}'},
                         addresses=[{"type": "InternalIP", "address": "10.0.0.9"}])),
        node_record(node("cpu-1", addresses=[{"type": "Hostname", "address": ""}])),
    ]
    inventory, warnings = populated(
        monkeypatch, records, compose={"ansible_user": "'ansible'"},
        groups={"zone_one": "kubehw_node.labels.zone | default('') == 'z1'"},
        keyed_groups=[{"key": "kubehw_node.labels.zone | default('none')", "prefix": "zone"}])
    assert members(inventory, "gpu_nodes") == ["gpu-a", "gpu-b"]
    assert members(inventory, "nvidia_gpu_nodes") == ["gpu-a"]
    assert members(inventory, "intel_gpu_nodes") == ["gpu-b"]
    assert members(inventory, "amd_gpu_nodes") == []
    assert members(inventory, "dra_gpu_nodes") == ["gpu-b"]
    assert members(inventory, "static_resource_nodes") == ["lab-1"]
    assert members(inventory, "zone_one") == ["gpu-a"]
    assert members(inventory, "zone_z2") == ["gpu-b"]
    assert inventory.get_host("lab-1").vars["extended_resources_static"] == {"example.com/dongle": 2}
    assert inventory.get_host("gpu-a").vars["ansible_user"] == "ansible"
    assert inventory.get_host("gpu-a").vars["ansible_host"] == "10.0.0.7"
    assert "ansible_host" not in inventory.get_host("gpu-b").vars
    # nodes without a usable address are kept, and named in one warning
    assert sorted(inventory.hosts) == ["cpu-1", "gpu-a", "gpu-b", "lab-1"]
    assert len(warnings) == 1 and "without an address" in warnings[0] and "cpu-1" in warnings[0] \
        and "gpu-b" in warnings[0], warnings


def test_default_static_rule_takes_resources_set_by_compose_too(monkeypatch):
    records = [node_record(node("lab-1", labels={"dongles": "yes"})), node_record(node("cpu-1"))]
    inventory, _warnings = populated(monkeypatch, records, strict=False, compose={
        "extended_resources_static": "{'example.com/dongle': 2} if kubehw_node.labels.dongles is defined else omit"})
    assert members(inventory, "static_resource_nodes") == ["lab-1"]


def test_static_resource_nodes_rule_is_configurable(monkeypatch):
    records = [node_record(node("lab-1", capacity={"example.com/dongle": "2"})), node_record(node("cpu-1"))]
    inventory, _warnings = populated(monkeypatch, records,
                                     static_rule="'example.com/dongle' in kubehw_node.capacity")
    assert members(inventory, "static_resource_nodes") == ["lab-1"]


def test_only_files_named_k8s_nodes_yml_are_taken(tmp_path):
    plugin = InventoryModule()
    for name, taken in (("gpu.k8s_nodes.yml", True), ("k8s_nodes.yaml", True), ("hosts.yml", False),
                        ("k8s_nodes.yml.bak", False), ("gpu.k8s.yml", False)):
        path = tmp_path / name
        path.write_text("plugin: kubehw.devices.k8s_nodes\n")
        assert plugin.verify_file(str(path)) is taken, name
