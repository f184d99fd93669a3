"""
Messages whose JSON form is not an object of their fields: ``apiextensions/v1``'s
``JSON`` and ``JSONSchemaPropsOr*`` wrappers and ``runtime.RawExtension``, each read
off the type's ``MarshalJSON``/``UnmarshalJSON`` upstream (``apiextensions/v1/
marshal.go``, ``runtime/extension.go``).  ``protoconvert`` hands a message of one of
these types here (``FORMS``), with its own ``fill``/``plain`` for the schemas inside.

* ``JSON`` (``default``, ``enum``, ``example``) and ``RawExtension`` (a
  ``ConversionReview``'s objects): any JSON value; on the wire ``raw``, the value's
  compact JSON bytes, absent for JSON ``null`` (upstream's ``UnmarshalJSON`` leaves
  ``Raw`` nil for it, and ``MarshalJSON`` writes ``null`` for a nil ``Raw``).
* ``JSONSchemaPropsOrBool`` (``additionalProperties``, ``additionalItems``): ``true``,
  ``false`` or a schema; ``allows`` always written (a non-pointer ``bool``), ``true``
  beside a schema.
* ``JSONSchemaPropsOrArray`` (``items``): a schema (``schema``) or a list of them
  (``jSONSchemas``); JSON shows the list when it is not empty, else the schema.
* ``JSONSchemaPropsOrStringArray`` (``dependencies``' values): a list of property names
  (``property``) or a schema, the list first.

A form's ``plain`` gives None for what upstream's JSON shows as ``null`` (its field is
then left out, as every ``null``).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from platformd.codecs import jsoncodec
from platformd.goformat import gojson

APIEXTENSIONS = "platform.apiextensions_apiserver.pkg.apis.apiextensions.v1."
RAW_EXTENSION = "platform.apimachinery.pkg.runtime.RawExtension"


@attrs.frozen
class Form:
    """``fill(message, value, fill)`` sets the message from its JSON value (``fill`` the
    caller's, for a schema inside); ``plain(message, plain)`` gives the JSON value back."""

    fill: Callable[[Any, Any, Callable], None]
    plain: Callable[[Any, Callable], Any]


def _fill_raw(message, value, fill) -> None:
    message.SetInParent()
    if value is not None:
        message.raw = jsoncodec.dumps(value)


def _plain_raw(message, plain):
    """The value ``raw`` holds (ValueError when it is not JSON); None when it is empty."""
    return gojson.loads(message.raw) if message.raw else None


def _fill_or_bool(message, value, fill) -> None:
    if isinstance(value, dict):
        message.allows = True
        fill(message.schema, value)
    else:
        message.allows = value


def _plain_or_bool(message, plain):
    return plain(message.schema) if message.HasField("schema") else message.allows


def _fill_or_array(message, value, fill) -> None:
    message.SetInParent()
    if isinstance(value, list):
        for element in value:
            fill(message.jSONSchemas.add(), element)
    else:
        fill(message.schema, value)


def _plain_or_array(message, plain):
    if message.jSONSchemas:
        return [plain(element) for element in message.jSONSchemas]
    return plain(message.schema) if message.HasField("schema") else None


def _fill_or_string_array(message, value, fill) -> None:
    message.SetInParent()
    if isinstance(value, list):
        message.property.extend(value)
    else:
        fill(message.schema, value)


def _plain_or_string_array(message, plain):
    if message.property:
        return list(message.property)
    return plain(message.schema) if message.HasField("schema") else None


_RAW = Form(_fill_raw, _plain_raw)

#: Message full name → its form.
FORMS = {
    APIEXTENSIONS + "JSON": _RAW,
    RAW_EXTENSION: _RAW,
    APIEXTENSIONS + "JSONSchemaPropsOrBool": Form(_fill_or_bool, _plain_or_bool),
    APIEXTENSIONS + "JSONSchemaPropsOrArray": Form(_fill_or_array, _plain_or_array),
    APIEXTENSIONS + "JSONSchemaPropsOrStringArray": Form(_fill_or_string_array,
                                                         _plain_or_string_array),
}

#: Fields whose JSON name is not their Protobuf name, by message full name: the JSON
#: Schema keywords ``$schema`` and ``$ref`` and the ``x-kubernetes-*`` extensions, which
#: upstream's .proto names ``schema``, ``ref``, ``xKubernetesPreserveUnknownFields``...
JSON_NAMES = {
    APIEXTENSIONS + "JSONSchemaProps": {
        "schema": "$schema",
        "ref": "$ref",
        "xKubernetesPreserveUnknownFields": "x-kubernetes-preserve-unknown-fields",
        "xKubernetesEmbeddedResource": "x-kubernetes-embedded-resource",
        "xKubernetesIntOrString": "x-kubernetes-int-or-string",
        "xKubernetesListMapKeys": "x-kubernetes-list-map-keys",
        "xKubernetesListType": "x-kubernetes-list-type",
        "xKubernetesMapType": "x-kubernetes-map-type",
        "xKubernetesValidations": "x-kubernetes-validations",
    },
}
