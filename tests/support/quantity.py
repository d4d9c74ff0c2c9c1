# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes quantities (resource.Quantity's text form) as exact fractions, for the kubelet stand-in's QoS class
(tests/support/k8s_objects.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fractions
import re

QUANTITY_RE_TEXT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_ERROR = "quantities must match the regular expression '%s'" % QUANTITY_RE_TEXT


class QuantityError(ValueError):
    pass


_QUANTITY_RE = re.compile(QUANTITY_RE_TEXT)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value):
    """Return (Fraction, format) for a Kubernetes quantity; format is binary, decimal or exponent."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if isinstance(value, (int, float)):
        value = repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    text = value.strip()
    m = _QUANTITY_RE.match(text)
    if not m:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    number, suffix = m.group(1), m.group(2)
    if number.count(".") > 1 or number.strip("+-") in ("", "."):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    try:
        amount = fractions.Fraction(number)
    except (ValueError, ZeroDivisionError):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if suffix in _BINARY:
        return amount * (1024 ** _BINARY[suffix]), "binary"
    if suffix in _DECIMAL:
        return amount * fractions.Fraction(10) ** _DECIMAL[suffix], "decimal"
    em = re.match(r"^[eE]([-+]?[0-9]+)$", suffix)
    if em:
        return amount * fractions.Fraction(10) ** int(em.group(1)), "exponent"
    raise QuantityError(QUANTITY_FORMAT_ERROR)


def quantity_amount(value):
    """A quantity as an exact Fraction for arithmetic (requests, allocatable); None or an unparsable value counts
    as 0, as a scheduler treats a resource it cannot read."""
    if value is None:
        return fractions.Fraction(0)
    try:
        return parse_quantity(value)[0]
    except QuantityError:
        return fractions.Fraction(0)
