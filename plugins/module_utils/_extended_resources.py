# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Extended-resource names and quantities, and the JSON-patch operations that set them.

Pure functions, no Kubernetes client: everything here is unit-testable without a server.
The rules follow what a real kube-apiserver does (docs in ``kube-apiserver-facts.md``); the
apiserver does not check extended-resource names on node status, so these checks are the
only thing between a typo and a node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re
import traceback
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_SUBDOMAIN_MAX,
    QUALIFIED_NAME_MAX,
    is_dns1123_subdomain,
    is_qualified_name_part,
)

JSONPATCH_IMPORT_ERROR = None
try:
    import jsonpatch

    HAS_JSONPATCH = True
except ImportError:
    HAS_JSONPATCH = False
    JSONPATCH_IMPORT_ERROR = traceback.format_exc()


CAPACITY_PATH = "/status/capacity"
REQUESTS_PREFIX = "requests."
# Resource names Kubernetes defines itself (no domain prefix): never extended resources.
STANDARD_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
STANDARD_PREFIXES = ("hugepages-", "attachable-volumes-")


def is_extended_resource(name):
    """Whether a node status or pod resource name is not one Kubernetes defines itself."""
    return name not in STANDARD_RESOURCES and not name.startswith(STANDARD_PREFIXES)


# The apiserver's own pattern (facts file): anything else is refused with field "patch".
# Matched with fullmatch: its "$" would accept a final newline in Python ("4\n").
_QUANTITY_RE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)")
# The precise grammar of resource.Quantity: <signedNumber><suffix>.
_NUMBER_RE = re.compile(r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(.*)", re.DOTALL)
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")
_SUFFIXES = {
    "": Fraction(1),
    "n": Fraction(1, 10 ** 9),
    "u": Fraction(1, 10 ** 6),
    "m": Fraction(1, 10 ** 3),
    "k": Fraction(10 ** 3),
    "M": Fraction(10 ** 6),
    "G": Fraction(10 ** 9),
    "T": Fraction(10 ** 12),
    "P": Fraction(10 ** 15),
    "E": Fraction(10 ** 18),
    "Ki": Fraction(2 ** 10),
    "Mi": Fraction(2 ** 20),
    "Gi": Fraction(2 ** 30),
    "Ti": Fraction(2 ** 40),
    "Pi": Fraction(2 ** 50),
    "Ei": Fraction(2 ** 60),
}
# Exponents beyond this are refused rather than expanded into huge integers.
_MAX_EXPONENT = 64
# The apiserver checks "is an integer" on the milli-value, an int64: larger values fail that check.
MAX_WHOLE_QUANTITY = (2 ** 63 - 1) // 1000

STATES = ("present", "absent", "exact")


def _dns_subdomain_problem(value):
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return "must be no more than %d characters (a DNS subdomain), got %d" % (DNS1123_SUBDOMAIN_MAX, len(value))
    if not is_dns1123_subdomain(value):
        return ("must be a lowercase RFC 1123 DNS subdomain: labels of a-z, 0-9 and '-', "
                "starting and ending with a letter or digit, separated by '.'")
    return None


def _is_kubernetes_io(domain):
    # Kubernetes calls a name native when it contains "kubernetes.io/" (IsPrefixedNativeResource in
    # k8s.io/kubernetes pkg/apis/core/v1/helper/helpers.go, v1.32): so "my-kubernetes.io/x" is native too.
    return domain.endswith("kubernetes.io")


def extended_resource_name_problem(name):
    """Return why ``name`` is not a valid extended-resource name, or None when it is."""
    if not isinstance(name, str):
        return "must be a string, got %s" % type(name).__name__
    if name.count("/") != 1:
        return "must contain exactly one '/' (domain/name, e.g. example.com/dongle), found %d" % name.count("/")
    domain, short = name.split("/")
    problem = _dns_subdomain_problem(domain)
    if problem:
        return "domain part %r %s" % (domain, problem)
    if _is_kubernetes_io(domain):
        return ("domain part %r is reserved: a name containing 'kubernetes.io/' is a native resource to Kubernetes, "
                "not an extended one" % domain)
    if name.startswith(REQUESTS_PREFIX):
        # Kubernetes treats such names as quota names, never as extended resources.
        return "must not start with %r (reserved for resource quota names)" % REQUESTS_PREFIX
    if not short:
        return "name part after '/' must not be empty"
    if len(short) > QUALIFIED_NAME_MAX:
        return "name part %r must be no more than %d characters, got %d" % (short, QUALIFIED_NAME_MAX, len(short))
    if not is_qualified_name_part(short):
        return ("name part %r must consist of letters, digits, '-', '_' or '.', "
                "and start and end with a letter or digit" % short)
    problem = _dns_subdomain_problem(REQUESTS_PREFIX + domain)
    if problem:
        # ResourceQuota tracks it as requests.<name>, which must itself be a qualified name.
        return "%r (the quota name of this resource) has a domain that %s" % (REQUESTS_PREFIX + name, problem)
    return None


def validate_name(name):
    problem = extended_resource_name_problem(name)
    if problem:
        raise InputRefused("invalid extended resource name %r: %s" % (name, problem))
    return name


def parse_quantity(value):
    """Parse a Kubernetes quantity string exactly; return a ``Fraction``.

    Raises InputRefused for anything resource.Quantity would refuse.
    """
    text = value
    if not isinstance(text, str) or not text:
        raise InputRefused("%r is not a Kubernetes quantity: empty" % (value,))
    if not _QUANTITY_RE.fullmatch(text):
        raise InputRefused(
            "%r is not a Kubernetes quantity: it must match '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" % (value,))
    match = _NUMBER_RE.fullmatch(text)
    if not match:
        raise InputRefused("%r is not a Kubernetes quantity: bad number" % (value,))
    sign, number, suffix = match.groups()
    try:
        magnitude = Fraction(Decimal(number))
    except (InvalidOperation, ValueError):
        raise InputRefused("%r is not a Kubernetes quantity: bad number %r" % (value, number))
    if suffix in _SUFFIXES:
        magnitude *= _SUFFIXES[suffix]
    else:
        exponent = _EXPONENT_RE.fullmatch(suffix)
        if not exponent:
            raise InputRefused(
                "%r is not a Kubernetes quantity: unknown suffix %r (use k M G T P E, Ki Mi Gi Ti Pi Ei, m u n, "
                "or an exponent such as e3)" % (value, suffix))
        power = int(exponent.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise InputRefused("%r is not a Kubernetes quantity: exponent %d is out of range" % (value, power))
        magnitude *= Fraction(10) ** power
    return -magnitude if sign == "-" else magnitude


def whole_quantity(value, key=None):
    """Turn what a user wrote (int or quantity string) into a non-negative int.

    ``key`` is the resource name, used to make the message point at the entry.
    """
    where = " for %s" % key if key is not None else ""
    if isinstance(value, bool) or value is None:
        raise InputRefused(
            "invalid quantity %r%s: must be a non-negative whole number or a Kubernetes quantity string" % (value, where))
    if isinstance(value, int):
        number = Fraction(value)
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InputRefused("invalid quantity %r%s: not a finite number" % (value, where))
        number = Fraction(value)
    elif isinstance(value, str):
        try:
            number = parse_quantity(value)
        except InputRefused as e:
            raise InputRefused("invalid quantity%s: %s" % (where, e))
    else:
        raise InputRefused(
            "invalid quantity %r%s: must be a number or a string, got %s" % (value, where, type(value).__name__))
    if number < 0:
        raise InputRefused("invalid quantity %r%s: must be greater than or equal to 0" % (value, where))
    if number.denominator != 1:
        raise InputRefused(
            "invalid quantity %r%s: extended resources must be whole numbers (the apiserver answers 'must be an integer')"
            % (value, where))
    if number > MAX_WHOLE_QUANTITY:
        raise InputRefused(
            "invalid quantity %r%s: must be at most %d (the apiserver checks it as a 64-bit milli-value)"
            % (value, where, MAX_WHOLE_QUANTITY))
    return int(number)


def quantity_value(value):
    """Value of a quantity as stored on a node, or None when it cannot be parsed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, str):
        try:
            return parse_quantity(value)
        except InputRefused:
            return None
    return None


def same_quantity(stored, wanted):
    """Compare by value: "1Ki" on the node equals 1024 asked for."""
    current = quantity_value(stored)
    return current is not None and current == Fraction(wanted)


def escape_pointer(token):
    """Escape one JSON-pointer reference token (RFC 6901): '~' first, then '/'."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_pointer(token):
    return token.replace("~1", "/").replace("~0", "~")


def capacity_pointer(name):
    return "%s/%s" % (CAPACITY_PATH, escape_pointer(name))


def normalize_resources(resources, state):
    """Validate the ``resources`` option; return {name: int or None}.

    For ``absent`` a list of names is accepted and values are ignored.
    """
    if resources is None:
        raise InputRefused("resources is required")
    if isinstance(resources, (list, tuple)):
        if state != "absent":
            raise InputRefused(
                "resources must be a dict of name to quantity for state=%s (a list of names is only accepted for "
                "state=absent)" % state)
        names = list(resources)
        for name in names:
            validate_name(name)
        if len(set(names)) != len(names):
            raise InputRefused("resources lists a name more than once")
        return dict((name, None) for name in names)
    if not isinstance(resources, dict):
        raise InputRefused("resources must be a dict of name to quantity, got %s" % type(resources).__name__)
    if not resources and state != "exact":
        raise InputRefused("resources must not be empty for state=%s" % state)
    result = {}
    for name, value in resources.items():
        validate_name(name)
        result[name] = None if state == "absent" else whole_quantity(value, key=name)
    return result


def validate_scope(domains, prefixes):
    """Validate the ``exact`` scope; return (domains, prefixes) as lists."""
    domains = list(domains or [])
    prefixes = list(prefixes or [])
    if not domains and not prefixes:
        raise InputRefused("state=exact needs domain or managed_prefixes, so that it knows which keys it owns")
    for domain in domains:
        problem = _dns_subdomain_problem(domain if isinstance(domain, str) else "")
        if problem:
            raise InputRefused("invalid domain %r: %s" % (domain, problem))
        if _is_kubernetes_io(domain):
            raise InputRefused("invalid domain %r: names under a domain ending in kubernetes.io are native "
                               "resources" % domain)
    for prefix in prefixes:
        if not isinstance(prefix, str) or prefix.count("/") != 1:
            raise InputRefused(
                "invalid managed prefix %r: must be '<domain>/' or '<domain>/<name start>' with exactly one '/'" % (prefix,))
        domain, start = prefix.split("/")
        problem = _dns_subdomain_problem(domain)
        if problem:
            raise InputRefused("invalid managed prefix %r: domain part %s" % (prefix, problem))
        # the start of a name part: it must be able to begin a valid name, or the prefix owns nothing
        if start and (len(start) > QUALIFIED_NAME_MAX or not is_qualified_name_part(start[0])
                      or any(not is_qualified_name_part("a%sa" % c) for c in start)):
            raise InputRefused(
                "invalid managed prefix %r: the part after '/' must be the start of a name: letters, digits, '-', '_' "
                "or '.', beginning with a letter or digit, at most %d characters" % (prefix, QUALIFIED_NAME_MAX))
        if _is_kubernetes_io(domain):
            raise InputRefused("invalid managed prefix %r: names under a domain ending in kubernetes.io are "
                               "native resources" % prefix)
    return domains, prefixes


def check_exact_scope(resources, domains, prefixes):
    """Under exact, every listed key must be one the task owns, or the statement is contradictory."""
    outside = sorted(k for k in resources if not in_scope(k, domains, prefixes))
    if outside:
        raise InputRefused(
            "state=exact: resource %r is outside the declared domain/managed_prefixes (%s); list only keys "
            "the task owns, or add its domain" % (outside[0], ", ".join(list(domains) + list(prefixes))))


def in_scope(name, domains, prefixes):
    """True when ``exact`` owns this key: its domain is declared, or it starts with a declared prefix."""
    if "/" in name and name.split("/", 1)[0] in domains:
        return True
    return any(name.startswith(prefix) for prefix in prefixes)


def managed_keys(capacity, resources, state, domains=(), prefixes=()):
    """Keys this task manages on a node: the listed ones, plus under ``exact`` every key in scope."""
    keys = set(resources)
    if state == "exact":
        keys.update(k for k in (capacity or {}) if in_scope(k, domains, prefixes))
    return sorted(keys)


def desired_capacity(capacity, resources, state, domains=(), prefixes=()):
    """Return the managed part of capacity after the task: {name: stored-or-new value}."""
    capacity = capacity or {}
    after = {}
    for key in managed_keys(capacity, resources, state, domains, prefixes):
        if state == "absent":
            continue
        if key in resources:
            wanted = resources[key]
            after[key] = capacity[key] if key in capacity and same_quantity(capacity[key], wanted) else str(wanted)
        # under exact, an unlisted key in scope is removed: not in after
    return after


def compute_patch(node_status, resources, state, domains=(), prefixes=(), resource_version=None):
    """Minimal key-level JSON-patch operations for one node.

    ``node_status`` is the node's ``status`` as read (dict or None), ``resources`` the
    normalized {name: int|None}. Every replace/remove is preceded by a ``test`` of the value
    read, so a concurrent change makes the patch fail (422) instead of being overwritten.
    Creating the whole capacity map is guarded by a ``test`` of metadata.resourceVersion,
    since a missing path cannot be tested.
    Returns a list of operations, empty when nothing needs to change.
    """
    if state not in STATES:
        raise InputRefused("state must be one of %s, got %r" % (", ".join(STATES), state))
    status = node_status if isinstance(node_status, dict) else None
    capacity = status.get("capacity") if status is not None else None
    has_map = isinstance(capacity, dict) and len(capacity) > 0
    capacity = capacity if isinstance(capacity, dict) else {}

    ops = []
    if not has_map:
        # A key-level add on a missing map is a 422: the map is created whole, in one add.
        wanted = dict((k, str(v)) for k, v in sorted(resources.items()) if state != "absent")
        if not wanted:
            return []
        guard = []
        if resource_version is not None:
            guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
        if status is None:
            return guard + [{"op": "add", "path": "/status", "value": {"capacity": wanted}}]
        return guard + [{"op": "add", "path": CAPACITY_PATH, "value": wanted}]

    for key in managed_keys(capacity, resources, state, domains, prefixes):
        path = capacity_pointer(key)
        present = key in capacity
        listed = key in resources
        if state == "absent" or (state == "exact" and not listed):
            if present:
                ops.append({"op": "test", "path": path, "value": capacity[key]})
                ops.append({"op": "remove", "path": path})
            continue
        wanted = resources[key]
        if not present:
            ops.append({"op": "add", "path": path, "value": str(wanted)})
        elif not same_quantity(capacity[key], wanted):
            ops.append({"op": "test", "path": path, "value": capacity[key]})
            ops.append({"op": "replace", "path": path, "value": str(wanted)})
    return ops


def diff_for(capacity, resources, state, domains=(), prefixes=()):
    """before/after of the managed keys, for diff mode."""
    capacity = capacity or {}
    keys = managed_keys(capacity, resources, state, domains, prefixes)
    before = dict((k, capacity[k]) for k in keys if k in capacity)
    after = desired_capacity(capacity, resources, state, domains, prefixes)
    return {"before": before, "after": after}


def changed_resources(capacity, resources, state, domains=(), prefixes=()):
    """Names whose value would be removed or changed (not merely added): a device plugin may undo those."""
    capacity = capacity or {}
    names = []
    for key in managed_keys(capacity, resources, state, domains, prefixes):
        if key not in capacity:
            continue
        if state == "absent" or key not in resources or not same_quantity(capacity[key], resources[key]):
            names.append(key)
    return names


def apply_patch(node, ops):
    """The node as the apiserver will store it after ``ops``, for check mode's predicted result.

    RFC 6902 semantics by jsonpatch, ``test`` operations included; the input is left unchanged.
    """
    try:
        return jsonpatch.apply_patch(node, ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise InputRefused("the computed patch does not apply to the node as read: %s" % exc)


# Device plugins re-advertise their resources at every kubelet registration, so removing or
# changing what they serve does not stick. Image path fragment -> resource names or "domain/" prefixes.
KNOWN_PLUGIN_IMAGES = {
    "nvidia/k8s-device-plugin": ["nvidia.com/"],
    "rocm/k8s-device-plugin": ["amd.com/"],
    "intel/intel-gpu-plugin": ["gpu.intel.com/"],
    "intel/intel-fpga-plugin": ["fpga.intel.com/"],
    "squat/generic-device-plugin": ["squat.ai/"],
}
# Set on device-plugin pods by kubehw.devices.device_plugin_deploy: comma-separated resource names.
PLUGIN_RESOURCES_ANNOTATION = "devices.kubehw.io/resources"


def _matches(resource, served):
    return any(resource == s or (s.endswith("/") and resource.startswith(s)) for s in served)


def plugin_pods_serving(pods, resource):
    """Names (namespace/name) of running pods that appear to be device plugins serving ``resource``."""
    found = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        served = []
        annotation = (meta.get("annotations") or {}).get(PLUGIN_RESOURCES_ANNOTATION)
        if annotation:
            served.extend(s.strip() for s in annotation.split(",") if s.strip())
        for container in (pod.get("spec") or {}).get("containers") or []:
            image = container.get("image") or ""
            for fragment, resources in KNOWN_PLUGIN_IMAGES.items():
                if fragment in image:
                    served.extend(resources)
        if _matches(resource, served):
            found.append("%s/%s" % (meta.get("namespace"), meta.get("name")))
    return sorted(found)


def holds(resources_map, resources, state, domains=(), prefixes=()):
    """True when a capacity/allocatable map already says what the task asked for."""
    resources_map = resources_map or {}
    for key in managed_keys(resources_map, resources, state, domains, prefixes):
        wanted = None if state == "absent" else resources.get(key)
        if wanted is None:
            if key in resources_map:
                return False
        elif key not in resources_map or not same_quantity(resources_map[key], wanted):
            return False
    return True
