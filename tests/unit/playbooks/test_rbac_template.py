# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/templates/rbac.yaml.j2: namespaces, and writes scoped by resourceNames to what the inventory declares."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import jinja2
import pytest
import yaml

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as plugin_presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets

TEMPLATE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "playbooks", "templates", "rbac.yaml.j2")
VARS = {"kubehw_rbac_namespace": "kubehw", "kubehw_rbac_service_account": "automation",
        "kubehw_rbac_smoke_test_namespace": "default", "kubehw_rbac_runtime_class": "true",
        "kubehw_rbac_drain": "false"}
WRITE_VERBS = {"update", "patch", "delete", "*"}


def _compile():
    # ansible's own `bool` rule, without importing controller code: that would switch module warnings in this
    # pytest worker to the controller's display, and other unit tests read warnings from module results
    env = jinja2.Environment()
    env.filters["bool"] = lambda value: boolean(value, strict=False)
    with open(TEMPLATE) as f:
        return env.from_string(f.read())


COMPILED = []


def render(**overrides):
    if not COMPILED:
        COMPILED.append(_compile())
    text = COMPILED[0].render(**dict(VARS, **overrides))
    return [doc for doc in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if doc]


def inventory(**hosts):
    """groups and hostvars as Ansible hands them to the template: the hosts are in group gpu_nodes."""
    return {"groups": {"all": sorted(hosts), "gpu_nodes": sorted(hosts)}, "hostvars": hosts}


def namespaces(docs):
    return [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]


def role(docs, name, namespace=None):
    found = [d for d in docs if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"] == name
             and d["metadata"].get("namespace") == namespace]
    assert len(found) == 1, [(d["kind"], d["metadata"]) for d in docs]
    return found[0]


def scoped(rules, resource, verb):
    """resourceNames of the rules granting this verb on this resource: None when a rule grants every name,
    [] when no rule grants it."""
    names = set()
    for rule in rules:
        if resource in rule["resources"] and verb in rule["verbs"]:
            if not rule.get("resourceNames"):
                return None
            names.update(rule["resourceNames"])
    return sorted(names)


def problems(docs):
    return [p for d in docs if d["kind"] == "KubehwRbacProblems" for p in d["problems"]]


def test_the_dedicated_plugin_namespace_is_the_default_and_created_before_its_role():
    docs = render()
    assert namespaces(docs) == ["kubehw", "kubehw-device-plugins", "kubehw-dra-drivers"]
    names = [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs]
    # one apply creates each namespace before the Role bound in it
    assert names.index(("Role", "kubehw-devices-plugins", "kubehw-device-plugins")) > names.index(
        ("Namespace", "kubehw-device-plugins", None))
    assert names.index(("Role", "kubehw-devices-dra-drivers", "kubehw-dra-drivers")) > names.index(
        ("Namespace", "kubehw-dra-drivers", None))
    # nothing the identity may do lives in kube-system
    assert not [n for n in names if n[2] == "kube-system"]


def test_the_plugin_and_driver_namespaces_let_privileged_pods_in_and_the_identitys_does_not():
    """Pod Security admission: the device plugins' and DRA drivers' pods are privileged; a cluster whose default
    level is baseline refuses them in a namespace without its own label."""
    labels = dict((d["metadata"]["name"], (d["metadata"].get("labels") or {})) for d in render() if d["kind"] == "Namespace")
    assert labels["kubehw-device-plugins"] == {"pod-security.kubernetes.io/enforce": "privileged"}
    assert labels["kubehw-dra-drivers"] == {"pod-security.kubernetes.io/enforce": "privileged"}
    assert labels["kubehw"] == {}       # the automation identity's own namespace runs no pod


@pytest.mark.parametrize("namespace", ["kube-system", "default", "kubehw"])
def test_existing_or_shared_namespaces_are_not_created_again(namespace):
    # kube-system and friends exist on every cluster; the identity's own namespace is created once
    docs = render(kubehw_rbac_plugin_namespace=namespace, kubehw_rbac_dra=False)
    assert namespaces(docs) == ["kubehw"]
    assert any(d["kind"] == "Role" and d["metadata"]["namespace"] == namespace for d in docs)


