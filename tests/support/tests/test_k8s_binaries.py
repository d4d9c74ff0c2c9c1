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
import tarfile
import threading

import pytest

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


@pytest.fixture(scope="module")
def release_server(binaries, tmp_path_factory):
    """A local server with the pinned release's two tarballs (official paths and member names), and the release
    table pointing at the official locations with these tarballs' checksums."""
    root = str(tmp_path_factory.mktemp("release"))
    release = copy.deepcopy(k8s_binaries.read_release())
    for part in ("kubernetes", "etcd"):
        entry = release[part]
        path = os.path.join(root, entry["url"].split("://", 1)[1].split("/", 1)[1])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # an uncompressed tar under the .tar.gz name: tarfile reads either, and the test need not spend a minute on gzip
        with tarfile.open(path, "w") as tar:
            for name, member in entry["members"].items():
                tar.add(os.path.join(binaries, name), arcname=member)
        algorithm = "sha512" if "sha512" in entry else "sha256"
        entry[algorithm] = _digest(path, algorithm)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield release, "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_mirror_replaces_scheme_and_host_and_keeps_the_release_path():
    url = "https://dl.k8s.io/v1.36.0/kubernetes-server-linux-amd64.tar.gz"
    assert k8s_binaries.mirrored(url, None) == url
    assert k8s_binaries.mirrored(url, "http://mirror.example:8080/k8s/") == \
        "http://mirror.example:8080/k8s/v1.36.0/kubernetes-server-linux-amd64.tar.gz"


def test_a_good_checksum_installs_binaries_a_control_plane_runs_on(release_server, tmp_path):
    release, mirror = release_server
    cache = str(tmp_path / "cache")
    installed = k8s_binaries.download(release, cache=cache, mirror=mirror)
    assert installed == os.path.join(cache, "k8s-release", release["kubernetes"]["version"], "bin")
    assert sorted(os.listdir(installed)) == sorted(k8s_binaries.NAMES)
    # found there by locate(), after ../shared/k8s/bin: an environment without either finds the download
    assert k8s_binaries.locate(environ={"KUBEHW_K8S_ASSETS": installed}, cache=cache) == installed
    plane = ControlPlane(installed, str(tmp_path / "plane")).start()
    try:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=plane.kubeconfig)
        assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    finally:
        plane.stop(wipe=True)
    # a second run finds it installed and fetches nothing
    assert k8s_binaries.download(release, cache=cache, mirror="http://127.0.0.1:9") == installed


def test_a_wrong_checksum_installs_nothing_and_leaves_nothing_half_written(release_server, tmp_path):
    release, mirror = release_server
    release = copy.deepcopy(release)
    release["etcd"]["sha256"] = "0" * 64
    cache = str(tmp_path / "cache")
    with pytest.raises(k8s_binaries.BinariesError) as err:
        k8s_binaries.download(release, cache=cache, mirror=mirror)
    assert "does not match the checksum kept in tests/support/k8s_release.json" in str(err.value)
    assert "nothing was installed" in str(err.value)
    # the kubernetes tarball before it was good: still nothing of it is left, installed or staged
    assert os.listdir(os.path.join(cache, "k8s-release", release["kubernetes"]["version"])) == []


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
        os.path.join(cache, "k8s-release", k8s_binaries.read_release()["kubernetes"]["version"], "bin")]


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
