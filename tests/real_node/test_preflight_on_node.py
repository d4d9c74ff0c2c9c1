# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight playbook on the real node as it is: a Debian sid machine (a release the driver role does not install
on) without an NVIDIA GPU and without the headers of the kernel it runs, whose containerd (2.1, installed and
configured by the roles) has CDI. Its modules run inside the node's namespaces (the interpreter entered with
nsenter, the module piped to it), so they read the node's files, packages and runtime, and the machine's kernel,
sysfs and firmware, as on any host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from tests.support.playbook_runner import run_playbook

# What the node's roles wrote and its package database: the preflight must leave them as they are.
WATCHED = ["/etc/containerd/config.toml", "/var/lib/dpkg/status"]


def node_inventory(real_node, tmp_path, **variables):
    """The node as a dra host of gpu_nodes (real_node.inventory)."""
    return real_node.inventory(tmp_path, accelerator_node_allocation="dra", **variables)


def fingerprint(real_node):
    return dict((path, hashlib.sha256(real_node.run(["cat", path]).stdout.encode()).hexdigest()) for path in WATCHED)


def checks_of(run):
    result = run.result("Find every blocker of the host before anything changes")
    return dict((c["check"], c) for c in result["checks"]), result


def test_a_host_lacking_a_gpu_headers_and_space_gets_every_blocker_at_once_and_nothing_changes(
        real_node, collections, tmp_path):
    kernel = real_node.run(["uname", "-r"]).stdout.strip()
    before = fingerprint(real_node)
    inventory = node_inventory(real_node, tmp_path, host_preflight_min_free_mib=2 ** 30,
                               host_preflight_space_paths=["/var/lib/containerd"])
    for check in (True, False):
        run = run_playbook("kubehw.devices.preflight", str(tmp_path), inventory=inventory, collections=collections,
                           check=check, timeout=300)
        assert run.returncode != 0, run.output()
        checks, result = checks_of(run)
        blocked = sorted(name for name, c in checks.items() if c["status"] == "blocker")
        # the four the node really lacks (Secure Boot is the machine's own business, so it may add one)
        lacks = {"distribution", "nvidia_gpu", "kernel_headers", "free_space"}
        assert lacks <= set(blocked) <= lacks | {"secure_boot"}, checks
        assert checks["distribution"]["detail"].startswith("Debian (no release) is not one"), checks
        assert "no headers for the running kernel %s" % kernel in checks["kernel_headers"]["detail"]
        assert "/var/lib/containerd has" in checks["free_space"]["detail"]
        # what the node has passes: the roles' containerd and the CDI their drop-in turns on
        assert checks["runtime"]["status"] == "ok" and checks["runtime"]["detail"].startswith("containerd 2."), checks
        assert checks["cdi"]["status"] == "ok", checks
        assert result["msg"].startswith("%d blocker(s) on this host, nothing was changed: " % len(blocked))
        assert run.recap()[real_node.name]["changed"] == 0
    assert fingerprint(real_node) == before


def test_a_host_the_run_installs_no_driver_on_passes(real_node, collections, tmp_path):
    """The GPU Operator's driver container (or a driver already there): no distribution, GPU, header or Secure Boot
    check, which are the driver role's."""
    inventory = node_inventory(real_node, tmp_path, accelerator_node_install_driver=False,
                               host_preflight_min_free_mib=1, host_preflight_space_paths=["/var/lib/containerd"])
    run = run_playbook("kubehw.devices.preflight", str(tmp_path), inventory=inventory, collections=collections,
                       timeout=300)
    assert run.returncode == 0, run.output()
    checks, _result = checks_of(run)
    assert sorted(checks) == ["cdi", "free_space", "running_driver", "runtime"], checks
    assert all(c["status"] == "ok" for c in checks.values()), checks
