"""
``JSONSchemaProps``, a CustomResourceDefinition version's ``openAPIV3Schema``, described
as upstream's Go type (``apiextensions/v1/types_jsonschema.go``, field order and JSON
tags) so that decoding a definition gives what upstream's typed decoding keeps:

* a keyword the type does not have (``foo``, a typo ``descripton``) is an unknown field,
  reported per ``fieldValidation`` at its path
  (``spec.versions[0].schema.openAPIV3Schema.properties.x.foo``) and dropped;
* the zero value of an ``omitempty`` non-pointer field (``nullable: false``,
  ``description: ""``, ``uniqueItems: false``, ``x-kubernetes-int-or-string: false``,
  ``required: []``, ``properties: {}``) is dropped; a pointer field keeps its zero
  (``x-kubernetes-preserve-unknown-fields: false``, ``maxLength: 0``, ``$ref: ""``);
* ``null`` leaves a pointer, slice or map field out (``default: null``); a ``null``
  element of ``enum`` stays (a ``JSON`` whose ``MarshalJSON`` writes ``null``), one of
  ``allOf`` or a ``properties`` value is the empty schema ``{}``;
* ``maximum``, ``minimum`` and ``multipleOf`` are float64s: ``5.0`` comes back ``5``;
* the fields come back in Go's order and map keys (``properties``...) sorted.

The union types have their own ``UnmarshalJSON`` (``marshal.go``), which decodes the
schemas inside with the plain ``json.Unmarshal``: sigs.k8s.io/json's strict decoding
does not reach below them, so an unknown or repeated field inside ``items``,
``additionalProperties``, ``additionalItems`` or a ``dependencies`` value is dropped
silently whatever ``fieldValidation`` says (``model.schema.LaxContext``):

* ``JSONSchemaPropsOrBool``: ``true``, ``false`` or a schema; anything else is the
  error ``boolean or JSON schema expected``;
* ``JSONSchemaPropsOrArray``: a schema or a list of schemas; anything else, or ``[]``,
  leaves nothing (upstream keeps an empty wrapper, which its JSON writes ``null``);
* ``JSONSchemaPropsOrStringArray``: a list of strings or a schema; anything else is an
  empty wrapper, written ``null`` (a ``dependencies`` value shows as ``null``);
* ``JSON`` (``default``, ``enum``, ``example``): any value, kept as written.

For merges, field ownership and apply these are untyped (``model.schema.Untyped``), as
in upstream's OpenAPI, from which its server-side apply takes its types: inside them
maps are owned field by field and lists whole, and nothing is undeclared.
"""

from __future__ import annotations

from typing import Optional

import attrs

from platformd.model.schema import (
    BOOLEAN, DOUBLE, INT64, STRING, DecodeError, LaxContext, ListOf, MapOf, Prop, Struct,
    Untyped,
)

PREFIX = "io.platform.apiextensions.v1"


class NotBoolOrSchema(DecodeError):
    """``JSONSchemaPropsOrBool.UnmarshalJSON``'s error, worded as it words it."""

    def __init__(self, path: str, value):
        Exception.__init__(self, "boolean or JSON schema expected")
        self.path = path
        self.expected = "JSONSchemaPropsOrBool"
        self.got = type(value).__name__


#: ``JSONSchemaProps``; its fields are added below, once the unions that hold it exist.
JSON_SCHEMA_PROPS = Struct(f"{PREFIX}.JSONSchemaProps", {}, doc=(
    "JSONSchemaProps is a JSON-Schema following Specification Draft 4 "
    "(http://json-schema.org/)."))
_SCHEMAS = ListOf(JSON_SCHEMA_PROPS)
_STRINGS = ListOf(STRING)


def _schema(value, path: str):
    """A schema inside a union: decoded by the plain ``json.Unmarshal`` (nothing strict)."""
    return JSON_SCHEMA_PROPS.decode(value, path, LaxContext())


@attrs.frozen
class _OrBool(Untyped):
    def decode(self, value, path, ctx):
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, dict):
            return _schema(value, path)
        raise NotBoolOrSchema(path, value)

    def order(self, value) -> None:
        JSON_SCHEMA_PROPS.order(value)


@attrs.frozen
class _OrList(Untyped):
    """``JSONSchemaPropsOrArray`` (``listed``: schemas) and ``JSONSchemaPropsOrStringArray``
    (``listed``: strings): a schema or a list; anything else, or an empty list, is the
    empty wrapper, which their ``MarshalJSON`` writes as ``null``."""

    listed: Optional[ListOf] = None

    def decode(self, value, path, ctx):
        if isinstance(value, dict):
            return _schema(value, path)
        if isinstance(value, list) and value and self.listed is not None:
            return self.listed.decode(value, path, LaxContext())
        return None

    def order(self, value) -> None:
        for schema in value if isinstance(value, list) else (value,):
            JSON_SCHEMA_PROPS.order(schema)  # a string of a list is left as it is


def _untyped(cls, name: str, doc: str, **kw) -> Untyped:
    return cls(f"{PREFIX}.{name}", {}, doc=doc, preserve_unknown=True, **kw)


JSON = _untyped(Untyped, "JSON", (
    "JSON represents any valid JSON value. These types are supported: bool, int64, "
    "float64, string, []interface{}, map[string]interface{} and nil."))
OR_ARRAY = _untyped(_OrList, "JSONSchemaPropsOrArray", (
    "JSONSchemaPropsOrArray represents a value that can either be a JSONSchemaProps or an "
    "array of JSONSchemaProps. Mainly here for serialization purposes."), listed=_SCHEMAS)
