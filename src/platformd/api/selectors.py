"""
Label and field selectors (``labelSelector``, ``fieldSelector``).

Parsed once per request into small predicate objects; the grammar and the error wording
follow upstream's ``labels.Parse`` and ``fields.ParseSelector``.  Field selectors are
limited to the fields each kind indexes (``metadata.name`` and ``metadata.namespace``
unless the kind names its own, ``ResourceType.field_labels``: a few more for pods and
secrets), as upstream limits them.
"""

from __future__ import annotations

import json
import re

import attrs

from platformd import errors
from platformd.model.meta import qualified_name

_LABEL_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|=|\(|\)|,|!)|(?P<word>[A-Za-z0-9_./-]+)|(?P<bad>\S))")


@attrs.frozen
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset = frozenset()

    def matches(self, labels: dict) -> bool:
        op = self.op
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" match objects that lack the label, as upstream does.
        return self.key not in labels or labels[self.key] not in self.values


@attrs.frozen
class LabelSelector:
    requirements: tuple

    def matches(self, obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _label_error(detail: str):
    return errors.bad_request(f"unable to parse requirement: {detail}")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse ``labelSelector``; a malformed one is a 400 BadRequest."""
    tokens = []
    for m in _LABEL_TOKEN.finditer(text):
        if m.group("bad"):
            raise _label_error(f"found '{m.group('bad')}', expected: identifier")
        tokens.append(m.group("op") or ("w", m.group("word")))
    if text.strip() and not tokens:
        raise _label_error("found '', expected: identifier")
    requirements = []
    pos = 0

    def take():
        nonlocal pos
        tok = tokens[pos] if pos < len(tokens) else None
        pos += 1
        return tok

    def word(tok, what):
        if not isinstance(tok, tuple):
            raise _label_error(f"found '{tok or ''}', expected: {what}")
        return tok[1]

    while pos < len(tokens):
        tok = take()
        if tok == "!":
            requirements.append(Requirement(word(take(), "identifier"), "!"))
        else:
            key = word(tok, "identifier")
            nxt = take()
            if nxt is None or nxt == ",":
                requirements.append(Requirement(key, "exists"))
                pos -= 1 if nxt is None else 0
                if nxt == ",":
                    continue
                break
            if nxt in ("=", "==", "!="):
                value_tok = tokens[pos] if pos < len(tokens) else None
                if isinstance(value_tok, tuple):
                    pos += 1
                    value = value_tok[1]
                else:
                    value = ""
                requirements.append(Requirement(key, "!=" if nxt == "!=" else "=",
                                                frozenset([value])))
            elif isinstance(nxt, tuple) and nxt[1] in ("in", "notin"):
                if take() != "(":
                    raise _label_error("found '', expected: '('")
                values = []
                while True:
                    tok = take()
                    if tok == ")":
                        break
                    if tok == ",":
                        continue
                    values.append(word(tok, "',', ')' or identifier"))
                requirements.append(Requirement(key, nxt[1], frozenset(values)))
            else:
                shown = nxt[1] if isinstance(nxt, tuple) else nxt
                raise _label_error(f"found '{shown}', expected: in, notin, =, ==, !=, "
                                   "gt, lt, identifier, or ','")
        if pos < len(tokens):
            sep = take()
            if sep != ",":
                shown = sep[1] if isinstance(sep, tuple) else sep
                raise _label_error(f"found '{shown}', expected: ',' or 'end of string'")
    for r in requirements:
        _check_label_key(r.key)
    return LabelSelector(tuple(requirements))


def _check_label_key(key: str):
    problems = qualified_name(key)
    if problems:
        raise _label_error(f"key: Invalid value: {key!r}: {'; '.join(problems)}")


def _path_getter(path: str):
    parts = path.split(".")

    def get(obj):
        for part in parts:
            if not isinstance(obj, dict):
                return ""
            obj = obj.get(part)
            if obj is None:
                return ""
        return obj if isinstance(obj, str) else str(obj)
    return get


@attrs.frozen
class FieldSelector:
    requirements: tuple  # (getter, field, op, value)

    def matches(self, obj: dict) -> bool:
        for getter, _field, op, value in self.requirements:
            if (getter(obj) == value) != (op == "="):
                return False
        return True

    def value_of(self, field: str):
        """The value an ``=`` term pins ``field`` to, or None (for fast single-name gets)."""
        for _getter, name, op, value in self.requirements:
            if name == field and op == "=":
                return value
        return None

    @property
    def empty(self) -> bool:
        return not self.requirements


def _unknown_field_label(field: str, custom: bool) -> str:
    """
    Upstream's words: a kind with its own field-label conversion func (core/v1
    conversion.go) says ``field label not supported``; every other kind falls to
    apimachinery's DefaultMetaV1FieldSelectorConversion.
    """
    if custom:
        return f"field label not supported: {field}"
    return (f'{json.dumps(field)} is not a known field selector: only "metadata.name", '
            '"metadata.namespace"')


#: apimachinery's DefaultMetaV1FieldSelectorConversion: what a kind without its own
#: field labels (``ResourceType.field_labels`` None) accepts.
DEFAULT_FIELD_LABELS = ("metadata.name", "metadata.namespace")


def parse_field_selector(text: str, kind) -> FieldSelector:
    """
    Parse ``fieldSelector`` for ``kind`` (a ``ResourceType``); fields outside its
    ``field_labels`` are a 400, as upstream.
    """
    custom = kind.field_labels
    allowed = DEFAULT_FIELD_LABELS if custom is None else custom
    requirements = []
    for term in _split_unescaped(text):
        term = term.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            field, sep, value = term.partition(op)
            if sep:
                break
        else:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field = field.strip()
        if field not in allowed:
            raise errors.bad_request(_unknown_field_label(field, custom is not None))
        value = value.strip().replace("\\,", ",").replace("\\=", "=").replace("\\\\", "\\")
        requirements.append((_path_getter(field), field, "!=" if op == "!=" else "=", value))
    return FieldSelector(tuple(requirements))


def _split_unescaped(text: str):
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def from_call(call):
    """(label selector or None, field selector or None) of a request's query."""
    kind = call.kind
    labels = call.arg("labelSelector")
    fields = call.arg("fieldSelector")
    return (parse_label_selector(labels) if labels else None,
            parse_field_selector(fields, kind) if fields else None)
