# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Representative inputs of the runtime drop-in filters, shared by their tests.

CASES are the inputs whose results are recorded in recorded/dropins.json. Those results were
written by the Python scripts the nvidia_container_toolkit role ran through the pipe lookup before
the filters replaced them (test_dropins_recorded.py), so a change of any drop-in a host gets for the
same input shows there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "roles", "fixtures")
RECORDED = os.path.join(HERE, "recorded", "dropins.json")


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def crio_file(*parts):
    """A CRI-O configuration file as the role passes it: its path (as named in messages) and text."""
    return {"path": "/etc/crio/" + "/".join(parts[1:]), "content": fixture("crio", *parts)}


# An excerpt of containerd 1.6's dump (config version 2), with an empty deprecated table.
V2_DUMP = """
version = 2
root = "/var/lib/containerd"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.default_runtime]
      runtime_type = ""
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
        BinaryName = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "/opt/containerd"
"""

# An excerpt of containerd 2.1's dump (config version 3).
V3_DUMP = """
version = 3
root = '/var/lib/containerd'
imports = []

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_cdi = true
    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          pod_annotations = []
          cgroup_writable = false
          sandboxer = 'podsandbox'

          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            BinaryName = ''
            SystemdCgroup = true

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dir = ''
      bin_dirs = ['/usr/lib/cni']
"""

# Debian sid's packaged /etc/containerd/config.toml (containerd 2.1 still ships version 2).
MAIN_V2 = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
"""

MAIN_V3 = "version = 3\nimports = ['/etc/containerd/conf.d/*.toml']\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'x'\n"

# A host whose CRI table names no runtime at all, and one whose runtime keys need quoting.
NO_RUNTIME_DUMP = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlayfs"\n'
QUOTED_DUMP = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "my runtime"\n'
               '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."my runtime"]\n  runtime_type = "io.containerd.runc.v2"\n'
               '  privileged_without_host_devices = true\n  pod_annotations = ["a.b/c", "x\\"y"]\n'
               '  cni_conf_dir = "/etc/cni/net.d\\tx"\n  ratio = 0.5\n'
               '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."my runtime".options]\n  SystemdCgroup = true\n'
               '  Root = "/run/ünïcode"\n')

CONTAINERD_OPTIONS = {
    "defaults": {},
    "default-cdi": {"default_runtime": True, "enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]},
    "cgroupfs-custom": {"systemd_cgroup": False, "binary_name": "/usr/local/nvidia/toolkit/nvidia-container-runtime",
                        "runtime_name": "nvidia-legacy"},
    "systemd-cdi-no-dirs": {"systemd_cgroup": True, "enable_cdi": True, "cdi_spec_dirs": []},
}

CONTAINERD_INPUTS = {
    "v2": (V2_DUMP, [None, MAIN_V3]),
    "v3": (V3_DUMP, [None, "# only a comment\n", MAIN_V2, MAIN_V3]),
    "1.6-crun": (fixture("containerd", "1.6-crun-default.dump.toml"), [fixture("containerd", "1.6-crun-default.main.toml")]),
    "2.1-crun": (fixture("containerd", "2.1-crun-default.dump.toml"), [fixture("containerd", "2.1-crun-default.main.toml")]),
    "no-runtime": (NO_RUNTIME_DUMP, [None]),
    "quoted": (QUOTED_DUMP, [None]),
}

# Inputs the filter refuses, with the message the user gets.
CONTAINERD_ERRORS = {
    "dump-v1": ("version = 1\n", None),
    "dump-unversioned": ('root = "/var/lib/containerd"\n', None),
    "dump-broken": ("version = 2\n[plugins\n", None),
    "main-v1": (V3_DUMP, '[plugins.cri]\n  sandbox_image = "x"\n'),
    "main-v4": (V3_DUMP, "version = 4\n"),
    "main-broken": (V3_DUMP, "version = 2\n[plugins\n"),
}

PACKAGED = [crio_file("packaged", "crio.conf.d", "10-crio.conf")]
PACKAGED_AND_SITE = PACKAGED + [crio_file("packaged", "crio.conf.d", "20-site.conf")]
LEGACY = [crio_file("legacy", "crio.conf")]
STATUS = fixture("crio", "status-crun.toml")

CRIO_OPTIONS = {
    "defaults": {},
    "default-cdi": {"default_runtime": True, "enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]},
    "custom": {"binary_name": "/usr/local/nvidia/toolkit/nvidia-container-runtime", "runtime_name": "nvidia-legacy",
               "enable_cdi": True},
}

CRIO_INPUTS = {
    "packaged": (PACKAGED, None),
    "packaged-site": (PACKAGED_AND_SITE, None),
    "legacy": (LEGACY, None),
    "packaged-status": (PACKAGED, STATUS),
    "status-only": ([], STATUS),
    "empty": ([{"path": "/etc/crio/crio.conf", "content": "# all commented out\n"}], ""),
    "pod-type": ([{"path": "/etc/crio/crio.conf.d/10.conf",
                   "content": '[crio.runtime.runtimes.runc]\nmonitor_path = "/usr/libexec/crio/conmonrs"\nruntime_type = "pod"\n'}], None),
    "vm-type": ([{"path": "/etc/crio/crio.conf.d/10.conf",
                  "content": '[crio.runtime]\ndefault_runtime = "kata"\n[crio.runtime.runtimes.kata]\nruntime_type = "vm"\n'
                             'runtime_config_path = "/etc/kata.toml"\nplatform_runtime_paths = {"x" = "/y"}\n'}], None),
}

CRIO_ERRORS = {
    "broken-file": ([{"path": "/etc/crio/crio.conf.d/30-bad.conf", "content": "[crio.runtime\n"}], None),
    "broken-status": (PACKAGED, "[crio\n"),
    "crio-not-a-table": ([{"path": "/etc/crio/crio.conf", "content": 'crio = "x"\n'}], None),
}


def cases():
    """(case id, filter name, input, keyword arguments) of every recorded case."""
    found = []
    for name, (dump, mains) in CONTAINERD_INPUTS.items():
        for index, main in enumerate(mains):
            for option_name, options in CONTAINERD_OPTIONS.items():
                kwargs = dict(options, main_config=main)
                found.append(("containerd/%s/main%d/%s" % (name, index, option_name), "containerd_nvidia_dropin", dump, kwargs))
    for name, (dump, main) in CONTAINERD_ERRORS.items():
        found.append(("containerd/error/" + name, "containerd_nvidia_dropin", dump, {"main_config": main}))
    for name, (files, status) in CRIO_INPUTS.items():
        for option_name, options in CRIO_OPTIONS.items():
            found.append(("crio/%s/%s" % (name, option_name), "crio_nvidia_dropin", files, dict(options, status=status)))
    for name, (files, status) in CRIO_ERRORS.items():
        found.append(("crio/error/" + name, "crio_nvidia_dropin", files, {"status": status}))
    return found
