"""
The CustomResourceDefinition in Protobuf (issue 31): upstream's own golden bytes (the
roundtrip test's files, ``tests/codecs/upstream/``), bytes built by hand for a small
schema, and JSON -> Protobuf -> JSON round trips of a rich definition: schema
``default``/``enum``/``example`` as raw JSON, the ``JSONSchemaPropsOr*`` unions, the
``x-kubernetes-*`` and ``$ref`` names, floats as Go's JSON writes them.
"""

import copy
import json
import os
import struct

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import protoconvert
from platformd.codecs.interface import CodecError
from platformd.codecs.protobufcodec import MAGIC, ProtobufCodec, envelope
from platformd.model.schema import DecodeContext
from platformd.protos.platform.apiextensions_apiserver.pkg.apis.apiextensions.v1 import (
    generated_pb2 as apiextensions,
)
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from platformd.registry.catalog import builtin
from platformd.registry.apiextensions import CUSTOM_RESOURCE_DEFINITION as CRD_KIND
from tests.codecs.test_upstream_bytes import m, s, v

GROUP_VERSION = "apiextensions.platform.io/v1"
UPSTREAM_GROUP_VERSION = "apiextensions.k8s.io/v1"
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream")

#: A definition in the shape platformd stores it, with every schema form a client uses.
RICH = {
    "kind": "CustomResourceDefinition", "apiVersion": GROUP_VERSION,
    "metadata": {"name": "widgets.example.com", "uid": "7d0c", "resourceVersion": "12",
                 "generation": 2, "creationTimestamp": "2024-05-06T07:08:09Z",
                 "finalizers": ["customresourcecleanup.apiextensions.platform.io"]},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                  "kind": "Widget", "listKind": "WidgetList", "categories": ["all"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object", "description": "A widget.",
                "$schema": "http://json-schema.org/draft-04/schema#",
                "required": ["spec"],
                "properties": {
                    "spec": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.size <= self.max", "message": "too big",
                             "reason": "FieldValueInvalid", "fieldPath": ".size"},
                            {"rule": "self.color == oldSelf.color",
                             "messageExpression": "'was ' + oldSelf.color",
                             "optionalOldSelf": True}],
                        "properties": {
                            "size": {"type": "integer", "format": "int32", "default": 3,
                                     "minimum": 0, "maximum": 100, "multipleOf": 0.5,
                                     "exclusiveMaximum": True},
                            "max": {"type": "number", "default": 2.5, "nullable": True},
                            "color": {"type": "string", "enum": ["red", "blue", None],
                                      "default": "red", "pattern": "^[a-z]+$",
                                      "maxLength": 10, "minLength": 1, "nullable": True},
                            "port": {"x-kubernetes-int-or-string": True,
                                     "anyOf": [{"type": "integer"}, {"type": "string"}],
                                     "example": 8080},
                            "labels": {"type": "object",
                                       "additionalProperties": {"type": "string"},
                                       "x-kubernetes-map-type": "granular",
                                       "default": {"a": "b", "n": [1, 2.5, None, True]}},
                            "closed": {"type": "object", "additionalProperties": False,
                                       "properties": {"x": {"type": "string"}}},
                            "open": {"type": "object", "additionalProperties": True},
                            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                      "x-kubernetes-list-map-keys": ["name"],
                                      "maxItems": 8, "minItems": 0, "uniqueItems": True,
                                      "items": {"type": "object", "required": ["name"],
                                                "properties": {"name": {"type": "string"}}}},
                            "pair": {"type": "array",
                                     "items": [{"type": "string"}, {"type": "integer"}],
                                     "additionalItems": False},
                            "embedded": {"type": "object",
                                         "x-kubernetes-embedded-resource": True,
                                         "x-kubernetes-preserve-unknown-fields": True},
                            "ref": {"$ref": "#/definitions/thing", "title": "Thing",
                                    "externalDocs": {"description": "docs",
                                                     "url": "https://example.com"}},
                            "either": {"oneOf": [{"required": ["a"]}],
                                       "not": {"required": ["b"]},
                                       "allOf": [{"minProperties": 1, "maxProperties": 3}]},
                        },
                        "dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}},
                        "patternProperties": {"^x-": {"type": "string"}},
                        "definitions": {"thing": {"type": "string", "id": "thing"}},
                    },
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": False}},
            }},
            "subresources": {"status": {},
                             "scale": {"specReplicasPath": ".spec.size",
                                       "statusReplicasPath": ".status.size",
                                       "labelSelectorPath": ".status.selector"}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1,
                 "description": "the size", "format": "int32"},
                {"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
            "selectableFields": [{"jsonPath": ".spec.color"}],
        }, {
            "name": "v1beta1", "served": False, "storage": False, "deprecated": True,
            "deprecationWarning": "use v1",
            "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}},
        }],
        "conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ops", "name": "conv",
                                         "path": "/convert", "port": 443},
                             "caBundle": "Y2E="}}},
    },
    "status": {
        "conditions": [
            {"type": "NamesAccepted", "status": "True",
             "lastTransitionTime": "2024-05-06T07:08:09Z", "reason": "NoConflicts",
             "message": "no conflicts found"},
            {"type": "Established", "status": "True",
             "lastTransitionTime": "2024-05-06T07:08:10Z",
             "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted"}],
        "acceptedNames": {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                          "kind": "Widget", "listKind": "WidgetList",
                          "categories": ["all"]},
        "storedVersions": ["v1"],
    },
}


