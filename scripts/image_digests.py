#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the collection's image list with the registries, from a machine that reaches them.

    python scripts/image_digests.py            # every image of plugins/module_utils/_images.py
    python scripts/image_digests.py pause      # the images named

For each image it reads the manifest its tag points at (`skopeo inspect --raw docker://repository:tag`; the
multi-arch index where there is one) and computes its sha256 digest, which is the digest a runtime pulls by. It
prints one line per image: `same`, `moved` (the tag now points elsewhere than the list's digest: a tag moved under
the site's feet, or a new digest to take after checking where upstream published it), `new` (the list has no
digest; this is what the registry serves now, to be recorded only with a published source) or `unreadable`.
Exits 1 when any image moved or could not be read. It changes no file: the list's digests come from what upstream
published, with the source named beside each (docs/images.md).
"""

from __future__ import absolute_import, division, print_function

import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_images():
    """_images.py is plain data and functions of the standard library: load it without the collection's path."""
    namespace = {}
    with open(os.path.join(ROOT, "plugins", "module_utils", "_images.py")) as handle:
        exec(compile(handle.read(), "_images.py", "exec"), namespace)   # pylint: disable=exec-used
    return namespace["IMAGES"]


def registry_digest(repository, tag, skopeo="skopeo"):
    """sha256 digest of the manifest the tag points at, or raises RuntimeError with skopeo's own words."""
    proc = subprocess.run([skopeo, "inspect", "--raw", "docker://%s:%s" % (repository, tag)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr.decode("utf-8", "replace").strip() or "skopeo exited %d" % proc.returncode))
    return "sha256:" + hashlib.sha256(proc.stdout).hexdigest()


def compare(images, names, skopeo="skopeo"):
    """(lines, failed)."""
    lines, failed = [], False
    for name in names:
        entry = images[name]
        image = "%s:%s" % (entry["repository"], entry["tag"])
        try:
            served = registry_digest(entry["repository"], entry["tag"], skopeo)
        except (OSError, RuntimeError) as err:
            lines.append("unreadable %s %s: %s" % (name, image, err))
            failed = True
            continue
        if entry["digest"] is None:
            lines.append("new        %s %s serves %s (the list records none: %s)"
                         % (name, image, served, entry.get("no_digest")))
        elif served == entry["digest"]:
            lines.append("same       %s %s@%s" % (name, image, served))
        else:
            lines.append("moved      %s %s: the list has %s, the registry serves %s"
                         % (name, image, entry["digest"], served))
            failed = True
    return lines, failed


def main(argv):
    images = load_images()
    names = argv or sorted(images)
    unknown = [n for n in names if n not in images]
    if unknown:
        print("not in the image list: %s (it lists %s)" % (", ".join(unknown), ", ".join(sorted(images))),
              file=sys.stderr)
        return 2
    lines, failed = compare(images, names, os.environ.get("SKOPEO", "skopeo"))
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
