"""
The rules ConfigMap and Secret share: config keys, base64 values, their total size,
``immutable``.
"""

from __future__ import annotations

import base64
import binascii
import re

from platformd.model import fielderrors as fe

#: Upstream's ``core.MaxSecretSize``, the bound of a Secret's and a ConfigMap's data.
MAX_SIZE = 1024 * 1024

_KEY_RE = re.compile(r"[-._a-zA-Z0-9]+\Z")
_KEY_MESSAGE = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                "is '[-._a-zA-Z0-9]+')")


def validate_keys(obj: dict, fields) -> list:
    causes, seen = [], set()
    for field in fields:
        for key in obj.get(field) or {}:
            if not _KEY_RE.match(key) or key in (".", ".."):
                causes.append(fe.invalid(f"{field}[{key}]", key, _KEY_MESSAGE))
            if key in seen:
                causes.append(fe.invalid(f"{field}[{key}]", key, "duplicate of key present in "
                                         + ("binaryData" if field == "data" else "data")))
            seen.add(key)
    return causes


def data_size(obj: dict, text: str = "", binary: str = "") -> int:
    """
    The bytes of the values of ``obj[text]`` (UTF-8 strings) and ``obj[binary]``
    (base64 of bytes: the bytes counted), as ``ValidateConfigMap`` and
    ``ValidateSecret`` total them; keys are not counted.
    """
    size = sum(len(v.encode("utf-8", "surrogatepass"))
               for v in (obj.get(text) or {}).values()) if text else 0
    for value in (obj.get(binary) or {}).values() if binary else ():
        size += len(value) // 4 * 3 - value[-2:].count("=")
    return size


def validate_size(obj: dict, field: str, text: str = "", binary: str = "") -> list:
    """
    ``field.TooLong(field, MAX_SIZE)`` when ``data_size`` is over it: an object this
    size is stored, watched and listed whole, by every client.
    """
    if data_size(obj, text, binary) > MAX_SIZE:
        return [fe.too_long(field, MAX_SIZE)]
    return []


def validate_binary(obj: dict, field: str) -> list:
    causes = []
    for key, value in (obj.get(field) or {}).items():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            causes.append(fe.invalid(f"{field}[{key}]", "<value omitted>",
                                     "must be base64-encoded"))
    return causes


def immutable_data(fields):
    """``validate_update``: once ``immutable`` is set, ``fields`` and it stay as they are."""
    def validate(new: dict, old: dict) -> list:
        if not old.get("immutable"):
            return []
        if any(new.get(f) != old.get(f) for f in fields):
            return [fe.forbidden("data", "field is immutable when `immutable` is set")]
        if not new.get("immutable"):
            return [fe.forbidden("immutable", "field is immutable when `immutable` is set")]
        return []
    return validate
