# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every container image the collection can deploy: one list, read by the presets, the modules and the roles.

Private to the collection. Each entry has the repository and tag a reader recognises, and the sha256 digest of
the multi-arch index where upstream publishes one, with where it was read (`digest_source`). Where no published
digest was found, `digest` is None and `no_digest` says what was looked at: the list never guesses a digest.
A deployment names an image as repository:tag@digest (the tag stays readable; the runtime pulls by digest, so a
moved tag changes nothing), or repository:tag where no digest is known.

To move to a new upstream release: change the entry's tag, and its digest with the place it was published, or set
the digest to None and say why. tests/unit/plugins/module_utils/test_images.py holds the list to the record of
what upstream published (tests/unit/plugins/module_utils/upstream_image_digests.yml), and
scripts/image_digests.py --resolve compares it with the registries from a machine that reaches them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

GPU_OPERATOR_CSV = ("NVIDIA/gpu-operator bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml "
                    "(gpu-operator-certified.v26.7.0, commit a22dbf671f2e), spec.relatedImages %s")
PROMOTER = ("kubernetes/k8s.io registry.k8s.io/images/%s/images.yaml (the image promoter's manifest, "
            "commit %s), name %s")

IMAGES = {
    "nvidia_device_plugin": {
        "repository": "nvcr.io/nvidia/k8s-device-plugin",
        "tag": "v0.20.0",
        "digest": "sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
        "digest_source": GPU_OPERATOR_CSV % "device-plugin-image",
        "used_by": "device_plugin_deploy preset nvidia",
        "preset": "device_plugin:nvidia",
    },
    "amd_device_plugin": {
        "repository": "docker.io/rocm/k8s-device-plugin",
        "tag": "1.31.0.10",
        "digest": None,
        "no_digest": "ROCm/k8s-device-plugin's chart and ROCm/gpu-operator's OLM bundle name this repository by tag only",
        "used_by": "device_plugin_deploy preset amd",
        "preset": "device_plugin:amd",
    },
    "intel_gpu_plugin": {
        "repository": "docker.io/intel/intel-gpu-plugin",
        "tag": "0.36.0",
        "digest": None,
        "no_digest": "intel/intel-device-plugins-for-kubernetes v0.36.0 deployments name it by tag; the digest in its "
                     "OPENSHIFT.md is of the Red Hat certified build, another image",
        "used_by": "device_plugin_deploy preset intel_gpu",
        "preset": "device_plugin:intel_gpu",
    },
    "generic_device_plugin": {
        "repository": "docker.io/squat/generic-device-plugin",
        "tag": "0.1.0",
        "digest": None,
        "no_digest": "squat/generic-device-plugin publishes tags only (its manifests name :latest)",
        "used_by": "device_plugin_deploy preset generic",
        "preset": "device_plugin:generic",
    },
    "dra_example_driver": {
        "repository": "registry.k8s.io/dra-example-driver/dra-example-driver",
        "tag": "v0.4.0",
        "digest": None,
        "no_digest": "the promoter manifest of k8s-staging-dra-example-driver read here ends at v0.3.0",
        "used_by": "dra_driver_deploy preset example",
        "preset": "dra_driver:example",
    },
    "nvidia_dra_driver": {
        "repository": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
        "tag": "v0.4.1",
        "digest": "sha256:eefe67396dedea4df74f68a94d5883f33204888b83979babd42b91501a2de1d8",
        "digest_source": PROMOTER % ("k8s-staging-dra-driver-nvidia", "1a15ab54855f", "dra-driver-nvidia-gpu"),
        "used_by": "dra_driver_deploy preset nvidia (its init container too)",
        "preset": "dra_driver:nvidia",
    },
    "intel_gpu_dra_driver": {
        "repository": "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver",
        "tag": "v0.11.0",
        "digest": None,
        "no_digest": "intel/intel-resource-drivers-for-kubernetes gpu-v0.11.0 deployments name it by tag",
        "used_by": "dra_driver_deploy preset intel",
        "preset": "dra_driver:intel",
    },
    "amd_dra_driver": {
        "repository": "docker.io/rocm/k8s-gpu-dra-driver",
        "tag": "v0.1.0",
        "digest": None,
        "no_digest": "ROCm/k8s-gpu-dra-driver's chart (v0.1.0, main at 2622427) names it by tag (its appVersion); "
                     "ROCm/gpu-operator v1.5.1 deploys :latest",
        "used_by": "dra_driver_deploy preset amd",
        "preset": "dra_driver:amd",
    },
    "pause": {
        "repository": "registry.k8s.io/pause",
        "tag": "3.10",
        "digest": "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
        "digest_source": PROMOTER % ("k8s-staging-kubernetes", "ecf019a88caa", "pause"),
        "used_by": "resource_smoke_test (its default image)",
    },
    "cuda_base": {
        "repository": "nvcr.io/nvidia/cuda",
        "tag": "12.4.1-base-ubuntu22.04",
        "digest": None,
        "no_digest": "NVIDIA publishes CUDA image digests in NGC's catalog, which is not reachable from the "
                     "collection's build; the GPU Operator's bundle does not list this image",
        "used_by": "accelerator_node role (its smoke test image)",
    },
}


def reference(name):
    """repository:tag@digest of a listed image (repository:tag where no digest is known)."""
    entry = IMAGES[name]
    tagged = "%s:%s" % (entry["repository"], entry["tag"])
    return "%s@%s" % (tagged, entry["digest"]) if entry["digest"] else tagged


def split_registry(image):
    """('registry', 'rest') by Docker's rule: the first part is a registry only if it has '.' or ':' or is
    localhost; otherwise the image is Docker Hub's (a single name is in library/)."""
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    if not sep:
        return "docker.io", "library/" + image
    return "docker.io", image


