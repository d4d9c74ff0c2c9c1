# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for any object the collection writes: ownership labels, the keys it manages, PUT bodies, diffs, and
the read / compare / adopt / write skeleton (``ObjectTask``) of the modules that manage one cluster-scoped object.

Private to the collection; used by device_plugin_deploy, k8s_runtime_class and the DeviceClass code alike."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import gc
import hashlib
import json

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, TaskFailed
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_SUBDOMAIN_RE, LABEL_VALUE_RE, label_key_problem)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubehw.devices"
# On the DaemonSet: the label and annotation keys the module set on its metadata, so a key the user
# drops from labels/annotations is removed on the next update instead of lingering (others' keys stay).
MANAGED_KEYS_ANNOTATION = "devices.kubehw.io/managed-keys"
# On the DaemonSet: fingerprint of what we last applied, so removing an option is noticed too.
APPLIED_HASH_ANNOTATION = "devices.kubehw.io/applied-hash"


def condition(obj, kind):
    """The status condition of type ``kind`` of ``obj`` (a node, a pod...) as a dict, or None when it has none.
    Read from the cluster, so anything not a map is passed over."""
    status = (obj or {}).get("status")
    for cond in (status.get("conditions") if isinstance(status, dict) else None) or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def to_text(value):
    """A YAML scalar as the API wants it in a string field (True -> "true", 4 -> "4")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%s" % (value,)


def label_map(mapping, what, error, convert=True, values=True):
    """A label map (labels, node selector) with string values, as the API stores it; raises error(message) naming
    the first key or value that is not a valid label key or value, and the rule.

    ``convert``: values that are not strings (YAML numbers) are turned into text; when false they are refused, for
    the modules whose documentation promises string values. ``values=False`` checks the keys only (annotations: any
    value is allowed)."""
    out = {}
    for key, value in (mapping or {}).items():
        problem = label_key_problem(key)
        if problem:
            raise error("%s key %r: %s" % (what, key, problem))
        if not values:
            out[key] = value
            continue
        if not convert and not isinstance(value, str):
            raise error("%s value %r of %r must be a string (quote it in YAML)" % (what, value, key))
        text = to_text(value)
        if len(text) > 63 or not LABEL_VALUE_RE.match(text):
            raise error(
                "%s value %r of %r must be empty or at most 63 characters of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit" % (what, text, key))
        out[key] = text
    return out


TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check_tolerations(tolerations, error, what="tolerations"):
    """Refuse pod tolerations the apiserver refuses (core/v1 validation of Toleration): raises error(message) naming
    the entry, the value and the rule. Used by every module that writes a pod template or a pod."""
    if tolerations is None:
        return
    if not isinstance(tolerations, list):
        raise error("%s must be a list of mappings (key, operator, value, effect, tolerationSeconds)" % what)
    for index, toleration in enumerate(tolerations):
        where = "%s[%d]" % (what, index)
        if not isinstance(toleration, dict):
            raise error("%s must be a mapping (key, operator, value, effect, tolerationSeconds)" % where)
        unknown = sorted(set(toleration) - set(TOLERATION_FIELDS))
        if unknown:
            raise error("%s has unknown field(s) %s; allowed: %s" % (where, ", ".join(unknown), ", ".join(TOLERATION_FIELDS)))
        operator = toleration.get("operator") or "Equal"
        if operator not in ("Exists", "Equal"):
            raise error("%s operator %r must be Exists or Equal" % (where, operator))
        key = toleration.get("key")
        if key:
            problem = label_key_problem(key)
            if problem:
                raise error("%s key %r: %s" % (where, key, problem))
        elif operator != "Exists":
            raise error("%s without a key must have operator Exists (it then tolerates every taint)" % where)
        value = toleration.get("value")
        if operator == "Exists" and value:
            raise error("%s value %r must be empty with operator Exists" % (where, value))
        if value is not None and (not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE_RE.match(value)):
            raise error("%s value %r must be a string of at most 63 letters, digits, '-', '_' or '.', starting and "
                        "ending with a letter or digit (a label value)" % (where, value))
        effect = toleration.get("effect")
        if effect and effect not in TOLERATION_EFFECTS:
            raise error("%s effect %r must be one of %s" % (where, effect, ", ".join(TOLERATION_EFFECTS)))
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None:
            if effect != "NoExecute":
                raise error("%s tolerationSeconds needs effect NoExecute" % where)
            if isinstance(seconds, bool) or not isinstance(seconds, int):
                raise error("%s tolerationSeconds %r must be a whole number of seconds" % (where, seconds))


def check_pull_secrets(secrets, error, what="image_pull_secrets"):
    """Names of Secrets: lowercase RFC 1123 DNS subdomains."""
    for index, secret in enumerate(secrets or []):
        if not isinstance(secret, str) or len(secret) > 253 or not DNS1123_SUBDOMAIN_RE.fullmatch(secret):
            raise error("%s[%d] %r must be a Secret name: a lowercase RFC 1123 DNS subdomain" % (what, index, secret))


def managed_keys(obj, kind):
    """The ``kind`` ("labels" or "annotations") keys the module recorded as set by it on ``obj``'s metadata."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(MANAGED_KEYS_ANNOTATION)
    try:
        keys = json.loads(text).get(kind) if text else None
    except (ValueError, AttributeError):
        return set()
    return set(k for k in keys or [] if isinstance(k, str))


def content_hash(data):
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


