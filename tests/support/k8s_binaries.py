# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes release binaries the test control plane runs (tests/support/control_plane.py): found, unpacked or
downloaded, and verified, as envtest's setup-envtest finds them by KUBEBUILDER_ASSETS or fetches them.

    locate()      a folder with executable etcd, kube-apiserver, kube-controller-manager, kube-scheduler, or None
    locate_node() a folder with the real node's kubelet, sample-device-plugin, dra-test-driver and pause, or None
    download()    fetch the pinned release (k8s_release.json) into .cache/k8s-release/, checksums verified

`locate()` looks, in this order, at:

1. ``$KUBEHW_K8S_ASSETS``: a folder of the four binaries, plain or xz-compressed (``<name>.xz``); when it is set it is
   the only place looked at, so ``KUBEHW_K8S_ASSETS=/nonexistent`` says "none";
2. ``../shared/k8s/bin`` beside the checkout (xz-compressed, as this workplace keeps them);
3. ``.cache/k8s-release/<version>/bin``: what ``download()`` (``make setup``) installed.

Compressed binaries are unpacked once into ``.cache/k8s-bin/<digest of their folder and times>/`` (atomically, so
parallel pytest workers never see half a file).

`download()` fetches the files ``k8s_release.json`` names, of the same Kubernetes version the tests run (envtest's
release archive for kube-apiserver and etcd, dl.k8s.io's binaries for the controller manager and the scheduler), from
their official locations or from ``$KUBEHW_K8S_MIRROR``, which replaces each URL's scheme and host for air-gapped
sites. Each file is verified against the checksum kept in ``k8s_release.json`` (itself held to the published one
recorded in ``k8s_release_published.yaml`` by the tests) or, where no published copy could be recorded, against the
``.sha256`` file its publisher puts beside it. The four binaries are installed only when every check passed: a
mismatch leaves nothing behind.

    python -m tests.support.k8s_binaries locate|download
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The real node's (tests/support/real_node.py): the kubelet, Kubernetes' test device plugin and DRA test driver, and a
# static pause for the pod sandbox image.
NODE_NAMES = ("kubelet", "sample-device-plugin", "dra-test-driver", "pause")
RELEASE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "k8s_release.json")
CACHE = os.path.join(REPO_ROOT, ".cache")
ASSETS_VARIABLE = "KUBEHW_K8S_ASSETS"
MIRROR_VARIABLE = "KUBEHW_K8S_MIRROR"


class BinariesError(RuntimeError):
    pass


def read_release(path=RELEASE_FILE):
    with open(path) as f:
        return json.load(f)


def _complete(folder, names=NAMES):
    """'plain' when folder holds the executables, 'xz' when it holds them all compressed, else None."""
    if all(os.access(os.path.join(folder, name), os.X_OK) for name in names):
        return "plain"
    if all(os.path.isfile(os.path.join(folder, name + ".xz")) for name in names):
        return "xz"
    return None


def _unpacked(folder, cache, names=NAMES):
    """The xz-compressed binaries `names` of folder, unpacked once into cache/k8s-bin/<digest>/."""
    digest = hashlib.sha256(folder.encode("utf-8"))
    for name in names:
        stat = os.stat(os.path.join(folder, name + ".xz"))
        digest.update(("%s:%d:%d" % (name, stat.st_size, stat.st_mtime_ns)).encode("ascii"))
    target = os.path.join(cache, "k8s-bin", digest.hexdigest()[:16])
    if _complete(target, names) == "plain":
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".unpack-", dir=os.path.dirname(target))
    try:
        for name in names:
            with lzma.open(os.path.join(folder, name + ".xz")) as src, open(os.path.join(staging, name), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.chmod(os.path.join(staging, name), 0o755)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, target)
        except OSError:
            if _complete(target, names) != "plain":     # another process won the race with a complete copy, else fail
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def candidates(environ=None, cache=CACHE):
    """The folders locate() looks at, in order (only $KUBEHW_K8S_ASSETS when it is set)."""
    environ = os.environ if environ is None else environ
    if environ.get(ASSETS_VARIABLE):
        return [os.path.abspath(environ[ASSETS_VARIABLE])]
    release = read_release()
    return [os.path.join(os.path.dirname(REPO_ROOT), "shared", "k8s", "bin"),
            os.path.join(cache, "k8s-release", release["version"], "bin")]


def locate(environ=None, cache=CACHE):
    """A folder with the four executables (unpacked where they are compressed), or None."""
    for folder in candidates(environ, cache):
        kind = _complete(folder) if os.path.isdir(folder) else None
        if kind == "plain":
            return folder
        if kind == "xz":
            return _unpacked(folder, cache)
    return None


