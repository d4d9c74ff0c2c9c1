# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""resource_smoke_test: the pod it makes, and input refused before any request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.modules import resource_smoke_test as mod
from tests.unit.plugins.modules.module_harness import run_module

PARAMS = dict(resource="nvidia.com/gpu", count=1, node="gpu-1", namespace="default", name_prefix="kubehw-smoke-",
              image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", command=["nvidia-smi", "-L"], tolerations=[],
              runtime_class_name=None, expect="scheduled", wait_for="completed", timeout=120)


def test_the_pod_names_the_runtime_class_it_is_given():
    pod = mod.pod_manifest(dict(PARAMS, runtime_class_name="nvidia"), "run1")
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["metadata"]["labels"][mod.RUN_LABEL] == "run1"


@pytest.mark.parametrize("value", [None, ""])
def test_no_runtime_class_leaves_the_node_default(value):
    pod = mod.pod_manifest(dict(PARAMS, runtime_class_name=value), "run1")
    assert "runtimeClassName" not in pod["spec"]


def test_the_pod_is_pinned_by_node_name_not_hostname_label():
    terms = mod.pod_manifest(PARAMS, "run1")["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]


class NoClient(object):
    def __init__(self, module):
        raise AssertionError("a request was about to be made")


@pytest.mark.parametrize("value", ["NVIDIA", "nvidia\n", "-nvidia", "nv_idia", "a" * 254])
def test_a_bad_runtime_class_name_is_refused_before_any_request(value, capsys, monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", NoClient)
    result = run_module(mod, capsys, {"resource": "nvidia.com/gpu", "runtime_class_name": value})
    assert result["failed"]
    assert "runtime_class_name" in result["msg"] and repr(value) in result["msg"]
    assert "DNS-1123 subdomain" in result["msg"]
