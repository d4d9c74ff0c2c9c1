#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unpack selected collections from the PyPI ``ansible`` wheel.

Usage: unpack_collections.py WHEEL DEST NAMESPACE.NAME [NAMESPACE.NAME ...]

Galaxy is unreachable here, but the ``ansible`` wheel carries the collections the tests use.
Only the requested ``ansible_collections/<ns>/<name>/`` trees are extracted, into
``DEST/ansible_collections/``, replacing any older copy.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil
import sys
import zipfile


def unpack(wheel, dest, names):
    prefixes = {}
    for name in names:
        namespace, collection = name.split('.', 1)
        prefixes[name] = 'ansible_collections/%s/%s/' % (namespace, collection)
    found = set()
    with zipfile.ZipFile(wheel) as archive:
        for name, prefix in prefixes.items():
            target = os.path.join(dest, prefix)
            if os.path.isdir(target):
                shutil.rmtree(target)
        for member in archive.infolist():
            for name, prefix in prefixes.items():
                if member.filename.startswith(prefix):
                    archive.extract(member, dest)
                    found.add(name)
                    break
    missing = sorted(set(names) - found)
    if missing:
        raise SystemExit('%s holds no collection named %s' % (wheel, ', '.join(missing)))


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    unpack(sys.argv[1], sys.argv[2], sys.argv[3:])


if __name__ == '__main__':
    main()
