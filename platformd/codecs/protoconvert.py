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
* ``bytes`` fields (``Secret.data``, ``ConfigMap.binaryData``): base64 text in JSON, the
  bytes themselves in Protobuf.

Fields the message does not define are dropped, as upstream drops unknown fields when it
decodes into a typed struct: the messages model what the schemas model, and free-form
parts of the schema (``ContainerState``) keep only upstream's fields.  ``None`` values
mean "absent".  Field presence (proto2 ``optional``) keeps an explicit ``""``, ``0`` or
``false`` distinct from an absent field both ways.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timezone

import orjson
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.timestamp_pb2 import Timestamp

TIME = "platform.apimachinery.pkg.apis.meta.v1.Time"
QUANTITY = "platform.apimachinery.pkg.api.resource.Quantity"
FIELDS_V1 = "platform.apimachinery.pkg.apis.meta.v1.FieldsV1"


class ConversionError(ValueError):
    """A value that cannot be a field of the message (a malformed time, say)."""


# Per field: how a value travels.  Computed once per message type.
(_SCALAR, _REPEATED_SCALAR, _MESSAGE, _REPEATED_MESSAGE, _MAP_SCALAR, _MAP_MESSAGE,
 _BYTES, _MAP_BYTES) = range(8)
_plans: dict = {}


def _plan(descriptor) -> dict:
    plan = _plans.get(descriptor.full_name)
    if plan is None:
        plan = {}
        for field in descriptor.fields:
            repeated = field.is_repeated
            if field.type == FieldDescriptor.TYPE_BYTES and not repeated:
                how = _BYTES
            elif field.type != FieldDescriptor.TYPE_MESSAGE:
                how = _REPEATED_SCALAR if repeated else _SCALAR
            elif field.message_type.GetOptions().map_entry:
                value = field.message_type.fields_by_name["value"]
                how = {FieldDescriptor.TYPE_MESSAGE: _MAP_MESSAGE,
                       FieldDescriptor.TYPE_BYTES: _MAP_BYTES}.get(value.type, _MAP_SCALAR)
            else:
                how = _REPEATED_MESSAGE if repeated else _MESSAGE
            plan[field.name] = how
        _plans[descriptor.full_name] = plan
    return plan


def to_message(obj: dict, message_class):
    """A new ``message_class`` holding ``obj`` (see the module docstring)."""
    message = message_class()
    _fill(message, obj)
    return message


def from_message(message) -> dict:
    """The plain value of ``message``: only the fields it has set."""
    return _plain(message)


def _fill(message, value) -> None:
    """Set ``message`` from the plain ``value`` of its type."""
    full_name = message.DESCRIPTOR.full_name
    if full_name == TIME:
        _set_time(message, value)
        return
    if full_name == QUANTITY:
        message.string = value
        return
    if full_name == FIELDS_V1:
        message.Raw = orjson.dumps(value)
        return
    message.SetInParent()
    plan = _plan(message.DESCRIPTOR)
    for name, item in value.items():
        how = plan.get(name)
        if how is None or item is None:
            continue
        if how == _SCALAR:
            setattr(message, name, item)
        elif how == _MESSAGE:
            _fill(getattr(message, name), item)
        elif how == _REPEATED_SCALAR:
            getattr(message, name).extend(item)
        elif how == _REPEATED_MESSAGE:
            field = getattr(message, name)
            for element in item:
                _fill(field.add(), element)
        elif how == _MAP_SCALAR:
            getattr(message, name).update(item)
        elif how == _BYTES:
            setattr(message, name, _unbase64(item))
        elif how == _MAP_BYTES:
            getattr(message, name).update({k: _unbase64(v) for k, v in item.items()})
        else:
            field = getattr(message, name)
            for key, element in item.items():
                _fill(field[key], element)


def _unbase64(text) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError, ValueError) as e:
        raise ConversionError(f"{text!r} is not base64: {e}") from None


def _set_time(message, text) -> None:
    stamp = Timestamp()
    try:
        stamp.FromJsonString(text)
    except (ValueError, TypeError, AttributeError) as e:
        raise ConversionError(f"{text!r} is not an RFC 3339 time: {e}") from None
    message.seconds = stamp.seconds
    if stamp.nanos:
        message.nanos = stamp.nanos


def _plain(message):
    full_name = message.DESCRIPTOR.full_name
    if full_name == TIME:
        moment = datetime.fromtimestamp(message.seconds, timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if full_name == QUANTITY:
        return message.string
    if full_name == FIELDS_V1:
        return orjson.loads(message.Raw) if message.Raw else {}
    plan = _plan(message.DESCRIPTOR)
    value = {}
    for field, item in message.ListFields():
        how = plan[field.name]
        if how == _SCALAR:
            value[field.name] = item
        elif how == _MESSAGE:
            value[field.name] = _plain(item)
        elif how == _REPEATED_SCALAR:
            value[field.name] = list(item)
        elif how == _REPEATED_MESSAGE:
            value[field.name] = [_plain(element) for element in item]
        elif how == _MAP_SCALAR:
            value[field.name] = dict(item)
        elif how == _BYTES:
            value[field.name] = base64.b64encode(item).decode("ascii")
        elif how == _MAP_BYTES:
            value[field.name] = {k: base64.b64encode(v).decode("ascii") for k, v in item.items()}
        else:
            value[field.name] = {key: _plain(element) for key, element in item.items()}
    return value
