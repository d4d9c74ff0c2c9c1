# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests: every name and quantity validator against an independent statement of the rule.

The validators use regular expressions. The ``spec_*`` functions below state the same Kubernetes rules
character by character (apimachinery's pkg/util/validation/validation.go and resource.Quantity's
grammar in pkg/api/resource/quantity.go, v1.32), with no regular expression, so a wrong anchor
(Python's ``$`` matching before a final newline), a wrong length limit or a character class that is
too wide shows up as a disagreement. Hypothesis generates strings around each rule's edges: lengths
near 63 and 253, first and last characters, '.', '-', '_', '/', whitespace, control characters and
non-ASCII letters and digits.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings  # requirements-dev.txt pins it
from hypothesis import strategies as st

from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
    parse_quantity,
    whole_quantity,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    QUALIFIED_NAME_RE,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name_part,
    label_key_problem,
    object_name_problem,
)

# quick: about 200 examples per property, no example database written into the checkout
QUICK = settings(max_examples=200, deadline=1000, database=None, derandomize=False,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ----------------------------------------------------------------------------- the rules, restated
LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = LOWER.upper()
DIGITS = "0123456789"


def spec_dns_label_chars(s):
    """RFC 1123 label without the length limit: [a-z0-9-], alphanumeric at both ends, not empty."""
    if s == "":
        return False
    for c in s:
        if c not in LOWER and c not in DIGITS and c != "-":
            return False
    return s[0] != "-" and s[-1] != "-"


def spec_dns_label(s):
    return len(s) <= 63 and spec_dns_label_chars(s)


def spec_dns_subdomain(s):
    """At most 253 characters; '.'-separated labels (each label has no length limit of its own)."""
    if len(s) > 253 or s == "":
        return False
    return all(spec_dns_label_chars(label) for label in s.split("."))


def spec_qualified_name_part(s):
    """1-63 of [A-Za-z0-9-_.], alphanumeric at both ends."""
    if s == "" or len(s) > 63:
        return False
    alnum = LOWER + UPPER + DIGITS
    for c in s:
        if c not in alnum and c not in "-_.":
            return False
    return s[0] in alnum and s[-1] in alnum


def spec_label_value(s):
    return s == "" or spec_qualified_name_part(s)


def spec_label_key(s):
    """IsQualifiedName: 'name' or 'prefix/name', the prefix a non-empty DNS subdomain."""
    parts = s.split("/")
    if len(parts) == 1:
        return spec_qualified_name_part(parts[0])
    if len(parts) == 2:
        return spec_dns_subdomain(parts[0]) and spec_qualified_name_part(parts[1])
    return False


def spec_extended_resource_name(s):
    """IsExtendedResourceName (k8s.io/kubernetes pkg/apis/core/v1/helper/helpers.go, v1.32)."""
    if "/" not in s or "kubernetes.io/" in s:  # native: unprefixed or *kubernetes.io/
        return False
    if s.startswith("requests."):
        return False
    # the quota name requests.<name> must be a qualified name (prefix/name with a subdomain prefix)
    return spec_label_key("requests." + s)


def spec_quantity(s):
    """resource.Quantity's grammar, read left to right; returns the value (Fraction) or None.

    <quantity> ::= <sign>? <number> <suffix>; <number> ::= digits | digits. | digits.digits | .digits;
    <suffix> ::= "" | m | u | n | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei | (e|E) <sign>? digits.
    Exponents beyond +-64 are refused by the collection on purpose (documented bound).
    """
    i, n = 0, len(s)
    negative = False
    if i < n and s[i] in "+-":
        negative = s[i] == "-"
        i += 1
    whole = ""
    while i < n and s[i] in DIGITS:
        whole += s[i]
        i += 1
    frac = ""
    if i < n and s[i] == ".":
        i += 1
        while i < n and s[i] in DIGITS:
            frac += s[i]
            i += 1
    if whole == "" and frac == "":
        return None
    value = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    suffix = s[i:]
    scale = {"": 1, "m": Fraction(1, 1000), "u": Fraction(1, 10 ** 6), "n": Fraction(1, 10 ** 9),
             "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
             "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
    if suffix in scale:
        value *= scale[suffix]
    elif len(suffix) >= 2 and suffix[0] in "eE":
        rest = suffix[1:]
        sign = 1
        if rest[0] in "+-":
            sign = -1 if rest[0] == "-" else 1
            rest = rest[1:]
        if rest == "" or any(c not in DIGITS for c in rest):
            return None
        power = sign * int(rest)
        if abs(power) > 64:
            return None
        value *= Fraction(10) ** power
    else:
        return None
    return -value if negative else value


# ----------------------------------------------------------------------------- strategies near the edges
EDGE_CHARS = ["-", ".", "_", "/", " ", "\n", "\n", "\n", "\r", "\t", "\x00", "\x7f", "\u00e9", "\u0131", "\u212a",
              "\u0664", "\u200b", "\uff41", "A", "Z", "~", ":", "%"]
EDGE_LENGTHS = (0, 1, 2, 62, 63, 64, 252, 253, 254)


@st.composite
def near_valid(draw, alphabet, lengths=EDGE_LENGTHS):
    """A string of mostly valid characters at an edge length, then perhaps broken at one place."""
    length = draw(st.one_of(st.sampled_from(lengths), st.integers(0, 70)))
    # a short random piece repeated to the length: long strings without hundreds of draws each
    piece = draw(st.text(alphabet=alphabet, min_size=1, max_size=6))
    text = (piece * (length // len(piece) + 1))[:length]
    mutation = draw(st.sampled_from(["none", "none", "first", "last", "middle", "append", "prepend"]))
    odd = draw(st.sampled_from(EDGE_CHARS))
    if mutation == "first" and text:
        text = odd + text[1:]
    elif mutation == "last" and text:
        text = text[:-1] + odd
    elif mutation == "middle" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + odd + text[at + 1:]
    elif mutation == "append":
        text += odd
    elif mutation == "prepend":
        text = odd + text
    return text


LABEL_ALPHABET = list(LOWER[:6] + DIGITS[:4]) + ["-"]
NAME_ALPHABET = list(LOWER[:4] + UPPER[:3] + DIGITS[:3]) + ["-", "_", "."]


@st.composite
def subdomains(draw):
    """Dotted labels, sometimes with an empty label or a label of 63/64 characters, total near 253."""
    count = draw(st.integers(1, 6))
    labels = [draw(near_valid(LABEL_ALPHABET, lengths=(1, 2, 3, 62, 63, 64))) for dummy in range(count)]
    text = ".".join(labels)
    if draw(st.booleans()) and len(text) < 253:
        # pad to a length next to the 253 limit with extra labels of 'a'
        target = draw(st.sampled_from([252, 253, 254]))
        while len(text) < target - 1:
            text += "." + "a" * min(60, max(1, target - len(text) - 1))
        text = text[:target]
    return text


@st.composite
def extended_names(draw):
    domain = draw(st.one_of(subdomains(), st.sampled_from(
        ["example.com", "kubernetes.io", "a.kubernetes.io", "my-kubernetes.io", "kubernetes.io.example.com",
         "requests.example.com", "nvidia.com", "x" * 244, "x" * 245])))
    name = draw(near_valid(NAME_ALPHABET, lengths=(1, 2, 62, 63, 64)))
    sep = draw(st.sampled_from(["/", "/", "/", "", "//", "/\n"]))
    return domain + sep + name


QUANTITY_ALPHABET = list(DIGITS[:4]) + ["+", "-", ".", "e", "E", "i", "m", "u", "n", "k", "K", "M", "G", "T", "P"]


@st.composite
def quantities(draw):
    head = draw(st.sampled_from(["", "+", "-"]))
    number = draw(st.sampled_from(["4", "0", "12", "1.5", ".5", "4.", "1.2.3", "", "."]))
    suffix = draw(st.one_of(
        st.sampled_from(["", "m", "u", "n", "k", "K", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                         "KiB", "mi", "e3", "E3", "e-1", "e+2", "e", "e65", "e64", "e-65"]),
        near_valid(QUANTITY_ALPHABET, lengths=(0, 1, 2, 3))))
    tail = draw(st.sampled_from(["", "", "", "\n", " ", "\t", "\x00", "\u0664"]))
    return head + number + suffix + tail


# ----------------------------------------------------------------------------- properties
@QUICK
@given(near_valid(LABEL_ALPHABET))
@example("node-1\n")
@example("a" * 63)
@example("a" * 64)
def test_dns_label_matches_the_rule(s):
    assert is_dns1123_label(s) == spec_dns_label(s)
    # callers elsewhere use pattern.match() plus their own length check: it must judge the whole string too
    assert (len(s) <= 63 and DNS1123_LABEL_RE.match(s) is not None) == spec_dns_label(s)


@QUICK
@given(st.one_of(subdomains(), near_valid(LABEL_ALPHABET + ["."])))
@example("node-1.example.com\n")
@example("a" * 253)
@example("a" * 254)
@example("a." * 126 + "a")
def test_dns_subdomain_matches_the_rule(s):
    assert is_dns1123_subdomain(s) == spec_dns_subdomain(s)
    assert (len(s) <= 253 and DNS1123_SUBDOMAIN_RE.match(s) is not None) == spec_dns_subdomain(s)
    # node names are DNS subdomains
    assert (object_name_problem(s) is None) == spec_dns_subdomain(s)


@QUICK
@given(near_valid(NAME_ALPHABET))
@example("dongle\n")
@example("A" * 63)
@example("A" * 64)
def test_qualified_name_part_matches_the_rule(s):
    assert is_qualified_name_part(s) == spec_qualified_name_part(s)
    assert (len(s) <= 63 and QUALIFIED_NAME_RE.match(s) is not None) == spec_qualified_name_part(s)


@QUICK
@given(near_valid(NAME_ALPHABET))
@example("yes\n")
@example("")
def test_label_value_matches_the_rule(s):
    assert is_label_value(s) == spec_label_value(s)
    assert (len(s) <= 63 and LABEL_VALUE_RE.match(s) is not None) == spec_label_value(s)


@QUICK
@given(st.one_of(
    near_valid(NAME_ALPHABET),
    st.tuples(subdomains(), st.sampled_from(["/", "//", "/\n", ""]), near_valid(NAME_ALPHABET)).map("".join)))
@example("example.com/key\n")
@example("example.com\n/key")
@example("a/b/c")
def test_label_key_matches_the_rule(s):
    assert (label_key_problem(s) is None) == spec_label_key(s)


@QUICK
@given(extended_names())
@example("example.com/x\n")
@example("my-kubernetes.io/x")
@example("kubernetes.io.example.com/x")
def test_extended_resource_name_matches_the_rule(s):
    assert (extended_resource_name_problem(s) is None) == spec_extended_resource_name(s)


@QUICK
@given(quantities())
@example("4\n")
@example("1Ki\n")
@example("1e3\n")
def test_quantity_matches_the_grammar(s):
    expected = spec_quantity(s)
    try:
        got = parse_quantity(s)
    except InputRefused:
        got = None
    assert got == expected


@QUICK
@given(quantities())
@example("4\n")
def test_whole_quantity_accepts_exactly_the_non_negative_whole_values(s):
    value = spec_quantity(s)
    accepted = value is not None and value >= 0 and value.denominator == 1 and value <= (2 ** 63 - 1) // 1000
    try:
        got = whole_quantity(s, key="example.com/dongle")
    except InputRefused as err:
        assert not accepted, (s, str(err))
        assert "example.com/dongle" in str(err)  # the message names the entry
    else:
        assert accepted and got == value


@pytest.mark.parametrize("check,value", [
    (is_dns1123_label, "node-1\n"),
    (is_dns1123_subdomain, "node-1.example.com\n"),
    (is_qualified_name_part, "dongle\n"),
    (is_label_value, "yes\n"),
])
def test_a_final_newline_is_refused(check, value):
    """The reported defect, stated once plainly (the properties above find it among others)."""
    assert check(value) is False
    assert check(value[:-1]) is True
