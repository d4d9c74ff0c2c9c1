# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_preflight: each blocker found alone, all of them at once, the cases that pass, and what it reads."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.kubehw.devices.plugins.modules import host_preflight as mod

from tests.unit.plugins.modules.module_harness import run_module

PARAMS = dict(install_driver=True, force_without_gpu=False, driver_branch="570", kernel_headers=True, reboot=False,
              supported={"Ubuntu": ["22.04", "24.04"], "Debian": ["12"]}, architectures=["x86_64", "aarch64"],
              runtimes=["containerd"], allocation="dra", min_free_mib=4096, containerd_package="containerd")
DEVICES = {"counts": {"pci:10de": 2}, "kernel_modules": [], "device_nodes": [], "driver_versions": {}}


def healthy_host(tmp_path):
    """What gather() reports of a host that lacks nothing (evaluate() reads this alone, never the file system: the
    headers' folder named here does not exist)."""
    build = tmp_path / "lib" / "modules" / "6.8.0-40-generic" / "build"
    return {"distribution": "Ubuntu", "release": "22.04", "kernel": "6.8.0-40-generic", "architecture": "x86_64",
            "secure_boot": False, "signing_key": None, "signing_key_enrolled": False,
            "runtimes": {"containerd": {"installed": ((2, 1), "containerd 2.1.9")}}, "cdi_enabled": True,
            "space_paths": ["/var/cache/apt", "/var/lib/containerd"],
            "free_mib": [("/var/cache/apt", 50000), ("/var/lib", 50000)],
            "headers_path": str(build), "headers_installed": True, "headers_available": None}


@pytest.fixture
def host(tmp_path):
    return healthy_host(tmp_path)


def blockers(params, host, devices):
    return [(c["check"], c["detail"]) for c in mod.evaluate(params, host, devices) if c["status"] == "blocker"]


def test_a_healthy_host_has_no_blocker(host):
    checks = mod.evaluate(PARAMS, host, DEVICES)
    assert [c["check"] for c in checks] == ["distribution", "architecture", "nvidia_gpu", "kernel_headers",
                                            "secure_boot", "nouveau", "running_driver", "runtime", "cdi",
                                            "free_space", "free_space"]
    assert [c for c in checks if c["status"] != "ok"] == []


# (what the host lacks, how it is made to lack it, the blocker's check and words)
LACKS = [
    ("a supported distribution", dict(host={"distribution": "Fedora", "release": "40"}),
     "distribution", "Fedora 40 is not one the driver role installs on"),
    ("a supported architecture", dict(host={"architecture": "ppc64le"}), "architecture", "ppc64le"),
    ("an NVIDIA GPU", dict(devices={"counts": {}}), "nvidia_gpu", "no NVIDIA GPU"),
    ("the running kernel's headers", dict(host={"kernel": "6.8.0-41-generic", "headers_installed": False, "headers_available": False}),
     "kernel_headers", "no headers for the running kernel 6.8.0-41-generic"),
    ("module signing under Secure Boot", dict(host={"secure_boot": True}), "secure_boot",
     "Secure Boot is on and DKMS has no signing key"),
    ("an enrolled signing key", dict(host={"secure_boot": True, "signing_key": "/var/lib/dkms/mok.pub"}),
     "secure_boot", "DKMS's key /var/lib/dkms/mok.pub is not enrolled"),
    ("nouveau unloaded", dict(devices={"kernel_modules": ["nouveau"]}), "nouveau", "the nouveau module is loaded"),
    ("the device nodes of its running driver", dict(devices={"driver_versions": {"nvidia": "570.86.15"}}),
     "device_nodes", "driver 570.86.15 is loaded but /dev/nvidiactl does not exist"),
    ("a containerd that reads drop-ins", dict(host={"runtimes": {"containerd": {"installed": ((1, 5), "x")}}},
                                              params={"allocation": "device_plugin"}),
     "runtime", "containerd 1.5 does not read the drop-in files"),
    ("CDI for a DRA allocation", dict(host={"runtimes": {"containerd": {"installed": ((1, 6), "x")}}}),
     "cdi", "containerd 1.6 has no CDI"),
    ("CDI in the containerd it would install",
     dict(host={"runtimes": {"containerd": {"installed": (None, ""), "candidate": ((1, 6), "1.6.20~ds1-1+deb12u3")}}}),
     "cdi", "containerd 1.6 (not installed; the container_runtime role installs package version 1.6.20~ds1-1+deb12u3)"),
    ("free space for packages", dict(host={"free_mib": [("/var/cache/apt", 900), ("/var/lib", 50000)]}),
     "free_space", "/var/cache/apt has 900 MiB free, less than 4096 MiB"),
]


