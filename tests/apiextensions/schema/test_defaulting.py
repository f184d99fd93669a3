"""
Defaulting against the cases of apiextensions-apiserver v1.36's ``TestDefault``
(pkg/apiserver/schema/defaulting/algorithm_test.go).
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions.schema import defaulting
from platformd.apiextensions.schema.node import Node


def d(value) -> dict:
    return {"default": value}


CASES = [
    ("scalar", "4", d("foo"), "4"),
    ("scalar array", "[1,2]", {"items": d("foo")}, "[1,2]"),
    ("object array", '[{"a":1},{"b":1},{"c":1}]',
     {"items": {"properties": {"a": d("A"), "b": d("B"), "c": d("C")}}},
     '[{"a":1,"b":"B","c":"C"},{"a":"A","b":1,"c":"C"},{"a":"A","b":"B","c":1}]'),
    ("object array object",
     '{"array":[{"a":1},{"b":2}],"object":{"a":1},'
     '"additionalProperties":{"x":{"a":1},"y":{"b":2}}}',
     {"properties": {
         "array": {"items": {"properties": {"a": d("A"), "b": d("B")}}},
         "object": {"properties": {"a": d("N"), "b": d("O")}},
         "additionalProperties": {"additionalProperties": {
             "properties": {"a": d("alpha"), "b": d("beta")}}},
         "foo": d("bar")}},
     '{"array":[{"a":1,"b":"B"},{"a":"A","b":2}],"object":{"a":1,"b":"O"},'
     '"additionalProperties":{"x":{"a":1,"b":"beta"},"y":{"a":"alpha","b":2}},"foo":"bar"}'),
    ("empty and null", '[{},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":null},{"a":[]},{"a":{}}]',
     {"items": {"properties": {"a": d("A")}}},
     '[{"a":"A"},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":"A"},{"a":[]},{"a":{}}]'),
    ("null in nullable list", "[null]",
     {"nullable": True, "items": {"properties": {"a": d("A")}}}, "[null]"),
    ("null in non-nullable list", "[null]", {"items": d("A")}, '["A"]'),
    ("null in nullable object", '{"a": null}',
     {"properties": {"a": {"nullable": True, "default": "A"}}}, '{"a": null}'),
    ("null in non-nullable object", '{"a": null}', {"properties": {"a": d("A")}},
     '{"a": "A"}'),
    ("null in nullable object with additionalProperties", '{"a": null}',
     {"additionalProperties": {"nullable": True, "default": "A"}}, '{"a": null}'),
    ("null in non-nullable object with additionalProperties", '{"a": null}',
     {"additionalProperties": d("A")}, '{"a": "A"}'),
    ("null unknown field", '{"a": null}', {"additionalProperties": True}, '{"a": null}'),
]


class UpstreamDefaultTests(SynchronousTestCase):
    def test_default(self):
        for name, given, schema, expected in CASES:
            value = json.loads(given)
            defaulting.default(value, Node(schema))
            self.assertEqual((name, value), (name, json.loads(expected)))
