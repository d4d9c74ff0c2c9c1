# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Patch semantics: JSON merge patch (RFC 7386), strategic merge patch for the core types' merge keys, and JSON
patch (RFC 6902) with the apiserver's leniency and errors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import jsonpatch

from tests.simcluster.errors import bad_request, generic_422


PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json")


MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": "containerPort", "imagePullSecrets": "name", "conditions": "type", "addresses": "type",
    "ownerReferences": "uid", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
}
MERGE_PRIMITIVE_LISTS = frozenset(["finalizers"])


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target, patch):
    """Strategic merge patch for the fields kubehw uses (merge keys of the core types)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        out = dict((k, v) for k, v in patch.items() if k != "$patch")
        return copy.deepcopy(out)
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key), value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGE_PRIMITIVE_LISTS:
            current = list(result.get(key) or [])
            result[key] = current + [v for v in value if v not in current]
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current, patch, merge_key):
    current = copy.deepcopy(current) if isinstance(current, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if not isinstance(item, dict):
            continue
        key_value = item.get(merge_key)
        index = next((i for i, c in enumerate(current) if isinstance(c, dict) and c.get(merge_key) == key_value), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del current[index]
            continue
        if index is None:
            current.append(strategic_merge({}, item))
        else:
            current[index] = strategic_merge(current[index], item)
    return current


def _lenient_json_patch(ops, doc):
    """`replace` of a missing key inside an existing map adds it, as the apiserver does."""
    result = []
    for op in ops:
        if isinstance(op, dict) and op.get("op") == "replace" and isinstance(op.get("path"), str):
            try:
                pointer = jsonpatch.JsonPointer(op["path"])
                parent_parts, last = pointer.parts[:-1], pointer.parts[-1] if pointer.parts else None
                parent = jsonpatch.JsonPointer.from_parts(parent_parts).resolve(doc) if pointer.parts else None
            except (jsonpatch.JsonPointerException, KeyError, IndexError, TypeError):
                parent = None
            if isinstance(parent, dict) and last not in parent:
                op = dict(op, op="add")
        result.append(op)
    return result


def apply_json_patch(body_text, doc):
    try:
        ops = json.loads(body_text)
    except ValueError as e:
        raise bad_request("error decoding patch: %s" % e)
    if isinstance(ops, dict):
        raise bad_request("error decoding patch: json: cannot unmarshal object into Go value of type "
                          "[]handlers.jsonPatchOp")
    if not isinstance(ops, list):
        raise bad_request("error decoding patch: json: cannot unmarshal %s into Go value of type "
                          "[]handlers.jsonPatchOp" % ("string" if isinstance(ops, str) else "number"))
    # replay op by op so a replace-of-missing-key sees the state the earlier ops left
    current = doc
    for op in ops:
        if not isinstance(op, dict):
            raise bad_request("error decoding patch: json: cannot unmarshal %s into Go struct field "
                              "jsonPatchOp of type map" % type(op).__name__)
        try:
            current = jsonpatch.JsonPatch(_lenient_json_patch([op], current)).apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError):
            raise generic_422()
    return current
