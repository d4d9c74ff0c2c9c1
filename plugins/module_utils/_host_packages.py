# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime and toolkit packages a GPU host runs against the versions the inventory pins: what the upgrade plan
shows as a step and the drift run as a difference (the accelerator_node role's upgrade_plan entry point reads the
installed versions with the distribution's package query).

Private to the collection. Pure functions over plain dicts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The packages a pin names, and the names each is installed under (containerd.io on Docker's repositories).
PACKAGE_NAMES = {"nvidia-container-toolkit": ("nvidia-container-toolkit",), "containerd": ("containerd", "containerd.io")}


def package_differences(installed, pinned):
    """(package, [installed versions], pinned version) for each pinned package whose installed version differs, or
    that is not installed ([]), in name order. A version matches its pin with or without a packaging revision
    (1.17.7 matches 1.17.7-1); an unpinned package (empty version) is never a difference (the roles install unpinned
    packages only where they are missing, and leave an installed one as it is)."""
    found = []
    for name, version in sorted((pinned or {}).items()):
        if not version:
            continue
        have = [installed[n] for n in PACKAGE_NAMES.get(name, (name,)) if (installed or {}).get(n)]
        if not any(h == version or h.startswith(version + "-") or h.startswith(version + "+") for h in have):
            found.append((name, have, version))
    return found
