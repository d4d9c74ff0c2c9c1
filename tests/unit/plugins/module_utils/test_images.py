# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The image list: every image a preset, module or role deploys comes from it; its digests are those upstream
published (upstream_image_digests.yml); mirror rewriting keeps path, tag and digest; the filters over it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.kubehw.devices.plugins.filter import images as image_filters
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as dp_presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets
from ansible_collections.kubehw.devices.plugins.module_utils import _images
from ansible_collections.kubehw.devices.plugins.module_utils._images import check_image_registry

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
with open(os.path.join(HERE, "upstream_image_digests.yml")) as _f:
    RECORD = yaml.safe_load(_f)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def test_each_digest_is_the_one_upstream_published_and_each_missing_one_says_what_was_read():
    published, missing = RECORD["published"], RECORD["not_published"]
    assert set(published) | set(missing) == set(_images.IMAGES)
    assert not set(published) & set(missing)
    for name, entry in _images.IMAGES.items():
        if name in missing:
            assert entry["digest"] is None and entry["no_digest"], name
            continue
        record = published[name]
        text = "\n".join(record["lines"])
        assert DIGEST.findall(text) == [entry["digest"]], (name, text)
        assert entry["tag"] in text, (name, entry["tag"])
        # the source the list names is the file the record was copied from, at that commit
        for part in (record["repository"], record["path"], record["commit"][:12]):
            assert part in entry["digest_source"], (name, part, entry["digest_source"])


def test_references_name_tag_and_digest_and_a_digest_is_never_guessed():
    assert _images.reference("pause") == ("registry.k8s.io/pause:3.10@sha256:"
                                          "ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a")
    assert _images.reference("amd_device_plugin") == "docker.io/rocm/k8s-device-plugin:1.31.0.10"
    for name, entry in _images.IMAGES.items():
        assert entry["digest"] is None or DIGEST.fullmatch(entry["digest"]), name


def test_every_preset_deploys_an_image_of_the_list():
    listed = set(_images.reference(name) for name in _images.IMAGES)
    deployed = dict(("device_plugin:%s" % name, preset["image"]) for name, preset in dp_presets.PRESETS.items())
    deployed.update(("dra_driver:%s" % name, preset["image"]) for name, preset in dra_presets.PRESETS.items())
    for preset, image in deployed.items():
        assert image is None or image in listed, (preset, image)
        if image:
            assert _images.IMAGES[_images.name_of(preset)]["preset"] == preset
    assert set(e["preset"] for e in _images.IMAGES.values() if e.get("preset")) == \
        set(p for p, image in deployed.items() if image)


