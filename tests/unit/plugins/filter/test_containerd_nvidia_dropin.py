# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The containerd_nvidia_dropin filter (the nvidia_container_toolkit role's containerd drop-in), config versions 2 and 3.

Both run for real: the nvidia_container_toolkit molecule scenario on Debian bookworm's containerd
1.6 (dump version 2), the real node (make node) on Debian sid's containerd 2.1 (dump version 3,
under the version 3 main file kubeadm's guide writes). V3_DUMP is an excerpt of 2.1's dump.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tomllib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins as dropin

from tests.unit.plugins.filter.dropin_cases import MAIN_V2, MAIN_V3, V2_DUMP, V3_DUMP


def build(dump, **options):
    result = dropin.containerd_nvidia_dropin(dump, **options)
    return result, tomllib.loads(result["content"])


def test_v2_keeps_the_host_cri_settings_and_adds_nvidia():
    result, doc = build(V2_DUMP)
    assert result["version"] == 2 and result["plugin"] == "io.containerd.grpc.v1.cri"
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert doc["version"] == 2
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.6"
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    runtimes = cri["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    # without default_runtime the host's default stays, and empty deprecated tables are dropped
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert "default_runtime" not in cri["containerd"]
    # only the CRI plugin is in the drop-in: other plugins are the host's business
    assert list(doc["plugins"]) == ["io.containerd.grpc.v1.cri"]


def test_v2_default_runtime_cdi_and_forced_cgroup():
    result, doc = build(V2_DUMP, default_runtime=True, enable_cdi=True, cdi_spec_dirs=["/etc/cdi"],
                        systemd_cgroup=False)
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi"]
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is False
    assert result["host_systemd_cgroup"] is True and result["systemd_cgroup"] is False


def test_v2_ignores_the_main_file():
    """containerd 1.x: the drop-in is the same whatever the main file says."""
    assert dropin.containerd_nvidia_dropin(V2_DUMP, main_config=MAIN_V3) == dropin.containerd_nvidia_dropin(V2_DUMP)


@pytest.mark.parametrize("main, version, plugin", [
    (MAIN_V3, 3, "io.containerd.cri.v1.runtime"),
    (MAIN_V2, 2, "io.containerd.grpc.v1.cri"),
    # no main file yet (check mode) or an empty one: nothing of it to lose, the dump's version
    (None, 3, "io.containerd.cri.v1.runtime"),
    ("# only a comment\n", 3, "io.containerd.cri.v1.runtime"),
])
def test_v3_dump_takes_the_main_file_version(main, version, plugin):
    result, doc = build(V3_DUMP, main_config=main, default_runtime=True, binary_name="/opt/nvidia/nvidia-container-runtime")
    assert result["version"] == doc["version"] == version
    assert result["plugin"] == plugin and result["dump_version"] == 3
    assert list(doc["plugins"]) == [plugin]
    cri = doc["plugins"][plugin]
    # containerd 2 merges key by key: only what the role adds, none of the host's settings
    assert cri == {"containerd": {"default_runtime_name": "nvidia", "runtimes": {"nvidia": cri["containerd"]["runtimes"]["nvidia"]}}}
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    # a copy of the host's runc runtime (2.x keys such as sandboxer kept) with the nvidia binary
    assert nvidia == {"runtime_type": "io.containerd.runc.v2", "pod_annotations": [], "cgroup_writable": False,
                      "sandboxer": "podsandbox",
                      "options": {"BinaryName": "/opt/nvidia/nvidia-container-runtime", "SystemdCgroup": True}}


def test_v3_dump_without_default_runtime_leaves_the_host_default_alone():
    result, doc = build(V3_DUMP, main_config=MAIN_V2, systemd_cgroup=False, enable_cdi=True, cdi_spec_dirs=["/etc/cdi"])
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert "default_runtime_name" not in cri["containerd"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi"]
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is False
    assert result["host_systemd_cgroup"] is True and result["systemd_cgroup"] is False
    assert "containerd 2 merges it" in result["content"]


@pytest.mark.parametrize("main, words", [
    # containerd 2 would migrate a version 1 file only without a versioned drop-in
    ('[plugins.cri]\n  sandbox_image = "x"\n', "config version 1"),
    ("version = 4\n", "config version 4"),
    ("version = 2\n[plugins\n", "the main configuration is not valid TOML"),
])
def test_v3_dump_refuses_a_main_file_it_cannot_match(main, words):
    with pytest.raises(AnsibleFilterError) as err:
        dropin.containerd_nvidia_dropin(V3_DUMP, main_config=main)
    assert words in str(err.value)


def test_host_without_runc_table_gets_a_runc_v2_nvidia_runtime():
    doc = build('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlayfs"\n')[1]
    nvidia = doc["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["SystemdCgroup"] is False


@pytest.mark.parametrize("dump, words", [
    ("version = 1\n", "version 1 is not supported"),
    ("root = \"/var/lib/containerd\"\n", "version 1 is not supported"),
    ("version = 2\n[plugins\n", "containerd config dump"),
])
def test_unsupported_or_broken_dumps_are_clear_errors(dump, words):
    with pytest.raises(AnsibleFilterError) as err:
        dropin.containerd_nvidia_dropin(dump)
    assert words in str(err.value)


def test_the_filter_is_the_function_and_refuses_what_is_not_a_dump():
    assert dropin.FilterModule().filters()["containerd_nvidia_dropin"] is dropin.containerd_nvidia_dropin
    with pytest.raises(AnsibleFilterError) as err:
        dropin.containerd_nvidia_dropin(["version = 2"])
    assert "takes the text of containerd config dump, not list" in str(err.value)


def test_keys_and_strings_that_need_quoting_round_trip():
    data = {"version": 2, "plugins": {"a.b": {"x y": 'say "hi"\\n', "list": [1, "two"], "on": True}}}
    assert tomllib.loads(dropin.to_toml(data)) == data


def test_a_key_ending_in_a_newline_is_quoted_not_written_bare():
    """A bare key must be the whole name: 'runc\\n' written bare breaks the drop-in ('$' matched before the newline)."""
    data = {"plugins": {"runc\n": {"on": True}}}
    assert tomllib.loads(dropin.to_toml(data)) == data


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "fixtures", "containerd")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("prefix, plugin", [
    ("1.6-crun-default", "io.containerd.grpc.v1.cri"),
    ("2.1-crun-default", "io.containerd.cri.v1.runtime"),
])
def test_nvidia_runtime_copies_the_default_runtime_crun_not_runc(prefix, plugin):
    """Real dumps of a host whose default runtime is crun with systemd cgroups (runc says cgroupfs).

    nvidia-ctk (NVIDIA Container Toolkit v1.20.0, pkg/config/engine/engine.go) takes its settings
    from default_runtime_name first; copying runc would put the nvidia runtime's containers on
    cgroupfs beside a kubelet on systemd.
    """
    result, doc = build(fixture(prefix + ".dump.toml"), main_config=fixture(prefix + ".main.toml"))
    assert result["host_systemd_cgroup"] is True and result["systemd_cgroup"] is True
    runtimes = doc["plugins"][plugin]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    host = tomllib.loads(fixture(prefix + ".dump.toml"))["plugins"][plugin]["containerd"]
    # every other key of the runtime table is crun's (runc's sandboxer would differ on 2.x)
    assert {k: v for k, v in runtimes["nvidia"].items() if k != "options"} == \
        {k: v for k, v in host["runtimes"]["crun"].items() if k != "options"}
    assert result["source_runtime"] == "crun"


@pytest.mark.parametrize("default, runtimes, source, systemd", [
    # an nvidia default (left by another tool) is skipped: runc, then crun
    ("nvidia", {"runc": False, "crun": True, "nvidia": True}, "runc", False),
    ("nvidia-cdi", {"crun": True}, "crun", True),
    # a default that names no table falls through to runc
    ("kata", {"runc": True}, "runc", True),
    ("", {"crun": True}, "crun", True),
    ("", {}, None, False),
])
def test_low_level_runtime_order(default, runtimes, source, systemd):
    lines = ['version = 2', '[plugins."io.containerd.grpc.v1.cri".containerd]']
    if default:
        lines.append('  default_runtime_name = "%s"' % default)
    for name, cgroup in runtimes.items():
        lines.append('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s]' % name)
        lines.append('  runtime_type = "io.containerd.runc.v2"')
        lines.append('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s.options]' % name)
        lines.append('  SystemdCgroup = %s' % ("true" if cgroup else "false"))
    result, doc = build("\n".join(lines) + "\n")
    nvidia = doc["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["SystemdCgroup"] is systemd
    assert result["source_runtime"] == source
