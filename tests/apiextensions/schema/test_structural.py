"""
The structural schema library against upstream apiextensions-apiserver v1.36's messages
(pkg/apiserver/schema/validation.go, apis/apiextensions/validation/validation.go,
pruning/, defaulting/, cel/validation.go, kube-openapi's validate).
"""

from __future__ import annotations

import copy

from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions.schema import cost
from platformd.apiextensions.schema.structural import INT_OR_STRING, Structural, check
from platformd.goformat import gonumbers
from platformd.model import schema as model

P = "spec.versions[0].schema.openAPIV3Schema"


def obj(**props) -> dict:
    return {"type": "object", "properties": props}


def texts(causes) -> list:
    return [f"{c.field}: {c.message}" for c in causes]


class CheckTests(SynchronousTestCase):
    def test_valid(self):
        schema = obj(spec=obj(replicas={"type": "integer", "default": 1, "minimum": 0}))
        self.assertEqual(check(schema, P), [])

    def test_type_required_for_fields(self):
        self.assertEqual(texts(check(obj(spec=obj(foo={})), P)), [
            f"{P}.properties[spec].properties[foo].type: Required value: must not be empty "
            "for specified object fields"])

    def test_root(self):
        self.assertEqual(texts(check({"type": "string", "nullable": True}, P)), [
            f"{P}.nullable: Forbidden: nullable cannot be true at the root",
            f'{P}.type: Invalid value: "string": must be object at the root'])

    def test_status_subresource_root(self):
        schema = {"type": "object", "properties": {}, "anyOf": [{"required": ["spec"]}]}
        self.assertEqual(texts(check(schema, P, status_enabled=True)), [
            f'{P}: Invalid value: {{"anyOf":[{{"required":["spec"]}}],"properties":{{}},'
            '"type":"object"}: only [Description Type Format Title Maximum ExclusiveMaximum '
            "Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems "
            "UniqueItems MultipleOf Required Items Properties ExternalDocs Example "
            "XPreserveUnknownFields XValidations] fields are allowed at the root of the "
            "schema if the status subresource is enabled"])
        self.assertEqual(check(schema, P), [])

    def test_formats(self):
        s = Structural.parse(obj(t={"type": "string", "format": "date-time"},
                                 u={"type": "string", "format": "uuid"},
                                 x={"type": "string", "format": "no-such-format"}))
        self.assertEqual(texts(s.validate({"t": "yesterday", "u": "x", "x": "anything"})), [
            't: Invalid value: "yesterday": t in body must be of type date-time: "yesterday"',
            'u: Invalid value: "x": u in body must be of type uuid: "x"'])
        self.assertEqual(s.validate({"t": "2024-01-02T03:04:05Z",
                                     "u": "123e4567-e89b-12d3-a456-426614174000"}), [])

    def test_patterns_as_re2(self):
        schema = obj(a={"type": "string", "pattern": "(ab"},
                     b={"type": "string", "pattern": "(?=x)y"},
                     c={"type": "string", "pattern": "^\\pL+\\z"})
        self.assertEqual(texts(check(schema, P)), [
            f'{P}.properties[a].pattern: Invalid value: "(ab": must be a valid regular '
            "expression, but isn't: error parsing regexp: missing closing ): `(ab`",
            f'{P}.properties[b].pattern: Invalid value: "(?=x)y": must be a valid regular '
            "expression, but isn't: error parsing regexp: invalid or unsupported Perl syntax: "
            "`(?=`"])
        s = Structural.parse(obj(c={"type": "string", "pattern": "^\\pL+\\z"}))
        self.assertEqual(s.validate({"c": "héllo"}), [])
        self.assertEqual(len(s.validate({"c": "h1"})), 1)

    def test_items_required(self):
        self.assertIn(f"{P}.properties[l].items: Required value: must be specified",
                      texts(check(obj(l={"type": "array"}), P)))

    def test_nested_forbidden_and_completeness(self):
        schema = obj(a={"type": "string", "anyOf": [{"type": "string",
                                                     "description": "x"}]},
                     b={"type": "object", "allOf": [{"properties": {"c": {}}}]})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[a].anyOf[0].description: Forbidden: must be empty to be "
            "structural",
            f"{P}.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"])
        # completeness is checked from the root's value validation (complete.go)
        root = {"type": "object", "properties": {}, "allOf": [{"properties": {"c": {}}}]}
        self.assertEqual(texts(check(root, P)), [
            f"{P}.properties[c]: Required value: because it is defined in "
            f"{P}.allOf[0].properties[c]"])

    def test_int_or_string_patterns(self):
        schema = obj(port={"x-kubernetes-int-or-string": True,
                           "anyOf": [{"type": "integer"}, {"type": "string"}]})
        self.assertEqual(check(schema, P), [])
        schema = obj(port={"x-kubernetes-int-or-string": True,
                           "x-kubernetes-preserve-unknown-fields": True})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[port].x-kubernetes-preserve-unknown-fields: Invalid value: true: "
            "must be false if x-kubernetes-int-or-string is true"])

    def test_embedded_resource(self):
        schema = obj(e={"type": "object", "x-kubernetes-embedded-resource": True})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[e].properties: Required value: must not be empty if "
            "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"])

    def test_metadata_restricted(self):
        schema = obj(metadata={"type": "object", "properties": {"labels": {"type": "object"}}})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[metadata]: Forbidden: must not specify anything other than name "
            "and generateName, but metadata is implicitly specified"])
        ok = obj(metadata={"type": "object", "properties": {"name": {"type": "string",
                                                                     "maxLength": 10}}})
        self.assertEqual(check(ok, P), [])

    def test_list_types(self):
        schema = obj(l={"type": "array", "x-kubernetes-list-type": "map",
                        "items": {"type": "object", "properties": {"k": {"type": "string"}}}})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty "
            "if x-kubernetes-list-type is map"])
        schema["properties"]["l"]["x-kubernetes-list-map-keys"] = ["k"]
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[l].items.properties[k].default: Required value: this property is "
            "in x-kubernetes-list-map-keys, so it must have a default or be a required property"])
        self.assertEqual(texts(check(obj(s={"type": "string", "x-kubernetes-list-type": "x"}),
                                     P)), [
            f'{P}.properties[s].type: Invalid value: "string": must be array if '
            "x-kubernetes-list-type is specified",
            f'{P}.properties[s].x-kubernetes-list-type: Unsupported value: "x": supported '
            'values: "atomic", "set", "map"'])

    def test_unsupported_keywords(self):
        schema = obj(a={"type": "array", "uniqueItems": True, "items": {"type": "string"}},
                     b={"$ref": "#/x", "type": "string"})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since "
            "the runtime complexity becomes quadratic",
            f"{P}.properties[b].$ref: Forbidden: $ref is not supported"])

    def test_defaults(self):
        # kube-openapi names the default's root "" ("%s in %s": " in body ...").
        schema = obj(a={"type": "integer", "default": "x"},
                     b={"type": "object", "default": {"z": 1}, "properties": {}},
                     metadata={"type": "object", "default": {}})
        self.assertEqual(texts(check(schema, P)), [
            f'{P}.properties[a].default: Invalid value: "string":  in body must be of type '
            'integer: "string"',
            f'{P}.properties[b].default: Invalid value: {{"z":1}}: must not have unknown fields',
            f"{P}.properties[metadata].default: Forbidden: must not be set in top-level "
            "metadata"])

    def test_default_must_pass_rules(self):
        schema = obj(x={"type": "integer", "default": 0,
                        "x-kubernetes-validations": [{"rule": "self > 0"}]})
        self.assertEqual(texts(check(schema, P)), [
            f"{P}.properties[x].default: Invalid value: 0: failed rule: self > 0"])

    def test_rule_fields_and_compilation(self):
        schema = obj(spec={"type": "object", "x-kubernetes-validations": [
            {"rule": " "}, {"rule": "1 +", "message": "m"}, {"rule": "'a'"},
            {"rule": "self.x > 0", "reason": "Nope"}]})
        causes = texts(check(schema, P))
        rules = f"{P}.properties[spec].x-kubernetes-validations"
        self.assertEqual(causes[0], f"{rules}[0].rule: Required value: rule is not specified")
        self.assertEqual(causes[1], f'{rules}[3].reason: Unsupported value: "Nope": supported '
                         'values: "FieldValueDuplicate", "FieldValueForbidden", '
                         '"FieldValueInvalid", "FieldValueRequired"')
        schema["properties"]["spec"]["x-kubernetes-validations"] = [
            {"rule": "1 +", "message": "m"}, {"rule": "'a'"}]
        causes = texts(check(schema, P))
        self.assertTrue(causes[0].startswith(
            f'{rules}[0].rule: Invalid value: {{"Rule":"1 +","Message":"m","MessageExpression":'
            '"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: '
            "ERROR: <input>:1:"), causes[0])
        self.assertTrue(causes[1].endswith(": cel expression must evaluate to a bool"))

    def test_old_self_uncorrelatable(self):
        schema = obj(l={"type": "array", "maxItems": 10, "items": {
            "type": "object", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}})
        self.assertEqual(texts(check(schema, P)), [
            f'{P}.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: '
            f'"self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the '
            f"schema within {P}.properties[l]"])

    def test_cost_limits(self):
        unbounded = obj(spec={"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self.names.all(x, self.names.all(y, x == y))"}]})
        rule = f"{P}.properties[spec].x-kubernetes-validations[0].rule"
        self.assertEqual(texts(check(unbounded, P)), [
            f"{rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x "
            "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
            "arrays, maps, and strings are declared)",
            f"{rule}: Forbidden: contributed to estimated rule cost total exceeding cost limit "
            "for entire OpenAPIv3 schema",
            f"{P}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
            "OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the "
            "rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
            "strings are declared)"])
        bounded = copy.deepcopy(unbounded)
        names = bounded["properties"]["spec"]["properties"]["names"]
        names["maxItems"], names["items"]["maxLength"] = 10, 5
        self.assertEqual(check(bounded, P), [])
        self.assertEqual(Structural.parse(bounded).rule_cost_causes(P), [])

    def test_unbounded_message_expression(self):
        """cel-go knows no size for string(int): the concatenation's cost is unbounded."""
        schema = obj(spec={"type": "object", "properties": {"x": {"type": "integer"}},
                           "x-kubernetes-validations": [{
                               "rule": "self.x > 0",
                               "messageExpression": "'x is ' + string(self.x)"}]})
        where = f"{P}.properties[spec].x-kubernetes-validations[0].messageExpression"
        self.assertEqual(texts(check(schema, P))[0],
                         f"{where}: Forbidden: estimated messageExpression cost exceeds budget "
                         "by factor of more than 100x (try simplifying the rule, or adding "
                         "maxItems, maxProperties, and maxLength where arrays, maps, and "
                         "strings are declared)")

    def test_estimates(self):
        """Costs as cel-go's estimator gives them for the schema's sizes."""
        from platformd.apiextensions.schema import celtypes
        from platformd.apiextensions.schema.node import Node

        node = Node(obj(s={"type": "string", "maxLength": 10},
                        l={"type": "array", "maxItems": 5,
                           "items": {"type": "string", "maxLength": 2}},
                        n={"type": "integer"}))
        env = celtypes.Declarations(node, False).environment()

        def estimated(source):
            return cost.estimate(env.compile(source)._compiled.serialize(), node)

        self.assertEqual(estimated("self.n > 0"), 3)  # ident, select, call
        self.assertEqual(estimated("has(self.n)"), 1)  # presence tests are free
        # startsWith: 0.1 per character of the argument (a 1-character literal)
        self.assertEqual(estimated("self.s.startsWith('a')"), 2 + 1)
        # == on strings: 0.1 × the smaller size (maxLength 10 is 40 bytes, the literal 3)
        self.assertEqual(estimated("self.s == 'abc'"), 2 + 1)
        # all(): the range (2), the result (1), and 5 items × (condition
        # @not_strictly_false(@result): 2 + step @result && x.size() < 3: 1 + 3)
        self.assertEqual(estimated("self.l.all(x, x.size() < 3)"), 2 + 1 + 5 * (2 + 1 + 3))

    def test_field_path(self):
        s = self.rules_schema()
        self.assertEqual(texts(s.validate_rules({"spec": {"m": {"k": {"x": "no"}}}})), [
            "spec.m[k].x: Invalid value: bad"])

    def rules_schema(self):
        schema = obj(spec={"type": "object", "properties": {"m": {
            "type": "object", "additionalProperties": {
                "type": "object", "properties": {"x": {"type": "string"}}}}},
            "x-kubernetes-validations": [{"rule": "self.m.all(k, self.m[k].x == 'ok')",
                                          "fieldPath": ".m['k'].x", "message": "bad"}]})
        self.assertEqual(check(schema, P), [])
        return Structural.parse(schema)

    def test_cost_message(self):
        self.assertIn("factor of 1.200000x", cost.message("estimated rule cost", 12, 10))
        self.assertIn("factor of 2.5x", cost.message("estimated rule cost", 25, 10))


