# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The containerd drop-in builder of the nvidia_container_toolkit role, for config versions 2 and 3.

The molecule scenario runs version 2 for real (Debian's containerd 1.6); version 3 (containerd 2.x)
is not installable here, so its layout is checked from a representative `config dump`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import importlib.util
import json
import os
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "nvidia_container_toolkit", "files", "containerd_dropin.py")
_SPEC = importlib.util.spec_from_file_location("containerd_dropin", SCRIPT)
dropin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(dropin)

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

V3_DUMP = """
version = 3
root = "/var/lib/containerd"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/opt/cni/bin"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
"""


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


def test_v3_uses_the_cri_runtime_plugin():
    result, doc = build(V3_DUMP, default_runtime=True, binary_name="/opt/nvidia/nvidia-container-runtime")
    assert result["version"] == 3 and result["plugin"] == "io.containerd.cri.v1.runtime"
    assert doc["version"] == 3
    runtime = doc["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["cni"]["bin_dirs"] == ["/opt/cni/bin"]
    assert runtime["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    nvidia = runtime["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"] == {"SystemdCgroup": False, "BinaryName": "/opt/nvidia/nvidia-container-runtime"}
    assert runtime["containerd"]["default_runtime_name"] == "nvidia"
    assert "io.containerd.cri.v1.images" not in doc["plugins"]
    assert "io.containerd.grpc.v1.cri" not in doc["plugins"]


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
    with pytest.raises(dropin.DropinError) as err:
        dropin.containerd_nvidia_dropin(dump)
    assert words in str(err.value)


def test_main_answers_json_even_on_bad_requests(capsys):
    request = base64.b64encode(json.dumps({"dump": V2_DUMP, "options": {"default_runtime": True}}).encode())
    assert dropin.main(["containerd_dropin.py", request.decode()]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["failed"] is False and 'default_runtime_name = "nvidia"' in answer["content"]
    assert dropin.main(["containerd_dropin.py", base64.b64encode(b'{"options": {}}').decode()]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["failed"] is True and "bad request" in answer["msg"]


def test_keys_and_strings_that_need_quoting_round_trip():
    data = {"version": 2, "plugins": {"a.b": {"x y": 'say "hi"\\n', "list": [1, "two"], "on": True}}}
    assert tomllib.loads(dropin.to_toml(data)) == data
