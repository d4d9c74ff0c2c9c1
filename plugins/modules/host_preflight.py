#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: host_preflight
short_description: Find every problem a GPU host has for the collection's host roles, before anything changes
version_added: 1.1.0
description:
  - Reads the host and reports, all at once, what would stop the host roles (C(nvidia_driver),
    C(container_runtime), C(nvidia_container_toolkit)) in the middle of a run, each with its fix.
  - Checks the distribution and architecture against those the driver role installs on; the kernel headers of the
    running kernel (installed, or a package of them available); Secure Boot and a DKMS module-signing key; a loaded
    C(nouveau) that only a reboot unloads; an NVIDIA GPU on the PCI bus; a running driver, its branch against the
    one asked for, and its C(/dev/nvidia*) nodes; the container runtime and its version against what the drop-ins
    and, for a DRA allocation, CDI need; the free space where packages and images go.
  - Changes nothing, in check mode or not. Fails when any check finds a blocker, naming each with its fix; the
    result lists every check either way.
  - The P(kubehw.devices.host_preflight#role) role runs it with the variables of the other roles;
    C(site.yml) runs that role on every GPU host before the first change.
author:
  - kubehw.devices contributors (@kubehw)
options:
  devices:
    description:
      - What M(kubehw.devices.device_facts) found on the host (its C(counts), C(kernel_modules), C(device_nodes) and
        C(driver_versions)). Without it the GPU, module and device-node checks are skipped.
    type: dict
  install_driver:
    description:
      - The run installs the NVIDIA driver on the host (the GPU, headers, Secure Boot and C(nouveau) checks apply).
      - V(false) where the driver is there already or comes from the GPU Operator's driver container.
    type: bool
    default: true
  force_without_gpu:
    description: The driver is installed even without an NVIDIA GPU (the driver role's C(nvidia_driver_force)).
    type: bool
    default: false
  driver_branch:
    description: The driver branch the run installs, for example V(570); compared with a running driver's.
    type: str
  kernel_headers:
    description: The run needs the headers of the running kernel (the driver role builds the module with DKMS).
    type: bool
    default: true
  reboot:
    description:
      - The run may reboot the host (the driver role's C(nvidia_driver_reboot)). Without, a loaded C(nouveau) is a
        blocker, since the NVIDIA driver cannot load until it is gone.
    type: bool
    default: false
  supported:
    description:
      - Distribution name to the releases the driver role installs on (Ubuntu by point release, others by major
        version), as C(ansible_facts) names them. Without it the distribution is not checked.
    type: dict
  architectures:
    description: The machine architectures the driver role installs on. Without it the architecture is not checked.
    type: list
    elements: str
  runtimes:
    description: The container runtimes the toolkit configures (its C(nvidia_container_toolkit_runtimes)).
    type: list
    elements: str
    choices: [containerd, crio, docker]
    default: [containerd]
  containerd_package:
    description:
      - The package the container_runtime role installs containerd from where it is not installed yet; the version
        the package manager would install is checked instead of the installed one.
    type: str
    default: containerd
  allocation:
    description: How the node's devices are served; V(dra) needs CDI in the runtime.
    type: str
    choices: [device_plugin, dra]
    default: device_plugin
  min_free_mib:
    description: Free space, in MiB, each of O(space_paths) must have.
    type: int
    default: 4096
  space_paths:
    description:
      - Where packages and images go. Each is measured on the file system of its nearest existing directory.
      - Defaults to the package cache of the host's package manager and the image store of each runtime.
    type: list
    elements: path
  sysfs_root:
    description:
      - Where sysfs is mounted; the firmware's Secure Boot variable is read from its C(firmware/efi/efivars).
      - Give the same root as M(kubehw.devices.device_facts) where the host's sysfs is mounted elsewhere, as in a
        container that reads the host.
    type: path
    default: /sys
extends_documentation_fragment:
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; check mode returns the same result.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
seealso:
  - module: kubehw.devices.device_facts
'''

EXAMPLES = r'''
- name: Read the devices
  kubehw.devices.device_facts:
  register: devices

- name: Find every blocker of this host before the roles run
  kubehw.devices.host_preflight:
    devices: "{{ devices }}"
    driver_branch: "570"
    allocation: dra
    supported: {Ubuntu: ["22.04", "24.04"], Debian: ["12"]}
    architectures: [x86_64, aarch64]
'''

RETURN = r'''
checks:
  description: Every check, in order, with what it found.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: The check's name, for example C(kernel_headers).
      type: str
    status:
      description: V(ok), V(blocker), V(warning) (the run goes on, with something to know) or V(skipped).
      type: str
    detail:
      description: What was found.
      type: str
    fix:
      description: What to do about a blocker or a warning.
      type: str
blockers:
  description: One line per blocker, C(check - what was found. Fix - what to do).
  returned: always
  type: list
  elements: str
  sample: ["nouveau - the nouveau module is loaded. Fix - set nvidia_driver_reboot: true, or reboot the host ..."]
host:
  description: What was read, for the report.
  returned: always
  type: dict
  sample: {"distribution": "Ubuntu", "release": "22.04", "kernel": "5.15.0-105-generic", "architecture": "x86_64",
           "runtimes": {"containerd": "1.7"}, "secure_boot": false}
'''

import os
import re
import shutil
import subprocess

from ansible.module_utils.basic import AnsibleModule

# The firmware's Secure Boot variable, under the sysfs root.
SECURE_BOOT_VAR = "firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
MODULES_DIR = "/lib/modules"
# Keys DKMS signs modules with (Debian and Ubuntu's dkms 3, Ubuntu's shim-signed, RHEL's dkms).
DKMS_SIGNING_KEYS = ("/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der")
# containerd reads the drop-ins the roles write (imports of a version 2 or 3 configuration) from 1.6 on, the
# versions the role scenarios run; CDI, which a DRA driver's devices reach the container through, from 1.7 on.
# CRI-O reads drop-in files in crio.conf.d and has CDI on from 1.23 on.
RUNTIME_FLOORS = {"containerd": ((1, 6), (1, 7)), "crio": ((1, 23), (1, 23)), "docker": ((20, 10), None)}
# Where a distribution's own containerd is too old (Debian 12 ships 1.6).
DOCKER_CONTAINERD = (" (on Debian and Ubuntu container_runtime_debian_repo_manage: true installs Docker's "
                     "containerd.io, 1.7 or later)")
RUNTIME_BINARIES = {"containerd": ("containerd", "--version"), "crio": ("crio", "--version"),
                    "docker": ("dockerd", "--version")}
IMAGE_STORES = {"containerd": "/var/lib/containerd", "crio": "/var/lib/containers", "docker": "/var/lib/docker"}
VERSION = re.compile(r"(?<![0-9.])v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?")


def check(name, status, detail, fix=""):
    return {"check": name, "status": status, "detail": detail, "fix": fix}


# -- what the host has ----------------------------------------------------------------------------------------

def read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def os_release():
    """(ID-like distribution name as ansible_facts has it, release) from os-release."""
    for path in OS_RELEASE:
        text = read_text(path)
        if text:
            fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            values = dict((k, v.strip().strip('"')) for k, v in fields.items())
            names = {"ubuntu": "Ubuntu", "debian": "Debian", "rhel": "RedHat", "rocky": "Rocky", "almalinux": "AlmaLinux"}
            distribution = names.get(values.get("ID", ""), values.get("NAME") or values.get("ID") or "unknown")
            version = values.get("VERSION_ID", "")
            release = version if distribution == "Ubuntu" else version.split(".", 1)[0]
            return distribution, release
    return "unknown", ""


def secure_boot(sysfs_root):
    """True, False, or None when the firmware does not say (no EFI variables)."""
    variable = os.path.join(sysfs_root, SECURE_BOOT_VAR)
    try:
        with open(variable, "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return False if not os.path.isdir(os.path.dirname(variable)) else None
    return bool(len(data) >= 5 and data[4] == 1)   # 4 bytes of attributes, then the value


def run(argv):
    """(rc, stdout) of a command, or (None, '') when it is not installed."""
    if not shutil.which(argv[0]):
        return None, ""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return 1, str(err)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def headers_available(kernel):
    """Whether the package manager has a headers package for the kernel: True, False, or None (no known one)."""
    if shutil.which("apt-cache"):
        rc, out = run(["apt-cache", "policy", "linux-headers-%s" % kernel])
        return bool(rc == 0 and re.search(r"Candidate:\s*(?!\(none\))\S+", out))
    if shutil.which("dnf"):
        rc, _out = run(["dnf", "-q", "list", "--available", "--installed", "kernel-devel-%s" % kernel])
        return rc == 0
    return None


def signing_key_enrolled():
    """(key path or None, enrolled: True/False/None when mokutil cannot tell)."""
    for key in DKMS_SIGNING_KEYS:
        if os.path.exists(key):
            rc, out = run(["mokutil", "--test-key", key])
            if rc is None:
                return key, None
            return key, "is already enrolled" in out
    return None, False


def runtime_version(runtime):
    binary, flag = RUNTIME_BINARIES[runtime]
    rc, out = run([binary, flag])
    if rc is None:
        return None, ""
    match = VERSION.search(out)
    return ((int(match.group(1)), int(match.group(2))) if match else ()), out.strip().splitlines()[0] if out else ""


def package_candidate(package):
    """((major, minor), text) of the version the package manager would install, or (None, '')."""
    if shutil.which("apt-cache"):
        rc, out = run(["apt-cache", "policy", package])
        match = re.search(r"Candidate:\s*(?!\(none\))(\S+)", out) if rc == 0 else None
    elif shutil.which("dnf"):
        rc, out = run(["dnf", "-q", "list", "--available", package])
        match = re.search(r"^%s\S*\s+(\S+)" % re.escape(package), out, re.M) if rc == 0 else None
    else:
        match = None
    if not match:
        return None, ""
    version = VERSION.search(match.group(1).split(":", 1)[-1])
    return ((int(version.group(1)), int(version.group(2))) if version else ()), match.group(1)


def containerd_cdi():
    """enable_cdi of the CRI plugin as the running configuration says, or None when it cannot be read."""
    rc, out = run(["containerd", "config", "dump"])
    if rc != 0:
        return None
    values = re.findall(r"^\s*enable_cdi\s*=\s*(true|false)\s*$", out, re.M)
    return None if not values else values[-1] == "true"


def free_mib(path):
    """(the nearest existing directory, the MiB free there for a writer that is not root)."""
    probe = path
    while not os.path.isdir(probe) and probe not in ("", "/"):
        probe = os.path.dirname(probe)
    stat = os.statvfs(probe or "/")
    return probe or "/", stat.f_bavail * stat.f_frsize // (1024 * 1024)


# -- what it means ---------------------------------------------------------------------------------------------

def distribution_checks(params, host):
    """The driver role's distributions and architectures (the runtime and toolkit roles take any apt or dnf host)."""
    found = []
    if not params["install_driver"]:
        return found
    supported = params.get("supported")
    if supported:
        releases = [str(r) for r in supported.get(host["distribution"]) or []]
        if host["release"] in releases:
            found.append(check("distribution", "ok", "%s %s" % (host["distribution"], host["release"])))
        else:
            found.append(check("distribution", "blocker", "%s %s is not one the driver role installs on" % (
                host["distribution"], host["release"] or "(no release)"),
                "use one of %s" % "; ".join("%s %s" % (d, "/".join(str(r) for r in rs))
                                            for d, rs in sorted(supported.items()))))
    architectures = params.get("architectures")
    if architectures:
        if host["architecture"] in architectures:
            found.append(check("architecture", "ok", host["architecture"]))
        else:
            found.append(check("architecture", "blocker", "%s is not one the driver role installs on"
                               % host["architecture"], "use a host of %s" % ", ".join(architectures)))
    return found


def driver_checks(params, host, devices):
    found = []
    installing = params["install_driver"]
    if devices is not None:
        gpus = (devices.get("counts") or {}).get("pci:10de", 0)
        if gpus:
            found.append(check("nvidia_gpu", "ok", "%d NVIDIA PCI function(s)" % gpus))
        elif installing and not params["force_without_gpu"]:
            found.append(check("nvidia_gpu", "blocker", "no NVIDIA GPU (PCI vendor 10de) on the host",
                               "run the GPU roles on GPU hosts only, or set nvidia_driver_force: true to prepare an "
                               "image"))
    if installing and params["kernel_headers"]:
        build = host["headers_path"]
        if host["headers_installed"]:
            found.append(check("kernel_headers", "ok", "%s exists" % build))
        elif host["headers_available"]:
            found.append(check("kernel_headers", "ok", "the headers of %s are not installed; the driver role "
                               "installs them (a package is available)" % host["kernel"]))
        else:
            found.append(check("kernel_headers", "blocker",
                               "no headers for the running kernel %s: not installed (%s) and no package of them in "
                               "the configured repositories" % (host["kernel"], build),
                               "boot a kernel the repositories have headers for (usually the newest, after an "
                               "upgrade that was not followed by a reboot), or make its headers package available"))
    if installing:
        if host["secure_boot"] is None:
            found.append(check("secure_boot", "warning", "the firmware's SecureBoot variable is unreadable",
                               "check with mokutil --sb-state; with Secure Boot on, DKMS needs an enrolled key"))
        elif not host["secure_boot"]:
            found.append(check("secure_boot", "ok", "Secure Boot is off"))
        elif host["signing_key"] and host["signing_key_enrolled"]:
            found.append(check("secure_boot", "ok", "Secure Boot is on and DKMS's key %s is enrolled"
                               % host["signing_key"]))
        elif host["signing_key"] and host["signing_key_enrolled"] is None:
            found.append(check("secure_boot", "warning", "Secure Boot is on; DKMS's key %s exists but mokutil is "
                               "not installed to tell whether it is enrolled" % host["signing_key"],
                               "mokutil --test-key %s must say it is enrolled" % host["signing_key"]))
        else:
            found.append(check("secure_boot", "blocker",
                               "Secure Boot is on and %s" % ("DKMS's key %s is not enrolled" % host["signing_key"]
                                                             if host["signing_key"] else "DKMS has no signing key"),
                               "enroll DKMS's key (mokutil --import /var/lib/dkms/mok.pub, then confirm at the next "
                               "boot), or turn Secure Boot off: the kernel refuses the unsigned nvidia module"))
        if devices is not None:
            if "nouveau" in (devices.get("kernel_modules") or []):
                if params["reboot"]:
                    found.append(check("nouveau", "warning", "the nouveau module is loaded",
                                       "the driver role blacklists it and reboots the host"))
                else:
                    found.append(check("nouveau", "blocker", "the nouveau module is loaded; the NVIDIA driver "
                                       "cannot load until a reboot unloads it",
                                       "set nvidia_driver_reboot: true, or reboot the host after the run"))
            else:
                found.append(check("nouveau", "ok", "nouveau is not loaded"))
    if devices is not None:
        found.extend(running_driver_checks(params, devices))
    return found


def running_driver_checks(params, devices):
    running = (devices.get("driver_versions") or {}).get("nvidia")
    if not running:
        return [check("running_driver", "ok", "no NVIDIA driver is loaded")]
    found = []
    branch = params.get("driver_branch")
    if branch and running.split(".", 1)[0] != str(branch):
        found.append(check("running_driver", "warning", "driver %s runs; the run installs branch %s" % (running, branch),
                           "the new branch loads after a reboot (nvidia_driver_reboot: true reboots with a drain)"))
    else:
        found.append(check("running_driver", "ok", "driver %s runs" % running))
    nodes = [n for n in devices.get("device_nodes") or [] if os.path.basename(n) == "nvidiactl"]
    if nodes:
        found.append(check("device_nodes", "ok", ", ".join(sorted(devices.get("device_nodes")))))
    else:
        found.append(check("device_nodes", "blocker", "driver %s is loaded but /dev/nvidiactl does not exist" % running,
                           "create the nodes (nvidia-modprobe, or nvidia-smi as root once) and make it happen at boot"
                           " (nvidia-persistenced, udev rules of the driver packages)"))
    return found


def runtime_checks(params, host):
    found = []
    for runtime in params["runtimes"]:
        found.extend(one_runtime_checks(params, runtime, host["runtimes"][runtime], host["cdi_enabled"]))
    return found


def one_runtime_checks(params, runtime, seen, cdi_enabled):
    floor, cdi_floor = RUNTIME_FLOORS[runtime]
    version, banner = seen["installed"]
    if version is None and runtime == "containerd" and seen.get("candidate", (None,))[0]:
        version, banner = seen["candidate"]
        installing = " (not installed; the container_runtime role installs package version %s)" % banner
    elif version is None:
        return [check("runtime", "ok", "%s is not installed; the container_runtime role installs it" % runtime)]
    else:
        installing = ""
    if version == ():
        return [check("runtime", "warning", "%s's version is unreadable: %s" % (runtime, banner),
                      "check that it is %s or later" % ".".join(map(str, floor)))]
    shown = ".".join(map(str, version)) + installing
    found = []
    if version < floor:
        found.append(check("runtime", "blocker", "%s %s does not read the drop-in files the roles write" % (runtime, shown),
                           "upgrade %s to %s or later" % (runtime, ".".join(map(str, floor)))))
    else:
        found.append(check("runtime", "ok", "%s %s" % (runtime, shown)))
    if params["allocation"] != "dra":
        return found
    if cdi_floor is None:
        found.append(check("cdi", "blocker", "%s gives containers no CDI devices, which a DRA driver's devices need"
                           % runtime, "serve this host's devices with the device plugin, or run containerd 1.7 or "
                           "later or CRI-O 1.23 or later"))
    elif version < cdi_floor:
        newer = DOCKER_CONTAINERD if runtime == "containerd" else ""
        found.append(check("cdi", "blocker", "%s %s has no CDI, through which a DRA driver's devices reach the "
                           "container" % (runtime, shown), "upgrade %s to %s or later%s, or serve this host's devices "
                           "with the device plugin" % (runtime, ".".join(map(str, cdi_floor)), newer)))
    elif runtime == "containerd" and cdi_enabled is False:
        found.append(check("cdi", "ok", "CDI is off in containerd's configuration; the toolkit role turns it on "
                           "(enable_cdi) for a DRA allocation"))
    else:
        found.append(check("cdi", "ok", "%s %s has CDI" % (runtime, shown)))
    return found


def space_checks(params, host):
    found = []
    for path, (measured, free) in zip(host["space_paths"], host["free_mib"]):
        where = path if measured == path else "%s (measured on %s)" % (path, measured)
        if free < params["min_free_mib"]:
            found.append(check("free_space", "blocker", "%s has %d MiB free, less than %d MiB"
                               % (where, free, params["min_free_mib"]),
                               "free space there (old kernels, package caches, unused images) or grow the file "
                               "system"))
        else:
            found.append(check("free_space", "ok", "%s has %d MiB free" % (where, free)))
    return found


def evaluate(params, host, devices):
    return (distribution_checks(params, host) + driver_checks(params, host, devices) + runtime_checks(params, host)
            + space_checks(params, host))


def default_space_paths(runtimes):
    cache = "/var/cache/apt" if shutil.which("apt-get") else "/var/cache/dnf"
    return [cache] + [IMAGE_STORES[runtime] for runtime in runtimes]


def gather(params):
    distribution, release = os_release()
    uname = os.uname()
    key, enrolled = signing_key_enrolled()
    runtimes = dict((runtime, {"installed": runtime_version(runtime)}) for runtime in params["runtimes"])
    if "containerd" in runtimes and runtimes["containerd"]["installed"][0] is None:
        runtimes["containerd"]["candidate"] = package_candidate(params["containerd_package"])
    paths = params.get("space_paths") or default_space_paths(params["runtimes"])
    host = {"distribution": distribution, "release": release, "kernel": uname.release, "architecture": uname.machine,
            "secure_boot": secure_boot(params["sysfs_root"]), "signing_key": key, "signing_key_enrolled": enrolled,
            "runtimes": runtimes, "space_paths": paths,
            "free_mib": [free_mib(p) for p in paths]}
    installing = params["install_driver"] and params["kernel_headers"]
    host["headers_path"] = os.path.join(MODULES_DIR, uname.release, "build")
    host["headers_installed"] = os.path.isdir(host["headers_path"])
    host["headers_available"] = headers_available(uname.release) if installing and not host["headers_installed"] else None
    cdi_needed = params["allocation"] == "dra" and (runtimes.get("containerd") or {}).get("installed", (None,))[0]
    host["cdi_enabled"] = containerd_cdi() if cdi_needed else None
    return host


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type="dict"),
            install_driver=dict(type="bool", default=True),
            force_without_gpu=dict(type="bool", default=False),
            driver_branch=dict(type="str"),
            kernel_headers=dict(type="bool", default=True),
            reboot=dict(type="bool", default=False),
            supported=dict(type="dict"),
            architectures=dict(type="list", elements="str"),
            runtimes=dict(type="list", elements="str", choices=["containerd", "crio", "docker"], default=["containerd"]),
            containerd_package=dict(type="str", default="containerd"),
            allocation=dict(type="str", choices=["device_plugin", "dra"], default="device_plugin"),
            min_free_mib=dict(type="int", default=4096),
            space_paths=dict(type="list", elements="path"),
            sysfs_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["min_free_mib"] < 0:
        module.fail_json(msg="min_free_mib %d must be 0 or more" % params["min_free_mib"])
    for index, path in enumerate(params.get("space_paths") or []):
        if not path or not os.path.isabs(path):
            module.fail_json(msg="space_paths[%d] %r must be an absolute path" % (index, path))
    host = gather(params)
    checks = evaluate(params, host, params.get("devices"))
    blockers = ["%s - %s. Fix - %s" % (c["check"], c["detail"], c["fix"]) for c in checks if c["status"] == "blocker"]
    report = dict(changed=False, checks=checks, blockers=blockers,
                  host=dict((k, host[k]) for k in ("distribution", "release", "kernel", "architecture", "secure_boot")),
                  )
    installed = dict((runtime, seen["installed"][0]) for runtime, seen in host["runtimes"].items())
    report["host"]["runtimes"] = dict((runtime, ".".join(map(str, version)) if version else None)
                                      for runtime, version in installed.items())
    if blockers:
        module.fail_json(msg="%d blocker(s) on this host, nothing was changed: %s" % (len(blockers), " | ".join(blockers)),
                         **report)
    module.exit_json(**report)


if __name__ == "__main__":
    main()
