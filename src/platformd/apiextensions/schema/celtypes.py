"""
The CEL types of ``self`` and ``oldSelf`` from a schema (upstream's ``model.SchemaDeclType``
and ``apiserver/pkg/cel`` DeclTypes), declared as protobuf messages so that the checker
knows every field: ``self.nope`` is ``undefined field 'nope'`` and ``self.replicas ==
'x'`` a type error when the CRD is written, as upstream.

Each object with properties is a proto2 message (``has()`` is true for a set field),
its fields the escaped property names (``foo-bar`` → ``foo__dash__bar``, ``if`` →
``__if__``, and a CEL keyword by its own name too: ``self.if``; names that cannot be
escaped are left out, as upstream); strings are
``string`` (``date-time`` and ``date`` a ``google.protobuf.Timestamp``, ``duration`` a
``google.protobuf.Duration``, ``byte`` ``bytes``), integers ``int64``, numbers
``double``, booleans ``bool``; lists ``repeated`` and maps ``map<string, V>`` (a list or
map of lists or maps has ``dyn`` elements: protobuf cannot nest them); int-or-string and
objects without properties (``x-kubernetes-preserve-unknown-fields``) are ``dyn``.  The
resource root and every embedded resource have ``apiVersion``, ``kind`` and
``metadata`` with ``name`` and ``generateName``, whatever the schema says, and only
those of metadata.

Rules are type-checked against these messages, then evaluated with ``self`` and
``oldSelf`` as ``dyn`` over the object's values (``cel_value``: escaped keys,
timestamps, durations, bytes and doubles as the types say), so that a field missing
from the object is ``no such key`` as upstream, not a message's default.
"""

from __future__ import annotations

import base64
import datetime
import re
from typing import Optional

from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

from platformd import cel
from platformd.apiextensions.schema.node import Node
from platformd.goformat.durations import go_parse_duration

_F = descriptor_pb2.FieldDescriptorProto
RESERVED = frozenset(("true", "false", "null", "in", "as", "break", "const", "continue",
                       "else", "for", "function", "if", "import", "let", "loop", "package",
                       "namespace", "return", "var", "void", "while"))
