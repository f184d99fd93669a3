"""
Numbers in a client's text, read as upstream's Go reads them, whatever their length.

Python's ``int()`` refuses decimal text of more than 4,300 digits (``ValueError:
Exceeds the limit``, a guard against its quadratic conversion), and ``str()`` an int that
long; Go reads any length in linear time and says the value is out of range.  So every
place platformd reads a number from a request (query parameters, JSON and YAML bodies,
continue tokens, tokens' claims) goes through here, which never converts more digits
than a 64-bit value can hold (JSON patch indices are the patch library's, which refuses
what it cannot convert):

* ``parse_int`` and ``parse_uint`` are ``strconv.ParseInt(s, 10, bits)`` and
  ``ParseUint``, failing with Go's ``*strconv.NumError`` text (``strconv.ParseInt:
  parsing "x": invalid syntax`` / ``value out of range``);
* ``BigNumber`` is a JSON number no int64 (an integer) or float64 (a fraction or an
  exponent) holds, kept as written: Go's decoder refuses it only where it lands in a
  typed field (``json: cannot unmarshal number 1111… into … of type int64``), skips it in
  an unknown one, and reads it as a float64 into ``interface{}`` if it can
  (``model/schema.py`` does each).  ``json_number_hooks`` makes the stdlib parser produce
  them.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import attrs

from platformd.goformat import gotext

INT64 = range(-(1 << 63), 1 << 63)
#: Go's JSON writes a float64 at or past this magnitude with an exponent.
_GO_EXPONENT = 1e21


def go_float(number: float):
    """A float64 as Go's JSON writes it: a whole number below 1e21 without a fraction,
    as an int where the JSON encoder can hold one (int64 and uint64: ``2.0 ** 64`` stays
    a float, which orjson cannot write as an int)."""
    if number.is_integer() and abs(number) < _GO_EXPONENT and \
            -(1 << 63) <= number < (1 << 64):
        return int(number)
    return number


_DIGITS = re.compile(r"[0-9]*")
#: Digits past which a value is beyond 64 bits without converting it (2**64 has 20).
_MAX_DIGITS = 20
SYNTAX, RANGE = "invalid syntax", "value out of range"


class NumError(ValueError):
    """Go's ``*strconv.NumError``: the function, the text it was given, what is wrong."""

    def __init__(self, func: str, num: str, err: str):
        super().__init__(func, num, err)
        self.func, self.num, self.err = func, num, err

    def __str__(self) -> str:
        return f"strconv.{self.func}: parsing {gotext.quote(self.num)}: {self.err}"


def _unsigned(text: str, bits: int, func: str, original: str) -> int:
    """``ParseUint``'s digits: Go stops at the first overflow, before a later bad byte."""
    digits = _DIGITS.match(text)
    assert digits is not None  # [0-9]* matches every string
    end = digits.end()
    significant = text[:end].lstrip("0")
    if len(significant) > _MAX_DIGITS or int(significant or "0") >= 1 << bits:
        raise NumError(func, original, RANGE)
    if not text or end != len(text):
        raise NumError(func, original, SYNTAX)
    return int(significant or "0")


def parse_uint(text: str, bits: int = 64) -> int:
    """``strconv.ParseUint(text, 10, bits)``: ASCII digits only, no sign."""
    return _unsigned(text, bits, "ParseUint", text)


def parse_int(text: str, bits: int = 64) -> int:
    """``strconv.ParseInt(text, 10, bits)``: an optional sign, then ASCII digits."""
    negative = text[:1] == "-"
    digits = text[1:] if text[:1] in ("+", "-") else text
    value = _unsigned(digits, bits, "ParseInt", text)
    if value > (1 << (bits - 1)) - (0 if negative else 1):
        raise NumError("ParseInt", text, RANGE)
    return -value if negative else value


@attrs.frozen
class BigNumber(numbers.Number):
    """
    A JSON number beyond int64 (an integer) or float64, as written (see the module
    docstring).  A ``numbers.Number``, so what names a JSON value's type calls it a
    number; not an int or a float, so nothing computes with it by mistake.
    """

    text: str

    def __str__(self) -> str:
        return self.text

    def as_float(self):
        """What Go's decoder makes of it in an ``interface{}`` (``ParseFloat``): a finite
        float, or None where that fails (past float64's range)."""
        value = float(self.text)
        return value if math.isfinite(value) else None


def _json_int(text: str):
    """The stdlib parser's ``parse_int``: an int within int64, else a BigNumber."""
    if len(text) < 19:
        return int(text)  # at most 18 digits: always an int64
    try:
        return parse_int(text)
    except NumError:
        return BigNumber(text)


def _json_float(text: str):
    """The stdlib parser's ``parse_float``: a finite float, else a BigNumber (``1e400``)."""
    value = float(text)
    return value if math.isfinite(value) else BigNumber(text)


#: Keyword arguments for ``json.loads`` / ``json.JSONDecoder``: numbers as above.
json_number_hooks: dict[str, Any] = {"parse_int": _json_int, "parse_float": _json_float}
