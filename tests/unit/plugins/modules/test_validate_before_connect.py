# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every input that can be checked without a cluster is refused before the module builds its client.

Building the client reads the kubeconfig (and may run its exec plugin); a bad input must fail with a
message naming the value and the rule, not with whatever the connection says, and with no request.
Each case here used to reach the client (tolerations, image, node_selector, an empty namespace, a
negative wait_timeout) and was then refused by the apiserver or not at all.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.modules import device_plugin_deploy
from ansible_collections.kubehw.devices.plugins.modules import dra_driver_deploy
from ansible_collections.kubehw.devices.plugins.modules import extended_resource_info
from ansible_collections.kubehw.devices.plugins.modules import resource_smoke_test
from tests.unit.plugins.modules import module_harness
from tests.unit.plugins.modules.module_harness import NoClient


SMOKE = dict(resource="example.com/dongle")
DEPLOY = dict(preset="nvidia")
DRA = dict(preset="example")

CASES = [
    (extended_resource_info, dict(name="n1", wait_timeout=-1), ["wait_timeout -1", "number of seconds 0 or more"]),
    (extended_resource_info, dict(all_nodes=True, wait_timeout=-5), ["wait_timeout -5", "number of seconds 0 or more"]),
    (extended_resource_info, dict(name="n1", wait_released=["gpu"]), ["wait_released", "'gpu'", "exactly one '/'"]),
    (extended_resource_info, dict(name="n1", wait_released=["nvidia.com/gpu", " "]), ["wait_released", "' '"]),
    (resource_smoke_test, dict(SMOKE, tolerations=[{"operator": "Bogus"}]),
     ["tolerations[0] operator 'Bogus'", "Exists or Equal"]),
    (resource_smoke_test, dict(SMOKE, tolerations=[{"key": "a b", "operator": "Exists"}]), ["tolerations[0] key 'a b'"]),
    (resource_smoke_test, dict(SMOKE, tolerations=[{"key": "gpu", "value": "x\n"}]),
     ["tolerations[0] value 'x\\n'", "label value"]),
    (resource_smoke_test, dict(SMOKE, tolerations=[{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     ["tolerationSeconds needs effect NoExecute"]),
    (resource_smoke_test, dict(SMOKE, image="pause:3.10\n"), ["image 'pause:3.10\\n'", "without spaces or newlines"]),
    (resource_smoke_test, dict(SMOKE, image=" "), ["image ' '", "container image reference"]),
    (device_plugin_deploy, dict(DEPLOY, tolerations=[{"operator": "Bogus"}]), ["tolerations[0] operator 'Bogus'"]),
    (device_plugin_deploy, dict(DEPLOY, tolerations=[{"value": "x"}]), ["tolerations[0] without a key", "Exists"]),
    (device_plugin_deploy, dict(DEPLOY, node_selector={"pool": "a b"}), ["node_selector value 'a b' of 'pool'"]),
    (device_plugin_deploy, dict(DEPLOY, node_selector={"a b": "x"}), ["node_selector key 'a b'"]),
    (device_plugin_deploy, dict(DEPLOY, image="nvcr.io/x:1 "), ["image 'nvcr.io/x:1 '", "without spaces"]),
    (device_plugin_deploy, dict(DEPLOY, image_pull_secrets=["Regcred"]), ["image_pull_secrets[0] 'Regcred'",
                                                                          "DNS subdomain"]),
    # an empty namespace (an undefined inventory variable) is refused, not read as the default namespace
    (device_plugin_deploy, dict(DEPLOY, namespace=""), ["namespace ''", "DNS label"]),
    (device_plugin_deploy, dict(DEPLOY, state="absent", namespace=""), ["namespace ''", "DNS label"]),
    (dra_driver_deploy, dict(DRA, namespace=""), ["namespace ''", "DNS label"]),
]


@pytest.mark.parametrize("module, args, words", CASES)
def test_bad_input_is_refused_before_the_client_is_built(monkeypatch, capsys, module, args, words):
    monkeypatch.setattr(module, "KubeClient", NoClient)
    NoClient.made = 0
    result = module_harness.run_module(module, capsys, args)
    assert result.get("failed") is True, result
    assert NoClient.made == 0, "the module connected before refusing %r: %s" % (args, result["msg"])
    for word in words:
        assert word in result["msg"], (word, result["msg"])
    assert result.get("changed") is not True


def test_valid_input_does_reach_the_client(monkeypatch, capsys):
    """The stand-in works: a valid input gets as far as connecting."""
    monkeypatch.setattr(resource_smoke_test, "KubeClient", NoClient)
    NoClient.made = 0
    result = module_harness.run_module(resource_smoke_test, capsys, dict(SMOKE, tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    assert NoClient.made == 1 and result["msg"] == "connected to the cluster", result