_ESCAPES = {"_": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
PACKAGE = "platformd.crd"


def escape(name: str) -> Optional[str]:
    """Upstream's ``cel.Escape``: the CEL name of property ``name``, None if it has none."""
    if not name or name[0].isdigit():
        return None
    if name in RESERVED:
        return f"__{name}__"
    out = []
    for char in name:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isascii() and (char.isalnum()):
            out.append(char)
        else:
            return None
    return "".join(out)


def _needs_escape(name: str) -> bool:
    return escape(name) != name


_META = Node({"type": "object", "properties": {"name": {"type": "string"},
                                               "generateName": {"type": "string"}}})
_STRING = Node({"type": "string"})


def resource_properties(node: Node) -> dict:
    props = dict(node.properties)
    props.setdefault("apiVersion", _STRING)
    props.setdefault("kind", _STRING)
    props["metadata"] = _META
    return props


class Declarations:
    """The message types of one rule scope; ``self_type`` is ``self``'s CEL type."""

    def __init__(self, node: Node, resource_root: bool):
        self.file = descriptor_pb2.FileDescriptorProto(name="platformd_crd.proto",
                                                       package=PACKAGE, syntax="proto2")
        for dependency in ("google/protobuf/struct.proto", "google/protobuf/timestamp.proto",
                           "google/protobuf/duration.proto"):
            self.file.dependency.append(dependency)
        self._count = 0
        self.self_type = self._cel_type(node, resource_root)

    def environment(self) -> cel.Environment:
        """An environment declaring ``self`` and ``oldSelf`` of these types.  The
        checker finds the messages in the environment's pool when it compiles, so they
        (and the well-known types they use) are added after it is made."""
        env = cel.Environment({"self": self.self_type, "oldSelf": self.self_type})
        for module in (timestamp_pb2, duration_pb2):
            env.pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
        env.pool.Add(self.file)
        return env

    # -- types

    def _cel_type(self, node: Node, resource_root: bool = False):
        if node.int_or_string or not has_type(node):
            return cel.DYN
        kind = node.type
        if kind == "array":
            assert node.items is not None
            return cel.list_of(self._element_type(node.items))
        if kind == "object":
            if node.additional is not None:
                return cel.map_of(cel.STRING, self._element_type(node.additional))
            return cel.message_type(self._message(node, resource_root or node.embedded))
        return _SCALARS.get((kind, node.format), _SCALARS.get((kind, ""), cel.DYN))

    def _element_type(self, node: Node):
        if node.type == "array" or node.type == "object" and node.additional is not None:
            return cel.DYN  # protobuf cannot nest lists and maps
        return self._cel_type(node)

    def _message(self, node: Node, resource: bool) -> str:
        """The message of an object's fields; its full name.  The messages its fields
        use are added first: a reference into a repeated field of the file is not kept
        across additions to it."""
        self._count += 1
        name = f"M{self._count}"
        props = resource_properties(node) if resource else node.properties
        fields = []
        for prop_name, prop in props.items():
            field_name = escape(prop_name)
            if field_name is None or not has_type(prop):
                continue  # upstream leaves such fields out of the type
            spec = self._field(prop)
            # a CEL keyword is also a field by its own name (self.if), as upstream since
            # 1.32 (recognizeKeywordAsFieldName)
            for each in (field_name, prop_name) if prop_name in RESERVED else (field_name,):
                fields.append((each, spec))
        message = self.file.message_type.add(name=name)
        entries: set = set()
        for number, (field_name, (label, kind, type_name, entry)) in enumerate(fields, 1):
            entry_name = _map_entry_name(field_name) if entry is not None else ""
            if entry_name in entries:
                # a map whose entry message would have another map's name ("__in__" and
                # its keyword alias "in", "a_b" and "aB"): protobuf allows only protoc's
                # name, so this one is a Struct, its values dyn to the checker
                label, kind, type_name, entry = \
                    _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, ".google.protobuf.Struct", None
            if entry is not None:
                value_kind, value_type = entry
                entries.add(entry_name)
                nested = message.nested_type.add(name=entry_name)
                nested.options.map_entry = True
                nested.field.add(name="key", number=1, type=_F.TYPE_STRING,
                                 label=_F.LABEL_OPTIONAL)
                value = nested.field.add(name="value", number=2, type=value_kind,
                                         label=_F.LABEL_OPTIONAL)
                if value_type:
                    value.type_name = value_type
                type_name = f".{PACKAGE}.{name}.{nested.name}"
            field = message.field.add(name=field_name, number=number, json_name=field_name,
                                      label=label, type=kind)
            if type_name:
                field.type_name = type_name
        return f"{PACKAGE}.{name}"

    def _field(self, prop: Node) -> tuple:
        """(label, type, type name, map entry's (value type, value type name) or None)."""
        kind = prop.type
        if prop.int_or_string:
            return _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, ".google.protobuf.Value", None
        if kind == "array":
            items = prop.items
            assert items is not None
            if items.int_or_string or items.type == "array":
                element = (_F.TYPE_MESSAGE, ".google.protobuf.Value")
            elif items.type == "object" and items.additional is not None:
                element = (_F.TYPE_MESSAGE, ".google.protobuf.Struct")
            else:
                element = self._scalar_or_message(items)
            return (_F.LABEL_REPEATED, *element, None)
        if kind == "object" and prop.additional is not None:
            values = prop.additional
            if values.int_or_string or values.type == "array" or \
                    values.type == "object" and values.additional is not None:
                entry = (_F.TYPE_MESSAGE, ".google.protobuf.Value")
            else:
                entry = self._scalar_or_message(values)
            return _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "", entry
        return (_F.LABEL_OPTIONAL, *self._scalar_or_message(prop), None)

    def _scalar_or_message(self, node: Node) -> tuple:
        """(type, type name) of a scalar or an object."""
        if node.type == "object":
            return _F.TYPE_MESSAGE, "." + self._message(node, node.embedded)
        kind = _PROTO_SCALARS.get((node.type, node.format)) or \
            _PROTO_SCALARS.get((node.type, ""))
        if kind is None:
            return _F.TYPE_MESSAGE, ".google.protobuf.Value"
        if isinstance(kind, str):
            return _F.TYPE_MESSAGE, kind
        return kind, ""


def _map_entry_name(field: str) -> str:
    """protoc's name for a map field's entry message: the field in CamelCase + Entry."""
    out, upper = [], True
    for char in field:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out) + "Entry"