def locate_node(environ=None, cache=CACHE):
    """A folder with the real node's executables (NODE_NAMES), or None: the first folder of candidates() that has
    them. They are not part of an official server release (the kubelet is, the test plugins are Kubernetes' e2e
    test binaries), so where only the release was downloaded there is no real node."""
    for folder in candidates(environ, cache):
        kind = _complete(folder, NODE_NAMES) if os.path.isdir(folder) else None
        if kind == "plain":
            return folder
        if kind == "xz":
            return _unpacked(folder, cache, NODE_NAMES)
    return None


def mirrored(url, mirror):
    """url with its scheme and host replaced by mirror's (a mirror keeps the release paths)."""
    if not mirror:
        return url
    base = urllib.parse.urlsplit(mirror)
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + parts.path, "", ""))


def _fetch(url, path, algorithm, expected, opener, kept_in):
    digest = hashlib.new(algorithm)
    with opener(url) as resp, open(path, "wb") as out:
        while True:
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != expected:
        raise BinariesError("%s: %s %s does not match the checksum %s (%s); nothing was installed"
                            % (url, algorithm, digest.hexdigest(), kept_in, expected))


def _published_sha256(url, opener):
    """The checksum of the file `url` names, read from its publisher's `<url>.sha256` (a bare hex digest, or one
    followed by a file name as sha256sum writes it)."""
    with opener(url) as resp:
        words = resp.read(4096).decode("ascii", "replace").split()
    if not words or len(words[0]) != 64 or any(c not in "0123456789abcdef" for c in words[0].lower()):
        raise BinariesError("%s is not a sha256 checksum file; nothing was installed" % url)
    return words[0].lower()


def _expected_checksum(entry, mirror, opener):
    """(algorithm, digest, where it was kept) for one file of the release table."""
    if "sha512" in entry:
        return "sha512", entry["sha512"], "kept in %s" % os.path.relpath(RELEASE_FILE, REPO_ROOT)
    published = mirrored(entry["url"] + entry["sha256_published_beside"], mirror)
    return "sha256", _published_sha256(published, opener), "published in %s" % published


def _naming_the_url(opener):
    """opener, with a failure to fetch raised as a BinariesError that names the URL."""
    def fetch(url):
        try:
            return opener(url)
        except OSError as err:
            raise BinariesError("could not fetch %s (%s); nothing was installed" % (url, getattr(err, "reason", err)))
    return fetch


def download(release=None, cache=CACHE, mirror=None, opener=None):
    """Fetch and verify the release's files, then install the four binaries into
    cache/k8s-release/<kubernetes version>/bin; returns that folder. Already installed: nothing is fetched."""
    release = read_release() if release is None else release
    mirror = os.environ.get(MIRROR_VARIABLE) if mirror is None else mirror
    opener = _naming_the_url(opener or (lambda url: urllib.request.urlopen(url, timeout=60)))
    target = os.path.join(cache, "k8s-release", release["version"], "bin")
    if _complete(target) == "plain":
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".download-", dir=os.path.dirname(target))
    try:
        binaries = os.path.join(staging, "bin")
        os.makedirs(binaries)
        for entry in release["files"]:
            algorithm, expected, kept_in = _expected_checksum(entry, mirror, opener)
            fetched = os.path.join(staging, os.path.basename(urllib.parse.urlsplit(entry["url"]).path))
            _fetch(mirrored(entry["url"], mirror), fetched, algorithm, expected, opener, kept_in)
            if "binary" in entry:
                os.rename(fetched, os.path.join(binaries, entry["binary"]))
                os.chmod(os.path.join(binaries, entry["binary"]), 0o755)
                continue
            with tarfile.open(fetched) as tar:
                for name, member in entry["members"].items():
                    src = tar.extractfile(member)
                    if src is None:
                        raise BinariesError("%s has no file %s" % (entry["url"], member))
                    with src, open(os.path.join(binaries, name), "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    os.chmod(os.path.join(binaries, name), 0o755)
            os.remove(fetched)
        missing = sorted(set(NAMES) - set(os.listdir(binaries)))
        if missing:
            raise BinariesError("the release table installs no %s; nothing was installed" % ", ".join(missing))
        os.chmod(binaries, 0o755)
        os.rename(binaries, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv):
    if argv[1:] == ["locate"]:
        found = locate()
        print(found or "")
        return 0 if found else 1
    if argv[1:] == ["download"]:
        try:
            print(download())
        except (BinariesError, OSError) as err:
            sys.stderr.write("k8s_binaries: %s\n" % err)
            return 1
        return 0
    sys.stderr.write("usage: python -m tests.support.k8s_binaries locate|download\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
