# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes name rules (apimachinery's validation patterns), shared by every module that checks names.

One place for the patterns, so the modules cannot drift apart on what a valid name is. Callers word
their own messages; these are only the rules.

Every pattern is anchored with ``\\Z``, not ``$``: Python's ``$`` also matches before a final newline,
so ``"example.com/x\\n"`` would pass ``re.match("^...$")``. With ``\\Z`` both ``.match()`` and
``.fullmatch()`` judge the whole string; new code should call the ``is_*`` predicates below.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# RFC 1123 label: a-z, 0-9 and '-', starting and ending with a letter or digit.
DNS1123_LABEL_RE = re.compile(r"^%s\Z" % _DNS1123_LABEL)
# RFC 1123 subdomain: labels separated by '.'.
DNS1123_SUBDOMAIN_RE = re.compile(r"^%s(\.%s)*\Z" % (_DNS1123_LABEL, _DNS1123_LABEL))
# The name part of a qualified name (label keys, extended-resource names): never empty.
QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
# A label value: the same characters, and empty is allowed.
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")


def _fits(pattern, limit, value):
    return isinstance(value, str) and len(value) <= limit and pattern.fullmatch(value) is not None


def is_dns1123_label(value):
    """A DNS label (RFC 1123): 1-63 of a-z, 0-9, '-', starting and ending with a letter or digit."""
    return _fits(DNS1123_LABEL_RE, DNS1123_LABEL_MAX, value)


def is_dns1123_subdomain(value):
    """A DNS subdomain (RFC 1123): labels joined by '.', at most 253 characters (node and object names)."""
    return _fits(DNS1123_SUBDOMAIN_RE, DNS1123_SUBDOMAIN_MAX, value)


def is_qualified_name_part(value):
    """The name part of a qualified name: 1-63 letters, digits, '-', '_', '.', alphanumeric at both ends."""
    return _fits(QUALIFIED_NAME_RE, QUALIFIED_NAME_MAX, value)


def is_label_value(value):
    """A label value: empty, or what a qualified name part allows."""
    return _fits(LABEL_VALUE_RE, LABEL_VALUE_MAX, value)


def label_key_problem(key):
    """Why ``key`` is not a valid label key (an optional DNS-subdomain prefix and a name), or None."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, sep, name = key.rpartition("/")
    if sep and not is_dns1123_subdomain(prefix):
        return "prefix %r must be a lowercase DNS subdomain of at most %d characters" % (prefix, DNS1123_SUBDOMAIN_MAX)
    if not is_qualified_name_part(name):
        return ("name part %r must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending "
                "with a letter or digit" % name)
    return None


def object_name_problem(value):
    """Why ``value`` is not a valid name of a node (or another object named by a DNS subdomain), or None."""
    if not isinstance(value, str):
        return "must be a string, got %s" % type(value).__name__
    if not value.strip():
        return "must not be empty or blank"
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return "must be no more than %d characters, got %d" % (DNS1123_SUBDOMAIN_MAX, len(value))
    if not is_dns1123_subdomain(value):
        return ("must be a lowercase RFC 1123 DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with a "
                "letter or digit; no spaces, newlines or other characters)")
    return None


def selector_problem(value):
    """Why ``value`` cannot be one label or field selector string, or None.

    Only what would widen or garble the selection is refused here: an empty or blank string (the
    apiserver reads an empty selector as "everything"), an empty term between commas, and control
    characters. The apiserver judges the syntax of the terms themselves.
    """
    if not isinstance(value, str):
        return "must be a string, got %s" % type(value).__name__
    if not value.strip():
        return "must not be empty or blank (an empty selector matches every object)"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "must not contain control characters such as a newline or a tab"
    if any(not term.strip() for term in value.split(",")):
        return "must not have an empty term between commas"
    return None


NODE_TARGET_OPTIONS = ("name", "names", "label_selectors", "field_selectors")


def selector_kwargs(label_selectors=None, field_selectors=None):
    """Keyword arguments of a list call for the label_selectors and field_selectors options (terms ANDed)."""
    kwargs = {}
    if label_selectors:
        kwargs["label_selector"] = ",".join(label_selectors)
    if field_selectors:
        kwargs["field_selector"] = ",".join(field_selectors)
    return kwargs


def node_target_problem(params):
    """Why the node-selecting options of ``params`` are refused, or None.

    Used by every module that selects nodes. An empty or blank value never widens the selection:
    ``name: ""``, ``names: []``, ``label_selectors: [""]`` and the like are errors, and every node is
    only targeted with ``all_nodes: true`` (never by leaving the target out).
    """
    given = [opt for opt in NODE_TARGET_OPTIONS if params.get(opt) is not None]
    if params.get("all_nodes"):
        if given:
            return ("all_nodes=true targets every node and cannot be combined with %s; drop one of them"
                    % ", ".join(given))
        return None
    if not given:
        return ("no target: give name, names, label_selectors or field_selectors, or all_nodes=true to target "
                "every node on purpose (a missing or empty target never means every node)")
    if params.get("name") is not None:
        problem = object_name_problem(params["name"])
        if problem:
            return "invalid node name %r in name: %s" % (params["name"], problem)
    for option, check, what in (("names", object_name_problem, "node name"),
                                ("label_selectors", selector_problem, "label selector"),
                                ("field_selectors", selector_problem, "field selector")):
        values = params.get(option)
        if values is None:
            continue
        if not values:
            return ("%s is an empty list: refused, so that an empty inventory variable never targets every "
                    "node; give at least one entry, or all_nodes=true to target every node on purpose" % option)
        for index, value in enumerate(values):
            problem = check(value)
            if problem:
                return "invalid %s %r in %s[%d]: %s" % (what, value, option, index, problem)
    return None