def mirrored(image, registry):
    """The image in a mirror: nvcr.io/nvidia/x:1@sha256:.. with mirror.local:5000 -> mirror.local:5000/nvidia/x:1@sha256:..
    (path, tag and digest kept; a mirror made with skopeo copy --all or skopeo sync keeps the digest)."""
    if not registry:
        return image
    return "%s/%s" % (registry.rstrip("/"), split_registry(image)[1])


def image_source_spec():
    """The argument spec of the doc fragment kubehw.devices.image_source."""
    return dict(image_registry=dict(type="str"), image_pull_secrets=dict(type="list", elements="str", no_log=False))


def name_of(wanted):
    """The list's name for a list name, a preset given as device_plugin:<preset> or dra_driver:<preset>, or a listed
    image's reference (with or without its digest); None for anything else (an image a user names)."""
    if wanted in IMAGES:
        return wanted
    for name, entry in IMAGES.items():
        if wanted in (entry.get("preset"), reference(name), "%s:%s" % (entry["repository"], entry["tag"])):
            return name
    return None


def image_repository(image):
    """registry/path/name of an image reference, without tag or digest."""
    image = (image or "").split("@", 1)[0]
    last = image.rsplit("/", 1)
    if ":" in last[-1]:
        last[-1] = last[-1].split(":", 1)[0]
    return "/".join(last)


def _user_image(image):
    """A listing entry for an image the user named (a custom preset's, an inventory's smoke-test image)."""
    named, _sep, digest = image.partition("@")
    repository = image_repository(named)
    tag = named[len(repository) + 1:] or None
    return {"name": None, "image": image, "repository": repository, "tag": tag, "digest": digest or None,
            "used_by": "named in the variables", "digest_source": None,
            "no_digest": None if digest else "named by the user without a digest"}


# A registry host (a dotted name, localhost or an address, optional :port) and an optional path of lowercase
# components, as the distribution reference grammar has them: no scheme, no tag, no trailing slash.
_REGISTRY_RE = re.compile(r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
                          r"|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")


def check_image_registry(registry, error, what="image_registry"):
    """The mirror every image is taken from: host[:port][/path], matched whole (no scheme, tag or blank)."""
    if registry is None:
        return
    if not isinstance(registry, str) or not _REGISTRY_RE.fullmatch(registry):
        raise error("%s %r must be a registry host with an optional port and path, such as mirror.example.com:5000/"
                    "gpu (no scheme, tag, spaces or trailing slash)" % (what, registry))


def check_image(image, error, what="image"):
    """A container image reference: a non-empty string without whitespace (the registry refuses the rest)."""
    if image is not None and (not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image)):
        raise error("%s %r must be a container image reference without spaces or newlines" % (what, image))


def resolve(wanted):
    """The list's name for ``wanted`` (as name_of), or None for an image reference with a registry path that a user
    names; ValueError, naming the value and what is accepted, for anything else."""
    if not isinstance(wanted, str) or not wanted.strip():
        raise ValueError("%r must be a non-empty string" % (wanted,))
    name = name_of(wanted)
    if name is not None:
        return name
    if wanted.partition(":")[0] in ("device_plugin", "dra_driver"):
        raise ValueError("%r: that preset has no image in the collection's list (preset custom, test_driver: name the "
                         "image itself); presets with one: %s"
                         % (wanted, ", ".join(sorted(e["preset"] for e in IMAGES.values() if e.get("preset")))))
    if "/" not in wanted:
        raise ValueError("%r is neither a name of the collection's image list (%s) nor an image reference with a "
                         "registry path" % (wanted, ", ".join(sorted(IMAGES))))
    check_image(wanted, ValueError)
    return None


def listing(wanted=None, registry=None):
    """The images asked for (list names, presets as device_plugin:<preset> / dra_driver:<preset>, or image
    references a user named; all listed images when None), once each, as dicts a reader or a mirroring tool uses.
    ValueError (resolve()) for an item that is none of these."""
    result, seen = [], set()
    for index, want in enumerate(sorted(IMAGES) if wanted is None else wanted):
        try:
            name = resolve(want)
        except ValueError as err:
            raise ValueError("item %d %s" % (index, err))
        if name:
            entry = IMAGES[name]
            item = {"name": name, "image": reference(name), "repository": entry["repository"], "tag": entry["tag"],
                    "digest": entry["digest"], "used_by": entry["used_by"],
                    "digest_source": entry.get("digest_source"), "no_digest": entry.get("no_digest")}
        else:
            item = _user_image(want)
        if item["image"] in seen:
            continue
        seen.add(item["image"])
        item["deployed_as"] = mirrored(item["image"], registry)
        result.append(item)
    return result


def skopeo_copy(item):
    """The command that copies a listed image into the mirror: from repository@digest (skopeo takes a tag or a
    digest, not both), every platform, the digest kept, pushed under its tag (a push names no digest)."""
    source = "%s@%s" % (item["repository"], item["digest"]) if item["digest"] else item["image"]
    return "skopeo copy --all --preserve-digests docker://%s docker://%s" % (source, item["deployed_as"].partition("@")[0])


def skopeo_sync(items):
    """The images as skopeo sync's YAML source (registry -> images -> repository -> tags and digests)."""
    registries = {}
    for item in items:
        registry, path = split_registry(item["repository"])
        refs = registries.setdefault(registry, {"images": {}})["images"].setdefault(path, [])
        for ref in (item["tag"], item["digest"]):
            if ref and ref not in refs:
                refs.append(ref)
    return registries