def _golden(kind):
    """Upstream's JSON (the apiVersion ours) and .pb of ``kind``."""
    base = os.path.join(HERE, f"{UPSTREAM_GROUP_VERSION.replace('/', '.')}.{kind}")
    with open(base + ".json", "rb") as f:
        value = json.loads(f.read())
    with open(base + ".pb", "rb") as f:
        data = f.read()
    value["apiVersion"] = GROUP_VERSION
    return value, data


def _schema_bytes(message_bytes):
    """The bytes of ``JSONSchemaProps`` ``openAPIV3Schema`` in a one-version definition."""
    crd = apiextensions.CustomResourceDefinition.FromString(message_bytes)
    return crd.spec.versions[0].schema.openAPIV3Schema.SerializeToString(deterministic=True)


def _small(schema):
    return {"kind": "CustomResourceDefinition", "apiVersion": GROUP_VERSION,
            "metadata": {"name": "ws.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"plural": "ws", "kind": "W"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]},
            "status": {"acceptedNames": {"plural": "", "kind": ""}}}


def _props(*parts):
    """
    A JSONSchemaProps as upstream's ``MarshalToSizedBuffer`` writes it: its non-pointer
    fields always (id 1, $schema 2, description 4, type 5, format 6, title 7,
    exclusiveMaximum 10, exclusiveMinimum 12, pattern 15, uniqueItems 18, nullable 37,
    x-kubernetes-embedded-resource 39, x-kubernetes-int-or-string 40), ``parts``
    (number, bytes) in their place by number.
    """
    fields = {1: s(1, ""), 2: s(2, ""), 4: s(4, ""), 5: s(5, ""), 6: s(6, ""), 7: s(7, ""),
              10: v(10, 0), 12: v(12, 0), 15: s(15, ""), 18: v(18, 0), 37: v(37, 0),
              39: v(39, 0), 40: v(40, 0)}
    fields.update(parts)
    return b"".join(fields[n] for n in sorted(fields))


class GoldenTests(SynchronousTestCase):
    """Upstream's roundtrip files: every field of the kind filled, as Go writes it."""

    def setUp(self):
        builtin()  # registers the kind's presence
        self.codec = ProtobufCodec()

    def check(self, kind):
        value, data = _golden(kind)
        # The same bytes as upstream's, envelope and all, under upstream's apiVersion.
        self.assertEqual(envelope(UPSTREAM_GROUP_VERSION, kind,
                                  self.codec.message_bytes(value)).hex(" "), data.hex(" "))
        # Upstream's bytes, under our apiVersion, decode to upstream's JSON.
        raw = runtime.Unknown.FromString(data[len(MAGIC):]).raw
        self.assertEqual(self.codec.decode(envelope(GROUP_VERSION, kind, raw)), value)

    def test_custom_resource_definition(self):
        """Every field of a CustomResourceDefinition (upstream's golden file)."""
        self.check("CustomResourceDefinition")

    def test_conversion_review(self):
        """A ConversionReview: its objects are RawExtensions, raw JSON on the wire."""
        self.check("ConversionReview")


class HandBuiltTests(SynchronousTestCase):
    """The schema's bytes built by hand from ``generated.pb.go``'s rules."""

    def setUp(self):
        builtin()
        self.codec = ProtobufCodec()

    def schema_bytes(self, schema):
        return _schema_bytes(self.codec.message_bytes(_small(schema)))

    def test_string(self):
        """``{"type": "string"}``: every non-pointer field written, type set."""
        self.assertEqual(self.schema_bytes({"type": "string"}).hex(" "),
                         _props((5, s(5, "string"))).hex(" "))

    def test_json_values(self):
        """``default``, ``enum`` and ``example`` are ``JSON{raw}``: the value's compact
        JSON bytes; a ``null`` enum element an empty JSON."""
        schema = {"default": {"a": [1, "x"]}, "enum": ["a", None], "example": 2.5}
        self.assertEqual(self.schema_bytes(schema).hex(" "), _props(
            (8, m(8, s(1, '{"a":[1,"x"]}'))),
            (20, m(20, s(1, '"a"')) + m(20)),
            (36, m(36, s(1, "2.5")))).hex(" "))

    def test_unions(self):
        """additionalProperties false: ``allows`` written as 0; a schema: allows 1 and
        the schema; items as a schema (field 1) and as a list (field 2)."""
        string = _props((5, s(5, "string")))
        cases = [
            ({"additionalProperties": False}, (30, m(30, v(1, 0)))),
            ({"additionalProperties": {"type": "string"}},
             (30, m(30, v(1, 1), m(2, string)))),
            ({"items": {"type": "string"}}, (24, m(24, m(1, string)))),
            ({"items": [{"type": "string"}]}, (24, m(24, m(2, string)))),
        ]
        for schema, part in cases:
            self.assertEqual(self.schema_bytes(schema).hex(" "), _props(part).hex(" "),
                             schema)

    def test_extensions_and_pointers(self):
        """``x-kubernetes-*`` go to upstream's numbers (38 a *bool, 42 a *string, 44
        the rules); ``$ref`` (3) and ``maximum`` (9, a double) only when set."""
        schema = {"$ref": "#/r", "maximum": 5, "x-kubernetes-preserve-unknown-fields": False,
                  "x-kubernetes-list-type": "set",
                  "x-kubernetes-validations": [{"rule": "true"}]}
        rule = s(1, "true") + s(2, "") + s(3, "") + s(5, "")
        self.assertEqual(self.schema_bytes(schema).hex(" "), _props(
            (3, s(3, "#/r")), (9, b"\x49" + struct.pack("<d", 5.0)),
            (38, bytes.fromhex("b0 02 00")), (42, bytes.fromhex("d2 02 03") + b"set"),
            (44, bytes.fromhex("e2 02") + bytes([len(rule)]) + rule)).hex(" "))


class RoundTripTests(SynchronousTestCase):
    def setUp(self):
        builtin()
        self.codec = ProtobufCodec()

    def test_rich_definition(self):
        """JSON -> Protobuf -> JSON gives the same definition, schema and all."""
        self.assertEqual(self.codec.decode(self.codec.encode(RICH)), RICH)

    def test_list(self):
        """A CustomResourceDefinitionList round-trips, its items given the list's type."""
        value = {"kind": "CustomResourceDefinitionList", "apiVersion": GROUP_VERSION,
                 "metadata": {"resourceVersion": "12"}, "items": [RICH, RICH]}
        self.assertEqual(self.codec.decode(self.codec.encode(value)), value)

    def test_library_reads_our_bytes(self):
        """The generated class reads the bytes: the names' proto fields hold the JSON
        keywords' values."""
        raw = self.codec.message_bytes(RICH)
        crd = apiextensions.CustomResourceDefinition.FromString(raw)
        spec = crd.spec.versions[0].schema.openAPIV3Schema.properties["spec"]
        self.assertEqual([r.rule for r in spec.xKubernetesValidations],
                         ["self.size <= self.max", "self.color == oldSelf.color"])
        self.assertEqual(spec.properties["size"].default.raw, b"3")
        self.assertEqual(spec.properties["size"].maximum, 100.0)
        self.assertTrue(spec.properties["port"].xKubernetesIntOrString)
        self.assertEqual(spec.properties["ref"].ref, "#/definitions/thing")
        self.assertEqual(list(spec.dependencies["a"].property), ["b", "c"])
        self.assertEqual(list(spec.dependencies["d"].schema.required), ["e"])
        self.assertFalse(spec.properties["closed"].additionalProperties.allows)
        self.assertEqual(crd.spec.conversion.webhook.clientConfig.caBundle, b"ca")

    def test_what_upstream_json_drops(self):
        """Zero values of non-pointer fields (``nullable: false``, ``description: ""``)
        and ``null`` JSON values come back as upstream's JSON shows them: absent."""
        schema = {"type": "object", "nullable": False, "description": "", "default": None,
                  "x-kubernetes-int-or-string": False, "uniqueItems": False}
        back = self.codec.decode(self.codec.encode(_small(schema)))
        self.assertEqual(back["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
                         {"type": "object"})

    def test_decoded_definition_round_trips_exactly(self):
        """A definition as the kind's schema decodes it (upstream's typed form: no
        unknown keyword, no omitempty zero, no null pointer) comes back from Protobuf
        exactly, and in the same order once ordered as the store orders every object."""
        schema = {"nullable": False, "type": "object", "description": "", "bogus": 1,
                  "properties": {
                      "z": {"type": "number", "maximum": 5.0, "default": None,
                            "enum": [1, None], "uniqueItems": False},
                      "a": {"type": "array", "items": {"type": "string", "x": 1},
                            "x-kubernetes-list-type": "set"},
                      "m": {"type": "object", "additionalProperties": False,
                            "x-kubernetes-preserve-unknown-fields": False,
                            "dependencies": {"k": ["j"], "l": {"required": ["q"]}}}}}
        decoded = CRD_KIND.schema.decode(_small(schema), "", DecodeContext())
        CRD_KIND.schema.order(decoded)
        back = self.codec.decode(self.codec.encode(decoded))
        CRD_KIND.schema.order(back)  # Protobuf's maps come in no set order, as Go's
        self.assertEqual(json.dumps(back), json.dumps(decoded))
        self.assertEqual(list(back["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                              ["properties"]), ["a", "m", "z"])

    def test_floats_as_go_writes_them(self):
        """A whole double comes back an integer (Go's JSON writes ``5``), others as they
        were; int64 fields stay integers."""
        schema = {"maximum": 5.0, "minimum": -1.5, "multipleOf": 1e21, "maxLength": 3}
        back = self.codec.decode(self.codec.encode(_small(schema)))
        got = back["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        self.assertEqual(got, {"maximum": 5, "minimum": -1.5, "multipleOf": 1e21,
                               "maxLength": 3})
        self.assertIsInstance(got["maximum"], int)
        self.assertIsInstance(got["multipleOf"], float)

    def test_empty_status_shows_accepted_names(self):
        """An empty status (a definition just created) shows ``acceptedNames`` with its
        non-omitempty ``plural`` and ``kind``, as upstream's JSON does."""
        value = copy.deepcopy(RICH)
        value["status"] = {}
        back = self.codec.decode(self.codec.encode(value))
        self.assertEqual(back["status"], {"acceptedNames": {"plural": "", "kind": ""}})

    def test_raw_json_not_json_refused(self):
        """A ``default`` whose raw bytes are not JSON is a CodecError (a 400)."""
        message = protoconvert.to_message(_small({"default": 1}),
                                          apiextensions.CustomResourceDefinition,
                                          upstream=True)
        schema = message.spec.versions[0].schema.openAPIV3Schema
        schema.default.raw = b"{nope"
        data = envelope(GROUP_VERSION, "CustomResourceDefinition",
                        message.SerializeToString())
        self.assertRaises(CodecError, self.codec.decode, data)