def record_applied(obj):
    """Annotate ``obj`` (labels and annotations already final) with the keys the module set on its metadata and a
    fingerprint of its spec, labels and annotations: a later run then removes a key the user dropped and notices a
    removed option, which a comparison of the fields set would not see."""
    meta = obj["metadata"]
    meta["annotations"][MANAGED_KEYS_ANNOTATION] = json.dumps(
        {"labels": sorted(meta["labels"]), "annotations": sorted(meta["annotations"]) + [MANAGED_KEYS_ANNOTATION]},
        sort_keys=True, separators=(",", ":"))
    meta["annotations"][APPLIED_HASH_ANNOTATION] = content_hash(
        {"spec": obj["spec"], "labels": meta["labels"], "annotations": meta["annotations"]})


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


def managed_here(obj):
    """Whether the object carries the collection's managed-by label (it was created, or adopted, here)."""
    return (((obj or {}).get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


class ObjectTask(object):
    """The read / compare / adopt / write skeleton of a module that manages one cluster-scoped object.

    A subclass names the object (``kind``, and ``result_key``, the result's key for the object) and does the
    kind's own parts: ``read()`` (the live object or None), ``differences(desired, live)`` (JSON pointers),
    ``create(desired)``, ``update(desired, live, paths)`` and ``delete(live)``; each write records
    ``action``/``changed`` and the object in ``self.result`` (in check mode: what would be done). ``run`` reads
    again and decides again after a 409 Conflict (three times at most). An object without the managed-by label
    is left unchanged with a warning naming what differs, unless ``adopt`` is set.
    """

    kind = "object"
    result_key = "object"

    def __init__(self, name, params, check_mode):
        self.name = name
        self.params = params
        self.check_mode = check_mode
        self.label = '%s "%s"' % (self.kind, name)
        self.result = {}
        self.diff = None
        self.warnings = []

    # -- what a subclass provides --------------------------------------------------------------------------
    def read(self):
        raise NotImplementedError

    def differences(self, desired, live):
        raise NotImplementedError

    def create(self, desired):
        raise NotImplementedError

    def update(self, desired, live, paths):
        raise NotImplementedError

    def delete(self, live):
        raise NotImplementedError

    def fresh_result(self):
        """The result before a decision: nothing done yet."""
        return {"changed": False, "action": "none", self.result_key: None}

    # -- the skeleton --------------------------------------------------------------------------------------
    def run(self, desired):
        """Bring the object to ``desired`` (None: absent)."""
        for _attempt in range(3):
            self.result = self.fresh_result()
            self.diff = None
            try:
                if desired is None:
                    self.absent()
                else:
                    self.present(desired)
                return
            except KubeHwError as err:
                # someone wrote in between (or created it first): read again and decide again
                if err.status != 409 or self.check_mode:
                    raise
        raise KubeHwError("Failed to write %s: it kept changing under us (409 Conflict three times)" % self.label,
                          status=409, reason="Conflict")

    def set_diff(self, before, after):
        self.diff = dict(before_header=self.label, after_header=self.label,
                         before=clean(before) or {}, after=clean(after) or {})

    def foreign(self, live, paths):
        differs = "; it differs from the task in %s" % ", ".join(paths) if paths else ""
        self.warnings.append(
            "%s exists but was not created by kubehw.devices (no label %s=%s): left unchanged%s. "
            "Set adopt: true to manage it." % (self.label, MANAGED_BY_LABEL, MANAGED_BY, differs))
        self.result.update(action="skipped")
        self.result[self.result_key] = live

    def present(self, desired):
        live = self.read()
        if live is None:
            self.set_diff(None, desired)
            self.create(desired)
            return
        paths = self.differences(desired, live)
        if not managed_here(live):
            if not self.params.get("adopt"):
                own = "/metadata/labels/" + MANAGED_BY_LABEL.replace("~", "~0").replace("/", "~1")
                self.foreign(live, [p for p in paths if p != own])
                return
            self.warnings.append("%s was not created by kubehw.devices; adopt: true makes it managed by it"
                                 % self.label)
        self.result[self.result_key] = live
        if not paths:
            return
        self.result["changed_paths"] = paths
        self.update(desired, live, paths)

    def absent(self):
        live = self.read()
        if live is None:
            return
        if not managed_here(live) and not self.params.get("adopt"):
            self.foreign(live, [])
            return
        self.set_diff(live, None)
        self.delete(live)


def run_object_module(module, build, spec_error, make_task, invalid_suffix=""):
    """main() of a module that manages one object with an ObjectTask: validate the input with ``build(params)``
    (``spec_error`` names a bad value) before any request, run the task ``make_task()`` returns, and end the
    module with report_task."""
    problem = None
    desired = None
    try:
        desired = build(module.params)
    except spec_error as err:
        problem = "Invalid input: %s%s" % (err, invalid_suffix)
    if problem:
        # failed outside the except block: ansible-core 2.19 would attach the active exception's traceback
        module.fail_json(msg=problem, changed=False)
    task = None
    error = None
    try:
        task = make_task()
        task.run(desired)
    except (KubeHwError, TaskFailed) as err:
        error = err
    report_task(module, task, error)


def report_task(module, task, error):
    """End a module that ran an ObjectTask: warnings, diff (in diff mode), and fail_json or exit_json."""
    result = dict(task.result) if task is not None else dict(changed=False)
    if task is not None and module._diff and task.diff:  # pylint: disable=protected-access
        result["diff"] = task.diff
    for text in (task.warnings if task is not None else []):
        module.warn(text)
    # The kubernetes client leaves so many objects that the interpreter's final garbage collection took over a
    # second (measured in benchmarks/daemonset_rollout); frozen objects are skipped, so the task returns that much
    # sooner after its work is done.
    gc.freeze()
    if error is not None:
        module.fail_json(msg=error.msg, status=getattr(error, "status", None),
                         reason=getattr(error, "reason", None), **result)
    module.exit_json(**result)
