"""
A small schema language for the built-in kinds.

One schema per kind is the single source for everything that depends on the shape of an
object: decoding with type checks (a wrong type is a 400 naming the field), detection and
pruning of unknown fields (field validation), required fields, OpenAPI documents, and
later the strategic-merge keys, list types for server-side apply, and Protobuf field
numbers.  Keeping these in one place means a field is described once and every consumer
agrees on it.

Decoding walks a value parsed from JSON/YAML/CBOR (dicts, lists, scalars) and returns a
pruned copy that holds only known fields.  Paths are written the way upstream reports
them: ``spec.containers[0].image``.
"""

from __future__ import annotations

import datetime
import re
from itertools import repeat
from typing import Optional, Union

import attrs

from platformd.goformat import gonumbers, gotext
class DecodeError(Exception):
    """
    A value of the wrong type at ``path`` (upstream answers such bodies with 400).  A
    number that misses a numeric field (``numeric``: out of its range, or a fraction in
    an integer) is named with its text, as Go's decoder names it (``UnmarshalTypeError``
    of ``"number " + s``: ``json: cannot unmarshal number 1e400 into …``).
    """

    def __init__(self, path: str, expected: str, value, numeric: bool = False):
        self.path = path
        self.expected = expected
        self.got = _json_type(value, numeric)
        super().__init__(
            f"json: cannot unmarshal {self.got} into field {path or '(root)'} "
            f"of type {expected}"
        )


def _json_type(value, numeric: bool) -> str:
    if value is None:
        return "null"
    kind = gotext.json_kind(value, type(value).__name__)
    if not numeric or kind != "number":
        return kind
    return f"number {gotext.json_number(value)}"


#: The values an integer field of each format holds (Go's ``OverflowInt``).
_INTEGER_RANGES = {"int64": gonumbers.INT64, "int32": range(-(1 << 31), 1 << 31)}


