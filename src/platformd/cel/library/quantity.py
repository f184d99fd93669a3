"""
Upstream's ``kubernetes.quantity`` library (``library/quantity.go``) over
``resource.Quantity``'s parser (``ParseQuantity``, read here step by step: its scanner,
its suffixes, the exact fast path, the slow path that rounds a magnitude up to a
nano-unit and caps it at 2^63 − 1) and exact arithmetic: ``quantity``, ``isQuantity``,
``sign``, ``isGreaterThan``, ``isLessThan``, ``compareTo``, ``add``, ``sub`` (a quantity
or an integer), ``asInteger``, ``isInteger``, ``asApproximateFloat``.

A quantity is a ``kubernetes.Quantity`` holding its exact value (``numerator/denominator``),
so ``==`` compares values as upstream's ``Equal`` (``quantity('200M') ==
quantity('0.2G')``).  Upstream's ``AsInt64`` also depends on how the value is kept
(``int64Amount`` with a scale, or ``inf.Dec``), which an exact value does not say: here
a whole number of magnitude below 2^63 − 1 is an integer; upstream says no for one kept
with decimals (``1000m``, ``1.0``) or parsed through its slow path (``0.5Ki``, more than
18 digits).
"""

from __future__ import annotations

import math
from fractions import Fraction

from platformd.cel.library import opaque
from platformd.cel.library.overloads import (Implementation, Library, Overload, comparisons,
                                             parses, sign)
FORMAT_WRONG = ("quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
SUFFIX = "unable to parse quantity's suffix"
NUMERIC = "unable to parse numeric part of quantity"
_MAX = (1 << 63) - 1
_DIGITS = "0123456789"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}


def _scan(text: str) -> tuple:
    """``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive, pos, end = True, 0, len(text)
    if end and text[0] in "+-":
        positive = text[0] != "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(FORMAT_WRONG)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple:
    """``quantitySuffixer.interpret``: (base, exponent, binary?)."""
    if suffix in _BINARY:
        return 2, _BINARY[suffix], True
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], False
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:], 10)
        except ValueError:
            raise ValueError(SUFFIX) from None
        if -(1 << 63) <= exponent < (1 << 63):
            return 10, exponent, False
    raise ValueError(SUFFIX)


def parse(text: str) -> Fraction:
    """``resource.ParseQuantity``'s value; ``ValueError`` with its message."""
    if not text:
        raise ValueError(FORMAT_WRONG)
    if text == "0":
        return Fraction(0)
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, binary = _interpret(suffix)
    if binary:
        fast = not denom and 15 - len(num) - int(exponent * 3 / 10) - 1 >= 0
        mantissa, scale = (1 << exponent) if fast else 1, 0
    else:
        fast = 18 - len(num + denom) >= 0
        mantissa, scale = 1, exponent
    scale -= len(denom)
    if fast and scale >= -9:
        result = int(num + denom) * mantissa
        if result <= _MAX:
            exact = Fraction(result) * Fraction(10) ** scale
            return exact if positive else -exact
    return _slow(value, base, exponent)


def _slow(value: str, base: int, exponent: int) -> Fraction:
    """``ParseQuantity``'s ``inf.Dec`` path: exact, then the magnitude rounded up to a
    nano-unit and capped at 2^63 − 1."""
    sign, digits = (-1 if value[:1] == "-" else 1), value.lstrip("+-")
    whole, _, fraction = digits.partition(".")
    if not (whole + fraction) or not (whole + fraction).isdigit():
        raise ValueError(NUMERIC)
    amount = Fraction(int(whole + fraction or "0"), 10 ** len(fraction))
    amount *= Fraction(base) ** exponent
    if amount:
        amount = Fraction(math.ceil(amount * 10 ** 9), 10 ** 9)
    return sign * min(amount, Fraction(_MAX))


def _value(quantity) -> Fraction:
    return Fraction(opaque.text(quantity))


def _quantity(value: Fraction):
    return opaque.make(opaque.QUANTITY, f"{value.numerator}/{value.denominator}")


def _as_int(quantity):
    value = _value(quantity)
    if value.denominator == 1 and abs(value) < _MAX:
        return int(value)
    return None


def _as_integer(quantity) -> int:
    found = _as_int(quantity)
    if found is None:
        raise ValueError("cannot convert value to integer")
    return found


def _operand(other) -> Fraction:
    return Fraction(other) if isinstance(other, int) else _value(other)


def compare(a, b) -> int:
    """``Cmp`` of two quantities: -1, 0 or 1."""
    return sign(_value(a) - _value(b))


_Q = opaque.QUANTITY
LIBRARY = Library(
    "kubernetes.quantity",
    (Overload("string_to_quantity", "quantity", ("string",), _Q),
     Overload("is_quantity_string", "isQuantity", ("string",), "bool"),
     Overload("quantity_sign", "sign", (_Q,), "int"),
     *comparisons("quantity", _Q),
     Overload("quantity_get_float", "asApproximateFloat", (_Q,), "double", member=True),
     Overload("quantity_get_int", "asInteger", (_Q,), "int", member=True),
     Overload("quantity_is_integer", "isInteger", (_Q,), "bool", member=True),
     Overload("quantity_add", "add", (_Q, _Q), _Q, member=True),
     Overload("quantity_add_int", "add", (_Q, "int"), _Q, member=True),
     Overload("quantity_sub", "sub", (_Q, _Q), _Q, member=True),
     Overload("quantity_sub_int", "sub", (_Q, "int"), _Q, member=True)),
    (Implementation("quantity", ("dyn",), lambda text: _quantity(parse(text))),
     Implementation("isQuantity", ("dyn",), parses(parse)),
     Implementation("sign", ("dyn",), lambda q: sign(_value(q))),
     Implementation("asApproximateFloat", ("dyn",), lambda q: float(_value(q)), member=True),
     Implementation("asInteger", ("dyn",), _as_integer, member=True),
     Implementation("isInteger", ("dyn",), lambda q: _as_int(q) is not None, member=True),
     Implementation("add", ("dyn", "dyn"), lambda q, o: _quantity(_value(q) + _operand(o)),
                    member=True),
     Implementation("sub", ("dyn", "dyn"), lambda q, o: _quantity(_value(q) - _operand(o)),
                    member=True)))