def test_plugin_writes_are_scoped_to_the_daemonsets_the_inventory_declares():
    docs = render(**inventory(
        **{"gpu-a": {},                                                   # accelerator_node's default: nvidia
           "gpu-b": {"accelerator_node_preset": "amd"},
           "gpu-c": {"accelerator_node_preset": "nvidia"},                # the same DaemonSet as gpu-a
           "lab-1": {"device_plugin_preset": "intel_gpu"},                # the device_plugin role alone
           "lab-2": {"accelerator_node_preset": "custom", "device_plugin_name": "fpga-plugin"},
           "lab-3": {"device_plugin_preset": "generic", "device_plugin_name": ""}}))   # empty: the preset's
    assert problems(docs) == []
    rules = role(docs, "kubehw-devices-plugins", "kubehw-device-plugins")["rules"]
    daemonsets = ["amdgpu-device-plugin", "fpga-plugin", "generic-device-plugin", "intel-gpu-plugin",
                  "nvidia-device-plugin"]
    for verb in ("update", "patch", "delete"):
        assert scoped(rules, "daemonsets", verb) == daemonsets
        assert scoped(rules, "configmaps", verb) == [name + "-config" for name in daemonsets]
    # create cannot be scoped by name (the authorizer has no name before the object exists): allowed here only
    assert scoped(rules, "daemonsets", "create") is None and scoped(rules, "configmaps", "create") is None
    # ConfigMaps are read by name only; DaemonSets are listed and watched (by field selector) in this namespace
    assert scoped(rules, "configmaps", "get") == [name + "-config" for name in daemonsets]
    assert scoped(rules, "configmaps", "list") == [] and scoped(rules, "configmaps", "watch") == []


def test_an_explicit_list_replaces_the_inventory_and_the_group_can_be_chosen():
    inv = inventory(**{"gpu-a": {"accelerator_node_preset": "amd"}})
    docs = render(kubehw_rbac_plugin_daemonsets=["team-gpu-plugin"], **inv)
    assert scoped(role(docs, "kubehw-devices-plugins", "kubehw-device-plugins")["rules"], "daemonsets", "delete") == [
        "team-gpu-plugin"]
    inv["groups"]["fpga_nodes"] = inv["groups"].pop("gpu_nodes")
    docs = render(kubehw_rbac_plugin_group="fpga_nodes", **inv)
    assert scoped(role(docs, "kubehw-devices-plugins", "kubehw-device-plugins")["rules"], "daemonsets", "delete") == [
        "amdgpu-device-plugin"]


def test_no_declared_daemonset_leaves_the_write_rules_out_instead_of_an_empty_name_list():
    # resourceNames: [] would allow every name
    for docs in (render(), render(**inventory()), render(kubehw_rbac_plugin_daemonsets=[])):
        rules = role(docs, "kubehw-devices-plugins", "kubehw-device-plugins")["rules"]
        assert not [r for r in rules if set(r["verbs"]) & WRITE_VERBS and r["resources"] != ["pods"]], rules
        assert all(r.get("resourceNames", None) != [] for d in docs for r in d.get("rules") or [])


@pytest.mark.parametrize("variables, message", [
    (inventory(**{"lab-9": {"accelerator_node_preset": "custom"}}),
     "host lab-9: device-plugin preset custom has no default DaemonSet name; set device_plugin_name"),
    (inventory(**{"lab-9": {"accelerator_node_preset": "nvidea"}}),
     "host lab-9: device-plugin preset nvidea has no default DaemonSet name"),
    ({"kubehw_rbac_plugin_daemonsets": "nvidia-device-plugin"},
     'kubehw_rbac_plugin_daemonsets must be a list of DaemonSet names, not "nvidia-device-plugin"'),
    ({"kubehw_rbac_plugin_daemonsets": ["ok", " "]}, 'kubehw_rbac_plugin_daemonsets: " " is not a DaemonSet name'),
    ({"kubehw_rbac_plugin_daemonsets": ["nvidia-device-plugin\n"]},
     'kubehw_rbac_plugin_daemonsets: "nvidia-device-plugin\\n" is not a DaemonSet name'),
    ({"kubehw_rbac_dra_presets": ["example", "xilinx"]},
     "kubehw_rbac_dra_presets: xilinx is not a DRA driver preset (amd, example, intel, kubernetes_test, nvidia)"),
    ({"kubehw_rbac_dra_presets": "example"}, 'kubehw_rbac_dra_presets must be a list of names, not "example"'),
    ({"kubehw_rbac_dra_device_classes": [""]}, 'kubehw_rbac_dra_device_classes: "" is not a DeviceClass name'),
    ({"kubehw_rbac_dra_drivers": {"preset": "example", "name": "x"}}, "kubehw_rbac_dra_drivers must be a list"),
    ({"kubehw_rbac_dra_drivers": [{"preset": "xilinx", "name": "x"}]}, 'kubehw_rbac_dra_drivers: {"name": "x", "preset": "xilinx"}'),
    ({"kubehw_rbac_dra_drivers": [{"preset": "example", "name": " "}]}, "kubehw_rbac_dra_drivers: "),
    ({"kubehw_rbac_dra_drivers": [{"preset": "example", "name": "team-a\n"}]}, "kubehw_rbac_dra_drivers: "),
    ({"kubehw_rbac_dra_drivers": [{"preset": "example"}]}, "kubehw_rbac_dra_drivers: "),
])
def test_what_cannot_be_named_is_a_problem_the_playbook_stops_on(variables, message):
    found = problems(render(**variables))
    assert any(p.startswith(message) for p in found), found


