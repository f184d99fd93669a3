"""
Plain values (the dicts every handler works with, in upstream's JSON shape) to and from
Protobuf messages of ``proto/`` — shared by the node-local pods socket and the HTTP
Protobuf codec.

Upstream's .proto field names are the JSON names, so most fields map one to one.  A few
types are encoded differently in the two forms and are handled by message type:

* ``meta.v1.Time``: an RFC 3339 string in JSON, ``{seconds, nanos}`` in Protobuf.  Like
  upstream, JSON has second precision: nanos are dropped on the way back.
* ``resource.Quantity``: its canonical string in JSON, ``{string}`` in Protobuf.
* ``meta.v1.FieldsV1``: a JSON object in JSON, that object's JSON bytes in ``Raw``.
* ``meta.v1.Verbs`` (``APIResource.verbs``) and the reviews' ``ExtraValue``: a list in
  JSON, ``{items}`` in Protobuf.
* ``intstr.IntOrString`` (``ServicePort.targetPort``): a number or a string in JSON,
  ``{type, intVal, strVal}`` in Protobuf.
* ``bytes`` fields (``Secret.data``, ``ConfigMap.binaryData``): base64 text in JSON, the
  bytes themselves in Protobuf.
* Go embedded structs (``INLINE``: ``RuleWithOperations.rule``,
  ``NamedRuleWithOperations.ruleWithOperations``): a nested message in Protobuf, its
  fields inline in the parent's JSON object.
* ``double`` fields (``JSONSchemaProps.maximum``): a whole number below 1e21 is shown as
  an integer, as Go's JSON writes a float64 (``5``, not ``5.0``).
* The CustomResourceDefinition's schema messages (``jsonforms``): ``JSON`` (any JSON
  value: ``default``, ``enum``, ``example``) and ``RawExtension`` as raw JSON bytes, the
  ``JSONSchemaPropsOr*`` unions as a boolean, a list or a schema; and the fields whose
  JSON name differs from their Protobuf name (``jsonforms.JSON_NAMES``: ``$ref``,
  ``x-kubernetes-validations``, ...).

Fields the message does not define are dropped, as upstream drops unknown fields when it
decodes into a typed struct: the messages model what the schemas model, and free-form
parts of the schema (``ContainerState``) keep only upstream's fields.  ``None`` values
mean "absent".

Two modes:

* presence (the default; the node-local pods service): proto2 presence keeps an explicit
  ``""``, ``0`` or ``false`` distinct from an absent field both ways, and a message holds
  exactly the fields the dict has.
* ``upstream=True`` (the HTTP Protobuf codec): the bytes upstream's Go marshallers write
  for the same object.  ``to_message`` also sets every field ``gopresence.ALWAYS`` lists
  that the dict lacks, to its zero value (a message field: present, with its own
  always-written fields; a ``Time``: present and empty), and writes times as upstream's
  ``Timestamp`` (nanos always written, always 0).  ``from_message`` returns what
  upstream's JSON encoding of the decoded Go struct shows: an always-written field whose
  JSON omits its zero value (``?`` in the table) is left out when zero, one JSON always
  shows is present even when the bytes lack it (zero, or ``{}`` for a struct), a zero
  ``Time`` (``null`` upstream) is left out.  So ``from_message(to_message(x))`` is ``x``
  in upstream's JSON canonical form, and re-encoding a decoded upstream message gives
  the same bytes.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timezone
from typing import Any

import orjson
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.timestamp_pb2 import Timestamp

from platformd.codecs import gopresence
from platformd.codecs.jsonforms import FORMS, JSON_NAMES
from platformd.goformat import gonumbers

TIME = "platform.apimachinery.pkg.apis.meta.v1.Time"
#: ``meta.v1.MicroTime``: RFC 3339 with six fractional digits in JSON, ``{seconds,
#: nanos}`` (whole microseconds) in Protobuf, both always written for a non-zero time.
MICRO_TIME = "platform.apimachinery.pkg.apis.meta.v1.MicroTime"
QUANTITY = "platform.apimachinery.pkg.api.resource.Quantity"
VERBS = "platform.apimachinery.pkg.apis.meta.v1.Verbs"
#: ``[]string`` types whose message holds ``items``: a JSON list (``Verbs``, and the
#: access reviews' ``ExtraValue``).
STRING_LISTS = frozenset({VERBS, "platform.api.authorization.v1.ExtraValue",
                          "platform.api.authentication.v1.ExtraValue"})
FIELDS_V1 = "platform.apimachinery.pkg.apis.meta.v1.FieldsV1"
#: ``intstr.IntOrString``: a JSON number or string, ``{type, intVal, strVal}`` in
#: Protobuf, all three always written (upstream's marshaller).
INT_OR_STRING = "platform.apimachinery.pkg.util.intstr.IntOrString"
#: Go embedded structs (``json:",inline"``): message fields whose fields are the parent's
#: in JSON, by "<message full name>.<field>".
INLINE = frozenset({
    "platform.api.admissionregistration.v1.RuleWithOperations.rule",
    "platform.api.admissionregistration.v1.NamedRuleWithOperations.ruleWithOperations",
})
#: ``time.Time{}`` (0001-01-01T00:00:00Z) in Unix seconds: upstream's zero time.
ZERO_TIME_SECONDS = -62135596800


class ConversionError(ValueError):
    """A value that cannot be a field of the message (a malformed time, say)."""


# Per field: how a value travels.  Computed once per message type.
(_SCALAR, _REPEATED_SCALAR, _MESSAGE, _REPEATED_MESSAGE, _MAP_SCALAR, _MAP_MESSAGE,
 _BYTES, _MAP_BYTES, _INLINE, _DOUBLE) = range(10)
_plans: dict = {}
_ZERO = {FieldDescriptor.CPPTYPE_STRING: "", FieldDescriptor.CPPTYPE_BOOL: False}
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)


class _Plan:
    """
    How each field of one message type travels: ``by_json`` (JSON name → (how, field
    name)) for filling a message from a dict, ``by_field`` (field name → (how, JSON
    name)) for the way back, ``inlines`` (the ``_INLINE`` fields' names).
    """

    __slots__ = ("by_json", "by_field", "inlines")

    def __init__(self, descriptor):
        names = JSON_NAMES.get(descriptor.full_name, {})
        self.by_json, self.by_field = {}, {}
        for field in descriptor.fields:
            how = _how(field)
            key = names.get(field.name, field.name)
            # A double is set as any scalar; only its way back differs.
            self.by_json[key] = (_SCALAR if how == _DOUBLE else how, field.name)
            self.by_field[field.name] = (how, key)
        self.inlines = tuple(n for n, (how, _) in self.by_field.items() if how == _INLINE)


def _how(field) -> int:
    repeated = field.is_repeated
    if field.type == FieldDescriptor.TYPE_BYTES and not repeated:
        return _BYTES
    if field.type in _FLOATS and not repeated:
        return _DOUBLE
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return _REPEATED_SCALAR if repeated else _SCALAR
    if field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {FieldDescriptor.TYPE_MESSAGE: _MAP_MESSAGE,
                FieldDescriptor.TYPE_BYTES: _MAP_BYTES}.get(value.type, _MAP_SCALAR)
    if field.full_name in INLINE:
        return _INLINE
    return _REPEATED_MESSAGE if repeated else _MESSAGE


def _plan(descriptor) -> _Plan:
    plan = _plans.get(descriptor.full_name)
    if plan is None:
        plan = _plans[descriptor.full_name] = _Plan(descriptor)
    return plan


class _GoPlan:
    """
    What upstream mode needs of one message type, from ``gopresence``: ``template``, a
    message of the type holding exactly its always-written fields at their zero values,
    recursively (merged into a message before its dict is applied; None when it has
    none); ``filled``, its always-written message fields (the template already filled
    them); ``omit_zero``, the always-written fields JSON leaves out when zero; ``show``,
    those JSON shows even when zero, as (JSON name, field name, zero; None for a
    message: its own plain form).
    """

    __slots__ = ("template", "filled", "omit_zero", "show")
    template: Any  # a message of the type, or None

    def __init__(self, message_class):
        descriptor = message_class.DESCRIPTOR
        template = message_class()
        filled, omit, show = set(), set(), []
        by_field = _plan(descriptor).by_field
        for name, omitted in gopresence.fields(descriptor.full_name):
            field = descriptor.fields_by_name[name]
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                sub = getattr(template, name)
                sub.SetInParent()
                if field.message_type.full_name not in (TIME, MICRO_TIME):
                    sub_template = _go_plan(type(sub)).template
                    if sub_template is not None:
                        sub.MergeFrom(sub_template)
                filled.add(name)
                zero = None
            else:
                zero = _ZERO.get(field.cpp_type, 0)
                setattr(template, name, zero)
            if omitted:
                omit.add(name)
            elif field.full_name not in INLINE:
                show.append((by_field[name][1], name, zero))
        self.template = template if template.ListFields() else None
        self.filled, self.omit_zero, self.show = frozenset(filled), frozenset(omit), tuple(show)


_go_plans: dict = {}


def _go_plan(message_class) -> _GoPlan:
    plan = _go_plans.get(message_class)
    if plan is None:
        plan = _go_plans[message_class] = _GoPlan(message_class)
    return plan


def to_message(obj: dict, message_class, upstream: bool = False):
    """A new ``message_class`` holding ``obj`` (see the module docstring)."""
    message = message_class()
    if upstream:
        _fill_go(message, obj)
    else:
        _fill(message, obj)
    return message


def from_message(message, upstream: bool = False) -> dict:
    """
    The plain value of ``message``: only the fields it has set, or (``upstream``) what
    upstream's JSON shows of it.
    """
    return _plain_go(message) if upstream else _plain(message)


def _fill(message, value) -> None:
    """Set ``message`` from the plain ``value`` of its type."""
    special = _FILL.get(message.DESCRIPTOR.full_name)
    if special is not None:
        special(message, value, _fill)
        return
    message.SetInParent()
    _set_fields(message, value, _fill)


def _fill_go(message, value, filled: bool = False) -> None:
    """
    ``_fill`` for upstream's bytes: always-written fields first (unless ``filled``: an
    always-written field of a parent, whose template held them), then the dict.
    """
    special = _FILL_GO.get(message.DESCRIPTOR.full_name)
    if special is not None:
        special(message, value, _fill_go)
        return
    go = _go_plan(type(message))
    if not filled:
        if go.template is None:
            message.SetInParent()
        else:
            message.MergeFrom(go.template)
    _set_fields(message, value, _fill_go, go.filled, _fill_go_filled)


def _fill_go_filled(message, value) -> None:
    _fill_go(message, value, filled=True)


def _fill_string_list(message, value, fill) -> None:
    message.SetInParent()
    message.items.extend(value)


def _fill_int_or_string(message, value, fill) -> None:
    text = isinstance(value, str)
    message.type = 1 if text else 0
    message.intVal = 0 if text else value
    message.strVal = value if text else ""


def _fill_quantity(message, value, fill) -> None:
    message.string = value


def _fill_fields_v1(message, value, fill) -> None:
    message.Raw = orjson.dumps(value)


def _set_fields(message, value, fill, filled=frozenset(), fill_filled=None) -> None:
    """
    Set ``message``'s fields from the dict ``value``, message-typed ones through
    ``fill`` (``fill_filled`` for the singular ones named in ``filled``).
    """
    plan = _plan(message.DESCRIPTOR)
    for name in plan.inlines:
        # An embedded struct takes its fields from the parent's own dict.
        (fill_filled if name in filled else fill)(getattr(message, name), value)
    by_json = plan.by_json
    for key, item in value.items():
        entry = by_json.get(key)
        if entry is None or item is None:
            continue
        how, name = entry
        if how == _INLINE:
            continue
        if how == _SCALAR:
            setattr(message, name, item)
        elif how == _MESSAGE:
            (fill_filled if name in filled else fill)(getattr(message, name), item)
        elif how == _REPEATED_SCALAR:
            getattr(message, name).extend(item)
        elif how == _REPEATED_MESSAGE:
            field = getattr(message, name)
            for element in item:
                fill(field.add(), element)
        elif how == _MAP_SCALAR:
            getattr(message, name).update(item)
        elif how == _BYTES:
            setattr(message, name, _unbase64(item))
        elif how == _MAP_BYTES:
            getattr(message, name).update({k: _unbase64(v) for k, v in item.items()})
        else:
            field = getattr(message, name)
            for key, element in item.items():
                fill(field[key], element)


def _unbase64(text) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError, ValueError) as e:
        raise ConversionError(f"{text!r} is not base64: {e}") from None


def _parse_time(text) -> Timestamp:
    stamp = Timestamp()
    try:
        stamp.FromJsonString(text)
    except (ValueError, TypeError, AttributeError) as e:
        raise ConversionError(f"{text!r} is not an RFC 3339 time: {e}") from None
    return stamp


def _set_time(message, text) -> None:
    stamp = _parse_time(text)
    message.seconds = stamp.seconds
    if stamp.nanos:
        message.nanos = stamp.nanos


def _set_go_time(message, text) -> None:
    """Upstream's ``Time``: nothing for the zero time, else seconds and nanos = 0."""
    stamp = _parse_time(text)
    if stamp.seconds == ZERO_TIME_SECONDS and not stamp.nanos:
        message.SetInParent()
        return
    message.seconds = stamp.seconds
    message.nanos = 0


