"""
Pruning against cases of apiextensions-apiserver v1.36's ``TestPrune``
(pkg/apiserver/schema/pruning/algorithm_test.go): objects, the pruned result, and the
paths reported for fieldValidation, not at a resource root.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions.schema import pruning
from platformd.apiextensions.schema.node import Node

OBJ = {"type": "object"}
PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

NESTED_PRESERVE = {
    "type": "object", "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "alpha": {"type": "string"}, "beta": {"type": "number"},
        "pruning": {"type": "object", "properties": {"preserving": PRESERVE, "pruning": OBJ}},
        "preserving": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"preserving": PRESERVE,
                           "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": True},
                           "pruning": OBJ}},
        "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "additionalProperties": {"type": "object", "properties": {"specified": OBJ}}},
        "preservingAdditionalPropertiesKeyPruneValues": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"specified": OBJ}}},
    }}

NESTED_IN = """
{
  "unspecified":"bar", "alpha": "abc", "beta": 42.0,
  "unspecifiedObject": {"unspecified": "bar"},
  "pruning": {
     "unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
     "pruning": {"unspecified": "bar"}, "apiVersion": "unknown",
     "preserving": {"unspecified": "bar"}
  },
  "preserving": {
     "unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
     "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"},
     "preservingUnknownType": [{"foo":true},{"bar":true}]
  },
  "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
     "foo": {"specified": {"unspecified":"bar"}, "unspecified": "bar"}
  },
  "preservingAdditionalPropertiesKeyPruneValues": {
     "foo": {"specified": {"unspecified":"bar"}, "unspecified": "bar"}
  }
}"""

NESTED_OUT = """
{
  "unspecified":"bar", "alpha": "abc", "beta": 42.0,
  "unspecifiedObject": {"unspecified": "bar"},
  "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
  "preserving": {
     "unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"}, "pruning": {},
     "preserving": {"unspecified": "bar"},
     "preservingUnknownType": [{"foo":true},{"bar":true}]
  },
  "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {"foo": {"specified": {}}},
  "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}}
}"""

CASES = [
    ("scalar", "4", {}, "4", []),
    ("scalar array", "[1,2]", {"items": {}}, "[1,2]", []),
    ("object array", '[{"a":1},{"b":1},{"a":1,"b":2,"c":3}]',
     {"items": {"properties": {"a": {}, "c": {}}}}, '[{"a":1},{},{"a":1,"c":3}]',
     ["[1].b", "[2].b"]),
    ("object array with nil schema", '[{"a":1},{"b":1},{"a":1,"b":2,"c":3}]', None,
     "[{},{},{}]", ["[0].a", "[1].b", "[2].a", "[2].b", "[2].c"]),
    ("object array object",
     '{"array":[{"a":1},{"b":1},{"a":1,"b":2,"c":3}],"unspecified":{"a":1},'
     '"specified":{"a":1,"b":2,"c":3}}',
     {"properties": {"array": {"items": {"properties": {"a": {}, "c": {}}}},
                     "specified": {"properties": {"a": {}, "c": {}}}}},
     '{"array":[{"a":1},{},{"a":1,"c":3}],"specified":{"a":1,"c":3}}',
     ["array[1].b", "array[2].b", "specified.b", "unspecified"]),
    ("nested x-kubernetes-preserve-unknown-fields", NESTED_IN, NESTED_PRESERVE, NESTED_OUT,
     ["preserving.pruning.unspecified",
      "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
      "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified."
      "unspecified",
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
      "pruning.apiVersion", "pruning.pruning.unspecified", "pruning.unspecified",
      "pruning.unspecifiedObject"]),
    ("additionalProperties with schema", '{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1}}}',
     {"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}},
     '{"a":1,"c":{"a":1,"b":2,"c":{}}}', ["b", "c.c.a"]),
    ("additionalProperties with bool",
     '{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1, "apiVersion": "unknown"}}}',
     {"properties": {"a": {}, "c": {"additionalProperties": False}}},
     '{"a":1,"c":{"a":1,"b":2,"c":{}}}', ["b", "c.c.a", "c.c.apiVersion"]),
]


class UpstreamPruneTests(SynchronousTestCase):
    def test_prune(self):
        for name, given, schema, expected, pruned in CASES:
            value = json.loads(given)
            node = Node(schema) if schema is not None else None
            got = pruning.prune(value, node, False)
            self.assertEqual((name, value), (name, json.loads(expected)))
            self.assertEqual((name, got), (name, pruned))
