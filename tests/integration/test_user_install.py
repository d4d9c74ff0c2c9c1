# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README's way in, as a new user takes it: the tarball built from this checkout, installed with the README's
command (and its declared dependency, kubernetes.core, from the local copy make setup keeps, since Galaxy is not
reached here) into an empty home, then the README's inventory and its commands run as written from another folder
against the suite's control plane, with the cluster of $KUBECONFIG. Nothing of the checkout is on the way: no
ansible.cfg, no ANSIBLE_* variable, no collections path but the home's.

Two things differ from a user's machine, both because the stand-in nodes are no machines to log in to: the GPU hosts
of the README's inventory get the connection and variables of the demo inventory (host preparation off, the
controller's Python), and every host's kubehw_node_name points at a node of the demo cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import shutil

import pytest
import yaml

from tests.support.collection_install import build_tarball, dependency_sources, galaxy_info, run, user_env
from tests.support.node_configs import DEMO_CONFIG_PATH
from tests.support.playbook_runner import REPO_ROOT

pytestmark = pytest.mark.node_config(DEMO_CONFIG_PATH)

# README host -> node of the demo cluster
NODES = {"gpu-a.example.com": "gpu-node-1", "gpu-b.example.com": "gpu-node-2", "lab-1": "dongle-node-1"}
# what the stand-in nodes need instead of a login (playbooks/inventory/demo/hosts.yml)
NO_LOGIN = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "accelerator_node_host_setup": False, "accelerator_node_smoke_test_command": []}


def readme_section(title):
    with open(os.path.join(REPO_ROOT, "README.md")) as handle:
        text = handle.read()
    start = text.index("\n## %s\n" % title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def fenced_blocks(section, language):
    return re.findall(r"^```%s\n(.*?)^```$" % language, section, re.M | re.S)


def readme_install_command():
    lines = [line for line in fenced_blocks(readme_section("Install"), "bash")[0].splitlines()
             if line.startswith("ansible-galaxy collection install ")]
    return shlex.split(lines[0], comments=True)


def readme_inventory():
    (inventory,) = [block for block in fenced_blocks(readme_section("Use it on your cluster"), "yaml")
                    if block.startswith("# my-inventory.yml\n")]
    return yaml.safe_load(inventory)


def readme_commands():
    (block,) = fenced_blocks(readme_section("Use it on your cluster"), "bash")
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("ansible-playbook ")]


def on_stand_in_nodes(inventory):
    groups = inventory["all"]["children"]
    assert sorted(host for group in groups.values() for host in group["hosts"]) == sorted(NODES)
    groups["gpu_nodes"]["vars"].update(NO_LOGIN)
    for group in groups.values():
        for host, variables in group["hosts"].items():
            group["hosts"][host] = dict(variables or {}, kubehw_node_name=NODES[host])
    return inventory


def node_status(cluster, name):
    return json.loads(cluster.core.read_node(name, _preload_content=False).data)["status"]


@pytest.mark.timeout(900)
def test_the_readme_install_and_commands_work_from_an_empty_home(cluster, tmp_path):
    cluster.require_controlled("runs rbac.yml, whose identity has fixed names, on the demo cluster's nodes")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = user_env(home, {"KUBECONFIG": cluster.kubeconfig.split(os.pathsep)[0]})
    tarball = build_tarball(REPO_ROOT, tmp_path / "dist", env)
    shutil.copy(tarball, str(work))

    # the README's install command, offline, with the declared dependency from a local copy instead of Galaxy
    install = readme_install_command()
    assert install[-1] == os.path.basename(tarball), "the README installs %s, the build made %s" % (install, tarball)
    proc = run(install + dependency_sources() + ["--offline"], env, work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = home / ".ansible" / "collections" / "ansible_collections"
    with open(str(installed / "kubehw" / "devices" / "MANIFEST.json")) as handle:
        assert json.load(handle)["collection_info"]["version"] == galaxy_info()["version"]
    assert (installed / "kubernetes" / "core" / "MANIFEST.json").exists()

    inventory = on_stand_in_nodes(readme_inventory())
    (work / "my-inventory.yml").write_text(yaml.safe_dump(inventory))
    commands = readme_commands()
    playbooks = [[w for w in c if w.startswith("kubehw.devices.")][0] for c in commands]
    expected = ("rbac", "site", "verify", "drift", "drift", "drift", "upgrade_plan", "images", "teardown")
    assert playbooks == ["kubehw.devices.%s" % p for p in expected]
    outputs = {}
    for command, playbook in zip(commands, playbooks):
        proc = run(command, env, work)
        outputs[playbook] = proc.stdout
        assert proc.returncode == 0, "%s\n%s\n%s" % (" ".join(command), proc.stdout[-6000:], proc.stderr[-3000:])
        if playbook == "kubehw.devices.drift":     # right after site.yml: nothing drifted, nothing to repair
            assert '"msg": "no drift"' in proc.stdout, proc.stdout[-3000:]
        if playbook == "kubehw.devices.upgrade_plan":  # right after site.yml: the DaemonSet would not roll
            assert re.search(r"then: device plugin DaemonSet \S+: unchanged", proc.stdout), proc.stdout[-3000:]
        if playbook == "kubehw.devices.images":    # the mirror's copy of the plugin, by tag and published digest
            assert "mirror.example.com:5000/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd" in proc.stdout, \
                proc.stdout[-3000:]
        if playbook == "kubehw.devices.site":
            assert node_status(cluster, "dongle-node-1")["capacity"]["example.com/dongle"] == "2"
            assert node_status(cluster, "gpu-node-1")["allocatable"]["nvidia.com/gpu"] == "4"
    assert re.search(r"dongle-node-1: Ready=True advertised=\{[^}]*'example.com/dongle': '2'", outputs[
        "kubehw.devices.verify"]), outputs["kubehw.devices.verify"]
    assert "example.com/dongle" not in node_status(cluster, "dongle-node-1").get("capacity", {})

    # the same commands with an inventory that is not there fail, naming it, instead of skipping every play
    for command in [c for c, playbook in zip(commands, playbooks) if c[-1] == playbook][1:]:    # each playbook once
        broken = [word if word != "my-inventory.yml" else "my-inventroy.yml" for word in command]
        proc = run(broken, env, work)
        assert proc.returncode != 0, proc.stdout
        assert "The inventory (%s) names no host in" % (work / "my-inventroy.yml") in proc.stdout, proc.stdout
