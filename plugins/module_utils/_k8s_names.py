# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes name rules (apimachinery's validation patterns), shared by every module that checks names.

One place for the patterns, so the modules cannot drift apart on what a valid name is. Callers word
their own messages; these are only the rules.
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
DNS1123_LABEL_RE = re.compile(r"^%s$" % _DNS1123_LABEL)
# RFC 1123 subdomain: labels separated by '.'.
DNS1123_SUBDOMAIN_RE = re.compile(r"^%s(\.%s)*$" % (_DNS1123_LABEL, _DNS1123_LABEL))
# The name part of a qualified name (label keys, extended-resource names): never empty.
QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# A label value: the same characters, and empty is allowed.
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key_problem(key):
    """Why ``key`` is not a valid label key (an optional DNS-subdomain prefix and a name), or None."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN_RE.match(prefix)):
        return "prefix %r must be a lowercase DNS subdomain of at most %d characters" % (prefix, DNS1123_SUBDOMAIN_MAX)
    if len(name) > QUALIFIED_NAME_MAX or not QUALIFIED_NAME_RE.match(name):
        return ("name part %r must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending "
                "with a letter or digit" % name)
    return None
