"""
A definition's ``openAPIV3Schema`` decoded as upstream's typed ``JSONSchemaProps``
(issue 31): unknown keywords are unknown fields (Strict: 400, Warn: a warning each,
Ignore: nothing), reported at sigs.k8s.io/json's paths and dropped; below the union types
(``items``, ``additionalProperties``, ``additionalItems``, ``dependencies``) nothing is
reported; zero values of ``omitempty`` fields and ``null`` pointers are not kept; the
stored form is upstream's (Go's field order, sorted map keys, floats as Go writes them)
for create, update, every patch and apply, in JSON, YAML, CBOR and Protobuf.
"""

from __future__ import annotations

import copy
import json

import cbor2
import yaml
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.protobufcodec import PROTOBUF, ProtobufCodec
from tests.apiextensions.test_crd import CRDS, definition
from tests.stub import StubServer

NAME = "widgets.example.com"
SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"
CANNOT = ('CustomResourceDefinition in version "v1" cannot be handled as a '
          'CustomResourceDefinition: ')

#: Unknown keywords where sigs.k8s.io/json's strict decoding reaches them, and where it
#: does not (below a type with its own UnmarshalJSON).
WITH_UNKNOWN = {
    "type": "object", "foo": 1,
    "properties": {
        "x": {"type": "string", "descripton": "typo"},
        "all": {"allOf": [{"a": 1}], "anyOf": [{}, {"b": 1}], "oneOf": [{"c": 1}],
                "not": {"d": 1}},
        "defs": {"type": "object", "definitions": {"one": {"e": 1}},
                 "patternProperties": {"^p.q$": {"f": 1}}},
        "rules": {"type": "object", "x-kubernetes-validations": [{"rule": "true", "g": 1}],
                  "externalDocs": {"url": "u", "h": 1}},
        "hidden": {"type": "array", "items": {"type": "string", "i": 1},
                   "additionalItems": {"j": 1}},
        "map": {"type": "object", "additionalProperties": {"type": "string", "k": 1},
                "dependencies": {"a": {"l": 1}, "b": ["c"]}},
    },
}
#: What Strict names, in the order of the body.
REPORTED = [f"{SCHEMA_PATH}.{p}" for p in (
    "foo", "properties.x.descripton", "properties.all.allOf[0].a",
    "properties.all.anyOf[1].b", "properties.all.oneOf[0].c", "properties.all.not.d",
    "properties.defs.definitions.one.e", "properties.defs.patternProperties.^p.q$.f",
    "properties.rules.x-kubernetes-validations[0].g", "properties.rules.externalDocs.h")]
#: A schema a definition may have (no definitions, dependencies, patternProperties or
#: additionalItems: forbidden in apiextensions/v1) with unknown keywords, what Warn names
#: of them, and what is kept: the schema without them, in Go's field order and with its
#: map keys sorted.
VALID_WITH_UNKNOWN = {
    "type": "object", "foo": 1,
    "properties": {
        "x": {"type": "string", "descripton": "typo"},
        "all": {"type": "string", "allOf": [{"a": 1}], "anyOf": [{}, {"b": 1}],
                "oneOf": [{"c": 1}], "not": {"d": 1}},
        "rules": {"type": "object", "x-kubernetes-validations": [{"rule": "true", "g": 1}],
                  "externalDocs": {"url": "u", "h": 1}},
        "list": {"type": "array", "items": {"type": "string", "i": 1}},
        "map": {"type": "object", "additionalProperties": {"type": "string", "k": 1}},
    },
}
VALID_REPORTED = [f"{SCHEMA_PATH}.{p}" for p in (
    "foo", "properties.x.descripton", "properties.all.allOf[0].a",
    "properties.all.anyOf[1].b", "properties.all.oneOf[0].c", "properties.all.not.d",
    "properties.rules.x-kubernetes-validations[0].g", "properties.rules.externalDocs.h")]
PRUNED = {
    "type": "object",
    "properties": {
        "all": {"type": "string", "allOf": [{}], "oneOf": [{}], "anyOf": [{}, {}],
                "not": {}},
        "list": {"type": "array", "items": {"type": "string"}},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
        "rules": {"type": "object", "externalDocs": {"url": "u"},
                  "x-kubernetes-validations": [{"rule": "true"}]},
        "x": {"type": "string"},
    },
}


def crd_with(schema: dict, plural: str = "widgets") -> dict:
    crd = definition(plural=plural, kind=plural.capitalize()[:-1], status=False)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    return crd


