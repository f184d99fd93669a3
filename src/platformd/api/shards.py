"""
Sharded list and watch (spec 4.6, gate ``ShardedListAndWatch``): the ``shardSelector``
query parameter.

Grammar: ``shardRange(<field>, '<hex start>', '<hex end>')`` joined by ``||``, where
``<field>`` is ``object.metadata.uid`` or ``object.metadata.namespace`` (the same in
every range), ``<hex start>`` is ``0x`` and 16 lowercase hex digits (inclusive) and
``<hex end>`` is ``0x`` hex up to ``0x10000000000000000`` (exclusive).  An object belongs
to the selection when the 64-bit FNV-1a hash of the field's UTF-8 value lies in one of
the ranges.
"""

from __future__ import annotations

import re

import attrs

from platformd import errors
FIELDS = {"object.metadata.uid": "uid", "object.metadata.namespace": "namespace"}
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
_RANGE = re.compile(
    r"\s*shardRange\(\s*(?P<field>[A-Za-z.]+)\s*,\s*'(?P<start>[^']*)'\s*,\s*'(?P<end>[^']*)'\s*\)\s*")


def fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


@attrs.frozen
class ShardSelector:
    text: str
    field: str
    ranges: tuple  # ((start, end), ...)

    def matches(self, obj: dict) -> bool:
        value = (obj.get("metadata") or {}).get(self.field) or ""
        h = fnv1a64(value.encode("utf-8"))
        return any(start <= h < end for start, end in self.ranges)


def _invalid(text: str, problem: str):
    return errors.bad_request(f"invalid shardSelector {text!r}: {problem}")


def parse(text: str) -> ShardSelector:
    """Parse ``shardSelector``; a malformed expression is a 400 naming the problem."""
    if not text.strip():
        raise _invalid(text, "empty expression")
    fields, ranges = set(), []
    for part in text.split("||"):
        m = _RANGE.fullmatch(part)
        if m is None:
            raise _invalid(text, f"expected shardRange(<field>, '<hex start>', '<hex end>'), "
                                 f"found {part.strip()!r}")
        field = m.group("field")
        if field not in FIELDS:
            raise _invalid(text, f"unsupported field {field!r}; supported: "
                                 + ", ".join(sorted(FIELDS)))
        fields.add(field)
        start_text, end_text = m.group("start"), m.group("end")
        if not re.fullmatch(r"0x[0-9a-f]{16}", start_text):
            raise _invalid(text, f"start {start_text!r} must be 0x followed by 16 lowercase "
                                 "hex digits")
        if not re.fullmatch(r"0x[0-9a-f]{1,17}", end_text):
            raise _invalid(text, f"end {end_text!r} must be 0x followed by lowercase hex digits")
        start, end = int(start_text, 16), int(end_text, 16)
        if end > 1 << 64:
            raise _invalid(text, f"end {end_text!r} is above 0x10000000000000000")
        if start >= end:
            raise _invalid(text, f"start {start_text!r} is not below end {end_text!r}")
        ranges.append((start, end))
    if len(fields) > 1:
        raise _invalid(text, "all ranges must use the same field path")
    return ShardSelector(text, FIELDS[fields.pop()], tuple(ranges))
