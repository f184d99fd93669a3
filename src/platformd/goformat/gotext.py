"""
Go's text forms that upstream's messages are made of: ``%q`` of a string
(``strconv.Quote``) and of a ``[]string`` (``["a" "b"]``), ``%#v`` of a ``[]string``, a
JSON number as encoding/json writes it, ``%v`` of a decoded JSON value, a Unix time as ``time.Time`` prints it, the text
of an aggregated error (``utilerrors.NewAggregate(errs).Error()``) and of an
``*os.PathError``.  At the bottom of the layers: validation, authorization and the flags
all word errors with them.
"""

from __future__ import annotations

import decimal
import numbers
import re

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """Go's ``%q`` (strconv.Quote): printable characters as they are, others escaped."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'



def quote(text: str) -> str:
    """``strconv.Quote`` (``go_quote``), at once for plain text."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return go_quote(text)


def quote_list(items) -> str:
    """``%q`` of a ``[]string``: ``["a" "b"]`` (``[]`` when empty)."""
    return "[" + " ".join(quote(item) for item in items) + "]"


def string_slice(items) -> str:
    """``%#v`` of a ``[]string``: ``[]string{"a", "b"}`` (``[]string{}`` when empty)."""
    return "[]string{" + ", ".join(quote(item) for item in items) + "}"


def unix_time(seconds: int) -> str:
    """
    ``time.Unix(seconds, 0).UTC().String()`` for any int64 (``datetime`` stops at years
    1 and 9999): the civil date by days from the epoch (proleptic Gregorian), a year of
    at least four digits, signed before year 0.
    """
    days, rest = divmod(seconds, 86400)
    era, day_of_era = divmod(days + 719468, 146097)  # eras of 400 years from 0000-03-01
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524
                   - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153  # March is 0
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    year = year_of_era + era * 400 + (month <= 2)
    sign = "-" if year < 0 else ""
    hours, rest = divmod(rest, 3600)
    return (f"{sign}{abs(year):04d}-{month:02d}-{day:02d} "
            f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d} +0000 UTC")


def aggregate(messages) -> str:
    """
    ``utilerrors.NewAggregate(errs).Error()``: one error as itself; several as
    ``[a, b]``, each distinct message once (and without brackets when only one is left).
    """
    messages = list(messages)
    if len(messages) <= 1:
        return messages[0] if messages else ""
    distinct = list(dict.fromkeys(messages))
    if len(distinct) == 1:
        return distinct[0]
    return "[" + ", ".join(distinct) + "]"


def os_error(error: OSError) -> str:
    """An OS error's text as Go writes it (``no such file or directory``)."""
    return (error.strerror or str(error)).lower()


def path_error(op: str, path: str, error: OSError) -> str:
    """An ``*os.PathError`` as Go prints it (``open /x: no such file or directory``)."""
    return f"{op} {path}: {os_error(error)}"


def json_kind(value, other: str = "value") -> str:
    """How Go's encoding/json names a decoded JSON value's type in an unmarshal error
    (``json: cannot unmarshal <kind> into ...``); ``other`` for anything else (null)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Number):
        return "number"
    return _JSON_KINDS.get(type(value), other)


def json_number(value) -> str:
    """
    The text of a decoded JSON number, as Go's decoder shows one (``number <text>``):
    an int or a ``gonumbers.BigNumber`` as it prints; a float as encoding/json writes a
    float64: the shortest digits that read back (``repr``'s), in exponent form below 1e-6
    and from 1e21 on (``1e+21``, ``1e-7``: a one-digit negative exponent loses its
    zero), plain otherwise (``100000000000000000000``, ``1``).
    """
    if not isinstance(value, float):
        return str(value)
    text = repr(value)
    magnitude = abs(value)
    if magnitude and (magnitude < 1e-6 or magnitude >= 1e21):
        return re.sub(r"e-0(\d)\Z", r"e-\1", text)
    if "e" in text:
        text = format(decimal.Decimal(text), "f")
    return text.removesuffix(".0")


_JSON_KINDS: dict = {str: "string", list: "array", dict: "object"}


def go_value(value) -> str:
    """
    A decoded JSON value as Go's ``%v`` (and ``%+v``) prints the ``interface{}`` holding
    it: ``map[a:1 b:[x y]]`` (keys sorted, as ``fmt`` sorts a map's), strings bare,
    ``<nil>``, a float as ``strconv.FormatFloat(f, 'g', -1, 64)``; a number past int64
    as the float64 Go's decoder makes of it.
    """
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{go_value(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(item) for item in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    as_float = getattr(value, "as_float", None)
    if as_float is not None and as_float() is not None:
        value = as_float()
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _go_float(value: float) -> str:
    """``strconv.FormatFloat(value, 'g', -1, 64)``: exponent form below 1e-4 and from 1e6."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits)) or "0"
    assert isinstance(exponent, int)  # 'n', 'N' and 'F' are NaN and the infinities, above
    point = len(text) + exponent  # the decimal point's place in the digits (Go's dp)
    minus = "-" if sign else ""
    if value and not -4 <= point - 1 < 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        power = point - 1
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"
