# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real node's image archives (tests/support/image_archive.py): the docker-archive layout containerd imports
(the real node suite imports them for real), checked here member by member."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import tarfile

from tests.support.image_archive import write_image


def test_one_layer_with_parents_links_and_the_digests_the_manifest_names(tmp_path):
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF tool")
    path = write_image(str(tmp_path / "image.tar"), "kubehw.local/tool:1", ["tool"],
                       {"usr/local/bin/tool": str(binary), "bin/alias": "@../usr/local/bin/tool"})
    with tarfile.open(path) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == ["kubehw.local/tool:1"]
        config_bytes = archive.extractfile(manifest[0]["Config"]).read()
        layer_bytes = archive.extractfile(manifest[0]["Layers"][0]).read()
    config = json.loads(config_bytes)
    assert manifest[0]["Config"] == hashlib.sha256(config_bytes).hexdigest() + ".json"
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer_bytes).hexdigest()]
    assert config["config"]["Entrypoint"] == ["tool"]
    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as layer:
        members = dict((m.name, m) for m in layer.getmembers())
        assert layer.extractfile("usr/local/bin/tool").read() == b"\x7fELF tool"
    assert members["usr/local/bin/tool"].mode == 0o755
    assert members["usr"].isdir() and members["usr/local/bin"].isdir() and members["tmp"].mode == 0o1777
    assert members["bin/alias"].issym() and members["bin/alias"].linkname == "../usr/local/bin/tool"


def test_the_same_input_writes_the_same_archive(tmp_path):
    binary = tmp_path / "tool"
    binary.write_bytes(b"tool")
    first = write_image(str(tmp_path / "a.tar"), "x/tool:1", ["tool"], {"tool": str(binary)})
    second = write_image(str(tmp_path / "b.tar"), "x/tool:1", ["tool"], {"tool": str(binary)})
    with tarfile.open(first) as one, tarfile.open(second) as two:
        assert json.load(one.extractfile("manifest.json")) == json.load(two.extractfile("manifest.json"))