def _free_form(value, path: str):
    """
    A value kept whole where the schema does not describe it (``preserve_unknown``), as
    Go's decoder fills an ``interface{}``: a number past int64 becomes a float64 where it
    fits one (``convertNumber``), else it is refused.
    """
    if isinstance(value, gonumbers.BigNumber):
        as_float = value.as_float()
        if as_float is None:
            raise DecodeError(path, "float64", value, numeric=True)
        return as_float
    if isinstance(value, dict):
        return {k: _free_form(v, join(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_free_form(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def join(path: str, name: str) -> str:
    """The path of field ``name`` below ``path``."""
    return f"{path}.{name}" if path else name


#: sigs.k8s.io/json's ``saveStrictError`` keeps at most this many strict errors.
MAX_PROBLEMS = 100


UNKNOWN, DUPLICATE = "unknown field", "duplicate field"


class DecodeContext:
    """
    What one decode collects besides the result: its strict problems, the unknown
    fields it pruned (``UNKNOWN``, path) and the keys the parser saw twice
    (``DUPLICATE``, path), ordered as sigs.k8s.io/json meets them: a repeated key just
    before its (last) value, a repeated unknown field once, as unknown; each problem
    once, at most ``MAX_PROBLEMS`` (its ``saveStrictError``).
    """

    __slots__ = ("problems",)

    def __init__(self):
        self.problems: dict = {}

    def unknown(self, path: str) -> None:
        self._add((UNKNOWN, path))

    def duplicate(self, path: str) -> None:
        self._add((DUPLICATE, path))

    def _add(self, problem: tuple) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.setdefault(problem)

    def texts(self) -> list:
        """The problems as sigs.k8s.io/json words them (the path ``strconv.Quote``d)."""
        return [f"{kind} {gotext.go_quote(path)}" for kind, path in self.problems]


class LaxContext(DecodeContext):
    """
    A decode that reports nothing strict: below a Go type with its own ``UnmarshalJSON``,
    which decodes its value with the plain (non-strict) ``json.Unmarshal``, sigs.k8s.io/json
    sees no unknown or repeated field (``UnmarshalStrict`` delegates to the type: its
    serializer says so of ``Unstructured``).  Unknown fields are still pruned.
    """

    __slots__ = ()

    def _add(self, problem: tuple) -> None:
        pass


@attrs.frozen
class Scalar:
    """A JSON scalar: ``string``, ``integer``, ``number`` or ``boolean``."""

    type: str
    format: Optional[str] = None
    enum: tuple = ()
    #: ``metav1.MicroTime``: decoded as its ``UnmarshalJSON`` parses (exactly six
    #: fractional digits) and kept in the UTC form its ``MarshalJSON`` writes.
    micro: bool = False

    def decode(self, value, path, ctx):
        # null is the zero value for every field, as in Go's JSON decoding.
        if value is None:
            return None
        if self.format == "date-time" and isinstance(value, str):
            return micro_time(value, path) if self.micro else go_time(value, path)
        if self.type == "string":
            ok = isinstance(value, str)
        elif self.type == "boolean":
            ok = isinstance(value, bool)
        elif self.type == "integer":
            return self._integer(value, path)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise DecodeError(path, self.type, value)
        return value

    def _integer(self, value, path: str) -> int:
        """An int within the format's range (a whole float too: YAML's ``1.0``, CBOR's
        floats); anything else is Go's ``UnmarshalTypeError`` for the Go type."""
        go_type = self.format or "int64"  # Go's int, 64 bits wide here
        allowed = _INTEGER_RANGES[go_type]
        whole = isinstance(value, int) and not isinstance(value, bool) or \
            isinstance(value, float) and value.is_integer()
        if whole and allowed.start <= value < allowed.stop:
            return int(value)
        raise DecodeError(path, go_type, value, numeric=True)

    def zero(self):
        """What Go's decoder leaves for a ``null`` element of a list or map."""
        return {"string": "", "boolean": False}.get(self.type, 0)

    def order(self, value) -> None:
        """Nothing to order in a scalar (see ``Struct.order``)."""

    def walk(self):
        return iter(())


@attrs.frozen
class IntOrString(Scalar):
    """
    Upstream's ``intstr.IntOrString``: a JSON number (an int32) or a string; OpenAPI
    says ``type: string, format: int-or-string``, as upstream's.
    """

    def decode(self, value, path, ctx):
        if value is None or isinstance(value, str):
            return value
        whole = isinstance(value, int) and not isinstance(value, bool) or \
            isinstance(value, float) and value.is_integer()
        if whole and -(1 << 31) <= value < (1 << 31):
            return int(value)
        raise DecodeError(path, "int32", value, numeric=True)


@attrs.frozen
class Double(Scalar):
    """
    A Go ``float64``: any JSON number, kept as Go's JSON writes it back (a whole number
    below 1e21 without a fraction: ``5.0`` becomes ``5``); a number past float64's
    range is Go's ``UnmarshalTypeError``.
    """

    def decode(self, value, path, ctx):
        if value is None:
            return None
        if isinstance(value, gonumbers.BigNumber):
            as_float = value.as_float()
            if as_float is None:
                raise DecodeError(path, "float64", value, numeric=True)
            return gonumbers.go_float(as_float)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(path, "float64", value)
        return gonumbers.go_float(float(value))


STRING = Scalar("string")
INT_OR_STRING = IntOrString("string", "int-or-string")
INT32 = Scalar("integer", "int32")
INT64 = Scalar("integer", "int64")
BOOLEAN = Scalar("boolean")
TIME = Scalar("string", "date-time")
MICRO_TIME = Scalar("string", "date-time", micro=True)
BYTES = Scalar("string", "byte")
DOUBLE = Double("number", "double")


class TimeParseError(DecodeError):
    """A time that Go's ``time.Parse`` refuses, worded as it words it."""

    def __init__(self, path: str, message: str):
        Exception.__init__(self, message)
        self.path = path
        self.expected = "time"
        self.got = "string"


#: ``metav1.RFC3339Micro``, the layout MicroTime is parsed and written with.
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_MICRO_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})(Z|[+-]\d{2}:\d{2})\Z")


def micro_time(text: str, path: str = "") -> str:
    """
    ``text`` as ``metav1.MicroTime`` reads and writes it: parsed with
    ``RFC3339Micro`` (exactly six fractional digits, ``Z`` or an offset), written back
    in UTC (``2006-01-02T15:04:05.000000Z``); anything else is Go's parse error.
    """
    match = _MICRO_RE.match(text)
    if match is None:
        raise TimeParseError(path, f"parsing time {gotext.go_quote(text)} as "
                                   f"{gotext.go_quote(RFC3339_MICRO)}: {_micro_problem(text)}")
    year, month, day, hour, minute, second, micros, zone = match.groups()
    try:
        stamp = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute),
                                  int(second), int(micros), tzinfo=datetime.timezone.utc)
    except ValueError as e:
        raise TimeParseError(path, f"parsing time {gotext.go_quote(text)}: {e}") from None
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        stamp -= sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: ``time.RFC3339``, the layout ``metav1.Time`` is parsed and written with.
RFC3339 = "2006-01-02T15:04:05Z07:00"
_TIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def go_time(text: str, path: str = "") -> str:
    """
    ``text`` as ``metav1.Time`` reads and writes it: parsed with ``RFC3339`` (fractional
    seconds allowed and dropped, ``Z`` or an offset), written back in UTC to the second
    (``2006-01-02T15:04:05Z``); anything else is Go's parse error.
    """
    match = _TIME_RE.match(text)
    if match is None:
        head = re.match(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", text)
        rest = text[head.end():] if head else text
        element = "Z07:00" if head else "2006"
        raise TimeParseError(path, f"parsing time {gotext.go_quote(text)} as "
                                   f"{gotext.go_quote(RFC3339)}: cannot parse "
                                   f"{gotext.go_quote(rest)} as {gotext.go_quote(element)}")
    year, month, day, hour, minute, second, zone = match.groups()
    try:
        stamp = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute),
                                  int(second), tzinfo=datetime.timezone.utc)
    except ValueError:
        raise TimeParseError(path, f"parsing time {gotext.go_quote(text)}: "
                                   "day, month or hour out of range") from None
    if zone == "Z" and len(text) == 20:
        return text  # already the canonical form
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        stamp -= sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_problem(text: str) -> str:
    """What Go's parser says of the first element of ``text`` that misses the layout."""
    quote = gotext.go_quote
    head = re.match(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", text)
    if head is None:
        return f"cannot parse {quote(text)} as {quote('2006')}"
    rest = text[head.end():]
    if not re.match(r"\.\d{6}", rest):
        return f"cannot parse {quote(rest)} as {quote('.000000')}"
    return f"cannot parse {quote(rest[7:])} as {quote('Z07:00')}"


@attrs.frozen
class MapOf:
    """A map with string keys, every value of one type (labels, ConfigMap data);
    ``atomic`` (``x-kubernetes-map-type: atomic``: a Service's selector) makes apply
    and field ownership treat it as one value."""

    values: Node
    atomic: bool = False

    def decode(self, value, path, ctx):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise DecodeError(path, "object", value)
        values = self.values
        repeated = getattr(value, "duplicates", ())
        out = {}
        for key, item in value.items():
            if key in repeated:
                ctx.duplicate(join(path, key))
            out[key] = values.zero() if item is None else values.decode(item, join(path, key),
                                                                         ctx)
        return out

    def zero(self):
        return None  # a nil map

    def order(self, value) -> None:
        """Keys sorted as Go's encoding/json sorts a map's (code point order is UTF-8's)."""
        if isinstance(value, dict):
            keys = list(value)
            if keys != sorted(keys):
                items = sorted(value.items())
                value.clear()
                value.update(items)
            values = self.values
            if not _orders_nothing(values):
                for item in value.values():
                    values.order(item)

    def walk(self):
        yield self.values


@attrs.frozen
class ListOf:
    """
    A list.  ``list_type`` follows ``x-kubernetes-list-type``: ``atomic`` lists are
    replaced whole on merge, ``map`` lists merge element-wise by ``map_keys``, ``set``
    lists hold unique scalars.  ``patch_strategy``/``merge_key`` are the strategic-merge
    hints.
    """

    items: Node
    list_type: str = "atomic"
    map_keys: tuple = ()
    patch_strategy: Optional[str] = None
    merge_key: Optional[str] = None

    def decode(self, value, path, ctx):
        if value is None:
            return None
        if not isinstance(value, list):
            raise DecodeError(path, "array", value)
        items = self.items
        return [items.zero() if v is None else items.decode(v, f"{path}[{i}]", ctx)
                for i, v in enumerate(value)]

    def zero(self):
        return None  # a nil slice

    def order(self, value) -> None:
        items = self.items
        if isinstance(value, list) and not _orders_nothing(items):
            for item in value:
                items.order(item)

    def walk(self):
        yield self.items


@attrs.frozen
class Prop:
    """One field of a Struct."""

    node: Node
    doc: str = ""
    required: bool = False
    #: A struct field's strategic-merge strategy (``x-kubernetes-patch-strategy``):
    #: ``"replace"`` replaces the object whole (a PodDisruptionBudget's selector).
    patch_strategy: Optional[str] = None
    #: Go's ``omitempty`` on a non-pointer scalar, slice or map: its zero value (``false``,
    #: ``0``, ``""``, an empty list or map) is dropped when decoded, as upstream's typed
    #: decoding leaves it and its JSON never writes it.  Never a struct's (Go writes a
    #: struct, empty or not).
    omit_empty: bool = False


@attrs.frozen
class Struct:
    """
    An object with named fields.  ``name`` is the OpenAPI definition name (for example
    ``io.platform.api.rbac.v1.RoleRef``); ``preserve_unknown`` keeps fields the schema does
    not name instead of pruning them; ``atomic`` (``x-kubernetes-map-type: atomic``) makes
    merges and field ownership treat the object as one value.
    """

    name: str
    props: dict
    doc: str = ""
    preserve_unknown: bool = False
    atomic: bool = False
    #: What ``order`` and ``decode`` read of the props (each field's rank, the fields
    #: whose values have an order of their own, the plain string fields), made at the
    #: first call: a recursive schema fills its props in after it is made, at import
    #: (``jsonschemaprops.py``).
    _plan: Optional[tuple] = attrs.field(default=None, init=False, eq=False, repr=False)

    def decode(self, value, path, ctx):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise DecodeError(path, "object", value)
        out = {}
        props = self.props
        strings = (self._plan or self._make_plan())[2]
        repeated = getattr(value, "duplicates", ())
        for key, item in value.items():
            prop = props.get(key)
            if prop is None:
                if self.preserve_unknown:
                    out[key] = _free_form(item, join(path, key))
                else:
                    ctx.unknown(join(path, key))
                continue
            if key in repeated:
                ctx.duplicate(join(path, key))
            if key in strings and type(item) is str:
                decoded = item  # what a plain string field's decode gives, without a call
            else:
                decoded = prop.node.decode(item, join(path, key), ctx)
            if decoded is not None and not (prop.omit_empty and not decoded
                                            and not isinstance(prop.node, Struct)):
                out[key] = decoded
        return out

    def zero(self):
        return {}  # a struct with every field at its zero value

    def order(self, value) -> None:
        """
        Put ``value``'s fields in declaration order, in place and all the way down.
        Declarations follow the Go struct's field order, which is the order upstream's
        encoding/json writes, so one ``orjson.dumps`` of an ordered object gives
        upstream's bytes.  Fields the schema does not name (``preserve_unknown``) follow,
        as they came.  In place, so references into the object stay valid.
        """
        if not isinstance(value, dict):
            return
        plan = self._plan
        if plan is None:
            plan = self._make_plan()
        rank, nested, _strings = plan
        # Each field's rank, the unnamed ones after every named one: a stable sort by
        # rank is the order; an object already in it (as most are) is left alone.
        ranks = list(map(rank.get, value, repeat(len(rank))))
        if ranks != sorted(ranks):
            items = sorted(value.items(), key=lambda item: rank.get(item[0], len(rank)))
            value.clear()
            value.update(items)
        for key, node in nested:
            item = value.get(key)
            if item is not None:
                node.order(item)

    def _make_plan(self) -> tuple:
        props = self.props
        plan = ({key: i for i, key in enumerate(props)},
                tuple((key, prop.node) for key, prop in props.items()
                      if not _orders_nothing(prop.node)),
                frozenset(key for key, prop in props.items() if _plain_string(prop.node)))
        object.__setattr__(self, "_plan", plan)
        return plan

    def required_names(self):
        return [name for name, prop in self.props.items() if prop.required]

    def walk(self):
        for prop in self.props.values():
            yield prop.node


@attrs.frozen
class Untyped(Struct):
    """
    A value of any JSON shape: a Go type with its own JSON form, whose OpenAPI
    definition names no type (``OpenAPISchemaType`` nil: apiextensions' ``JSON`` and
    ``JSONSchemaPropsOr*``).  Built as ``Untyped(name, {}, doc, preserve_unknown=True)``,
    so merges, field ownership and apply see what upstream's structured-merge-diff sees
    in an untyped value (its deduced type: maps field by field, lists whole, nothing
    undeclared).  It decodes as ``interface{}`` does; subclasses decode their own form.
    """

    def decode(self, value, path, ctx):
        return None if value is None else _free_form(value, path)

    def zero(self):
        return None  # what the wrapper's MarshalJSON writes for nothing: null

    def order(self, value) -> None:
        """Kept as written: Go keeps such a value's bytes (``JSON.Raw``)."""


#: A schema node: what a field, map value or list item is described by.
Node = Union[Scalar, MapOf, ListOf, Struct]


def _plain_string(node) -> bool:
    """Whether ``node.decode`` gives back any string as it is (a string scalar that is
    not a time): ``Struct.decode`` need not call it for one."""
    return type(node) is Scalar and node.type == "string" and node.format != "date-time"


def _orders_nothing(node) -> bool:
    """Whether ``node.order`` leaves every value as it is (a scalar's, an untyped
    value's, a list of those): ``order`` need not be called for it."""
    while type(node) is ListOf:
        node = node.items
    return type(node).order in (Scalar.order, Untyped.order)


def structs(root):
    """Every Struct reachable from ``root``, each once, in a stable order."""
    seen = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Struct):
            if node.name in seen:
                continue
            seen[node.name] = node
        stack.extend(reversed(list(node.walk())))
    return list(seen.values())
