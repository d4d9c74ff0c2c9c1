# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the control plane's binaries come from (tests/support/k8s_binaries.py): the order they are looked for in,
and the download path against a local HTTP server that serves release tarballs in the official layout, built here
from the binaries this machine has: a good checksum installs binaries a control plane then runs on, a wrong one
installs nothing and leaves nothing half written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import functools
import hashlib
import http.server
import lzma
import os
import shutil
import subprocess
import tarfile
import threading

import pytest
import yaml

from tests.support import k8s_binaries
from tests.support.control_plane import ControlPlane


@pytest.fixture(scope="module")
def binaries():
    found = k8s_binaries.locate()
    if found is None:
        pytest.skip("no Kubernetes binaries on this machine (tests/support/k8s_binaries.py)")
    return found


def _digest(path, algorithm):
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _serve(root):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _local_path(root, url):
    path = os.path.join(root, url.split("://", 1)[1].split("/", 1)[1])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


@pytest.fixture(scope="module")
def release_server(binaries, tmp_path_factory):
    """A local server with the pinned release's files at their official paths and member names (envtest's archive,
    dl.k8s.io's binaries with the .sha256 files beside them), and the release table pointing at the official
    locations with the archive's checksum as built here."""
    root = str(tmp_path_factory.mktemp("release"))
    release = copy.deepcopy(k8s_binaries.read_release())
    for entry in release["files"]:
        path = _local_path(root, entry["url"])
        if "binary" in entry:
            shutil.copyfile(os.path.join(binaries, entry["binary"]), path)
            with open(path + entry["sha256_published_beside"], "w") as published:
                published.write("%s  %s\n" % (_digest(path, "sha256"), entry["binary"]))   # as sha256sum writes it
            continue
        # an uncompressed tar under the .tar.gz name: tarfile reads either, and the test need not spend a minute on gzip
        with tarfile.open(path, "w") as tar:
            for name, member in entry["members"].items():
                tar.add(os.path.join(binaries, name), arcname=member)
        entry["sha512"] = _digest(path, "sha512")
    server = _serve(root)
    yield release, "http://127.0.0.1:%d" % server.server_address[1], root
    server.shutdown()
    server.server_close()


def test_the_mirror_replaces_scheme_and_host_and_keeps_the_release_path():
    url = "https://dl.k8s.io/v1.36.2/bin/linux/amd64/kube-scheduler"
    assert k8s_binaries.mirrored(url, None) == url
    assert k8s_binaries.mirrored(url, "http://mirror.example:8080/k8s/") == \
        "http://mirror.example:8080/k8s/v1.36.2/bin/linux/amd64/kube-scheduler"