def has_type(node: Node) -> bool:
    """Whether upstream's ``SchemaDeclType`` gives ``node`` a type (fields without one are
    not in the object's type: a rule cannot name them)."""
    if node.int_or_string:
        return True
    if node.type == "array":
        return node.items is not None and has_type(node.items)
    if node.type == "object":
        return node.additional is None or has_type(node.additional)
    return node.type in ("string", "boolean", "number", "integer")


_SCALARS = {("string", ""): cel.STRING, ("integer", ""): cel.INT,
            ("number", ""): cel.message_type("double"), ("boolean", ""): cel.BOOL,
            ("string", "date-time"): cel.message_type("timestamp"),
            ("string", "date"): cel.message_type("timestamp"),
            ("string", "duration"): cel.message_type("duration"),
            ("string", "byte"): cel.message_type("bytes")}
_PROTO_SCALARS: dict = {("string", ""): _F.TYPE_STRING, ("integer", ""): _F.TYPE_INT64,
                        ("number", ""): _F.TYPE_DOUBLE, ("boolean", ""): _F.TYPE_BOOL,
                        ("string", "date-time"): ".google.protobuf.Timestamp",
                        ("string", "date"): ".google.protobuf.Timestamp",
                        ("string", "duration"): ".google.protobuf.Duration",
                        ("string", "byte"): _F.TYPE_BYTES}


# -- values ----------------------------------------------------------------------------

def _converts(node: Optional[Node]) -> bool:
    """Whether values of ``node`` need converting (escaped names, formats, doubles);
    kept on the node."""
    if node is None:
        return False
    if node.cel_converts is None:
        node.cel_converts = node.type == "number" or node.type == "string" and \
            node.format in ("date-time", "date", "duration", "byte") or any(
            _needs_escape(k) for k in node.properties) or any(
            _converts(p) for p in node.properties.values()) or _converts(node.items) or \
            _converts(node.additional)
    return node.cel_converts


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def cel_names(node: Node) -> dict:
    """The CEL name (``escape``) of each of ``node``'s properties, kept on the node."""
    if node.cel_names is None:
        node.cel_names = {key: escape(key) for key in node.properties}
    return node.cel_names


def cel_value(node: Optional[Node], value):
    """``value`` as the CEL evaluation of a rule over ``node`` sees it."""
    if value is None or node is None or not _converts(node):
        return value
    if isinstance(value, dict):
        out = {}
        names = cel_names(node)
        for key, item in value.items():
            prop = node.properties.get(key)
            if prop is not None:
                name = names[key]
                if name is None:
                    continue
                out[name] = cel_value(prop, item)
                if key in RESERVED:
                    out[key] = out[name]
            else:
                out[key] = cel_value(node.additional, item)
        return out
    if isinstance(value, list):
        return [cel_value(node.items, item) for item in value]
    if node.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if node.type == "string" and isinstance(value, str):
        if node.format == "date-time":
            return _timestamp(value)
        if node.format == "date":
            return _timestamp(value + "T00:00:00Z") if re.fullmatch(
                r"\d{4}-\d{2}-\d{2}", value) else value
        if node.format == "duration":
            return _duration(value)
        if node.format == "byte":
            try:
                return base64.b64decode(value)
            except ValueError:
                return value
    return value


def _timestamp(text: str):
    match = _RFC3339.match(text)
    if not match:
        return text
    date, clock, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        parsed = datetime.datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return text
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None))
    if fraction:
        out.nanos = int((fraction[1:] + "000000000")[:9])
    return out


def _duration(text: str):
    try:
        seconds = go_parse_duration(text)
    except ValueError:
        return text
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out
