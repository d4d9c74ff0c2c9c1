# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Label and field selectors of lists and watches: parsed as kube-apiserver parses them (its 400 answers), and
matched against objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from tests.simcluster.resources import RESOURCES, StoreError, kind_of


_LABEL_REQ = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<val>\([^)]*\)|[^,()\s]*))?\s*$")


def _split_selector(text):
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def parse_label_selector(text):
    """Return a list of (key, op, values); op in =, !=, in, notin, exists, !exists."""
    reqs = []
    if not text:
        return reqs
    for part in _split_selector(text):
        m = _LABEL_REQ.match(part)
        if not m:
            raise StoreError(400, "BadRequest",
                             "unable to parse requirement: found '%s', expected: identifier" % part.strip())
        key, op, val = m.group("key"), (m.group("op") or "").strip(), m.group("val")
        if m.group("neg"):
            if op:
                raise StoreError(400, "BadRequest", "unable to parse requirement: %s" % part.strip())
            reqs.append((key, "!exists", None))
        elif not op:
            reqs.append((key, "exists", None))
        elif op in ("in", "notin"):
            if not val or not val.startswith("("):
                raise StoreError(400, "BadRequest",
                                 "unable to parse requirement: found '%s', expected: '('" % (val or ""))
            values = [v.strip() for v in val[1:-1].split(",") if v.strip()]
            reqs.append((key, op, values))
        else:
            reqs.append((key, "!=" if op == "!=" else "=", [val or ""]))
    return reqs


def label_match(reqs, labels):
    labels = labels or {}
    for key, op, values in reqs:
        if op == "exists" and key not in labels:
            return False
        if op == "!exists" and key in labels:
            return False
        if op in ("=", "in") and labels.get(key) not in values:
            return False
        if op in ("!=", "notin") and key in labels and labels[key] in values:
            return False
    return True


FIELD_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
    "spec.unschedulable": ("spec", "unschedulable"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.kind": ("involvedObject", "kind"),
    "reason": ("reason",),
}


# Field selectors a kind adds to the common ones (ResourceSlice: spec.driver; its API reference, resource.k8s.io/v1).
RESOURCE_FIELD_PATHS = {"resourceslices": {"spec.driver": ("spec", "driver")}}


def parse_field_selector(text, resource=None):
    paths = dict(FIELD_PATHS, **RESOURCE_FIELD_PATHS.get(resource, {}))
    reqs = []
    if not text:
        return reqs
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise StoreError(400, "BadRequest", "invalid selector: '%s'; can't understand '%s'" % (text, part))
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in paths:
            kind = kind_of(resource) if resource in RESOURCES else resource
            raise StoreError(400, "BadRequest",
                             'field label not supported: %s' % field if kind is None else
                             '"%s" is not a known field selector: only "metadata.name", "metadata.namespace"'
                             % field)
        reqs.append((paths[field], op != "!=", value))
    return reqs


def _field_value(obj, path):
    cur = obj
    for p in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_match(reqs, obj):
    for path, equal, value in reqs:
        if (_field_value(obj, path) == value) != equal:
            return False
    return True


# ---------------------------------------------------------------- watch