@pytest.mark.parametrize("overrides", [
    {}, {"kubehw_rbac_dra": False}, {"kubehw_rbac_drain": True},
    {"kubehw_rbac_plugin_daemonsets": ["a", "b"], "kubehw_rbac_dra_presets": ["example"],
     "kubehw_rbac_dra_device_classes": ["fpga.example.com"],
     "kubehw_rbac_dra_drivers": [{"preset": "nvidia", "name": "team-b"}]},
    dict(inventory(**{"gpu-a": {}, "gpu-b": {"accelerator_node_preset": "amd"}})),
])
def test_no_rule_changes_daemonsets_configmaps_or_device_classes_of_any_name(overrides):
    docs = render(**overrides)
    for doc in docs:
        for rule in doc.get("rules") or []:
            touches = set(rule["resources"]) & {"daemonsets", "configmaps", "deviceclasses", "serviceaccounts",
                                                "clusterroles", "clusterrolebindings", "roles", "rolebindings"}
            if touches and set(rule["verbs"]) & WRITE_VERBS and doc["metadata"]["name"] not in DRIVER_NAMES:
                assert rule.get("resourceNames"), (doc["metadata"]["name"], rule)
            # no wildcard anywhere, and the identity never writes RBAC objects
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            if doc["metadata"]["name"] not in DRIVER_NAMES:
                assert not set(rule["resources"]) & {"clusterroles", "clusterrolebindings", "roles", "rolebindings"}
                assert not set(rule["verbs"]) & {"escalate", "bind", "impersonate"}


DRIVER_NAMES = [preset["name"] for preset in dra_presets.PRESETS.values()] + ["team-b"]


def test_dra_rules_for_the_automation_identity():
    docs = render(kubehw_rbac_dra_presets=["example"], kubehw_rbac_dra_device_classes=["fpga.example.com"])
    cluster = role(docs, "kubehw-devices-nodes")["rules"]
    assert scoped(cluster, "deviceclasses", "create") is None
    for verb in ("update", "patch", "delete"):
        assert scoped(cluster, "deviceclasses", verb) == ["fpga.example.com", "gpu.example.com"]
    for resource in ("resourceslices", "resourceclaims"):
        assert scoped(cluster, resource, "list") is None and scoped(cluster, resource, "watch") is None
        assert [v for v in ("create", "update", "patch", "delete") if scoped(cluster, resource, v) != []] == []
    smoke = role(docs, "kubehw-devices-smoke-test", "default")["rules"]
    for resource in ("resourceclaimtemplates", "resourceclaims"):
        assert scoped(smoke, resource, "create") is None and scoped(smoke, resource, "delete") is None
    drivers = role(docs, "kubehw-devices-dra-drivers", "kubehw-dra-drivers")["rules"]
    assert scoped(drivers, "daemonsets", "delete") == ["dra-example-driver-kubeletplugin"]
    assert scoped(drivers, "serviceaccounts", "get") == ["dra-example-driver-kubeletplugin"]
    assert scoped(drivers, "serviceaccounts", "create") == []
    # the driver's own identity, made by the administrator: the automation identity needs no escalate/bind
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs if d["metadata"]["name"] == DRIVER_NAMES[0])
    assert kinds == [("ClusterRole", DRIVER_NAMES[0]), ("ClusterRoleBinding", DRIVER_NAMES[0]),
                     ("ServiceAccount", DRIVER_NAMES[0])]