def schema_of(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def warnings(r) -> list:
    return r.headers.getRawHeaders(b"warning") or []


def warned(paths) -> list:
    return [b'299 - "unknown field \\"' + p.encode() + b'\\""' for p in paths]


class Base(SynchronousTestCase):
    gates = ""

    def setUp(self):
        self.stub = StubServer(gates=self.gates)
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()

    def create(self, crd, query="", **kw):
        return self.admin.request("POST", CRDS + query, crd, **kw)

    def stored(self) -> dict:
        r = self.admin.get(f"{CRDS}/{NAME}")
        self.assertEqual(r.code, 200, r.body)
        return r.json()


class UnknownKeywordTests(Base):
    def test_strict_names_each_unknown_keyword(self):
        """Strict refuses the definition, naming every unknown keyword the strict decoder
        reaches at its path, none below items, additionalProperties, additionalItems or
        a dependencies schema."""
        r = self.create(crd_with(WITH_UNKNOWN), "?fieldValidation=Strict")
        self.assertEqual(r.code, 400, r.body)
        status = r.json()
        self.assertEqual(status["reason"], "BadRequest")
        self.assertEqual(status["message"], CANNOT + "strict decoding error: " + ", ".join(
            f'unknown field "{p}"' for p in REPORTED))
        self.assertEqual(self.admin.get(f"{CRDS}/{NAME}").code, 404)

    def test_warn_then_dropped(self):
        """Warn (the default) creates the definition with one warning per unknown keyword
        and keeps none of them."""
        r = self.create(crd_with(VALID_WITH_UNKNOWN))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(warnings(r), warned(VALID_REPORTED))
        self.assertEqual(schema_of(r.json()), PRUNED)
        self.assertEqual(schema_of(self.stored()), PRUNED)

    def test_ignore(self):
        """Ignore drops them without a word."""
        r = self.create(crd_with(VALID_WITH_UNKNOWN), "?fieldValidation=Ignore")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(warnings(r), [])
        self.assertEqual(schema_of(r.json()), PRUNED)

    def test_duplicate_keyword(self):
        """A keyword written twice is a duplicate field at its path (the last value
        kept); below ``items`` it is not reported."""
        body = (b'{"apiVersion": "apiextensions.platform.io/v1", "kind": '
                b'"CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}, '
                b'"spec": {"group": "example.com", "scope": "Namespaced", "names": '
                b'{"plural": "widgets", "kind": "Widget"}, "versions": [{"name": "v1", '
                b'"served": true, "storage": true, "schema": {"openAPIV3Schema": '
                b'{"type": "object", "description": "a", "description": "b", '
                b'"properties": {"l": {"type": "array", "items": {"type": "string", '
                b'"type": "string"}}}}}}]}}')
        r = self.create(body)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(warnings(r), [
            b'299 - "duplicate field \\"' + SCHEMA_PATH.encode() + b'.description\\""'])
        self.assertEqual(schema_of(r.json())["description"], "b")

    def test_union_not_bool_or_schema(self):
        """``additionalProperties`` neither a boolean nor a schema fails the decoding as
        its UnmarshalJSON does, a 400 before any field validation."""
        schema = {"type": "object", "additionalProperties": "yes"}
        r = self.create(crd_with(schema), "?fieldValidation=Strict")
        self.assertEqual(r.code, 400, r.body)
        self.assertEqual(r.json()["message"], CANNOT + "boolean or JSON schema expected")

    def test_wrong_type(self):
        """A keyword of the wrong type is a decoding error naming its path."""
        schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": "9"}}}
        r = self.create(crd_with(schema))
        self.assertEqual(r.code, 400, r.body)
        self.assertEqual(r.json()["message"], CANNOT + "json: cannot unmarshal string into "
                         f"field {SCHEMA_PATH}.properties.n.maximum of type float64")


class StoredFormTests(Base):
    def test_zero_values_and_nulls(self):
        """omitempty zero values, ``null`` pointers and empty lists and maps are not kept;
        pointer fields keep their zeros; a null enum element stays; floats come back as
        Go writes them; fields in Go's order."""
        schema = {
            "x-kubernetes-preserve-unknown-fields": None, "nullable": False,
            "description": "", "uniqueItems": False, "type": "object", "required": [],
            "properties": {
                "s": {"x-kubernetes-int-or-string": False, "type": "string",
                      "default": None, "enum": ["a", None], "pattern": "",
                      "maxLength": 0, "title": "", "format": "", "example": None},
                "n": {"type": "number", "maximum": 5.0, "minimum": -1.5, "multipleOf": 0.5,
                      "exclusiveMaximum": False, "exclusiveMinimum": True},
                "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                      "x-kubernetes-embedded-resource": False, "properties": {},
                      "x-kubernetes-validations": [], "allOf": [], "additionalProperties":
                      None, "dependencies": {}, "definitions": {}, "patternProperties": {}},
                "l": {"type": "array", "items": {"type": "integer"},
                      "x-kubernetes-list-type": "atomic", "x-kubernetes-list-map-keys": [],
                      "x-kubernetes-map-type": None},
            },
        }
        expected = {
            "type": "object",
            "properties": {
                "l": {"type": "array", "items": {"type": "integer"},
                      "x-kubernetes-list-type": "atomic"},
                "n": {"type": "number", "maximum": 5, "minimum": -1.5,
                      "exclusiveMinimum": True, "multipleOf": 0.5},
                "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "s": {"type": "string", "maxLength": 0, "enum": ["a", None]},
            },
        }
        r = self.create(crd_with(schema))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(warnings(r), [])
        self.assertEqual(schema_of(r.json()), expected)
        got = schema_of(self.stored())
        self.assertEqual(got, expected)
        self.assertEqual(list(got["properties"]["n"]),
                         ["type", "maximum", "minimum", "exclusiveMinimum", "multipleOf"])
        self.assertIsInstance(got["properties"]["n"]["maximum"], int)
        self.assertEqual(r.body.count(b'"properties":{"l"'), 1)

    def test_raw_json_kept_as_written(self):
        """default, enum and example keep their values whole, keys in the order
        written."""
        schema = {"type": "object", "properties": {"m": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "default": {"z": 1, "a": {"y": None, "b": [1, 2.5]}},
            "example": {"z": 1}}}}
        r = self.create(crd_with(schema))
        self.assertEqual(r.code, 201, r.body)
        self.assertIn(b'"default":{"z":1,"a":{"y":null,"b":[1,2.5]}}', r.body)