def test_the_pinned_release_is_the_version_the_tests_run_with_the_published_checksums(binaries):
    release = k8s_binaries.read_release()
    version = release["version"]
    # every file of the download is of that version
    assert all("/%s/" % version in entry["url"] or "-%s-" % version in entry["url"] for entry in release["files"])
    # and it is the version the control plane of every test runs
    out = subprocess.run([os.path.join(binaries, "kube-apiserver"), "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["Kubernetes", version]
    # a pinned checksum is the one its publisher lists, as recorded with where it was read
    with open(os.path.join(os.path.dirname(k8s_binaries.RELEASE_FILE), "k8s_release_published.yaml")) as f:
        published = {row["file"]: row for row in yaml.safe_load(f)}
    for entry in release["files"]:
        name = os.path.basename(entry["url"])
        if "sha512" in entry:
            assert name in published, "%s: a pinned checksum without a recorded published one" % name
            assert entry["sha512"] == published[name]["sha512"], "%s: the pin and the published checksum differ" % name
            assert published[name]["published_in"].strip()
        else:
            # not recorded: the download reads the checksum its publisher puts beside the file
            assert name not in published, "%s: a published checksum is recorded; pin it" % name
            assert entry["sha256_published_beside"] == ".sha256"
    installs = [name for entry in release["files"] for name in entry.get("members", [entry.get("binary")])]
    assert sorted(installs) == sorted(k8s_binaries.NAMES)


def test_a_good_checksum_installs_binaries_a_control_plane_runs_on(release_server, tmp_path):
    release, mirror, _root = release_server
    cache = str(tmp_path / "cache")
    installed = k8s_binaries.download(release, cache=cache, mirror=mirror)
    assert installed == os.path.join(cache, "k8s-release", release["version"], "bin")
    assert sorted(os.listdir(installed)) == sorted(k8s_binaries.NAMES)
    # found there by locate(), after ../shared/k8s/bin: an environment without either finds the download
    assert k8s_binaries.locate(environ={"KUBEHW_K8S_ASSETS": installed}, cache=cache) == installed
    plane = ControlPlane(installed, str(tmp_path / "plane")).start()
    try:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=plane.kubeconfig)
        assert client.VersionApi(api).get_code().git_version == release["version"]
    finally:
        plane.stop(wipe=True)
    # a second run finds it installed and fetches nothing
    assert k8s_binaries.download(release, cache=cache, mirror="http://127.0.0.1:9") == installed


def test_a_wrong_pinned_checksum_installs_nothing_and_leaves_nothing_half_written(release_server, tmp_path):
    release, mirror, _root = release_server
    release = copy.deepcopy(release)
    release["files"][0]["sha512"] = "0" * 128
    cache = str(tmp_path / "cache")
    with pytest.raises(k8s_binaries.BinariesError) as err:
        k8s_binaries.download(release, cache=cache, mirror=mirror)
    assert "does not match the checksum kept in tests/support/k8s_release.json" in str(err.value)
    assert "nothing was installed" in str(err.value)
    assert os.listdir(os.path.join(cache, "k8s-release", release["version"])) == []


def test_a_binary_unlike_its_published_checksum_installs_nothing(release_server, tmp_path):
    release, mirror, root = release_server
    entry = release["files"][-1]
    published = _local_path(root, entry["url"] + entry["sha256_published_beside"])
    with open(published) as f:
        good = f.read()
    try:
        with open(published, "w") as f:
            f.write("%s  %s\n" % ("1" * 64, entry["binary"]))
        cache = str(tmp_path / "cache")
        with pytest.raises(k8s_binaries.BinariesError) as err:
            k8s_binaries.download(release, cache=cache, mirror=mirror)
        assert "does not match the checksum published in %s" % k8s_binaries.mirrored(
            entry["url"] + ".sha256", mirror) in str(err.value)
        # the archive and the other binary before it were good: nothing of them is left, installed or staged
        assert os.listdir(os.path.join(cache, "k8s-release", release["version"])) == []
        with open(published, "w") as f:
            f.write("<html>not found</html>")
        with pytest.raises(k8s_binaries.BinariesError, match="is not a sha256 checksum file"):
            k8s_binaries.download(release, cache=cache, mirror=mirror)
    finally:
        with open(published, "w") as f:
            f.write(good)


def test_assets_named_by_the_variable_are_the_only_place_looked_at_and_xz_is_unpacked_once(tmp_path):
    # Small stand-ins for the binaries: what is tested is where they are looked for and that each is unpacked whole,
    # once, and executable (compressing the real ones would cost 15 CPU seconds; the download test runs them).
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in k8s_binaries.NAMES:
        content = ("#!/bin/sh\necho %s\n" % name).encode() + os.urandom(1 << 16)
        with lzma.open(str(assets / (name + ".xz")), "wb", preset=0) as dst:
            dst.write(content)
        (tmp_path / name).write_bytes(content)
    cache = str(tmp_path / "cache")
    environ = {"KUBEHW_K8S_ASSETS": str(assets)}
    unpacked = k8s_binaries.locate(environ=environ, cache=cache)
    assert os.path.dirname(unpacked) == os.path.join(cache, "k8s-bin")
    for name in k8s_binaries.NAMES:
        assert _digest(os.path.join(unpacked, name), "sha256") == _digest(str(tmp_path / name), "sha256")
    assert all(os.access(os.path.join(unpacked, name), os.X_OK) for name in k8s_binaries.NAMES)
    assert k8s_binaries.locate(environ=environ, cache=cache) == unpacked     # once
    assert os.listdir(os.path.join(cache, "k8s-bin")) == [os.path.basename(unpacked)]
    # set to a folder without them, nothing else is tried: a user can say "none"
    assert k8s_binaries.locate(environ={"KUBEHW_K8S_ASSETS": str(tmp_path / "none")}, cache=cache) is None
    assert k8s_binaries.candidates(environ={}, cache=cache) == [
        os.path.join(os.path.dirname(k8s_binaries.REPO_ROOT), "shared", "k8s", "bin"),
        os.path.join(cache, "k8s-release", k8s_binaries.read_release()["version"], "bin")]


def test_the_real_node_binaries_are_found_apart_and_a_release_without_them_has_none(tmp_path):
    # A folder of the control plane's four (as the downloaded release has) has no real node's binaries.
    plain = tmp_path / "release"
    plain.mkdir()
    for name in k8s_binaries.NAMES:
        (plain / name).write_bytes(b"#!/bin/sh\n")
        os.chmod(str(plain / name), 0o755)
    cache = str(tmp_path / "cache")
    assert k8s_binaries.locate_node(environ={"KUBEHW_K8S_ASSETS": str(plain)}, cache=cache) is None
    # A folder with them compressed: unpacked once, apart from the control plane's.
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in k8s_binaries.NAMES + k8s_binaries.NODE_NAMES:
        with lzma.open(str(assets / (name + ".xz")), "wb", preset=0) as dst:
            dst.write(("#!/bin/sh\necho %s\n" % name).encode())
    environ = {"KUBEHW_K8S_ASSETS": str(assets)}
    node = k8s_binaries.locate_node(environ=environ, cache=cache)
    plane = k8s_binaries.locate(environ=environ, cache=cache)
    assert node != plane
    assert sorted(os.listdir(node)) == sorted(k8s_binaries.NODE_NAMES)
    assert sorted(os.listdir(plane)) == sorted(k8s_binaries.NAMES)
    with open(os.path.join(node, "kubelet")) as unpacked:
        assert unpacked.read() == "#!/bin/sh\necho kubelet\n"
    assert k8s_binaries.locate_node(environ=environ, cache=cache) == node
