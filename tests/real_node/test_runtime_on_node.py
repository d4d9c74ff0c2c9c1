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

IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]'


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
