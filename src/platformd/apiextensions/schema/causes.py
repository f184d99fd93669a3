"""
``field.Error``s as apimachinery v0.36 words them (``ErrorBody``), as ``Cause``s: a bad
value is shown by its Go type: a string ``%q``, a number or bool ``%v``, anything else
(null, objects, lists) as compact JSON with sorted keys.
"""

from __future__ import annotations

import json

from platformd.errors import Cause
from platformd.goformat.gotext import go_quote, go_value
from platformd.model.fielderrors import GoValue


def show(value) -> str:
    """A bad value as ``field.Error.ErrorBody`` prints it."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_value(value)
    if isinstance(value, int) or isinstance(value, GoValue):
        return str(value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def invalid(path: str, value, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {show(value)}: {detail}", path)


def type_invalid(path: str, value, detail: str) -> Cause:
    return Cause("FieldValueTypeInvalid", f"Invalid value: {show(value)}: {detail}", path)


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""),
                 path)


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def duplicate(path: str, value) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {show(value)}", path)


def not_supported(path: str, value, allowed) -> Cause:
    detail = ""
    if allowed:
        detail = ": supported values: " + ", ".join(go_quote(str(a)) for a in allowed)
    return Cause("FieldValueNotSupported", f"Unsupported value: {show(value)}{detail}", path)


def too_long(path: str, limit: int) -> Cause:
    unit = "byte" if limit == 1 else "bytes"
    detail = f"may not be more than {limit} {unit}" if limit >= 0 else "value is too long"
    return Cause("FieldValueTooLong", f"Too long: {detail}", path)


def too_many(path: str, actual: int, limit: int) -> Cause:
    unit = "item" if limit == 1 else "items"
    detail = f"must have at most {limit} {unit}" if limit >= 0 else "has too many items"
    shown = f": {actual}" if actual >= 0 else ""
    return Cause("FieldValueTooMany", f"Too many{shown}: {detail}", path)


def internal(path: str, detail: str) -> Cause:
    return Cause("InternalError", f"Internal error: {detail}", path)


def text(cause: Cause) -> str:
    """``field.Error.Error()``: ``<field>: <body>``."""
    return f"{cause.field}: {cause.message}"
