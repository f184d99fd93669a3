"""
Field-level validation errors, worded as upstream's ``field.ErrorList`` words them.

Validators return lists of ``Cause``; the handler turns a non-empty list into one 422
``Invalid`` Status (``platformd.errors.invalid``).
"""

from __future__ import annotations

import json

import attrs

from platformd.errors import Cause
from platformd.goformat.gotext import go_quote


@attrs.frozen
class GoValue:
    """A bad value shown as it is (not quoted): one upstream prints from a Go struct."""

    text: str

    def __str__(self) -> str:
        return self.text


def go_json(value) -> GoValue:
    """
    A struct as a bad value, as apimachinery's ``field.Error.ErrorBody`` shows it (v0.36):
    Go's ``json.Marshal`` of it (compact; ``<``, ``>``, ``&``, U+2028 and U+2029
    escaped).  An internal type has no JSON tags, so ``value``'s keys are its Go field
    names.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _HTML_ESCAPES:
        text = text.replace(char, escaped)
    return GoValue(text)


_HTML_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                 ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def _quote(value) -> str:
    """A bad value as field.Error renders it: strings by %q, others as Go prints them."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value).lower() if isinstance(value, bool) else str(value)


def required(field: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), field)


def invalid(field: str, value, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {_quote(value)}: {detail}", field)


def not_supported(field: str, value, allowed) -> Cause:
    choices = ", ".join(json.dumps(a) for a in allowed)
    return Cause(
        "FieldValueNotSupported",
        f"Unsupported value: {_quote(value)}: supported values: {choices}",
        field,
    )


def forbidden(field: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", field)


def duplicate(field: str, value) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {_quote(value)}", field)


def too_long(field: str, limit: int) -> Cause:
    return Cause("FieldValueTooLong", f"Too long: may not be more than {limit} bytes", field)
