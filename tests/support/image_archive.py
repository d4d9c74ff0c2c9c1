# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container images for the real node (tests/support/real_node.py) without a registry: one-layer image archives in
the docker-archive layout (``manifest.json``, the image configuration, the layer tarball) that
``ctr -n k8s.io images import`` takes.

    write_image(path, reference, entrypoint, files)

files: {path in the image: path on this machine}; a value starting with ``@`` makes a symbolic link to the rest
(``{"bin/sh": "@busybox"}``). The images hold static binaries only (the node's pause, the test device plugin, the
DRA test driver, busybox), so no library or user database is needed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import os
import tarfile

# Directories every image has, so a container runtime can mount over them.
BASE_DIRECTORIES = {"dev": 0o755, "etc": 0o755, "proc": 0o755, "sys": 0o755, "tmp": 0o1777}


def _layer(files):
    """The layer tarball's bytes: the parent directories, the files, the base directories, in a stable order."""
    buffer = io.BytesIO()
    directories = dict(BASE_DIRECTORIES)
    for name in files:
        parts = name.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories.setdefault("/".join(parts[:depth]), 0o755)
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, directories[directory]
            layer.addfile(info)
        for name in sorted(files):
            source = files[name]
            info = tarfile.TarInfo(name.strip("/"))
            if source.startswith("@"):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, source[1:], 0o777
                layer.addfile(info)
                continue
            info.size, info.mode = os.path.getsize(source), 0o755
            with open(source, "rb") as handle:
                layer.addfile(info, handle)
    return buffer.getvalue()


def write_image(path, reference, entrypoint, files):
    """Write the archive of image `reference` (``name:tag``) to path; returns path."""
    layer = _layer(files)
    layer_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_id]},
        "history": [{"created_by": "tests/support/image_archive.py"}],
    }, sort_keys=True).encode("utf-8")
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [reference],
                            "Layers": [layer_id + "/layer.tar"]}]).encode("utf-8")
    with tarfile.open(path, "w") as archive:
        for name, data in ((config_name, config), (layer_id + "/layer.tar", layer), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path