def _set_micro_time(message, text) -> None:
    """Upstream's ``MicroTime``: nothing for the zero time, else seconds and the nanos of
    whole microseconds, both written."""
    stamp = _parse_time(text)
    if stamp.seconds == ZERO_TIME_SECONDS and not stamp.nanos:
        message.SetInParent()
        return
    message.seconds = stamp.seconds
    message.nanos = stamp.nanos // 1000 * 1000


#: How each type with its own JSON form is set from its plain value, by message full
#: name (the times apart: they differ between the two modes); ``fill`` is the mode's, for
#: the messages a ``jsonforms`` form holds.
_FILL_CUSTOM = {
    QUANTITY: _fill_quantity,
    FIELDS_V1: _fill_fields_v1,
    INT_OR_STRING: _fill_int_or_string,
    **{name: _fill_string_list for name in STRING_LISTS},
    **{name: form.fill for name, form in FORMS.items()},
}
_FILL = {TIME: lambda message, value, fill: _set_time(message, value),
         MICRO_TIME: lambda message, value, fill: _set_micro_time(message, value),
         **_FILL_CUSTOM}
_FILL_GO = {TIME: lambda message, value, fill: _set_go_time(message, value),
            MICRO_TIME: lambda message, value, fill: _set_micro_time(message, value),
            **_FILL_CUSTOM}


