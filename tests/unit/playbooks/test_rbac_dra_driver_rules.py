# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/templates/rbac.yaml.j2: the DRA drivers' own rights as the presets grant them (the
example driver's granular claim-status verbs of 1.36, NVIDIA's MPS Role in the driver namespace), and what the
automation identity needs for the checks the modules now make (device plugins in any namespace, the
DaemonSet controller's events)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as dra_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets

from tests.unit.playbooks.test_rbac_template import render, role


def test_each_preset_with_namespace_rules_gets_its_role_and_binding_in_the_driver_namespace():
    docs = render(kubehw_rbac_dra_drivers=[{"preset": "nvidia", "name": "team-gpus"}])
    for name in ("nvidia-dra-driver-gpu-kubelet-plugin", "team-gpus"):
        built_role, built_binding = dra_manifest.build_namespace_rbac(
            {"preset": "nvidia", "name": name, "namespace": "kubehw-dra-drivers"})
        assert role(docs, name, "kubehw-dra-drivers")["rules"] == built_role["rules"] == \
            dra_presets.NVIDIA["namespace_rules"]
        binding = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == name][0]
        assert binding["roleRef"] == built_binding["roleRef"] and binding["subjects"] == built_binding["subjects"]
    # the other presets have none
    assert not [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] in (
        dra_presets.EXAMPLE["name"], dra_presets.INTEL["name"])]


def test_the_example_driver_may_write_claim_status_for_its_own_driver_name_on_its_node():
    rules = role(render(), dra_presets.EXAMPLE["name"])["rules"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
            "verbs": ["associated-node:update", "associated-node:patch"],
            "resourceNames": ["gpu.example.com"]} in rules


def test_the_identity_may_list_daemonsets_everywhere_and_the_controllers_events():
    docs = render()
    nodes = role(docs, "kubehw-devices-nodes")["rules"]
    assert {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]} in nodes
    for name, namespace in (("kubehw-devices-plugins", "kubehw-device-plugins"),
                            ("kubehw-devices-dra-drivers", "kubehw-dra-drivers")):
        assert {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]} in role(docs, name, namespace)["rules"]
