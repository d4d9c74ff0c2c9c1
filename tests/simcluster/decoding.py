# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What decoding a request body into the Go type does: quantities of the resource maps become canonical strings,
a value that is no quantity is the decoder's error (QuantityError).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from tests.simcluster.quantity import QUANTITY_FORMAT_ERROR, QuantityError, canonical_quantity


def _canonicalize_resource_map(mapping):
    """Quantities are serialized as canonical strings; raises QuantityError like the decoder."""
    if not isinstance(mapping, dict):
        raise QuantityError("json: cannot unmarshal %s into Go value of type map" % type(mapping).__name__)
    for key in list(mapping):
        if mapping[key] is None:
            raise QuantityError(QUANTITY_FORMAT_ERROR)
        mapping[key] = canonical_quantity(mapping[key])


def _pod_spec_resources(spec):
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict) and isinstance(container.get("resources"), dict):
                yield container["resources"]


def decode_object(resource, obj):
    """What decoding into the Go type does to quantities. Raises QuantityError."""
    if resource == "nodes":
        status = obj.get("status")
        if isinstance(status, dict):
            for field in ("capacity", "allocatable"):
                if status.get(field) is not None:
                    _canonicalize_resource_map(status[field])
    elif resource == "runtimeclasses":
        pod_fixed = (obj.get("overhead") or {}).get("podFixed") if isinstance(obj.get("overhead"), dict) else None
        if pod_fixed is not None:
            _canonicalize_resource_map(pod_fixed)
    elif resource in ("pods", "daemonsets"):
        spec = obj.get("spec") or {}
        if resource == "daemonsets":
            spec = ((spec.get("template") or {}).get("spec")) or {}
        if isinstance(spec, dict):
            for res in _pod_spec_resources(spec):
                for field in ("limits", "requests"):
                    if res.get(field) is not None:
                        _canonicalize_resource_map(res[field])