SCHEMA = obj(
    spec=obj(
        replicas={"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
        name={"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
        mode={"type": "string", "enum": ["a", "b"]},
        port={"x-kubernetes-int-or-string": True},
        items={"type": "array", "maxItems": 2, "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["k"],
               "items": {"type": "object", "required": ["k"],
                         "properties": {"k": {"type": "string"}}}},
        labels={"type": "object", "maxProperties": 1,
                "additionalProperties": {"type": "string"}},
        free={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        nothing={"type": "string", "nullable": True},
        embedded={"type": "object", "x-kubernetes-embedded-resource": True,
                  "x-kubernetes-preserve-unknown-fields": True},
    ),
)


class ValidateTests(SynchronousTestCase):
    def setUp(self):
        self.assertEqual(check(SCHEMA, P), [])
        self.s = Structural.parse(SCHEMA)

    def test_messages(self):
        body = {"spec": {"replicas": 11, "name": "ABCD", "mode": "c", "port": True,
                         "items": [{"k": "a"}, {"k": "b"}, {}],
                         "labels": {"a": "1", "b": 2}, "nothing": None}}
        self.assertEqual(texts(self.s.validate(body)), [
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or "
            "equal to 10",
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
            'spec.mode: Unsupported value: "c": supported values: "a", "b"',
            'spec.port: Invalid value: "boolean": spec.port in body must be of type '
            'integer,string: "boolean"',
            "spec.items[2].k: Required value",
            "spec.items: Too many: 3: must have at most 2 items",
            "spec.labels: Too many: 2: must have at most 1 item",
            'spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of type '
            'string: "integer"',
        ])

    def test_null_and_type(self):
        self.assertEqual(texts(self.s.validate({"spec": {"replicas": None, "name": 1}})), [
            'spec.replicas: Invalid value: "null": spec.replicas in body must be of type '
            'integer: "null"',
            'spec.name: Invalid value: "integer": spec.name in body must be of type string: '
            '"integer"'])

    def test_ratcheting(self):
        """On update, a value equal to its correlated old value keeps passing."""
        old = {"spec": {"replicas": 11, "items": [{"k": "a", "x": 1}], "name": "ok"}}
        new = {"spec": {"replicas": 11, "items": [{"k": "a", "x": 1}], "name": "ABCD"}}
        self.assertEqual(texts(self.s.validate(new, old)), [
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'"])
        self.assertEqual(len(self.s.validate(new)), 3)

    def test_numbers_as_kube_openapi(self):
        """A limit that fits the schema's type applies to an integer natively, truncated
        (int64(limit)); a value out of its format's range is reported at the root."""
        s = Structural.parse(obj(
            i={"type": "integer", "format": "int32", "multipleOf": 2, "minimum": 0},
            n={"type": "number", "multipleOf": 0.1, "maximum": 10.5},
            m={"type": "integer", "multipleOf": 0.5}))
        self.assertEqual(texts(s.validate({"i": -1})), [
            "i: Invalid value: -1: i in body should be a multiple of 2",
            "i: Invalid value: -1: i in body should be greater than or equal to 0"])
        self.assertEqual(texts(s.validate({"i": 3000000000})), [
            ': Invalid value: "": Checked value must be of type integer with format int32 in i'])
        self.assertEqual(s.validate({"n": 0.3, "m": 3}), [])
        self.assertEqual(texts(s.validate({"n": 0.35})), [
            "n: Invalid value: 0.35: n in body should be a multiple of 0.1"])
        self.assertEqual(texts(s.validate({"n": 11})), [
            "n: Invalid value: 0: factor MultipleOf declared for n must be positive: 0",
            "n: Invalid value: 11: n in body should be less than or equal to 10"])

    def test_junctions(self):
        s = Structural.parse(obj(x={"type": "integer", "anyOf": [{"minimum": 5},
                                                                {"maximum": 1}]}))
        self.assertEqual(texts(s.validate({"x": 3})), [
            ': Invalid value: "": "x" must validate at least one schema (anyOf)',
            "x: Invalid value: 3: x in body should be greater than or equal to 5"])

    def test_embedded_objectmeta(self):
        body = {"spec": {"embedded": {"kind": "x_y", "metadata": {"name": "a/b"}}}}
        self.assertEqual(texts(self.s.validate(body)), [
            "spec.embedded.apiVersion: Required value",
            'spec.embedded.kind: Invalid value: "x_y": may have mixed case, but should '
            "otherwise match: a DNS-1035 label must consist of lower case alphanumeric "
            "characters or '-', start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
            "is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.embedded.metadata.name: Invalid value: \"a/b\": may not contain '/'"])


class ListTypeTests(SynchronousTestCase):
    SCHEMA = obj(
        s={"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        m={"type": "array", "x-kubernetes-list-type": "map",
           "x-kubernetes-list-map-keys": ["a", "b"],
           "items": {"type": "object", "required": ["a", "b"],
                     "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}},
        one={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
             "items": {"type": "object", "properties": {"k": {"type": "string", "default": "x"}}}})

    def test_duplicates(self):
        self.assertEqual(check(self.SCHEMA, P), [])
        s = Structural.parse(self.SCHEMA)
        body = {"s": ["x", "y", "x", "x"], "m": [{"a": "1", "b": 1}, {"a": "1", "b": 1}],
                "one": [{}, {}]}
        self.assertEqual(texts(s.validate_lists(body)), [
            's[2]: Duplicate value: "x"',
            'm[1]: Duplicate value: {"a":"1","b":1}',
            "one[1]: Duplicate value: {}"])
        # on update, only when the old object had none
        self.assertEqual(s.validate_lists(body, body), [])

    def test_blocking_errors_skip_rules(self):
        schema = obj(x={"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]})
        s = Structural.parse(schema)
        self.assertEqual(texts(s.validate_object({"x": "a"})), [
            'x: Invalid value: "string": x in body must be of type integer: "string"',
            ": Invalid value: null: some validation rules were not checked because the object "
            "was invalid; correct the existing errors to complete validation"])
        self.assertEqual(texts(s.validate_object({"x": 0})), [
            "x: Invalid value: 0: failed rule: self > 0"])


class PruneDefaultTests(SynchronousTestCase):
    def setUp(self):
        self.s = Structural.parse(SCHEMA)

    def test_prune(self):
        body = {"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "n"}, "bad": 1,
                "spec": {"zzz": 1, "items": [{"k": "a", "q": 1}], "free": {"any": {"x": 1}},
                         "labels": {"a": "b"},
                         "embedded": {"apiVersion": "v1", "kind": "P",
                                      "metadata": {"name": "n", "foo": 1, "labels": 3},
                                      "other": 1}}}
        self.assertEqual(self.s.prune(body), ["bad", "spec.items[0].q", "spec.zzz",
                                              "spec.embedded.metadata.foo"])
        self.assertEqual(body["spec"]["embedded"]["metadata"], {"name": "n"})
        self.assertEqual(body["spec"]["free"], {"any": {"x": 1}})
        self.assertEqual(body["spec"]["embedded"]["other"], 1)
        self.assertEqual(body["metadata"], {"name": "n"})

    def test_default(self):
        """Pruning drops nulls neither nullable nor defaulted; defaulting fills the rest."""
        body: dict = {"spec": {"replicas": None, "name": None, "nothing": None}}
        self.assertEqual(self.s.prune(body), [])
        self.assertEqual(body, {"spec": {"replicas": None, "nothing": None}})
        self.s.default(body)
        self.assertEqual(body, {"spec": {"replicas": 1, "nothing": None}})
        empty: dict = {}
        self.s.default(empty)
        self.assertEqual(empty, {})  # spec has no default: nothing to default below it


class RuleTests(SynchronousTestCase):
    def rules(self, *rules, **props):
        spec = {"type": "object", "properties": props or {"x": {"type": "integer"}},
                "x-kubernetes-validations": list(rules)}
        schema = obj(spec=spec)
        self.assertEqual(check(schema, P), [])
        return Structural.parse(schema)

    def test_messages_and_reasons(self):
        s = self.rules({"rule": "self.x > 0"}, {"rule": "self.x > 1", "message": "big"},
                       {"rule": "self.x > 2", "reason": "FieldValueForbidden",
                        "fieldPath": ".x", "message": "no"},
                       {"rule": "self.x > 3", "messageExpression": "self.x < 1 ? 'x is 0' : 'x is 1'"})
        self.assertEqual(texts(s.validate_rules({"spec": {"x": 0}})), [
            "spec: Invalid value: failed rule: self.x > 0",
            "spec: Invalid value: big",
            "spec.x: Forbidden: no",
            "spec: Invalid value: x is 0"])

    def test_scalar_value_shown(self):
        schema = obj(name={"type": "string", "x-kubernetes-validations": [
            {"rule": "self.startsWith('a')"}]})
        s = Structural.parse(schema)
        self.assertEqual(texts(s.validate_rules({"name": "b"})), [
            "name: Invalid value: \"b\": failed rule: self.startsWith('a')"])

    def test_evaluation_error(self):
        s = self.rules({"rule": "self.x > 0"})
        self.assertEqual(texts(s.validate_rules({"spec": {}})), [
            'spec: Invalid value: "object": no such key: x evaluating rule: self.x > 0'])

    def test_typed_compilation(self):
        """self is typed from the schema: unknown fields and type errors do not compile;
        the root's metadata has only name and generateName."""
        schema = obj(spec={"type": "object", "properties": {"x": {"type": "integer"}},
                           "x-kubernetes-validations": [{"rule": "self.y > 0"},
                                                        {"rule": "self.x == 'a'"}]})
        schema["x-kubernetes-validations"] = [{"rule": "self.metadata.labels.size() > 0"},
                                              {"rule": "self.metadata.name != ''"}]
        causes = texts(check(schema, P))
        self.assertEqual(len(causes), 3, causes)
        # a node's own rules after its properties', as upstream appends them
        self.assertIn("compilation failed: ERROR: <input>:1:5: undefined field 'y'",
                      causes[0])
        self.assertIn("found no matching overload for '_==_' applied to '(int, string)'",
                      causes[1])
        self.assertIn("compilation failed: ERROR: <input>:1:14: undefined field 'labels'",
                      causes[2])

    def test_keywords_as_field_names(self):
        """upstream's "valid for escaping" and "invalid for escaping" compilation cases:
        a keyword property is both __if__ and if; self itself is the object."""
        schema = {"type": "object", "properties": {
            "namespace": {"type": "array", "items": {"type": "array",
                                                     "items": {"type": "string"}}},
            "if": {"type": "integer"}, "self": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "size(self.__namespace__[0]) == 10", "message": "m"},
                {"rule": "self.__if__ == 10"}, {"rule": "self.self == 10"},
                {"rule": "size(self.namespace[0]) == 10", "message": "m"},
                {"rule": "self.if == 10"}, {"rule": "self == 10"}]}
        causes = texts(check(schema, P))
        self.assertEqual(len(causes), 1, causes)
        self.assertIn(f"{P}.x-kubernetes-validations[5].rule: Invalid value: ", causes[0])
        self.assertIn("found no matching overload for '_==_'", causes[0])
        del schema["x-kubernetes-validations"][5]
        s = Structural.parse(schema)
        self.assertEqual(s.validate_rules({"namespace": [["a"] * 10], "if": 10, "self": 10}),
                         [])

    def test_escaping_and_formats(self):
        s = self.rules({"rule": "self.foo__dash__bar == 1 && self.__in__ == 'x' && "
                                "self.t > timestamp('2020-01-01T00:00:00Z') && "
                                "self.d > duration('1s') && self.n > 1.5"},
                       **{"foo-bar": {"type": "integer"}, "in": {"type": "string"},
                          "t": {"type": "string", "format": "date-time"},
                          "d": {"type": "string", "format": "duration"},
                          "n": {"type": "number"}})
        good = {"spec": {"foo-bar": 1, "in": "x", "t": "2021-02-03T04:05:06Z", "d": "1m",
                         "n": 2}}
        self.assertEqual(s.validate_rules(good), [])
        good["spec"]["n"] = 1
        self.assertEqual(len(s.validate_rules(good)), 1)

    def test_ratcheting(self):
        """A rule without oldSelf that fails on an unchanged value is let through."""
        s = self.rules({"rule": "self.x > 0"})
        self.assertEqual(s.validate_rules({"spec": {"x": 0}}, {"spec": {"x": 0}}), [])
        self.assertEqual(len(s.validate_rules({"spec": {"x": 0}}, {"spec": {"x": 2}})), 1)

    def test_transition_rules(self):
        s = self.rules({"rule": "self.x >= oldSelf.x", "message": "no going back"})
        self.assertEqual(s.validate_rules({"spec": {"x": 0}}, None), [])
        self.assertEqual(texts(s.validate_rules({"spec": {"x": 0}}, {"spec": {"x": 1}})), [
            "spec: Invalid value: no going back"])

    def test_optional_old_self(self):
        """An optionalOldSelf rule runs on create with oldSelf empty, and on update with
        the old value; it is type-checked with oldSelf an optional."""
        s = self.rules({"rule": "!oldSelf.hasValue() || self.x >= oldSelf.value().x",
                        "optionalOldSelf": True, "message": "no going back"},
                       {"rule": "oldSelf.hasValue() || self.x < 5", "optionalOldSelf": True,
                        "messageExpression": "oldSelf.hasValue() ? 'updated' : 'created'"})
        self.assertEqual(s.validate_rules({"spec": {"x": 0}}, None), [])
        self.assertEqual(texts(s.validate_rules({"spec": {"x": 7}}, None)), [
            "spec: Invalid value: created"])
        self.assertEqual(s.validate_rules({"spec": {"x": 7}}, {"spec": {"x": 1}}), [])
        self.assertEqual(texts(s.validate_rules({"spec": {"x": 0}}, {"spec": {"x": 1}})), [
            "spec: Invalid value: no going back"])

    def test_optional_old_self_compile_errors(self):
        """Without optionalOldSelf, oldSelf is no optional; with it, a compile error's
        position is the rule's own; setting it without using oldSelf is refused."""
        schema = obj(spec={"type": "object", "properties": {"x": {"type": "integer"}},
                           "x-kubernetes-validations": [
                               {"rule": "oldSelf.hasValue()"},
                               {"rule": "oldSelf.x > 0", "optionalOldSelf": True},
                               {"rule": "self.x > 0", "optionalOldSelf": True}]})
        causes = texts(check(schema, P))
        self.assertEqual(len(causes), 3, causes)
        self.assertIn("x-kubernetes-validations[0].rule: Invalid value: ", causes[0])
        self.assertIn("found no matching overload for 'hasValue'", causes[0])
        self.assertIn("x-kubernetes-validations[1].rule: Invalid value: ", causes[1])
        self.assertIn("compilation failed: ERROR: <input>:1:11: found no matching overload "
                      "for '_>_' applied to '(optional_type(int), int)'\n"
                      " | oldSelf.x > 0\n | ..........^", causes[1])
        self.assertIn("x-kubernetes-validations[2].optionalOldSelf: Invalid value: true: "
                      "may not be set if oldSelf is not used in rule", causes[2])

    def test_library_rules(self):
        """Rules use Kubernetes' libraries, with their errors as upstream words them."""
        s = self.rules(
            {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))",
             "message": "at most 1Gi"},
            {"rule": "self.ports.isSorted() && self.ports.sum() < 100"},
            {"rule": "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'",
             "messageExpression": "url(self.endpoint).getScheme()"},
            {"rule": "cidr('10.0.0.0/8').containsIP(self.address)"},
            {"rule": "self.endpoint.find('[0-9]+') != '' && self.?address.orValue('') != ''"},
            memory={"type": "string", "maxLength": 20},
            ports={"type": "array", "items": {"type": "integer"}, "maxItems": 10},
            endpoint={"type": "string", "maxLength": 100},
            address={"type": "string", "maxLength": 50})
        good = {"memory": "512Mi", "ports": [1, 2], "endpoint": "https://a1.example",
                "address": "10.1.2.3"}
        self.assertEqual(s.validate_rules({"spec": good}), [])
        bad = {"memory": "2Gi", "ports": [3, 2], "endpoint": "http://example",
               "address": "11.0.0.1"}
        self.assertEqual(texts(s.validate_rules({"spec": bad})), [
            "spec: Invalid value: at most 1Gi",
            "spec: Invalid value: failed rule: self.ports.isSorted() && self.ports.sum() < 100",
            "spec: Invalid value: http",
            "spec: Invalid value: failed rule: cidr('10.0.0.0/8').containsIP(self.address)",
            "spec: Invalid value: failed rule: self.endpoint.find('[0-9]+') != '' && "
            "self.?address.orValue('') != ''"])
        self.assertEqual(texts(s.validate_rules({"spec": dict(good, memory="10Mo")})), [
            'spec: Invalid value: "object": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: at most 1Gi"])

    def test_library_rules_type_checked(self):
        """A library function applied to the wrong type does not compile."""
        schema = obj(spec={"type": "object", "properties": {"x": {"type": "integer"}},
                           "x-kubernetes-validations": [{"rule": "quantity(self.x).sign() > 0"}]})
        causes = texts(check(schema, P))
        self.assertEqual(len(causes), 1, causes)
        self.assertIn("found no matching overload for 'quantity' applied to '(int)'", causes[0])


class ModelTests(SynchronousTestCase):
    def test_to_model(self):
        struct = Structural.parse(SCHEMA).to_model("io.example.v1.Widget")
        self.assertIsInstance(struct, model.Struct)
        self.assertNotIn("metadata", struct.props)
        self.assertEqual(list(struct.props), ["spec"])
        spec = struct.props["spec"].node
        self.assertEqual(spec.props["items"].node.list_type, "map")
        self.assertEqual(spec.props["items"].node.map_keys, ("k",))
        self.assertEqual(spec.props["port"].node.format, INT_OR_STRING)
        self.assertTrue(spec.props["nothing"].node.nullable)
        self.assertTrue(spec.props["free"].node.preserve_unknown)
        self.assertIsInstance(spec.props["labels"].node, model.MapOf)

    def test_decoding_is_lenient(self):
        struct = Structural.parse(SCHEMA).to_model("W")
        ctx = model.DecodeContext()
        out = struct.decode({"spec": {"replicas": "x", "zz": 1}}, "", ctx)
        self.assertEqual(out, {"spec": {"replicas": "x"}})
        self.assertEqual(ctx.texts(), ['unknown field "spec.zz"'])
        big = struct.decode({"spec": {"replicas": gonumbers.BigNumber("1e30")}}, "", ctx)
        self.assertEqual(big, {"spec": {"replicas": 1e30}})
