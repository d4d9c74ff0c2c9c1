# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Where the images of the pods a module creates come from: one mirror for every image, and the Secrets to pull
    # them. Shared by every module that creates pods (argument spec: _images.image_source_spec()).
    DOCUMENTATION = r"""
options:
  image_registry:
    description:
      - Registry host (with an optional port and path) that every image of the pods is taken from, for networks
        without a path to public registries. It replaces the registry part of each image and keeps the rest, tag
        and digest included; for example V(mirror.local:5000) turns
        C(nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61b...) into
        C(mirror.local:5000/nvidia/k8s-device-plugin:v0.20.0@sha256:a61b...), and Docker Hub images keep their
        path (C(docker.io/rocm/x:1) becomes C(mirror.local:5000/rocm/x:1)).
      - Applies to the default images and to one given with O(image) alike. The C(kubehw.devices.images) playbook
        prints what a mirror must hold for a set of inventory variables.
    type: str
  image_pull_secrets:
    description:
      - Names of Secrets in the pods' namespace used to pull the images (a mirror that needs credentials).
    type: list
    elements: str
"""
