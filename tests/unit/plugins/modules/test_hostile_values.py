# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile values: names, quantities, sizes and strings of the wrong type, each refused by the module itself.

Each case runs a module's main() in this process with a client that records any attempt to connect: the case must
fail, name the offending value (or option) and the rule, carry no traceback, and leave the client unbuilt (so no
request can have been sent). The targets (empty, blank and widening names and selectors), where a wrong reading
would touch more of a cluster, are played through ansible-playbook against the real control plane in
tests/integration/test_hostile_inputs.py; a value rule is the module's own code either way, so it is tested here,
where a case costs milliseconds instead of a module process.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.kubehw.devices.plugins.modules import device_plugin_deploy
from ansible_collections.kubehw.devices.plugins.modules import dra_driver_deploy
from ansible_collections.kubehw.devices.plugins.modules import extended_resource_info
from ansible_collections.kubehw.devices.plugins.modules import k8s_node_drain
from ansible_collections.kubehw.devices.plugins.modules import k8s_node_extended_resource
from ansible_collections.kubehw.devices.plugins.modules import k8s_runtime_class
from ansible_collections.kubehw.devices.plugins.modules import resource_smoke_test
from tests.unit.plugins.modules.module_harness import NoClient, run_module
from tests.support.overrides import overridden

ER = k8s_node_extended_resource
INFO = extended_resource_info
SMOKE = resource_smoke_test
DEPLOY = device_plugin_deploy
RUNTIME = k8s_runtime_class

DONGLE = "hostile.example.com/dongle"
BASES = {
    ER: {"names": ["hostile-1", "hostile-2"], "resources": {DONGLE: 1}, "wait": "none"},
    INFO: {"include_pods": False},
    SMOKE: {"namespace": "kubehw-hostile"},
    DEPLOY: {"preset": "generic", "name": "hostile-plugin", "namespace": "kubehw-hostile",
             "devices": [{"name": "dongle", "groups": [{"paths": [{"path": "/dev/null"}]}]}],
             "device_domain": "hostile.example.com", "wait": "none"},
    RUNTIME: {"name": "hostile-rc", "handler": "hostile"},
}

