# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for any object the collection writes: ownership labels, the keys it manages, PUT bodies, diffs.

Private to the collection; used by device_plugin_deploy and k8s_runtime_class alike."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubehw.devices"
# On the DaemonSet: the label and annotation keys the module set on its metadata, so a key the user
# drops from labels/annotations is removed on the next update instead of lingering (others' keys stay).
MANAGED_KEYS_ANNOTATION = "devices.kubehw.io/managed-keys"


class TaskFailed(Exception):
    """A task cannot go on (a foreign object, a timeout): main() turns it into fail_json(msg=...)."""

    def __init__(self, msg):
        super(TaskFailed, self).__init__(msg)
        self.msg = msg


def to_text(value):
    """A YAML scalar as the API wants it in a string field (True -> "true", 4 -> "4")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%s" % (value,)


def managed_keys(obj, kind):
    """The ``kind`` ("labels" or "annotations") keys the module recorded as set by it on ``obj``'s metadata."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(MANAGED_KEYS_ANNOTATION)
    try:
        keys = json.loads(text).get(kind) if text else None
    except (ValueError, AttributeError):
        return set()
    return set(k for k in keys or [] if isinstance(k, str))


def stale_keys(desired, live, kind):
    """Keys the module set on the live object earlier that the desired one no longer has (and live still does)."""
    want = (desired.get("metadata") or {}).get(kind) or {}
    have = ((live or {}).get("metadata") or {}).get(kind) or {}
    return set(k for k in managed_keys(live, kind) if k not in want and k in have)


def update_body(desired, live):
    """Body for a PUT: our spec and metadata keys over the live object, guarded by its resourceVersion."""
    body = copy.deepcopy(desired)
    live_meta = live.get("metadata") or {}
    meta = body["metadata"]
    meta["resourceVersion"] = live_meta.get("resourceVersion")
    # Keep labels/annotations others put there (the controller's template generation annotation included),
    # but not those this module set earlier and no longer wants.
    for kind in ("labels", "annotations"):
        stale = stale_keys(desired, live, kind)
        kept = dict((k, v) for k, v in (live_meta.get(kind) or {}).items() if k not in stale)
        meta[kind] = dict(kept, **meta.get(kind, {}))
    for key in ("ownerReferences", "finalizers"):
        if live_meta.get(key):
            meta[key] = copy.deepcopy(live_meta[key])
    return body


_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds")


def clean(obj):
    """The object without status and server-populated metadata, for diffs."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in _SERVER_META:
        meta.pop(key, None)
    tmeta = ((out.get("spec") or {}).get("template") or {}).get("metadata")
    if isinstance(tmeta, dict):
        tmeta.pop("creationTimestamp", None)
    return out


def has_owner_uid(obj, owner_uid):
    """True when ``obj`` has an ownerReference to the object with uid ``owner_uid`` (uids are unique cluster-wide)."""
    if not owner_uid:
        return False
    return any(ref.get("uid") == owner_uid for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def owner_description(obj):
    """Who made ``obj``, in words, for messages: its owner references, else its managed-by label, else the
    field manager that created it (managedFields), else 'unknown'."""
    meta = (obj or {}).get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    if refs:
        return "owned by %s" % ", ".join("%s %s" % (r.get("kind"), r.get("name")) for r in refs)
    manager = (meta.get("labels") or {}).get(MANAGED_BY_LABEL)
    if manager:
        return "labelled %s=%s" % (MANAGED_BY_LABEL, manager)
    for entry in meta.get("managedFields") or []:
        if entry.get("operation") in ("Update", "Apply") and entry.get("manager"):
            return "written by field manager %r" % entry["manager"]
    return "owner unknown (no ownerReferences, no %s label)" % MANAGED_BY_LABEL
