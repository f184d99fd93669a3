"""
``celpaths``: the field paths a rule reads of ``self``/``oldSelf``, and rules evaluated
over only those parts of the value giving what they give over the whole value.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd import cel
from platformd.apiextensions.schema import celpaths, celtypes, rules
from platformd.apiextensions.schema.node import Node

STRING = {"type": "string"}

SPEC = Node({"type": "object", "properties": {
    "roleRef": {"type": "object", "properties": {"name": STRING, "kind": STRING}},
    "subjects": {"type": "array", "items": {"type": "object", "properties": {
        "name": STRING, "namespace": STRING, "if": STRING}}},
    "if": {"type": "object", "properties": {"x-y": {"type": "integer"}}},
    "labels": {"type": "object", "additionalProperties": STRING},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "ratio": {"type": "number"},
}})

VALUES = [
    {},
    {"roleRef": {"name": "view", "kind": "Role"}, "subjects": [{"name": "a", "namespace": "n"}]},
    {"roleRef": {"name": ""}, "subjects": [], "if": {"x-y": 3}, "ratio": 2},
    {"roleRef": None, "subjects": [{"if": "x"}, {"name": "b"}], "labels": {"a": "1"},
     "free": {"a": {"b": [1, 2]}}, "ratio": 0.5},
    {"roleRef": "oops", "subjects": {"name": "x"}, "labels": {}, "free": {"a": 1}},
]

RULES = [
    "self.roleRef.name != ''",
    "has(self.roleRef) && has(self.roleRef.kind)",
    "self.subjects.all(s, s.name != '')",
    "self.subjects.exists(s, has(s.__namespace__) && s.__namespace__ == 'n')",
    "self.__if__.x__dash__y > 1",
    "self.if.x__dash__y > 1",
    "self.labels.a == '1'",
    "'a' in self.labels",
    "self.free.a.b[0] == 1",
    "self.ratio > 1.0",
    "size(self) > 2",
    "self == self",
    "self['roleRef'].name == 'view'",
    "self.subjects.map(self, self.name).size() > 0",
    "self.roleRef.name == oldSelf.roleRef.name",
    "[self.roleRef, {'k': self.labels}].size() == 2",
]


def _outcome(program, variables):
    try:
        return ("value", program.evaluate(variables))
    except cel.EvaluationError as error:
        return ("error", str(error))


class ReadsTests(SynchronousTestCase):
    def reads(self, source: str, name: str = "self"):
        return celpaths.reads(rules._environment().parse(source).parsed().expr, name)

    def test_selections(self):
        """Field selections from the variable are its paths, presence tests too."""
        self.assertEqual(self.reads("self.a.b != '' && has(self.c.d) && self.e.all(x, x.f)"),
                         {("a", "b"), ("c", "d"), ("e",)})
        self.assertEqual(self.reads("self.a.b == oldSelf.c", "oldSelf"), {("c",)})
        self.assertEqual(self.reads("oldSelf.a > 1"), frozenset())

    def test_whole(self):
        """Any other use of the variable needs it whole."""
        for source in ("size(self) > 0", "self == oldSelf", "self['a'] == 1",
                       "self.?a.orValue(1) == 1", "[1].all(self, self > 0)",
                       "self.a.all(self, self > 0)", "{'k': self}.size() == 1",
                       "[{'a': 1}].all(self, self.a == 1)"):
            self.assertIsNone(self.reads(source), source)

    def test_trie(self):
        """A path another extends keeps its value whole."""
        self.assertEqual(celpaths.trie(frozenset({("a", "b"), ("a",), ("c", "d")})),
                         {"a": celpaths.WHOLE, "c": {"d": celpaths.WHOLE}})
        self.assertIs(celpaths.trie(None), celpaths.WHOLE)


class BoundTests(SynchronousTestCase):
    def test_same_outcome(self):
        """Every rule evaluates over the bound parts as over the whole value: the same
        result or the same error, for each value of the corpus."""
        for source in RULES:
            program, _ = rules._runtime(source)
            expr = program.parsed().expr
            wanted = (celpaths.trie(celpaths.reads(expr, "self")),
                      celpaths.trie(celpaths.reads(expr, "oldSelf")))
            for value in VALUES:
                for old in VALUES[:2]:
                    whole = {"self": celtypes.cel_value(SPEC, value),
                             "oldSelf": celtypes.cel_value(SPEC, old)}
                    part = {"self": celpaths.bound(SPEC, value, wanted[0]),
                            "oldSelf": celpaths.bound(SPEC, old, wanted[1])}
                    self.assertEqual(_outcome(program, part), _outcome(program, whole),
                                     f"{source} over {value!r}")

    def test_only_what_is_read(self):
        """The bound value holds the selected fields, under their CEL names."""
        value = {"roleRef": {"name": "v", "kind": "Role"},
                 "subjects": [{"name": "a", "namespace": "n"}], "if": {"x-y": 1}}
        wanted = celpaths.trie(frozenset({("roleRef", "name"), ("__if__",)}))
        self.assertEqual(celpaths.bound(SPEC, value, wanted),
                         {"roleRef": {"name": "v"}, "__if__": {"x__dash__y": 1}})
        wanted = celpaths.trie(frozenset({("if", "x__dash__y")}))
        self.assertEqual(celpaths.bound(SPEC, value, wanted), {"if": {"x__dash__y": 1}})

    def test_rules_read_once_per_node(self):
        """A node's rules and messages are read once; a messageExpression's paths count."""
        node = Node({"type": "object", "properties": {"a": STRING, "b": STRING},
                     "x-kubernetes-validations": [
                         {"rule": "self.a != ''", "messageExpression": "self.b"}]})
        self.assertEqual([c.message for c in rules.validate(node, {"a": "", "b": "why"}, None,
                                                            "")], ["Invalid value: why"])
        self.assertEqual(node.cel_reads[0], {"a": celpaths.WHOLE, "b": celpaths.WHOLE})
