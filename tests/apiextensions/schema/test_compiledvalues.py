"""
``compiledvalues`` against the interpreter it compiles (``values.validate``): the same
errors, in the same order, for a corpus of schemas using every keyword and of values
made from them (valid, of other types, null, with unknown or missing fields, out of
range), on create and on update (ratcheting against old values equal or not).
"""

from __future__ import annotations

import copy
import random

from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions.schema import compiledvalues, values

STRING = {"type": "string"}

SCHEMAS = [
    {"type": "object", "required": ["roleRef"], "properties": {
        "roleRef": {"type": "object", "required": ["apiGroup", "kind", "name"],
                    "properties": {"apiGroup": STRING, "name": STRING,
                                   "kind": {"type": "string", "enum": ["ClusterRole", "Role"]}}},
        "subjects": {"type": "array", "maxItems": 3, "items": {
            "type": "object", "required": ["kind", "name"],
            "properties": {"kind": STRING, "name": STRING, "namespace": STRING}}}}},
    {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "multipleOf": 2},
        "ratio": {"type": "number", "format": "float", "exclusiveMaximum": True,
                  "maximum": 1.5, "multipleOf": 0.5},
        "small": {"type": "integer", "format": "int32"},
        "name": {"type": "string", "maxLength": 3, "minLength": 1, "pattern": "^[a-z]+$"},
        "when": {"type": "string", "format": "date-time"},
        "ip": {"type": "string", "format": "ipv4"},
        "odd": {"type": "string", "format": "not-a-format"},
        "port": {"x-kubernetes-int-or-string": True},
        "flag": {"type": "boolean", "nullable": True},
        "mode": {"type": "string", "enum": ["a", "b", None]},
        "shape": {"type": "object", "enum": [{"x": 1}, {"x": [1, 2]}],
                  "x-kubernetes-preserve-unknown-fields": True},
        "n": {"type": "number", "enum": [1, 2.5]},
    }},
    {"type": "object", "minProperties": 1, "maxProperties": 3,
     "additionalProperties": {"type": "array", "minItems": 1, "uniqueItems": True,
                              "items": {"type": "integer"}}},
    {"type": "object", "properties": {"a": STRING}, "additionalProperties": False,
     "required": ["a", "b"]},
    {"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "required": ["k"], "properties": {
                      "k": STRING, "v": {"type": "integer", "maximum": 3}}}},
        "plain": {"type": "array", "items": {"type": "string", "enum": ["x"]}}}},
    {"type": "object", "properties": {
        "x": {"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 1}]},
        "y": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
        "z": {"type": "object", "allOf": [{"required": ["p"]}, {"required": ["q"]}],
              "not": {"required": ["r"]}, "x-kubernetes-preserve-unknown-fields": True},
    }},
]

SCALARS = [None, True, False, 0, 1, 3, 4, 11, -1, 2.5, 1.0, 0.3, 3000000000, 1 << 64,
           "", "a", "ab", "ABCD", "b", "x", "Role", "Other", "10.0.0.1", "not-an-ip",
           "2026-01-01T00:00:00Z", "yesterday"]


def _value(schema, rng: random.Random, depth: int = 0):
    """A value of ``schema``, sometimes of another type, null or with extra fields."""
    roll = rng.random()
    if roll < 0.12 or depth > 4:
        return rng.choice(SCALARS)
    if roll < 0.17:
        return rng.choice([[], {}, [1, 1], {"x": 1}])
    enum = schema.get("enum")
    if enum and roll < 0.4:
        return copy.deepcopy(rng.choice(enum))
    kind = schema.get("type")
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        out = {}
        for key, sub in (schema.get("properties") or {}).items():
            if rng.random() < 0.8:
                out[key] = _value(sub, rng, depth + 1)
        extra = schema.get("additionalProperties")
        for _ in range(rng.randrange(3)):
            sub = extra if isinstance(extra, dict) else {}
            out[rng.choice(["p", "q", "r", "s"])] = _value(sub, rng, depth + 1)
        return out
    if kind == "array":
        items = schema.get("items") or {}
        return [_value(items, rng, depth + 1) for _ in range(rng.randrange(5))]
    return rng.choice(SCALARS)


def _changed(value, rng: random.Random):
    """``value`` with one part replaced, or as it is."""
    value = copy.deepcopy(value)
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        value[key] = _changed(value[key], rng)
        return value
    if isinstance(value, list) and value and rng.random() < 0.7:
        i = rng.randrange(len(value))
        value[i] = _changed(value[i], rng)
        return value
    return rng.choice(SCALARS) if rng.random() < 0.5 else value


def _errors(errors) -> list:
    return [(e.code, e.name, e.message, repr(e.value), e.valid, e.values) for e in errors]


class CompiledValuesTests(SynchronousTestCase):
    def assertSame(self, schema, check, data, old=values.NO_OLD):
        errors: list = []
        check(data, "", old, errors)
        self.assertEqual(_errors(errors),
                         _errors(values.validate(schema, data, "", old).errors),
                         f"schema {schema!r}\nvalue {data!r}\nold {old!r}")

    def test_corpus(self):
        """Errors as the interpreter's for every value of the corpus, on create and on
        update (the old value equal, changed in one place, or unrelated)."""
        rng = random.Random(31)
        found = 0
        for schema in SCHEMAS:
            check = compiledvalues.compile_schema(schema)
            for _ in range(400):
                data = _value(schema, rng)
                self.assertSame(schema, check, data)
                self.assertSame(schema, check, data, copy.deepcopy(data))
                self.assertSame(schema, check, data, _changed(data, rng))
                self.assertSame(schema, check, data, _value(schema, rng))
                found += bool(values.validate(schema, data).errors)
        self.assertGreater(found, 500)  # the corpus is not only valid objects

    def test_messages(self):
        """A few of the compiled errors as they read (the corpus compares the rest)."""
        schema = SCHEMAS[0]
        errors: list = []
        compiledvalues.compile_schema(schema)(
            {"roleRef": {"kind": "Other", "name": 1}, "subjects": [{}] * 4}, "",
            values.NO_OLD, errors)
        self.assertEqual([e.message for e in errors], [
            'roleRef.name in body must be of type string: "integer"',
            "roleRef.kind in body should be one of [ClusterRole Role]",
            "roleRef.apiGroup in body is required",
            "subjects[0].kind in body is required", "subjects[0].name in body is required",
            "subjects[1].kind in body is required", "subjects[1].name in body is required",
            "subjects[2].kind in body is required", "subjects[2].name in body is required",
            "subjects[3].kind in body is required", "subjects[3].name in body is required",
            "subjects in body should have at most 3 items"])

    def test_nothing_to_check(self):
        """No schema: nothing reported, as the interpreter."""
        errors: list = []
        compiledvalues.compile_schema(None)({"a": 1}, "", values.NO_OLD, errors)
        self.assertEqual(errors, [])
