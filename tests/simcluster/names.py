# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes name rules the validation applies: DNS labels and subdomains, qualified names, and which resource
names are standard, extended or integer-valued (apimachinery validation, pkg/apis/core/helper).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


DNS_LABEL_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL_RE = re.compile(r"^%s$" % DNS_LABEL_PATTERN)
DNS_SUBDOMAIN_RE = re.compile(r"^%s(\.%s)*$" % (DNS_LABEL_PATTERN, DNS_LABEL_PATTERN))
# apimachinery's IsDNS1123Label message (RegexError with its two examples, double space included).
DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


_QUALIFIED_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
INTEGER_NATIVE = frozenset(["pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                            "configmaps", "persistentvolumeclaims", "services.nodeports",
                            "services.loadbalancers"])
STANDARD_CONTAINER_RESOURCES = frozenset(["cpu", "memory", "ephemeral-storage"])
# pkg/apis/core/helper/helpers.go standardResources (IsStandardResourceName), besides hugepages-*
STANDARD_RESOURCES = STANDARD_CONTAINER_RESOURCES | frozenset([
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage", "pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
    "persistentvolumeclaims", "configmaps", "storage", "requests.storage", "services.nodeports",
    "services.loadbalancers"])


def _is_qualified_name(value):
    if value.count("/") > 1:
        return False
    if "/" in value:
        prefix, name = value.split("/", 1)
        if not prefix or len(prefix) > 253 or not all(DNS_LABEL_RE.match(p) for p in prefix.split(".")):
            return False
    else:
        name = value
    return bool(name) and len(name) <= 63 and bool(_QUALIFIED_NAME_PART.match(name))


def is_extended_resource_name(name):
    """helper.IsExtendedResourceName of the apiserver: not native, and requests.<name> qualified."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return _is_qualified_name("requests." + name)


def is_integer_resource(name):
    return name in INTEGER_NATIVE or is_extended_resource_name(name)