def test_the_roles_smoke_test_image_is_the_lists():
    with open(os.path.join(ROOT, "roles", "accelerator_node", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["accelerator_node_smoke_test_image"] == "{{ 'cuda_base' | kubehw.devices.image_reference }}"


@pytest.mark.parametrize("image,registry,expected", [
    ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "a" * 64, "mirror.local:5000",
     "mirror.local:5000/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "a" * 64),
    ("intel/intel-gpu-plugin:0.32.0", "mirror.local/hub/", "mirror.local/hub/intel/intel-gpu-plugin:0.32.0"),
    ("docker.io/rocm/k8s-device-plugin:1", "m.example", "m.example/rocm/k8s-device-plugin:1"),
    ("busybox", "m.example", "m.example/library/busybox"),
    ("localhost/x:1", "m.example", "m.example/x:1"),
    ("nvcr.io/a:1", None, "nvcr.io/a:1"),
])
def test_a_mirror_keeps_path_tag_and_digest(image, registry, expected):
    assert _images.mirrored(image, registry) == expected


@pytest.mark.parametrize("registry", ["mirror.local", "mirror.local:5000", "mirror.local:5000/gpu/images", "10.0.0.5:5000",
                                      "localhost:5000", "[fd00::1]:5000"])
def test_registry_settings_accepted(registry):
    check_image_registry(registry, ValueError)


@pytest.mark.parametrize("registry", ["", " ", "mirror.local\n", "https://mirror.local", "mirror.local/", "mirror.local:x",
                                      "mirror local", "mirror.local/Gpu", "mirror.local/gpu:1", "-mirror.local"])
def test_registry_settings_refused_by_name(registry):
    with pytest.raises(ValueError, match=r"image_registry %s must be a registry host" % re.escape(repr(registry))):
        check_image_registry(registry, ValueError)


def test_image_list_of_presets_and_user_images_in_a_mirror():
    result = image_filters.image_list(["device_plugin:nvidia", "dra_driver:nvidia", "pause", "cuda_base",
                                       "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                       "registry.example/own/plugin:2"], registry="mirror.local:5000")
    by_name = dict((item["name"], item) for item in result["images"])
    # the CUDA image named by its reference is the list's entry, listed once
    assert [item["name"] for item in result["images"]] == [
        "nvidia_device_plugin", "nvidia_dra_driver", "pause", "cuda_base", None]
    assert by_name["nvidia_dra_driver"]["deployed_as"] == (
        "mirror.local:5000/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1@" + _images.IMAGES["nvidia_dra_driver"]["digest"])
    assert by_name[None]["image"] == "registry.example/own/plugin:2" and by_name[None]["digest"] is None
    assert by_name["cuda_base"]["no_digest"]
    assert result["skopeo_sync"]["registry.k8s.io"]["images"]["pause"] == [
        "3.10", _images.IMAGES["pause"]["digest"]]
    assert result["skopeo_sync"]["registry.example"]["images"]["own/plugin"] == ["2"]
    assert result["copies"][2] == (
        "skopeo copy --all --preserve-digests docker://registry.k8s.io/pause@%s docker://mirror.local:5000/pause:3.10"
        % _images.IMAGES["pause"]["digest"])
    assert image_filters.image_list(["pause"])["copies"] == []


def test_image_list_without_a_selection_lists_every_image():
    assert sorted(i["name"] for i in image_filters.image_list()["images"]) == sorted(_images.IMAGES)


@pytest.mark.parametrize("wanted,words", [
    (["device_plugin:custom"], "'device_plugin:custom': that preset has no image"),
    (["dra_driver:nvidai"], "'dra_driver:nvidai': that preset has no image"),
    (["cuda"], "'cuda' is neither a name of the collection's image list"),
    ([""], "item 0 '' must be a non-empty string"),
    ("pause", "takes a list"),
])
def test_image_list_refuses_what_it_cannot_list(wanted, words):
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        image_filters.image_list(wanted)


def test_image_reference_filter():
    assert image_filters.image_reference("cuda_base", "m.example") == "m.example/nvidia/cuda:12.4.1-base-ubuntu22.04"
    with pytest.raises(AnsibleFilterError, match="'cuda' is not in the collection's image list"):
        image_filters.image_reference("cuda")
    with pytest.raises(AnsibleFilterError, match="registry 'https://m' must be a registry host"):
        image_filters.image_reference("pause", "https://m")


def test_the_refresh_command_tells_same_moved_new_and_unreadable_apart(tmp_path):
    """scripts/image_digests.py with a skopeo that serves a manifest per reference: the digest it computes is the
    manifest's sha256, compared with the list's."""
    import hashlib
    import subprocess
    import sys

    pause_manifest = b'{"schemaVersion": 2, "kubehw": "pause"}'
    served = {"docker://registry.k8s.io/pause:3.10": pause_manifest,
              "docker://nvcr.io/nvidia/k8s-device-plugin:v0.20.0": b'{"moved": true}',
              "docker://nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04": b'{"cuda": 1}'}
    for ref, body in served.items():
        (tmp_path / hashlib.sha256(ref.encode()).hexdigest()).write_bytes(body)
    skopeo = tmp_path / "skopeo"
    skopeo.write_text('#!/bin/sh\nf="%s/$(printf %%s "$3" | sha256sum | cut -d" " -f1)"\n'
                      '[ -f "$f" ] || { echo "manifest unknown: $3" >&2; exit 1; }\ncat "$f"\n' % tmp_path)
    skopeo.chmod(0o755)
    script = os.path.join(ROOT, "scripts", "image_digests.py")
    env = dict(os.environ, SKOPEO=str(skopeo))

    def run(*names):
        return subprocess.run([sys.executable, script] + list(names), env=env, capture_output=True, text=True,
                              check=False)

    # the list's pause digest is upstream's, not this fake manifest's: the tag "moved"
    proc = run("pause", "nvidia_device_plugin", "cuda_base", "amd_device_plugin")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("moved      pause registry.k8s.io/pause:3.10: the list has %s, the registry serves "
                               "sha256:%s" % (_images.IMAGES["pause"]["digest"], hashlib.sha256(pause_manifest).hexdigest()))
    assert lines[1].startswith("moved      nvidia_device_plugin")
    assert lines[2].startswith("new        cuda_base nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 serves sha256:%s"
                               % hashlib.sha256(b'{"cuda": 1}').hexdigest())
    assert lines[3].startswith("unreadable amd_device_plugin") and "manifest unknown" in lines[3]
    # a registry serving exactly the published index: same, exit 0
    (tmp_path / hashlib.sha256(b"docker://registry.k8s.io/pause:3.10").hexdigest()).write_bytes(b"x")
    import importlib.util
    spec = importlib.util.spec_from_file_location("image_digests", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    images = dict(module.load_images())
    images["pause"] = dict(images["pause"], digest="sha256:" + hashlib.sha256(b"x").hexdigest())
    lines, failed = module.compare(images, ["pause"], str(skopeo))
    assert not failed and lines[0].startswith("same       pause registry.k8s.io/pause:3.10@sha256:"), lines
    proc = run("nonsense")
    assert proc.returncode == 2 and "not in the image list: nonsense" in proc.stderr
