# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The crio_nvidia_dropin filter (the nvidia_container_toolkit role's CRI-O drop-in), against CRI-O configuration files.

CRI-O is in no Debian suite (bookworm, sid), so it cannot run here; the fixtures under
tests/unit/roles/fixtures/crio are the packaged layout of cri-o/packaging (see the comment in each
file). What is asserted is what CRI-O would load: the files merged in CRI-O's order with the drop-in last.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tomllib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins as crio

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "fixtures", "crio")


def read(*parts):
    path = os.path.join(FIXTURES, *parts)
    with open(path, encoding="utf-8") as handle:
        return {"path": path, "content": handle.read()}


PACKAGED = [read("packaged", "crio.conf.d", "10-crio.conf")]
PACKAGED_AND_SITE = PACKAGED + [read("packaged", "crio.conf.d", "20-site.conf")]
LEGACY = [read("legacy", "crio.conf")]
STATUS = read("status-crun.toml")["content"]


def loaded(files, result):
    """What CRI-O loads: its files, then the role's drop-in (99-nvidia.conf sorts last)."""
    return crio.merge_files(files + [{"path": "99-nvidia.conf", "content": result["content"]}])


def test_packaged_layout_nvidia_copies_crun_monitor_settings():
    result = crio.crio_nvidia_dropin(PACKAGED)
    runtime = loaded(PACKAGED, result)["crio"]["runtime"]
    nvidia = runtime["runtimes"]["nvidia"]
    # conmon is outside $PATH in the packages: a handler without monitor_path would not start
    assert nvidia["monitor_path"] == "/usr/libexec/crio/conmon"
    assert nvidia["runtime_root"] == "/run/crun"
    assert nvidia["allowed_annotations"] == ["io.containers.trace-syscall"]
    assert nvidia["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["runtime_type"] == "oci"
    assert result["source_runtime"] == "crun"
    # the host's default and its runtimes are untouched without default_runtime
    assert runtime["default_runtime"] == "crun"
    assert runtime["runtimes"]["crun"]["runtime_path"] == "/usr/libexec/crio/crun"
    assert "default_runtime" not in tomllib.loads(result["content"])["crio"]["runtime"]


def test_a_later_drop_in_replaces_the_runtime_table_whole():
    result = crio.crio_nvidia_dropin(PACKAGED_AND_SITE, binary_name="/usr/local/nvidia/toolkit/nvidia-container-runtime")
    nvidia = loaded(PACKAGED_AND_SITE, result)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia == {
        "runtime_path": "/usr/local/nvidia/toolkit/nvidia-container-runtime",
        "runtime_root": "/run/crun",
        "monitor_path": "/usr/libexec/crio/conmon",
        "monitor_cgroup": "pod",
        "monitor_env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LOG_LEVEL=debug"],
        "allowed_annotations": ["io.containers.trace-syscall", "io.kubernetes.cri-o.Devices"],
        "runtime_type": "oci",
    }


def test_legacy_main_file_runc_default_and_cdi():
    result = crio.crio_nvidia_dropin(LEGACY, default_runtime=True, enable_cdi=True, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"])
    runtime = loaded(LEGACY, result)["crio"]["runtime"]
    assert runtime["default_runtime"] == "nvidia"
    assert runtime["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert runtime["conmon_cgroup"] == "pod"
    nvidia = runtime["runtimes"]["nvidia"]
    assert nvidia["monitor_path"] == "/usr/bin/crio-conmon"
    assert nvidia["monitor_env"] == ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    assert nvidia["runtime_root"] == "/run/runc"
    assert result["source_runtime"] == "runc"


def test_running_crio_status_wins_and_an_nvidia_default_is_skipped():
    """CRI-O runs with nvidia as default (the role's own earlier run): the files name crun."""
    result = crio.crio_nvidia_dropin(PACKAGED, status=STATUS, default_runtime=True)
    nvidia = tomllib.loads(result["content"])["crio"]["runtime"]["runtimes"]["nvidia"]
    assert result["source_runtime"] == "crun"
    assert nvidia["monitor_cgroup"] == "system.slice" and nvidia["monitor_exec_cgroup"] == ""
    # another binary per platform, or a VM runtime's configuration, would bypass the nvidia binary
    assert "platform_runtime_paths" not in nvidia and "runtime_config_path" not in nvidia
    # before the role's first run CRI-O said crun and had no nvidia handler: the same drop-in, so a
    # second run writes nothing
    before = STATUS.replace('default_runtime = "nvidia"', 'default_runtime = "crun"')
    before = before.split("      [crio.runtime.runtimes.nvidia]")[0] + "      [crio.runtime.runtimes.runc]" + \
        before.split("      [crio.runtime.runtimes.runc]")[1]
    assert "runtimes.nvidia" not in before and "\"nvidia\"" not in before
    assert crio.crio_nvidia_dropin(PACKAGED, status=before, default_runtime=True)["content"] == result["content"]


def test_status_without_files_falls_back_to_runc_then_crun():
    result = crio.crio_nvidia_dropin([], status=STATUS)
    assert result["source_runtime"] == "runc"
    assert tomllib.loads(result["content"])["crio"]["runtime"]["runtimes"]["nvidia"]["runtime_root"] == "/run/runc"


def test_no_configuration_at_all_gives_a_bare_oci_handler():
    result = crio.crio_nvidia_dropin([{"path": "/etc/crio/crio.conf", "content": "# all commented out\n"}])
    assert result["source_runtime"] is None
    assert tomllib.loads(result["content"])["crio"]["runtime"]["runtimes"]["nvidia"] == {
        "runtime_path": "/usr/bin/nvidia-container-runtime", "runtime_type": "oci"}


@pytest.mark.parametrize("source_type, written", [("pod", "pod"), ("vm", "oci"), (None, "oci")])
def test_runtime_type(source_type, written):
    handler = '[crio.runtime.runtimes.runc]\nmonitor_path = "/usr/libexec/crio/conmonrs"\n'
    if source_type:
        handler += 'runtime_type = "%s"\n' % source_type
    result = crio.crio_nvidia_dropin([{"path": "10.conf", "content": handler}])
    assert result["handler"]["runtime_type"] == written


def test_broken_file_is_named():
    with pytest.raises(AnsibleFilterError) as err:
        crio.crio_nvidia_dropin([{"path": "/etc/crio/crio.conf.d/30-bad.conf", "content": "[crio.runtime\n"}])
    assert "/etc/crio/crio.conf.d/30-bad.conf is not valid TOML" in str(err.value)


def test_the_filter_is_the_function_and_refuses_what_is_not_a_file_list():
    assert crio.FilterModule().filters()["crio_nvidia_dropin"] is crio.crio_nvidia_dropin
    for files, words in (("[crio.runtime]\n", "takes a list of {path, content} files, not str"),
                         ([["10-crio.conf", "[crio]"]], "each file must be a dictionary"),
                         ([{"path": "x", "content": 3}], "each file must be a dictionary")):
        with pytest.raises(AnsibleFilterError) as err:
            crio.crio_nvidia_dropin(files)
        assert words in str(err.value)
    with pytest.raises(AnsibleFilterError) as err:
        crio.crio_nvidia_dropin(PACKAGED, status=["x"])
    assert "status must be the text of crio status config, not list" in str(err.value)
