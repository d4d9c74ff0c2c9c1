# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters over the collection's image list (plugins/module_utils/_images.py), for roles and playbooks.

image_reference gives one listed image as deployments name it (repository:tag@digest); image_list gives the images
a set of presets and user-named images deploys, with where each digest was published and what a mirror must hold.
Each filter is documented in the YAML file of its name beside this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.kubehw.devices.plugins.module_utils import _images


def _registry(registry):
    registry = registry or None
    _images.check_image_registry(registry, AnsibleFilterError, "registry")
    return registry


def image_reference(name, registry=None):
    """The listed image ``name`` as deployed: repository:tag@digest, in ``registry`` when one is given."""
    if name not in _images.IMAGES:
        raise AnsibleFilterError("image %r is not in the collection's image list; it lists %s"
                                 % (name, ", ".join(sorted(_images.IMAGES))))
    return _images.mirrored(_images.reference(name), _registry(registry))


def image_list(wanted=None, registry=None):
    """The images of ``wanted`` (list names, device_plugin:<preset>, dra_driver:<preset>, image references; all
    listed images when empty), their copies in ``registry``, and skopeo sync's source YAML for them."""
    registry = _registry(registry)
    if wanted is not None and not isinstance(wanted, (list, tuple)):
        raise AnsibleFilterError("image_list takes a list of image names, presets or references, not %r" % (wanted,))
    try:
        items = _images.listing(list(wanted) if wanted else None, registry)
    except ValueError as err:
        raise AnsibleFilterError("image_list %s" % err)
    return {"images": items, "skopeo_sync": _images.skopeo_sync(items),
            "copies": [_images.skopeo_copy(item) for item in items] if registry else []}


class FilterModule(object):
    """image_reference and image_list (docs: the YAML file of each name beside this file)."""

    def filters(self):
        return {
            'image_reference': image_reference,
            'image_list': image_list,
        }