def test_a_dra_driver_of_its_own_name_gets_its_rights_and_identity_beside_the_presets():
    """dra_driver_deploy's name option: kubehw_rbac_dra_drivers names the DaemonSet, and the administrator makes
    that driver's ServiceAccount, ClusterRole and binding under that name (with the preset's rules)."""
    docs = render(kubehw_rbac_dra_presets=["example"],
                  kubehw_rbac_dra_drivers=[{"preset": "example", "name": "team-a-gpus"},
                                           {"preset": "intel", "name": "lab-xe"}])
    assert problems(docs) == []
    drivers = role(docs, "kubehw-devices-dra-drivers", "kubehw-dra-drivers")["rules"]
    names = sorted(["dra-example-driver-kubeletplugin", "team-a-gpus", "lab-xe"])
    assert scoped(drivers, "daemonsets", "delete") == names
    assert scoped(drivers, "serviceaccounts", "get") == names
    for name, preset in (("team-a-gpus", "example"), ("lab-xe", "intel")):
        assert role(docs, name)["rules"] == dra_presets.PRESETS[preset]["rules"]
        binding = [d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == name]
        assert binding[0]["roleRef"]["name"] == name
        assert binding[0]["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "kubehw-dra-drivers"}]
        assert [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == name]
    # the intel driver's DeviceClass joins the example preset's, once
    assert scoped(role(docs, "kubehw-devices-nodes")["rules"], "deviceclasses", "delete") == \
        ["gpu.example.com", "gpu.intel.com"]
    # a name given twice (or a preset's own) is granted once
    docs = render(kubehw_rbac_dra_presets=["example"], kubehw_rbac_dra_drivers=[
        {"preset": "example", "name": "dra-example-driver-kubeletplugin"}])
    drivers = role(docs, "kubehw-devices-dra-drivers", "kubehw-dra-drivers")["rules"]
    assert scoped(drivers, "daemonsets", "delete") == ["dra-example-driver-kubeletplugin"]


def test_without_dra_nothing_of_resource_k8s_io_is_granted():
    docs = render(kubehw_rbac_dra="false")
    assert "kubehw-dra-drivers" not in namespaces(docs)
    assert not [r for d in docs for r in d.get("rules") or [] if "resource.k8s.io" in r["apiGroups"]]
    assert not [d for d in docs if d["metadata"]["name"] in DRIVER_NAMES]


def test_the_template_tables_are_the_presets_of_the_modules():
    docs = render(**inventory(**dict(("h-" + name, {"accelerator_node_preset": name})
                                     for name in plugin_presets.PRESETS if name != "custom")))
    assert scoped(role(docs, "kubehw-devices-plugins", "kubehw-device-plugins")["rules"], "daemonsets", "delete") == \
        sorted(p["name"] for p in plugin_presets.PRESETS.values() if p["name"])
    # Kubernetes' test driver only on request
    assert [d for d in render() if d["kind"] == "ClusterRole" and d["metadata"]["name"].startswith("dra-test")] == []
    docs = render(kubehw_rbac_dra_presets=list(dra_presets.PRESET_NAMES))
    for preset in dra_presets.PRESETS.values():
        cluster_role = role(docs, preset["name"])
        assert cluster_role["rules"] == preset["rules"]
        binding = [d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == preset["name"]][0]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": preset["name"],
                                        "namespace": "kubehw-dra-drivers"}]
    classes = sorted(c["name"] for p in dra_presets.PRESETS.values() for c in p["device_classes"])
    assert scoped(role(docs, "kubehw-devices-nodes")["rules"], "deviceclasses", "delete") == classes


def test_own_names_for_tests_and_second_identities():
    docs = render(kubehw_rbac_name="team-a", kubehw_rbac_dra=False)
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"].endswith(("Role", "Binding"))) == [
        "team-a-nodes", "team-a-nodes", "team-a-plugins", "team-a-plugins", "team-a-smoke-test", "team-a-smoke-test"]
