# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade plan's filters: batches formed as ansible-playbook forms them for a play's serial (compared with
ansible-core's own PlaybookExecutor), and the plan's steps per node in the order the run takes them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible.executor.playbook_executor import PlaybookExecutor
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.template import Templar

from ansible_collections.kubehw.devices.plugins.filter.upgrade_plan import serial_batches, upgrade_plan

HOSTS = ["gpu-%d" % i for i in range(1, 8)]


def ansible_batches(tmp_path, serial):
    """The batches ansible-core's PlaybookExecutor forms for a play over HOSTS with this serial."""
    inventory_file = tmp_path / "hosts.ini"
    inventory_file.write_text("[gpu_nodes]\n" + "\n".join(HOSTS) + "\n")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inventory_file)])
    data = {"hosts": "gpu_nodes", "gather_facts": False, "tasks": []}
    if serial is not None:
        data["serial"] = serial
    play = Play.load(data, loader=loader)
    play.post_validate(Templar(loader=loader))     # serial becomes the list ansible-playbook reads
    executor = PlaybookExecutor.__new__(PlaybookExecutor)
    executor._inventory = inventory
    return [[h.name for h in batch] for batch in executor._get_serialized_batches(play)]


@pytest.mark.parametrize("serial", [None, 1, 2, "3", "25%", "50%", "10%", "100%", [1, 2], [1, "50%"], ["30%", 1, 3], 0])
def test_batches_are_the_ones_ansible_playbook_forms(tmp_path, serial):
    expected = ansible_batches(tmp_path, serial)
    assert serial_batches(HOSTS, serial) == expected, serial


@pytest.mark.parametrize("serial", ["one", "25 %%", "-1x", [1, "half"]])
def test_a_serial_that_is_no_number_nor_percentage_is_refused_naming_it(serial):
    with pytest.raises(AnsibleFilterError) as err:
        serial_batches(HOSTS, serial)
    assert "neither a number of hosts nor a percentage" in str(err.value)


def host(node, install=False, reboot=True, by_run=True, evicted=(), blocked=(), cordoned=False, **extra):
    return dict({"host": node, "node": node, "host_setup": True,
                 "driver": {"running": "550.54.15", "branch": "570" if install else "550", "install": install,
                            "reboot": reboot, "reboot_by_the_run": by_run, "drain": True, "loaded_modules": []},
                 "packages": {}, "pinned": {},
                 "drain": {"evicted": list(evicted), "blocked": list(blocked), "cordoned": cordoned}}, **extra)


def test_each_node_gets_its_steps_in_the_order_the_run_takes_them_and_blocks_are_named():
    budget = "Cannot evict pod as it would violate the pod's disruption budget."
    plan = upgrade_plan([
        host("gpu-1", install=True, evicted=["ml/train-0"]),
        host("gpu-2", evicted=["ml/db-0"], blocked=[{"pod": "ml/db-0", "message": budget}]),
        host("gpu-3", reboot=False, drain={}),
        host("gpu-4", cordoned=True),
    ], serial=2)
    assert plan["batches"] == [["gpu-1", "gpu-2"], ["gpu-3", "gpu-4"]]
    assert plan["lines"] == [
        "batch 1: gpu-1: install NVIDIA driver branch 570 (running: 550.54.15); cordon and drain: evict ml/train-0; "
        "reboot (new driver); uncordon once Ready",
        "batch 1: gpu-2: cordon and drain: evict ml/db-0; reboot (driver module not loaded (loaded: none)); "
        "uncordon once Ready",
        "batch 1: gpu-2: BLOCKED: ml/db-0: " + budget,
        "batch 2: gpu-3: no change: driver 550.54.15 (branch 550)",
        "batch 2: gpu-4: cordon and drain: evict no pod; reboot (driver module not loaded (loaded: none)); "
        "stays cordoned (cordoned before the run)"]
    assert plan["blocked"] == ["gpu-2"] and plan["unchanged"] == ["gpu-3"] and plan["stays_cordoned"] == ["gpu-4"]