# (module, parameters over its base (None removes one), offending value or option as the message shows it, the rule)
CASES = [
    # --- k8s_node_extended_resource
    (ER, {"names": None, "name": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (ER, {"names": None, "name": "hostile-1\r"}, "'hostile-1\\r'", "DNS subdomain"),
    (ER, {"names": None, "name": "hostile-1\x00"}, "'hostile-1\\x00'", "DNS subdomain"),
    (ER, {"names": None, "name": "Hostile-1"}, "'Hostile-1'", "lowercase"),
    (ER, {"names": None, "name": "h\u00f6stile-1"}, "h\u00f6stile-1", "DNS subdomain"),
    (ER, {"names": None, "name": "n" * 254}, "n" * 254, "no more than 253"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes\n"]}, "kubehw-hostile=yes", "control characters"),
    (ER, {"names": None, "field_selectors": ["metadata.name=hostile-1\n"]}, "metadata.name=hostile-1",
     "control characters"),
    (ER, {"names": None, "all_nodes": "maybe"}, "all_nodes", "bool"),
    (ER, {"resources": {"hostile.example.com/dongle\n": 1}}, "dongle\\n", "letters, digits"),
    (ER, {"resources": {"hostile.example.com\n/dongle": 1}}, "hostile.example.com\\n", "lowercase"),
    (ER, {"resources": {"hostile.example.com/dongle\t": 1}}, "dongle\\t", "letters, digits"),
    (ER, {"resources": {"hostile.example.com/d\u00f6ngle": 1}}, "d\u00f6ngle", "letters, digits"),
    (ER, {"resources": {"my-kubernetes.io/dongle": 1}}, "my-kubernetes.io", "native"),
    (ER, {"resources": {"hostile.example.com/" + "d" * 64: 1}}, "d" * 64, "no more than 63"),
    (ER, {"resources": {"a" * 250 + ".com/dongle": 1}}, "a" * 250, "no more than 253"),
    (ER, {"resources": {DONGLE: "4\n"}}, DONGLE, "must match"),
    (ER, {"resources": {DONGLE: "yes"}}, DONGLE, "must match"),
    (ER, {"resources": {DONGLE: "3.5"}}, DONGLE, "whole numbers"),
    (ER, {"resources": {DONGLE: "-3"}}, DONGLE, "greater than or equal to 0"),
    (ER, {"resources": {DONGLE: 10 ** 19}}, DONGLE, "at most"),
    (ER, {"resources": {DONGLE: "1e99"}}, DONGLE, "out of range"),
    (ER, {"resources": "hostile.example.com/dongle=4"}, "resources", "must be a dict"),
    (ER, {"resources": {"dongle": 4}}, "'dongle'", "exactly one '/'"),
    (ER, {"resources": {"a/b/c": 4}}, "a/b/c", "exactly one '/'"),
    (ER, {"resources": {"kubernetes.io/dongle": 4}}, "kubernetes.io/dongle", "reserved"),
    (ER, {"resources": {"sub.kubernetes.io/dongle": 4}}, "sub.kubernetes.io/dongle", "reserved"),
    (ER, {"resources": {"Hostile.example.com/dongle": 4}}, "Hostile.example.com/dongle", "lowercase"),
    (ER, {"resources": {"hostile.example.com/bad name": 4}}, "hostile.example.com/bad name", "letters, digits"),
    (ER, {"resources": {"requests.example.com/dongle": 4}}, "requests.example.com/dongle", "quota"),
    (ER, {"resources": {DONGLE: 1, "hostile.example.com/": 1}}, "hostile.example.com/", "must not be empty"),
    (ER, {"resources": {DONGLE: "500m"}}, DONGLE, "whole numbers"),
    (ER, {"resources": {DONGLE: -1}}, DONGLE, "greater than or equal to 0"),
    (ER, {"state": "exact"}, "state=exact", "domain or managed_prefixes"),
    (ER, {"state": "exact", "domain": "example.org"}, DONGLE, "outside"),
    (ER, {"state": "exact", "domain": [""], "resources": {}}, "''", "must not be empty"),
    (ER, {"state": "exact", "domain": ["hostile.example.com\n"], "resources": {}}, "hostile.example.com\\n",
     "lowercase"),
    (ER, {"state": "exact", "managed_prefixes": ["hostile.example.com/dongle\n"], "resources": {}},
     "hostile.example.com/dongle\\n", "start of a name"),
    (ER, {"parallel": 0}, "parallel", "at least 1"),
    (ER, {"parallel": 100000}, "parallel", "at most 100"),
    (ER, {"parallel": "three"}, "parallel", "int"),
    (ER, {"wait_timeout": -1}, "wait_timeout -1", "must be a number of seconds 0 or more"),
    (ER, {"state": "EXACT"}, "EXACT", "must be one of"),
    # --- extended_resource_info
    (INFO, {"name": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (INFO, {"all_nodes": True, "wait_allocatable": {"hostile.example.com/dongle\n": 1}}, "dongle\\n",
     "letters, digits"),
    (INFO, {"all_nodes": True, "wait_allocatable": {DONGLE: "-1"}}, DONGLE, "greater than or equal to 0"),
    (INFO, {"all_nodes": True, "wait_allocatable": {DONGLE: "many"}}, DONGLE, "must match"),
    # --- resource_smoke_test
    (SMOKE, {"resource": ""}, "''", "exactly one '/'"),
    (SMOKE, {"resource": "hostile.example.com/dongle\n"}, "dongle\\n", "letters, digits"),
    (SMOKE, {"resource": DONGLE, "count": 0}, "count", "at least 1"),
    (SMOKE, {"resource": DONGLE, "count": "3 GPUs"}, "count", "int"),
    (SMOKE, {"resource": DONGLE, "timeout": 0}, "timeout 0", "must be a number of seconds above 0"),
    (SMOKE, {"resource": DONGLE, "node": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (SMOKE, {"resource": DONGLE, "namespace": "kube system"}, "kube system", "DNS label"),
    (SMOKE, {"resource": DONGLE, "name_prefix": ""}, "name_prefix", "must not be empty or blank"),
    (SMOKE, {"resource": DONGLE, "name_prefix": "Smoke-\n"}, "Smoke-\\n", "DNS subdomain"),
    (SMOKE, {"device_class": "GPU.example.com\n"}, "GPU.example.com\\n", "DNS subdomain"),
    # --- device_plugin_deploy
    (DEPLOY, {"name": "hostile-plugin\n"}, "hostile-plugin\\n", "DNS"),
    (DEPLOY, {"name": "Hostile"}, "Hostile", "DNS"),
    (DEPLOY, {"preset": "nvidia\n"}, "got: nvidia\n", "must be one of"),  # ansible-core's message, raw
    (DEPLOY, {"labels": {"team\n": "gpu"}}, "team\\n", "name part"),
    (DEPLOY, {"labels": {"team": "gpu\n"}}, "gpu\\n", "labels value"),
    (DEPLOY, {"update_strategy": {"type": "RollingUpdate", "max_unavailable": "10%\n"}}, "10%\\n", "max_unavailable"),
    (DEPLOY, {"env": {"BAD NAME": "1"}}, "BAD NAME", "env name"),
    (DEPLOY, {"device_domain": "hostile.example.com\n"}, "hostile.example.com\\n", "DNS"),
    # --- k8s_runtime_class
    (RUNTIME, {"name": "hostile-rc\n"}, "hostile-rc\\n", "DNS"),
    (RUNTIME, {"handler": "hostile\n"}, "hostile\\n", "DNS"),
    (RUNTIME, {"handler": "Hostile"}, "Hostile", "DNS"),
    (RUNTIME, {"labels": {"team": "gpu\n"}}, "gpu\\n", "label"),
]


def params_of(module, overrides):
    return overridden(BASES[module], overrides)


def test_the_table_covers_every_module_it_names():
    assert len(CASES) >= 60
    assert set(case[0] for case in CASES) == set(BASES)


@pytest.mark.parametrize("module, overrides, offender, rule", CASES,
                         ids=["%s-%02d" % (case[0].__name__.rsplit(".", 1)[-1], i) for i, case in enumerate(CASES)])
def test_a_hostile_value_is_refused_naming_it_and_the_rule_before_any_connection(
        monkeypatch, capsys, module, overrides, offender, rule):
    monkeypatch.setattr(module, "KubeClient", NoClient)
    NoClient.made = 0
    result = run_module(module, capsys, params_of(module, overrides))
    assert result.get("failed") is True, result
    assert NoClient.made == 0, "connected before refusing %r: %s" % (overrides, result.get("msg"))
    assert offender in result["msg"] and rule in result["msg"], (offender, rule, result["msg"])
    assert "Traceback (most recent call last)" not in json.dumps(result)
    assert result.get("changed") is not True


# Every wait and task timeout option of every module: (module, its other parameters, option, a value it refuses, what it allows)
TIMEOUTS = [
    (ER, BASES[ER], "wait_timeout", -1, "0 or more"),
    (INFO, dict(BASES[INFO], name="hostile-1"), "wait_timeout", -1, "0 or more"),
    (DEPLOY, BASES[DEPLOY], "wait_timeout", -1, "0 or more"),
    (dra_driver_deploy, {"preset": "example", "namespace": "kubehw-hostile"}, "wait_timeout", -1, "0 or more"),
    (SMOKE, dict(BASES[SMOKE], resource=DONGLE), "timeout", 0, "above 0"),
    (k8s_node_drain, {"name": "hostile-1"}, "timeout", 0, "above 0"),
]
# (the connection's request_timeout, connect_timeout and retry_timeout: the same words, from KubeClient before its
# first request, tests/unit/plugins/module_utils/test_client.py)


@pytest.mark.parametrize("module, base, option, value, allowed", TIMEOUTS,
                         ids=["%s-%s" % (case[0].__name__.rsplit(".", 1)[-1], case[2]) for case in TIMEOUTS])
def test_every_timeout_option_is_refused_in_one_wording_before_any_connection(
        monkeypatch, capsys, module, base, option, value, allowed):
    monkeypatch.setattr(module, "KubeClient", NoClient)
    NoClient.made = 0
    result = run_module(module, capsys, dict(base, **{option: value}))
    assert result.get("failed") is True and NoClient.made == 0, result
    assert "%s %r must be a number of seconds %s" % (option, value, allowed) in result["msg"], result["msg"]