def _format_micro_time(message) -> str:
    return (datetime.fromtimestamp(message.seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            + f".{message.nanos // 1000:06d}Z")


def _format_time(seconds) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(message):
    special = _PLAIN.get(message.DESCRIPTOR.full_name)
    if special is not None:
        return special(message, _plain)
    return _plain_fields(message, _plan(message.DESCRIPTOR), _plain)


def _plain_go(message):
    """
    What upstream's JSON shows of ``message`` (None: ``null``, a zero ``Time`` or an
    empty ``jsonforms`` value).
    """
    descriptor = message.DESCRIPTOR
    special = _PLAIN_GO.get(descriptor.full_name)
    if special is not None:
        return special(message, _plain_go)
    go = _go_plan(type(message))
    plan = _plan(descriptor)
    value = _plain_fields(message, plan, _plain_go, go.omit_zero)
    for name in plan.inlines:
        if not message.HasField(name):  # not on the wire: its JSON zero form
            value.update(_plain_go(getattr(message, name)))
    for key, name, zero in go.show:
        if key not in value:
            value[key] = zero if zero is not None else _plain_go(getattr(message, name))
    return value


def _plain_go_time(message, plain):
    if not message.ListFields() or message.seconds == ZERO_TIME_SECONDS:
        return None
    return _format_time(message.seconds)


def _plain_go_micro_time(message, plain):
    if not message.ListFields() or message.seconds == ZERO_TIME_SECONDS:
        return None
    return _format_micro_time(message)


#: The plain value of each type with its own JSON form, by message full name (the
#: times apart: they differ between the two modes).
_PLAIN_CUSTOM = {
    QUANTITY: lambda message, plain: message.string,
    FIELDS_V1: lambda message, plain: orjson.loads(message.Raw) if message.Raw else {},
    INT_OR_STRING: lambda message, plain: (message.strVal if message.type == 1
                                           else message.intVal),
    **{name: (lambda message, plain: list(message.items)) for name in STRING_LISTS},
    **{name: form.plain for name, form in FORMS.items()},
}
_PLAIN = {TIME: lambda message, plain: _format_time(message.seconds),
          MICRO_TIME: lambda message, plain: _format_micro_time(message), **_PLAIN_CUSTOM}
_PLAIN_GO = {TIME: _plain_go_time, MICRO_TIME: _plain_go_micro_time, **_PLAIN_CUSTOM}


def _plain_fields(message, plan: _Plan, plain, omit_zero=frozenset()) -> dict:
    """
    The dict of ``message``'s set fields (``plan`` its type's), message-typed ones
    through ``plain`` (left out when it gives None); zero scalars named in ``omit_zero``
    left out.  Keys are the fields' JSON names.
    """
    by_field = plan.by_field
    value = {}
    for field, item in message.ListFields():
        how, name = by_field[field.name]
        if how == _SCALAR:
            if item or field.name not in omit_zero:
                value[name] = item
        elif how == _MESSAGE:
            item = plain(item)
            if item is not None:
                value[name] = item
        elif how == _INLINE:
            value.update(plain(item))
        elif how == _REPEATED_SCALAR:
            value[name] = list(item)
        elif how == _REPEATED_MESSAGE:
            value[name] = [plain(element) for element in item]
        elif how == _MAP_SCALAR:
            value[name] = dict(item)
        elif how == _BYTES:
            value[name] = base64.b64encode(item).decode("ascii")
        elif how == _MAP_BYTES:
            value[name] = {k: base64.b64encode(v).decode("ascii") for k, v in item.items()}
        elif how == _DOUBLE:
            if item or field.name not in omit_zero:
                value[name] = gonumbers.go_float(item)
        else:
            value[name] = {key: plain(element) for key, element in item.items()}
    return value
