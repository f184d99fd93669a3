"""
The static cost estimator against upstream's numbers: the cases of
apiextensions-apiserver v1.36's ``TestCostEstimation`` (pkg/apiserver/schema/cel/
compilation_test.go), those whose rules use CEL's standard library and those of the
Kubernetes libraries and the strings extension ("extended library ...").  Each
schema is built without limits (the "calc" cost) and with ``maxItems``,
``maxProperties`` or ``maxLength`` set (the "set" cost); the cost is one evaluation's
maximum (``CompilationResult.MaxCost``), the rule's ``self`` not a resource root.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions.schema import celtypes, cost
from platformd.apiextensions.schema.node import Node

#: ``costLimit`` of the upstream test (StaticEstimatedCRDCostLimit).
COST_LIMIT = 100_000_000


def _scalar(kind: str) -> dict:
    """``parseRuleType``: formats are strings, int-or-string has no type."""
    if kind in ("duration", "date", "date-time"):
        return {"type": "string", "format": kind}
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    return {"type": kind}


def _limited(schema: dict, key: str, limit):
    if limit is not None:
        schema[key] = limit
    return schema


def _with_rule(schema: dict, rule: str) -> dict:
    schema["x-kubernetes-validations"] = [{"rule": rule}]
    return schema


def genArrayWithRule(kind: str, rule: str):
    return lambda limit: _with_rule(_limited({"type": "array", "items": _scalar(kind)},
                                             "maxItems", limit), rule)


def genArrayOfArraysWithRule(kind: str, rule: str):
    return lambda limit: _with_rule(_limited(
        {"type": "array", "items": {"type": "array", "items": {"type": kind}}},
        "maxItems", limit), rule)


def _object_for_map() -> dict:
    return {"type": "object", "required": ["required"],
            "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}}


def genObjectArrayWithRule(rule: str):
    return lambda limit: _with_rule(_limited({"type": "array", "items": _object_for_map()},
                                             "maxItems", limit), rule)


def getMapArrayWithRule(kind: str, rule: str):
    return lambda limit: _with_rule(_limited(
        {"type": "array", "items": {"type": "object", "additionalProperties": {"type": kind}}},
        "maxItems", limit), rule)


def genMapWithRule(kind: str, rule: str):
    return lambda limit: _with_rule(_limited(
        {"type": "object", "additionalProperties": _scalar(kind)}, "maxProperties", limit),
        rule)


def genStringWithRule(rule: str):
    return lambda limit: _with_rule(_limited({"type": "string"}, "maxLength", limit), rule)


def genEnumWithRuleAndValues(rule: str, *values: str):
    return lambda limit: _with_rule(_limited({"type": "string", "enum": list(values)},
                                             "maxLength", limit), rule)


def genBytesWithRule(rule: str):
    return lambda limit: _with_rule(_limited({"type": "string", "format": "byte"},
                                             "maxLength", limit), rule)


def genNestedSpecWithRule(rule: str):
    return lambda limit: _with_rule(_limited(
        {"type": "object",
         "additionalProperties": _limited({"type": "string"}, "maxLength", limit)},
        "maxProperties", limit), rule)


def genAllMaxNestedSpecWithRootRule(rule: str):
    def build(limit):
        inner = _limited(_object_for_map(), "maxProperties", limit)
        items = _limited({"type": "object", "additionalProperties": inner}, "maxProperties",
                         limit)
        return _with_rule(_limited({"type": "array", "items": items}, "maxItems", limit), rule)
    return build


def genOneMaxNestedSpecWithRootRule(rule: str):
    def build(limit):
        items = _limited({"type": "object", "additionalProperties": _object_for_map()},
                         "maxProperties", limit)
        return _with_rule({"type": "array", "items": items}, rule)
    return build


def genObjectForMap() -> dict:
    return _object_for_map()


def genArrayForMap() -> dict:
    return {"type": "array", "items": {"type": "number"}}


def genMapForMap() -> dict:
    return {"type": "object", "additionalProperties": {"type": "number"}}


def genStringArrayWithRule(rule: str):
    """``arrayType`` of ``maxLength``-limited strings, ``maxItems`` the same limit."""
    return lambda limit: _with_rule(_limited(
        {"type": "array", "items": _limited({"type": "string"}, "maxLength", limit)},
        "maxItems", limit), rule)


def genReplaceObject(limit):
    return _with_rule({"type": "object", "properties": {
        "str": _limited({"type": "string"}, "maxLength", limit),
        "before": {"type": "string", "maxLength": 2},
        "after": {"type": "string", "maxLength": 4}}},
        "self.str.replace(self.before, self.after) == 'does not matter'")


def genSplitObject(limit):
    string = _limited({"type": "string"}, "maxLength", limit)
    return _with_rule({"type": "object", "properties": {"str": string, "separator": string}},
                      "self.str.split(self.separator) == []")


def genMapWithCustomItemRule(item: dict, rule: str):
    return lambda limit: _with_rule(_limited({"type": "object", "additionalProperties": item},
                                             "maxProperties", limit), rule)


#: (name, schema generator, calc cost, calc cost exceeds, set limit, set cost, set exceeds)
CASES = [
    ('number array with all', genArrayWithRule('number', 'self.all(x, true)'),
     4718591, 0, 10, 32, 0),
    ('string array with all', genArrayWithRule('string', 'self.all(x, true)'),
     3145727, 0, 20, 62, 0),
    ('boolean array with all', genArrayWithRule('boolean', 'self.all(x, true)'),
     1887437, 0, 5, 17, 0),
    ('array of number arrays with all', genArrayOfArraysWithRule('number', 'self.all(x, true)'),
     3145727, 0, 100, 302, 0),
    ('array of objects with all', genObjectArrayWithRule('self.all(x, true)'),
     555128, 0, 50, 152, 0),
    ('map of numbers with all', genMapWithRule('number', 'self.all(x, true)'),
     1348169, 0, 10, 32, 0),
    ('map of numbers with has', genMapWithRule('number', 'has(self.x)'),
     0, 0, 100, 0, 0),
    ('map of strings with all', genMapWithRule('string', 'self.all(x, true)'),
     1179647, 0, 3, 11, 0),
    ('map of strings with has', genMapWithRule('string', 'has(self.x)'),
     0, 0, 550, 0, 0),
    ('map of booleans with all', genMapWithRule('boolean', 'self.all(x, true)'),
     943718, 0, 100, 302, 0),
    ('map of booleans with has', genMapWithRule('boolean', 'has(self.x)'),
     0, 0, 1024, 0, 0),
    ('string with contains', genStringWithRule("self.contains('test')"),
     314574, 0, 10, 5, 0),
    ('string with startsWith', genStringWithRule("self.startsWith('test')"),
     2, 0, 15, 2, 0),
    ('string with endsWith', genStringWithRule("self.endsWith('test')"),
     2, 0, 30, 2, 0),
    ('concat string', genStringWithRule('size(self + "hello") > size("hello")'),
     314578, 0, 4, 7, 0),
    ('index of array with numbers', genArrayWithRule('number', 'self[1] == 0.0'),
     2, 0, 5000, 2, 0),
    ('index of array with strings', genArrayWithRule('string', 'self[1] == self[1]'),
     314577, 0, 8, 314577, 0),
    ('O(n^2) loop with numbers', genArrayWithRule('number', 'self.all(x, self.all(y, true))'),
     0, 100000000, 10, 352, 0),
    ('O(n^3) loop with numbers', genArrayWithRule('number', 'self.all(x, self.all(y, self.all(z, true)))'),
     0, 100000000, 10, 3552, 0),
    ('regex matches simple', genStringWithRule('self.matches("x")'),
     314574, 0, 50, 22, 0),
    ('regex matches empty string', genStringWithRule('"".matches("(((((((((())))))))))[0-9]")'),
     7, 0, 10, 7, 0),
    ('regex matches empty regex', genStringWithRule('self.matches("")'),
     1, 0, 100, 1, 0),
    ('map of strings with value length', genNestedSpecWithRule('self.all(x, x.contains(self[x]))'),
     2752507, 0, 10, 72, 0),
    ('set array maxLength to zero', genArrayWithRule('number', 'self[3] == 0.0'),
     2, 0, 0, 2, 0),
    ('set map maxLength to zero', genMapWithRule('number', 'self["x"] == 0.0'),
     2, 0, 0, 2, 0),
    ('set string maxLength to zero', genStringWithRule('self == "x"'),
     2, 0, 0, 1, 0),
    ('set bytes maxLength to zero', genBytesWithRule('self == b"x"'),
     2, 0, 0, 1, 0),
    ('set maxLength greater than estimated maxLength', genArrayWithRule('number', 'self.all(x, x == 0.0)'),
     6291454, 0, 6291456, 25165826, 0),
    ('nested types with root rule with all supporting maxLength', genAllMaxNestedSpecWithRootRule('self.all(x, x["y"].required == "z")'),
     7340027, 0, 10, 72, 0),
    ('nested types with root rule with one supporting maxLength', genOneMaxNestedSpecWithRootRule('self.all(x, x["y"].required == "z")'),
     7340027, 0, 10, 7340027, 0),
    ('int-or-string array with all', genArrayWithRule('int-or-string', 'self.all(x, true)'),
     4718591, 0, 10, 32, 0),
    ('index of array with int-or-strings', genArrayWithRule('int-or-string', 'self[0] == 5'),
     3, 0, 10, 3, 0),
    ('index of array with booleans', genArrayWithRule('boolean', 'self[0] == false'),
     2, 0, 25, 2, 0),
    ('index of array of objects', genObjectArrayWithRule('self[0] == null'),
     2, 0, 422, 2, 0),
    ('index of array of array of numnbers', genArrayOfArraysWithRule('number', 'self[0][0] == -1.0'),
     3, 0, 51, 3, 0),
    ('array of number maps with all', getMapArrayWithRule('number', 'self.all(x, x.y == 25.2)'),
     6291452, 0, 12, 74, 0),
    ('index of array of number maps', getMapArrayWithRule('number', 'self[0].x > 2.0'),
     4, 0, 3000, 4, 0),
    ('duration array with all', genArrayWithRule('duration', 'self.all(x, true)'),
     2359295, 0, 5, 17, 0),
    ('index of duration array', genArrayWithRule('duration', 'self[0].getHours() == 2'),
     4, 0, 525, 4, 0),
    ('date array with all', genArrayWithRule('date', 'self.all(x, true)'),
     725936, 0, 15, 47, 0),
    ('index of date array', genArrayWithRule('date', 'self[2].getDayOfMonth() == 13'),
     4, 0, 42, 4, 0),
    ('date-time array with all', genArrayWithRule('date-time', 'self.all(x, true)'),
     428963, 0, 25, 77, 0),
    ('index of date-time array', genArrayWithRule('date-time', 'self[2].getMinutes() == 45'),
     4, 0, 99, 4, 0),
    ('map of int-or-strings with all', genMapWithRule('int-or-string', 'self.all(x, true)'),
     1348169, 0, 15, 47, 0),
    ('map of int-or-strings with has', genMapWithRule('int-or-string', 'has(self.x)'),
     0, 0, 5000, 0, 0),
    ('map of objects with all', genMapWithCustomItemRule(genObjectForMap(), 'self.all(x, true)'),
     428963, 0, 20, 62, 0),
    ('map of objects with has', genMapWithCustomItemRule(genObjectForMap(), 'has(self.x)'),
     0, 0, 9001, 0, 0),
    ('map of number maps with all', genMapWithCustomItemRule(genMapForMap(), 'self.all(x, true)'),
     1179647, 0, 10, 32, 0),
    ('map of number maps with has', genMapWithCustomItemRule(genMapForMap(), 'has(self.x)'),
     0, 0, 101, 0, 0),
    ('map of number arrays with all', genMapWithCustomItemRule(genArrayForMap(), 'self.all(x, true)'),
     1179647, 0, 25, 77, 0),
    ('map of number arrays with has', genMapWithCustomItemRule(genArrayForMap(), 'has(self.x)'),
     0, 0, 40000, 0, 0),
    ('map of durations with all', genMapWithRule('duration', 'self.all(x, true)'),
     1048577, 0, 5, 17, 0),
    ('map of durations with has', genMapWithRule('duration', 'has(self.x)'),
     0, 0, 256, 0, 0),
    ('map of dates with all', genMapWithRule('date', 'self.all(x, true)'),
     524288, 0, 10, 32, 0),
    ('map of dates with has', genMapWithRule('date', 'has(self.x)'),
     0, 0, 65536, 0, 0),
    ('map of date-times with all', genMapWithRule('date-time', 'self.all(x, true)'),
     349526, 0, 25, 77, 0),
    ('map of date-times with has', genMapWithRule('date-time', 'has(self.x)'),
     0, 0, 490, 0, 0),
    ('check cost of size call', genMapWithRule('integer', 'oldSelf.size() == self.size()'),
     5, 0, 10, 5, 0),
    ('check cost of timestamp comparison', genMapWithRule('date-time', 'self["a"] == self["b"]'),
     8, 0, 7, 8, 0),
    ('check cost of duration comparison', genMapWithRule('duration', 'self["c"] == self["d"]'),
     8, 0, 42, 8, 0),
    ('enums with maxLength equals to the longest possible value', genEnumWithRuleAndValues("self.contains('A')", 'A', 'B', 'C', 'LongValue'),
     2, 0, 1000, 401, 0),
    # the libraries' functions with the schema's sizes (library/cost.go)
    ('extended library regex find', genStringWithRule("self.find('[0-9]+') == ''"),
     629147, 0, 10, 11, 0),
    ('extended library join', genStringArrayWithRule("self.join(' ') == 'aa bb'"),
     329853068905, 0, 10, 43, 0),
    ('extended library isSorted', genStringArrayWithRule("self.isSorted() == true"),
     329854432052, 0, 10, 52, 0),
    ('extended library replace', genReplaceObject, 629154, 0, 4, 12, 0),
    ('extended library split', genSplitObject, 629160, 0, 10, 22, 0),
    ('extended library lowerAscii', genStringWithRule("self.lowerAscii() == 'lower!'"),
     314575, 0, 10, 6, 0),
]


def estimate(schema: dict) -> int:
    node = Node(schema)
    env = celtypes.Declarations(node, False).environment()
    program = env.compile(node.rules[0]["rule"])
    return cost.estimate(program._compiled.serialize(), node)


class UpstreamCostTests(SynchronousTestCase):
    def test_cost_estimation(self):
        wrong = []
        for name, generate, calc, calc_exceeds, limit, set_cost, set_exceeds in CASES:
            for label, schema, expected, exceeds in (
                    ("calc", generate(None), calc, calc_exceeds),
                    ("set", generate(limit), set_cost, set_exceeds)):
                got = estimate(schema)
                if expected and got != expected or exceeds and got < exceeds:
                    wrong.append(f"{name} ({label}): {got}, upstream {expected or '>'}"
                                 f"{'' if expected else exceeds}")
        self.assertEqual(wrong, [])
