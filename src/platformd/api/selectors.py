"""
Label and field selectors (``labelSelector``, ``fieldSelector``).

Parsed once per request, in slices (``slices.run``: a request line may hold a megabyte
of terms; label selectors read by ``model.selectors``), into predicates whose cost per
object does not grow with the number of terms (``LabelSelector``, ``FieldSelector``);
the grammar and the error wording follow
upstream's ``labels.Parse`` and ``fields.ParseSelector``, which set no limit of their own
on a selector's length or terms: the request line's (``api/site.py``) is the only one.
Field selectors are limited to the fields each kind indexes (``metadata.name`` and
``metadata.namespace`` unless the kind names its own, ``ResourceType.field_labels``: a
few more for pods and secrets), as upstream limits them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import attrs

from platformd import errors
from platformd.util import slices
from platformd.model.selectors import label_requirements

#: Operators that need the key (with one of the values); the others ("!=", "notin",
#: "!") need it absent, or with none of theirs.
_POSITIVE = ("=", "in", "exists")


@attrs.frozen
class LabelSelector:
    """
    A label selector compiled for matching: upstream's requirements are a conjunction,
    so the terms on one key are merged into one, and a match costs what the object's
    labels cost, however many terms the selector has (the 100,000 terms of a hostile
    selector cost a LIST, or every event of a watch, no more than one term).
    """

    #: key -> the values it must have, None for any (``=``, ``==``, ``in``, exists).
    required: dict
    #: key -> the values it must not have, None for all (``!=``, ``notin``, ``!key``).
    forbidden: dict

    def matches(self, obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        required = self.required
        if len(required) > len(labels):
            return False  # each required key is one of the labels
        for key, allowed in required.items():
            if key not in labels or (allowed is not None and labels[key] not in allowed):
                return False
        forbidden = self.forbidden
        if len(forbidden) < len(labels):
            present = [(key, labels[key]) for key in forbidden if key in labels]
        else:
            present = [(key, value) for key, value in labels.items() if key in forbidden]
        # "!=" and "notin" match objects that lack the label, as upstream's do.
        return not any((bad := forbidden[key]) is None or value in bad
                       for key, value in present)

    @property
    def empty(self) -> bool:
        return not self.required and not self.forbidden


def label_selector(text: str) -> slices.Work[LabelSelector]:
    """
    Parse ``labelSelector`` (work for ``slices.run``: it may be a megabyte long); a
    malformed one is a 400 BadRequest.
    """
    requirements = yield from label_requirements(text)
    required: dict = {}
    forbidden: dict = {}
    for count, (key, op, values) in enumerate(requirements, 1):
        if op in _POSITIVE:
            _narrow(required, key, values)
        else:
            _widen(forbidden, key, values)
        if not count % slices.STEP:
            yield
    return LabelSelector(required, forbidden)


def _narrow(required: dict, key: str, values) -> None:
    """Another positive term on ``key``: the values both allow (None: any value)."""
    if key not in required or required[key] is None:
        required[key] = None if values is None else set(values)
    elif values is not None:
        required[key].intersection_update(values)


def _widen(forbidden: dict, key: str, values) -> None:
    """Another negative term on ``key``: the values either refuses (None: every value)."""
    if key not in forbidden:
        forbidden[key] = None if values is None else set(values)
    elif values is None:
        forbidden[key] = None
    elif forbidden[key] is not None:
        forbidden[key].update(values)


def _path_getter(path: str, zero: str = ""):
    """The field's value as upstream's field set formats it (a bool as ``strconv.
    FormatBool``); ``zero`` when the object omits it (``ResourceType.field_zeros``)."""
    parts = path.split(".")

    def get(obj):
        for part in parts:
            if not isinstance(obj, dict):
                return zero
            obj = obj.get(part)
            if obj is None:
                return zero
        if isinstance(obj, bool):
            return "true" if obj else "false"
        return obj if isinstance(obj, str) else str(obj)
    return get


@attrs.frozen
class FieldTerms:
    """What a field selector asks of one field: the values it must equal (more than one
    and nothing matches) and those it must not."""

    getter: Callable[[dict], str]
    equal: frozenset
    not_equal: frozenset

    def admits(self, obj: dict) -> bool:
        value = self.getter(obj)
        if self.equal and (len(self.equal) > 1 or value not in self.equal):
            return False
        return value not in self.not_equal


@attrs.frozen
class FieldSelector:
    """
    A field selector compiled for matching: its terms merged per field, so a match costs
    at most one look-up per field the kind indexes, however many terms it has.
    """

    #: field -> ``FieldTerms``.
    fields: dict

    def matches(self, obj: dict) -> bool:
        return all(terms.admits(obj) for terms in self.fields.values())

    def value_of(self, field: str):
        """The value an ``=`` term pins ``field`` to, or None (for fast single-name gets)."""
        terms = self.fields.get(field)
        if terms is None or len(terms.equal) != 1:
            return None
        return next(iter(terms.equal))

    @property
    def empty(self) -> bool:
        return not self.fields


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


#: One term of a field selector: up to an unescaped comma (upstream's splitTerms).
_FIELD_TERM = re.compile(r"(?:[^\\,]+|\\.)*\\?", re.S)
_FIELD_OPERATOR = re.compile("!=|==|=")


def _field_terms(text: str):
    """The comma-separated terms of ``text``, escapes kept (upstream's splitTerms)."""
    pos = 0
    while True:
        term = _FIELD_TERM.match(text, pos)
        assert term is not None  # the pattern matches the empty string
        yield term.group()
        pos = term.end() + 1
        if pos > len(text):
            return


def field_selector(text: str, kind) -> slices.Work[FieldSelector]:
    """
    Parse ``fieldSelector`` for ``kind`` (a ``ResourceType``; work for ``slices.run``);
    fields outside its ``field_labels`` are a 400, as upstream.
    """
    custom = kind.field_labels
    allowed = DEFAULT_FIELD_LABELS if custom is None else custom
    values: dict = {}  # field -> (values to equal, values not to)
    for count, term in enumerate(_field_terms(text), 1):
        if not count % slices.STEP:
            yield
        term = term.strip()
        if not term:
            continue
        # The first operator in the term splits it, as upstream's splitTerm.
        op = _FIELD_OPERATOR.search(term)
        if op is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field = term[:op.start()].strip()
        if field not in allowed:
            raise errors.bad_request(_unknown_field_label(field, custom is not None))
        value = term[op.end():].strip()
        value = value.replace("\\,", ",").replace("\\=", "=").replace("\\\\", "\\")
        equal, not_equal = values.setdefault(field, (set(), set()))
        (not_equal if op.group() == "!=" else equal).add(value)
    return FieldSelector({
        field: FieldTerms(_path_getter(kind.field_paths.get(field, field),
                                       getattr(kind, "field_zeros", {}).get(field, "")),
                          frozenset(equal), frozenset(not_equal))
        for field, (equal, not_equal) in values.items()})
