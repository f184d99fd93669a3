"""
Upstream's ``field.Error`` and ``ErrorList.ToAggregate()`` texts, for the configuration's
validation messages (``k8s.io/apimachinery/pkg/util/validation/field``).
"""

from __future__ import annotations

import json


def go_value(value) -> str:
    """A bad value as ``field.Error`` prints it (strings %q, numbers bare, lists %#v)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(json.dumps(v) for v in value) + "}"
    # Upstream prints the Go struct (%#v); the document's own JSON says the same.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def invalid(path: str, value, detail: str, raw: bool = False) -> str:
    shown = value if raw else go_value(value)
    return f"{path}: Invalid value: {shown}: {detail}"


def aggregate(errors: list) -> str:
    """``ToAggregate().Error()``: the one message, or ``[a, b]`` (duplicates once)."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"