def made_to_lack(host, change):
    host = dict(host, **change.get("host", {}))
    devices = dict(DEVICES, **change.get("devices", {}))
    return host, devices


@pytest.mark.parametrize("what,change,check,words", LACKS, ids=[case[0] for case in LACKS])
def test_each_blocker_alone(host, what, change, check, words):
    found = blockers(dict(PARAMS, **change.get("params", {})), *made_to_lack(host, change))
    assert len(found) == 1 and found[0][0] == check and words in found[0][1], (what, found)


def test_the_cdi_fix_names_dockers_containerd_for_containerd_only(host):
    params = dict(PARAMS, runtimes=["containerd", "crio"])
    lacking = dict(host, runtimes={"containerd": {"installed": ((1, 6), "x")}, "crio": {"installed": ((1, 22), "x")}})
    fixes = dict((c["detail"].split(" ", 1)[0], c["fix"]) for c in mod.evaluate(params, lacking, DEVICES)
                 if c["check"] == "cdi")
    assert "container_runtime_debian_repo_manage: true installs Docker's containerd.io" in fixes["containerd"]
    assert "containerd.io" not in fixes["crio"] and fixes["crio"].startswith("upgrade crio to 1.23 or later")


def test_every_blocker_at_once(host):
    change = {"host": {}, "devices": {}}
    for _what, case, _check, _words in LACKS[:4] + LACKS[6:8] + LACKS[9:10] + LACKS[11:]:
        for part in ("host", "devices"):
            change[part].update(case.get(part, {}))
    found = blockers(PARAMS, *made_to_lack(host, change))
    assert [c for c, _d in found] == ["distribution", "architecture", "nvidia_gpu", "kernel_headers", "nouveau",
                                      "device_nodes", "cdi", "free_space"]


@pytest.mark.parametrize("params,change,check,status", [
    # a reboot the run may do unloads nouveau; a branch other than the running one is an upgrade, not a blocker
    (dict(reboot=True), {"devices": {"kernel_modules": ["nouveau"]}}, "nouveau", "warning"),
    ({}, {"devices": {"driver_versions": {"nvidia": "550.1"}, "device_nodes": ["/dev/nvidiactl"]}},
     "running_driver", "warning"),
    # headers a package provides, a key mokutil confirms, CDI off that the toolkit role turns on
    ({}, {"host": {"kernel": "6.8.0-41-generic", "headers_installed": False, "headers_available": True}},
     "kernel_headers", "ok"),
    ({}, {"host": {"secure_boot": True, "signing_key": "/var/lib/dkms/mok.pub", "signing_key_enrolled": True}},
     "secure_boot", "ok"),
    ({}, {"host": {"cdi_enabled": False}}, "cdi", "ok"),
    # no driver to install (the GPU Operator's driver container): no distribution, GPU, header or Secure Boot check
    (dict(install_driver=False), {"devices": {"counts": {}}, "host": {"secure_boot": True}}, "secure_boot", None),
    (dict(install_driver=False), {"host": {"distribution": "Fedora", "release": "40"}}, "distribution", None),
    (dict(allocation="device_plugin"), {"host": {"runtimes": {"containerd": {"installed": ((1, 6), "x")}}}}, "cdi",
     None),
])
def test_what_does_not_block(host, params, change, check, status):
    checks = mod.evaluate(dict(PARAMS, **params), *made_to_lack(host, change))
    assert [c for c in checks if c["status"] == "blocker"] == []
    assert [c["status"] for c in checks if c["check"] == check] == ([status] if status else [])