class WriteVerbTests(Base):
    """Update, the patches and apply decode the result as create does."""

    def setUp(self):
        super().setUp()
        r = self.create(crd_with({"type": "object", "properties": {"x": {"type": "string"}}}))
        self.assertEqual(r.code, 201, r.body)
        self.path = f"{CRDS}/{NAME}"

    def test_update(self):
        crd = self.stored()
        schema_of(crd)["properties"]["x"].update({"bar": 1, "nullable": False})
        r = self.admin.put(self.path + "?fieldValidation=Strict", crd)
        self.assertEqual(r.code, 400, r.body)
        self.assertEqual(r.json()["message"], CANNOT + "strict decoding error: "
                         f'unknown field "{SCHEMA_PATH}.properties.x.bar"')
        r = self.admin.put(self.path, crd)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(warnings(r), warned([f"{SCHEMA_PATH}.properties.x.bar"]))
        self.assertEqual(schema_of(r.json())["properties"]["x"], {"type": "string"})

    def test_merge_patch(self):
        patch = {"spec": {"versions": [crd_with({"type": "object", "properties": {
            "x": {"type": "string", "descripton": "d"}}})["spec"]["versions"][0]]}}
        r = self.admin.patch(self.path + "?fieldValidation=Strict", patch)
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.json()["message"].endswith(
            f'strict decoding error: unknown field "{SCHEMA_PATH}.properties.x.descripton"'))
        r = self.admin.patch(self.path, patch)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(warnings(r), warned([f"{SCHEMA_PATH}.properties.x.descripton"]))
        self.assertEqual(schema_of(r.json())["properties"]["x"], {"type": "string"})

    def test_json_patch(self):
        patch = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/y",
                  "value": {"type": "integer", "foo": True, "nullable": False}}]
        r = self.admin.patch(self.path + "?fieldValidation=Strict", patch,
                             content_type="application/json-patch+json")
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.json()["message"].endswith(
            f'strict decoding error: unknown field "{SCHEMA_PATH}.properties.y.foo"'))
        r = self.admin.patch(self.path, patch, content_type="application/json-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(schema_of(r.json())["properties"]["y"], {"type": "integer"})

    def test_strategic_merge_patch_merges_rules_by_rule(self):
        """x-kubernetes-validations merge by ``rule`` (upstream's patchMergeKey)."""
        patch = {"spec": {"versions": [{"name": "v1", "served": True, "storage": True,
                                        "schema": {"openAPIV3Schema": {
                                            "type": "object",
                                            "x-kubernetes-validations": [{"rule": "true"}],
                                            "properties": {"x": {"type": "string"}}}}}]}}
        r = self.admin.patch(self.path, patch,
                             content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(schema_of(r.json())["x-kubernetes-validations"], [{"rule": "true"}])

    def test_apply(self):
        """Server-side apply decodes the configuration by the same schema: zero values
        go, and a keyword JSONSchemaProps does not declare is structured-merge-diff's
        500 (apply's field validation only sees repeated keys)."""
        applied = crd_with({"type": "object", "nullable": False, "properties": {
            "x": {"type": "string", "description": ""}}})
        r = self.admin.patch(self.path + "?fieldManager=m&force=true", applied,
                             content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(schema_of(r.json()), {"type": "object", "properties": {
            "x": {"type": "string"}}})
        r = self.admin.patch(self.path + "?fieldManager=m&force=true", applied,
                             content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 200, r.body)
        schema_of(applied)["properties"]["x"]["foo"] = 1
        schema_of(applied)["properties"]["l"] = {"type": "array", "items": {"type": "string",
                                                                            "bar": 1}}
        r = self.admin.patch(self.path + "?fieldManager=m&force=true", applied,
                             content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 500, r.body)
        self.assertEqual(r.json()["message"], (
            "failed to create typed patch object (/widgets.example.com; "
            "apiextensions.platform.io/v1, Kind=CustomResourceDefinition): "
            ".spec.versions[0].schema.openAPIV3Schema.properties.x.foo: field not declared "
            "in schema"))


class EncodingTests(Base):
    gates = "CBORServingAndStorage=true"

    def test_yaml(self):
        r = self.create(yaml.safe_dump(crd_with(WITH_UNKNOWN)).encode(),
                        "?fieldValidation=Strict", content_type="application/yaml")
        self.assertEqual(r.code, 400, r.body)
        self.assertIn(f'unknown field "{REPORTED[-1]}"', r.json()["message"])
        body = yaml.safe_dump(crd_with(VALID_WITH_UNKNOWN), sort_keys=False).encode()
        r = self.create(body, content_type="application/yaml")
        self.assertEqual(r.code, 201, r.body)
        # In key order: sigs.k8s.io/yaml makes JSON of the document through Go maps.
        self.assertEqual(warnings(r), sorted(warned(VALID_REPORTED)))
        self.assertEqual(schema_of(r.json()), PRUNED)

    def test_cbor(self):
        r = self.create(cbor2.dumps(crd_with(WITH_UNKNOWN)), "?fieldValidation=Strict",
                        content_type="application/cbor")
        self.assertEqual(r.code, 400, r.body)
        self.assertIn(f'unknown field "{REPORTED[0]}"', r.json()["message"])
        r = self.create(cbor2.dumps(crd_with(VALID_WITH_UNKNOWN)),
                        content_type="application/cbor",
                        headers={"Accept": "application/cbor"})
        self.assertEqual(r.code, 201, r.body)
        # CBOR answers decode to immutable maps and tuples: compared as encoded.
        self.assertEqual(cbor2.dumps(schema_of(cbor2.loads(r.body))), cbor2.dumps(PRUNED))

    def test_protobuf(self):
        """A Protobuf body carries no unknown keyword; it is stored in the same typed
        form as JSON (Go's order, sorted maps, no zero values)."""
        schema = copy.deepcopy(PRUNED)
        r = self.create(ProtobufCodec().encode(crd_with(schema)), content_type=PROTOBUF)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(json.dumps(schema_of(r.json())), json.dumps(PRUNED))


class BoundsTests(Base):
    gates = "CBORServingAndStorage=true"

    def test_deep_schema_refused(self):
        """A schema nested 200 deep is refused with a 400 Status in every encoding, never
        a RecursionError or a 5xx."""
        crd = crd_with(nested(200))
        bodies = {"application/json": json.dumps(crd).encode(),
                  "application/yaml": json.dumps(crd).encode(),  # JSON is YAML
                  "application/cbor": cbor2.dumps(crd),
                  PROTOBUF: ProtobufCodec().encode(crd)}
        for content_type, body in bodies.items():
            r = self.create(body, content_type=content_type)
            self.assertEqual((content_type, r.code), (content_type, 400), r.body)
            self.assertEqual(r.json()["kind"], "Status")
            self.assertTrue(r.json()["message"].startswith(CANNOT), r.json()["message"])

    def test_deepest_schema_accepted(self):
        """A schema nested near the bodies' limit (45 levels of
        ``properties``: two JSON levels each) is created, in JSON and in Protobuf."""
        for plural, body, content_type in (
                ("widgets", json.dumps(crd_with(nested(45))).encode(), "application/json"),
                ("gadgets", ProtobufCodec().encode(crd_with(nested(45), "gadgets")),
                 PROTOBUF)):
            r = self.create(body, content_type=content_type)
            self.assertEqual(r.code, 201, r.body)
            got = schema_of(r.json())
            for _ in range(45):
                got = got["properties"]["p"]
            self.assertEqual(got, {"type": "string"})


def nested(depth: int) -> dict:
    """A schema of ``depth`` objects, each holding the next as property ``p``."""
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"p": schema}}
    return schema
