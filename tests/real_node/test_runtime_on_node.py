# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roles made of the node's containerd 2.1 configuration, read from the running node: the main file is the
version 3 file kubeadm's guide writes, edited in place (runc's SystemdCgroup line, the imports line) and nothing else,
and the configuration containerd loads has the toolkit's nvidia runtime on the cgroupfs driver and CDI on. The roles'
second run changed nothing (tests/support/real_node.py fails the node's set-up otherwise); the pods of the other
node tests start only because the cgroup edit took."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import tomllib

from tests.support.playbook_runner import run_playbook

IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]'
TOOLKIT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def test_the_roles_edit_the_version_3_main_file_in_place_and_containerd_loads_their_settings(real_node):
    main = real_node.run(["cat", "/etc/containerd/config.toml"]).stdout
    default = real_node.run(["containerd", "config", "default"]).stdout
    # the guide's file (containerd's own default with CDI off) with the roles' two edits, line for line: its empty
    # imports line names the drop-in directory, its runc SystemdCgroup line stays false (the guide's true set back)
    guide = re.sub(r"(?m)^(\s*enable_cdi = )true$", r"\g<1>false", default).rstrip("\n").splitlines()
    assert "imports = []" in guide and "version = 3" in guide, default
    lines = main.rstrip("\n").splitlines()
    assert lines == [IMPORTS if line == "imports = []" else line for line in guide], main
    assert [line.strip() for line in lines if line.strip().startswith("SystemdCgroup")] == ["SystemdCgroup = false"]

    dump = tomllib.loads(real_node.run(["containerd", "config", "dump"]).stdout)
    cri = dump["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["enable_cdi"] is True
    runtimes = cri["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is False
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is False
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def runtime_drift(real_node, collections, tmp_path):
    """playbooks/drift.yml with kubehw_drift_hosts=true for the node as a GPU host whose runtime the roles configured
    (their settings of tests/support/real_node_files/runtime.yml; no driver of the collection's), and the rows it
    printed of the runtime's files."""
    inventory = real_node.inventory(tmp_path, accelerator_node_install_driver=False, nvidia_container_toolkit_cdi=True,
                                    nvidia_container_toolkit_systemd_cgroup=False,
                                    container_runtime_systemd_cgroup=False)
    kubeconfig = real_node.control_plane.kubeconfig
    run = run_playbook("kubehw.devices.drift", str(tmp_path), inventory=inventory, collections=collections,
                       kubeconfig=kubeconfig, extra_vars={"kubehw_kubeconfig": kubeconfig, "kubehw_drift_hosts": "true"},
                       timeout=300)
    rows = [line for line in run.printed_messages("drift: ") if "drop-in" in line or "imports line" in line
            or "CDI specification" in line]
    return run, rows


def test_a_drop_in_edited_by_hand_is_drift_named_by_its_lines_and_nothing_is_written_or_restarted(
        real_node, collections, tmp_path):
    """The toolkit's containerd drop-in without its enable_cdi line, as someone editing the host leaves it: the drift
    run computes the drop-in the roles would write from the node's containerd as it is, names the file and the line
    it lacks, writes nothing and restarts nothing (its host play runs in check mode); with the file back, no row."""
    watched = ["/etc/containerd/config.toml", TOOLKIT_DROPIN]
    before = dict((path, real_node.run(["cat", path]).stdout) for path in watched)
    assert "enable_cdi = true" in before[TOOLKIT_DROPIN], before[TOOLKIT_DROPIN]
    containerd = real_node.run(["cat", "/run/kubehw-node/containerd.pid"]).stdout.strip()
    edited = "\n".join(line for line in before[TOOLKIT_DROPIN].splitlines() if "enable_cdi" not in line) + "\n"
    real_node.run(["sh", "-c", 'printf %s "$1" > ' + TOOLKIT_DROPIN, "sh", edited])
    try:
        run, rows = runtime_drift(real_node, collections, tmp_path)
        assert run.returncode == 2, run.output()
        assert rows == ['drift: %s: containerd drop-in %s: declared {"lines the host lacks": ["    enable_cdi = true"]}, '
                        'observed {"lines not declared": []}' % (real_node.name, TOOLKIT_DROPIN)], run.output()
        assert real_node.run(["cat", TOOLKIT_DROPIN]).stdout == edited
        assert real_node.run(["cat", "/etc/containerd/config.toml"]).stdout == before["/etc/containerd/config.toml"]
        assert real_node.run(["cat", "/run/kubehw-node/containerd.pid"]).stdout.strip() == containerd
    finally:
        real_node.run(["sh", "-c", 'printf %s "$1" > ' + TOOLKIT_DROPIN, "sh", before[TOOLKIT_DROPIN]])
    run, rows = runtime_drift(real_node, collections, tmp_path)
    assert rows == [], run.output()
    assert dict((path, real_node.run(["cat", path]).stdout) for path in watched) == before