def test_os_release_as_ansible_facts_names_it(tmp_path, monkeypatch):
    release = tmp_path / "os-release"
    monkeypatch.setattr(mod, "OS_RELEASE", (str(release),))
    for text, expected in (('ID=ubuntu\nVERSION_ID="22.04"\n', ("Ubuntu", "22.04")),
                           ('ID=rocky\nVERSION_ID="9.4"\n', ("Rocky", "9")),
                           ('ID="rhel"\nVERSION_ID="8.10"\n', ("RedHat", "8")),
                           ('ID=debian\nVERSION_ID="12"\n', ("Debian", "12"))):
        release.write_text(text)
        assert mod.os_release() == expected


@pytest.mark.parametrize("data,expected", [(b"\x06\x00\x00\x00\x01", True), (b"\x06\x00\x00\x00\x00", False)])
def test_secure_boot_from_the_efi_variable_under_the_sysfs_root(tmp_path, data, expected):
    var = tmp_path / "sys" / "firmware" / "efi" / "efivars" / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    var.parent.mkdir(parents=True)
    var.write_bytes(data)
    assert mod.secure_boot(str(tmp_path / "sys")) is expected
    var.unlink()
    assert mod.secure_boot(str(tmp_path / "sys")) is None     # EFI variables, but not that one: unknown
    assert mod.secure_boot(str(tmp_path / "no-efi")) is False      # legacy boot: no EFI variables at all


@pytest.mark.parametrize("banner,expected", [
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1", (1, 6)),
    ("containerd containerd.io 1.7.12 71909c1814c544ac47ab91d2e8b84718e517bb99", (1, 7)),
    ("containerd github.com/containerd/containerd/v2 v2.1.9 1.fc42", (2, 1)),
    ("crio version 1.30.4", (1, 30)),
    ("Docker version 24.0.7, build afdd53b", (24, 0)),
])
def test_runtime_versions_from_their_banners(monkeypatch, banner, expected):
    monkeypatch.setattr(mod, "run", lambda argv: (0, banner + "\n"))
    assert mod.runtime_version("containerd")[0] == expected


def test_the_candidate_version_of_a_package(monkeypatch):
    policy = "containerd:\n  Installed: (none)\n  Candidate: 1.6.20~ds1-1+deb12u3\n  Version table:\n"
    monkeypatch.setattr(mod.shutil, "which", lambda name: "/usr/bin/" + name if name == "apt-cache" else None)
    monkeypatch.setattr(mod, "run", lambda argv: (0, policy))
    assert mod.package_candidate("containerd") == ((1, 6), "1.6.20~ds1-1+deb12u3")
    monkeypatch.setattr(mod, "run", lambda argv: (0, "containerd:\n  Installed: (none)\n  Candidate: (none)\n"))
    assert mod.package_candidate("containerd") == (None, "")


def test_a_blocked_host_fails_naming_every_blocker_and_reports_every_check(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(mod, "MODULES_DIR", str(tmp_path))
    monkeypatch.setattr(mod, "headers_available", lambda kernel: False)
    monkeypatch.setattr(mod, "runtime_version", lambda runtime: ((2, 1), "containerd 2.1.9"))
    monkeypatch.setattr(mod, "containerd_cdi", lambda: True)
    result = run_module(mod, capsys, dict(devices={"counts": {}}, allocation="dra", min_free_mib=2 ** 40,
                                          space_paths=[str(tmp_path)]))
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("3 blocker(s) on this host, nothing was changed: nvidia_gpu - no NVIDIA GPU")
    assert "kernel_headers - no headers for the running kernel %s" % os.uname().release in result["msg"]
    assert "free_space - %s has" % tmp_path in result["msg"]
    assert [c["check"] for c in result["checks"]] == ["nvidia_gpu", "kernel_headers", "secure_boot", "nouveau",
                                                      "running_driver", "runtime", "cdi", "free_space"]


@pytest.mark.parametrize("args,words", [({"min_free_mib": -1}, "min_free_mib -1 must be 0 or more"),
                                        ({"space_paths": ["var/cache"]}, "space_paths[0] 'var/cache' must be an absolute")])
def test_bad_input_is_refused_before_reading_the_host(capsys, monkeypatch, args, words):
    monkeypatch.setattr(mod, "gather", lambda params: pytest.fail("the host was read"))
    result = run_module(mod, capsys, args)
    assert result["failed"] and words in result["msg"], result
