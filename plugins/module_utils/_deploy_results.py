# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a deploy module's check-mode or diff-mode result says of the objects it would write.

Private to the collection: the interface may change without notice. Read by the drift and upgrade_plan filters, so
the drift a run reports and the plan a reviewer approves read a DaemonSet's images the same way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def pod_template_images(*objects):
    """The images of the objects' pod templates (DaemonSets'), init containers first, each image once, in the order
    first seen."""
    images = []
    for obj in objects:
        spec = (((obj or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            image = container.get("image") if isinstance(container, dict) else None
            if image and image not in images:
                images.append(image)
    return images


def diff_entries(result, kind):
    """The entries of a result's ``diff`` (a list of before/after pairs with headers such as "DaemonSet ns/name")
    for objects of this kind, in order; an entry without a header counts as one of them."""
    diff = (result or {}).get("diff")
    if not isinstance(diff, list):
        return []
    return [entry for entry in diff
            if isinstance(entry, dict) and str(entry.get("after_header", kind) or "").startswith(kind)]
