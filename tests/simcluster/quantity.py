# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes quantities for the simulated cluster, one parser for all of it: the apiserver's validation and
canonical form (validation.py, decoding.py) and the scheduler's and kubelets' arithmetic (controllers.py)."""

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
_DECIMAL_SUFFIX = dict((v, k) for k, v in _DECIMAL.items())


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


def format_quantity(amount, fmt):
    """Canonical string of a quantity, as resource.Quantity.String() prints it."""
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    # precision below nano is rounded up, as the apiserver does
    nanos = amount * 10 ** 9
    if nanos.denominator != 1:
        amount = fractions.Fraction(-(-nanos.numerator // nanos.denominator), 10 ** 9)
    if amount == 0:
        return "0"
    if fmt == "binary" and amount >= 1024 and amount.denominator == 1:
        value = int(amount)
        power = 0
        while power < 6 and value % 1024 == 0:
            value //= 1024
            power += 1
        if power:
            suffix = dict((v, k) for k, v in _BINARY.items())[power]
            return "%s%d%s" % (sign, value, suffix)
        return "%s%d" % (sign, value)
    for exp in range(18, -12, -3):
        mantissa = amount / fractions.Fraction(10) ** exp
        if mantissa.denominator == 1:
            if fmt == "exponent":
                return "%s%d%s" % (sign, mantissa.numerator, "e%d" % exp if exp else "")
            return "%s%d%s" % (sign, mantissa.numerator, _DECIMAL_SUFFIX[exp])
    return "%s%d%s" % (sign, int(amount * 10 ** 9), "n")


def canonical_quantity(value):
    amount, fmt = parse_quantity(value)
    return format_quantity(amount, fmt)


def quantity_amount(value):
    """A quantity as an exact Fraction for arithmetic (requests, allocatable); None or an unparsable value counts
    as 0, as a scheduler treats a resource it cannot read."""
    if value is None:
        return fractions.Fraction(0)
    try:
        return parse_quantity(value)[0]
    except QuantityError:
        return fractions.Fraction(0)