def test_a_node_an_earlier_run_cordoned_before_it_stopped_is_uncordoned_and_not_counted_as_someone_elses():
    """A rollout that stopped at a refused drain left its node cordoned (and marked so); the plan of the run that
    resumes it named that node as cordoned before the run, staying so: the run then left it cordoned for good."""
    plan = upgrade_plan([host("gpu-1", cordoned=True),
                         host("gpu-2", cordoned=True, drain={"evicted": [], "blocked": [], "cordoned": True,
                                                             "own_cordon": True})])
    assert plan["lines"] == [
        "batch 1: gpu-1: cordon and drain: evict no pod; reboot (driver module not loaded (loaded: none)); "
        "stays cordoned (cordoned before the run)",
        "batch 1: gpu-2: cordon and drain: evict no pod; reboot (driver module not loaded (loaded: none)); "
        "uncordon once Ready (cordoned by an earlier run that stopped)"]
    assert plan["stays_cordoned"] == ["gpu-1"]


def test_a_node_the_run_does_not_drain_keeps_someone_elses_cordon_and_loses_one_an_earlier_run_left():
    """Nodes whose driver runs already: no drain, so the cordon is read alone (a check-mode uncordon); an
    administrator's stays and is named, one the rollout left when it stopped after the reboot is lifted, and a node
    nobody cordoned has nothing to do."""
    def running(node, **cordon):
        return dict(host(node, reboot=False), drain={}, cordon=dict({"cordoned": False, "own_cordon": False}, **cordon))

    plan = upgrade_plan([running("gpu-1", cordoned=True), running("gpu-2", cordoned=True, own_cordon=True),
                         running("gpu-3")])
    assert plan["lines"] == [
        "batch 1: gpu-1: no change: driver 550.54.15 (branch 550); stays cordoned (cordoned before the run)",
        "batch 1: gpu-2: no change: driver 550.54.15 (branch 550); uncordon (cordoned by an earlier run that stopped)",
        "batch 1: gpu-3: no change: driver 550.54.15 (branch 550)"]
    assert plan["stays_cordoned"] == ["gpu-1"]
    assert [n["node"] for n in plan["nodes"].values() if n["changes"]] == ["gpu-2"]


def test_a_reboot_left_to_the_operator_a_refused_drain_and_pinned_packages_are_in_the_plan():
    plan = upgrade_plan([
        host("gpu-1", by_run=False),
        host("gpu-2", drain={"failed": True, "msg": 'Node "gpu-2" runs pods that no controller manages'}),
        host("gpu-3", reboot=False, packages={"containerd.io": "1.7.27-1", "nvidia-container-toolkit": "1.17.7-1"},
             pinned={"containerd": "1.7.28", "nvidia-container-toolkit": "1.17.7-1"}),
    ])
    assert plan["batches"] == [["gpu-1", "gpu-2", "gpu-3"]]
    assert plan["lines"][0] == ("batch 1: gpu-1: left for a reboot by hand (nvidia_driver_reboot is false): the new "
                                "driver runs only after it")
    assert plan["lines"][2] == 'batch 1: gpu-2: BLOCKED: Node "gpu-2" runs pods that no controller manages'
    assert plan["lines"][3] == "batch 1: gpu-3: containerd 1.7.27-1 -> 1.7.28"
    assert plan["unchanged"] == [] and plan["blocked"] == ["gpu-2"]


def test_the_daemonsets_are_read_from_the_check_mode_results():
    before = {"spec": {"template": {"spec": {"containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.19.0"}]}}}}
    after = {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                      "template": {"spec": {"containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}]}}}}
    rolled = {"changed": True, "daemonset": {"metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"}},
              "diff": [{"before_header": "ConfigMap x", "after_header": "ConfigMap x", "before": {}, "after": {}},
                       {"before_header": "DaemonSet kube-system/nvidia-device-plugin",
                        "after_header": "DaemonSet kube-system/nvidia-device-plugin", "before": before,
                        "after": after}]}
    plan = upgrade_plan([], cluster=[["device plugin", rolled], ["DRA driver", {"skipped": True}]])
    assert plan["daemonsets"] == [{
        "what": "device plugin", "daemonset": "kube-system/nvidia-device-plugin", "action": "updated",
        "images": {"from": ["nvcr.io/nvidia/k8s-device-plugin:v0.19.0"], "to": ["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"]},
        "update_strategy": after["spec"]["updateStrategy"]}]
    assert plan["lines"] == [
        "then: device plugin DaemonSet kube-system/nvidia-device-plugin: updated, image "
        "nvcr.io/nvidia/k8s-device-plugin:v0.19.0 -> nvcr.io/nvidia/k8s-device-plugin:v0.20.0, update strategy "
        "{'type': 'RollingUpdate', 'rollingUpdate': {'maxUnavailable': 1}}"]
