# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/templates/rbac.yaml.j2: the dedicated device-plugin namespace is created with its Role."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import jinja2
import pytest
import yaml

from ansible.module_utils.parsing.convert_bool import boolean

TEMPLATE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "playbooks", "templates", "rbac.yaml.j2")
VARS = {"kubehw_rbac_namespace": "kubehw", "kubehw_rbac_service_account": "automation",
        "kubehw_rbac_smoke_test_namespace": "default", "kubehw_rbac_runtime_class": "true",
        "kubehw_rbac_drain": "false"}


def render(**overrides):
    # ansible's own `bool` rule, without importing controller code: that would switch module warnings in this
    # pytest worker to the controller's display, and other unit tests read warnings from module results
    env = jinja2.Environment()
    env.filters["bool"] = lambda value: boolean(value, strict=False)
    with open(TEMPLATE) as f:
        text = env.from_string(f.read()).render(**dict(VARS, **overrides))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def namespaces(docs):
    return [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]


def test_dedicated_plugin_namespace_is_created_before_its_role():
    docs = render(kubehw_rbac_plugin_namespace="kubehw-device-plugins")
    assert namespaces(docs) == ["kubehw", "kubehw-device-plugins"]
    kinds = [(d["kind"], d["metadata"].get("namespace")) for d in docs]
    # the namespace comes first, so one apply creates it before the Role bound in it
    assert kinds.index(("Role", "kubehw-device-plugins")) > [d["metadata"]["name"] for d in docs].index(
        "kubehw-device-plugins")


@pytest.mark.parametrize("namespace", ["kube-system", "default", "kubehw"])
def test_existing_or_shared_namespaces_are_not_created_again(namespace):
    # kube-system and friends exist on every cluster; the identity's own namespace is created once
    docs = render(kubehw_rbac_plugin_namespace=namespace)
    assert namespaces(docs) == ["kubehw"]
    assert any(d["kind"] == "Role" and d["metadata"]["namespace"] == namespace for d in docs)