OR_BOOL = _untyped(_OrBool, "JSONSchemaPropsOrBool", (
    "JSONSchemaPropsOrBool represents JSONSchemaProps or a boolean value. Defaults to true "
    "for the boolean property."))
OR_STRING_ARRAY = _untyped(_OrList, "JSONSchemaPropsOrStringArray", (
    "JSONSchemaPropsOrStringArray represents a JSONSchemaProps or a string array."),
    listed=_STRINGS)

VALIDATION_RULE = Struct(f"{PREFIX}.ValidationRule", {
    "rule": Prop(STRING, "rule represents the expression which will be evaluated by CEL.",
                 True),
    "message": Prop(STRING, "message represents the message displayed when validation "
                    "fails.", omit_empty=True),
    "messageExpression": Prop(STRING, "messageExpression declares a CEL expression that "
                              "evaluates to the validation failure message that is returned "
                              "when this rule fails.", omit_empty=True),
    "reason": Prop(STRING, "reason provides a machine-readable validation failure reason "
                   "that is returned to the caller when a request fails this validation "
                   "rule."),
    "fieldPath": Prop(STRING, "fieldPath represents the field path returned when the "
                      "validation fails.", omit_empty=True),
    "optionalOldSelf": Prop(BOOLEAN, "optionalOldSelf is used to opt a transition rule into "
                            "evaluation even when the object is first created, or if the old "
                            "object is missing the value."),
}, doc="ValidationRule describes a validation rule written in the CEL expression language.")

EXTERNAL_DOCUMENTATION = Struct(f"{PREFIX}.ExternalDocumentation", {
    "description": Prop(STRING, omit_empty=True),
    "url": Prop(STRING, omit_empty=True),
}, doc="ExternalDocumentation allows referencing an external resource for extended "
       "documentation.")


def _omitted(node, doc: str = "") -> Prop:
    """An ``omitempty`` non-pointer field (its zero value is dropped)."""
    return Prop(node, doc, omit_empty=True)


_BY_NAME = MapOf(JSON_SCHEMA_PROPS)

# In Go's order, with its JSON names; pointers and slices of pointers are plain Props.
JSON_SCHEMA_PROPS.props.update({
    "id": _omitted(STRING),
    "$schema": _omitted(STRING),
    "$ref": Prop(STRING),
    "description": _omitted(STRING),
    "type": _omitted(STRING),
    "format": _omitted(STRING, "format is an OpenAPI v3 format string. Unknown formats are "
                       "ignored."),
    "title": _omitted(STRING),
    "default": Prop(JSON, "default is a default value for undefined object fields."),
    "maximum": Prop(DOUBLE),
    "exclusiveMaximum": _omitted(BOOLEAN),
    "minimum": Prop(DOUBLE),
    "exclusiveMinimum": _omitted(BOOLEAN),
    "maxLength": Prop(INT64),
    "minLength": Prop(INT64),
    "pattern": _omitted(STRING),
    "maxItems": Prop(INT64),
    "minItems": Prop(INT64),
    "uniqueItems": _omitted(BOOLEAN),
    "multipleOf": Prop(DOUBLE),
    "enum": _omitted(ListOf(JSON)),
    "maxProperties": Prop(INT64),
    "minProperties": Prop(INT64),
    "required": _omitted(_STRINGS),
    "items": Prop(OR_ARRAY),
    "allOf": _omitted(_SCHEMAS),
    "oneOf": _omitted(_SCHEMAS),
    "anyOf": _omitted(_SCHEMAS),
    "not": Prop(JSON_SCHEMA_PROPS),
    "properties": _omitted(_BY_NAME),
    "additionalProperties": Prop(OR_BOOL),
    "patternProperties": _omitted(_BY_NAME),
    "dependencies": _omitted(MapOf(OR_STRING_ARRAY)),
    "additionalItems": Prop(OR_BOOL),
    "definitions": _omitted(_BY_NAME),
    "externalDocs": Prop(EXTERNAL_DOCUMENTATION),
    "example": Prop(JSON),
    "nullable": _omitted(BOOLEAN),
    "x-kubernetes-preserve-unknown-fields": Prop(BOOLEAN, (
        "x-kubernetes-preserve-unknown-fields stops the API server decoding step from "
        "pruning fields which are not specified in the validation schema.")),
    "x-kubernetes-embedded-resource": _omitted(BOOLEAN, (
        "x-kubernetes-embedded-resource defines that the value is an embedded Kubernetes "
        "runtime.Object, with TypeMeta and ObjectMeta.")),
    "x-kubernetes-int-or-string": _omitted(BOOLEAN, (
        "x-kubernetes-int-or-string specifies that this value is either an integer or a "
        "string.")),
    "x-kubernetes-list-map-keys": _omitted(_STRINGS, (
        "x-kubernetes-list-map-keys annotates an array with the x-kubernetes-list-type `map` "
        "by specifying the keys used as the index of the map.")),
    "x-kubernetes-list-type": Prop(STRING, (
        "x-kubernetes-list-type annotates an array to further describe its topology.")),
    "x-kubernetes-map-type": Prop(STRING, (
        "x-kubernetes-map-type annotates an object to further describe its topology.")),
    "x-kubernetes-validations": _omitted(
        ListOf(VALIDATION_RULE, "map", ("rule",), patch_strategy="merge", merge_key="rule"),
        "x-kubernetes-validations describes a list of validation rules written in the CEL "
        "expression language."),
})
