"""
Random ``openAPIV3Schema``s for the CustomResourceDefinition fuzzer (issue 31, "Bad
input"), and plausible values of them to mutate.

``schema(rng)`` draws a root, mostly structural (every node typed, as a newly written
definition must be) with any keyword upstream's validation reads, often with a value it
refuses: formats odd and unknown, enums of mixed types, defaults of the wrong type,
``pattern``s invalid or catastrophic for a backtracking matcher, limits huge, negative or
zero (``multipleOf: 0``), ``required`` naming absent properties, junctions (allOf/anyOf/
oneOf/not) whose branches carry types (not structural), every ``x-kubernetes-*`` extension
in and out of place (``-list-map-keys`` naming what is not there), and
``x-kubernetes-validations`` drawn from ``RULES``: rules that compile, do not parse, do
not type-check, cost too much, name ``oldSelf`` (transition rules) or use regexes.  Some
roots nest objects 100 to 300 levels deep, some have thousands of properties.

``value(rng, node)`` is an instance that mostly satisfies ``node`` (its required fields,
enums, bounds), so that what is mutated afterwards reaches the validators.
"""

from __future__ import annotations

import random

#: Strings a backtracking regex engine takes exponential time over with these patterns
#: (RE2, upstream's engine, is linear).
CATASTROPHIC = ("^(a+)+$", "^(a|a)*$", "^(a|aa)+$", "(x+x+)+y", "^(\\w+\\s?)*$")
PATTERNS = CATASTROPHIC + (
    "^[a-z]+$", "(ab", "a)", "[a-", "*a", "a**", "\\", "(?=a)", "(?<!a)b", "(a)\\1", "\\pL+",
    "\\p{Greek}", "[[:alpha:]]+", "\\z", "a{1001}", "(a{500}){500}", "(?i)abc", "\\C",
    "x" * 3000, "", ".*", "^$", "(?P<n>a)", "(?P=n)", "[\\d-z]", "\\Q*\\E")
FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "duration",
           "uuid", "ipv4", "ipv6", "cidr", "mac", "hostname", "uri", "email", "password",
           "int-or-string", "quantity", "k8s-short-name", "bsonobjectid", "nope", "", "🙂")
ODD_NUMBERS = (0, -1, 1, 0.1, 1.5, -0.0, 2 ** 31, 2 ** 63 - 1, 2 ** 63, 2 ** 64, 10 ** 30,
               1e308, -1e308, 1e-300)
TEXTS = ("", "a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "x" * 300, "\u00e9t\u00e9", "1",
         "2024-01-01T00:00:00Z", "1.2.3.4", "10Mi", "\x00", "UPPER", "-")

#: (rule, kinds of node it is meant for or None for any): the CEL a node may carry.
RULES = (
    ("self == self", None), ("true", None), ("false", None), ("1 == 1", None),
    ("self ==", None), ("(((", None), ("self.nope == 1", None), ("self + 1 == 'a'", None),
    ("'x'", None), ("self == oldSelf", None), ("oldSelf.x == 1", None),
    ("has(self.a) || !has(self.a)", "object"), ("size(self) <= 5", "string"),
    ("self.matches('^(a+)+$')", "string"), ("self.find('^(a|a)*$') == ''", "string"),
    ("self.findAll('(x+x+)+y').size() == 0", "string"), ("self.matches('(ab')", "string"),
    ("self.all(x, self.all(y, self.all(z, true)))", "array"), ("self.size() < 3", "array"),
    ("self.map(x, self.map(y, self.map(z, self.map(w, 1)))).size() > 0", "array"),
    ("self.all(k, self[k] == self[k])", "map"), ("self < 10", "integer"),
    ("self / 0 == 1", "integer"), ("int(self) < 9223372036854775807", "integer"),
    ("self * 2.0 > 1.0", "number"), ("self == 'a' || self == 1", "int-or-string"),
    ("quantity(self).isInteger()", "string"), ("url(self).getHost() == ''", "string"),
    ("self.x.y.z == 1", "object"), ("[1,2,3].all(i, i > 0)", None),
    ("'a' * 3", None), ("dyn(self) == dyn(self)", None),
    ("self.split('').all(c, self.split('').all(d, c == d))", "string"),
)
#: Rules of ``RULES`` that compile wherever they fit (a tame schema's, mostly).
COMPILING = ("self == self", "true", "false", "size(self) <= 5", "self.matches('^(a+)+$')",
             "self.find('^(a|a)*$') == ''", "self.findAll('(x+x+)+y').size() == 0",
             "self < 10", "self.size() < 3", "self == oldSelf")
MESSAGE_EXPRESSIONS = ("'bad: ' + string(self)", "'x'", "self", "1 +", "'a'.repeat(9)",
                       "string(oldSelf)", "'m'", "''", "'line\\nbreak'")
FIELD_PATHS = (".a", ".spec", "a", ".a[0]", "['a']", ".nope.nope", "..", ".a.b",
               ".metadata.name", "")
REASONS = ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired",
           "FieldValueDuplicate", "Bogus", "")


def _names(rng: random.Random, count: int) -> list:
    pool = ("a", "b", "c", "spec", "status", "name", "in", "if", "x-y", "1x", "Ü", "__a",
            "a.b", "metadata", "kind", "apiVersion", "list", "x" * 70)
    return rng.sample(pool, min(count, len(pool)))


def _rules(rng: random.Random, kind: str, wild: bool) -> list:
    fitting = [r for r, k in RULES if k is None or k == kind] or [r for r, _ in RULES]
    if not wild and rng.random() < 0.7:
        fitting = [r for r in fitting if r in COMPILING] or list(COMPILING)
    out = []
    for _ in range(rng.randrange(1, 4 if wild else 2)):
        rule: dict = {"rule": rng.choice(fitting) if not wild or rng.random() < 0.85
                      else rng.choice(RULES)[0]}
        if rng.random() < 0.3:
            rule["message"] = _pick(rng, ("must be fine", "", "line\nbreak", "m" * 2000),
                                    wild, 1)
        if rng.random() < 0.3:
            rule["messageExpression"] = _pick(rng, MESSAGE_EXPRESSIONS, wild, 2)
        if wild and rng.random() < 0.2:
            rule["fieldPath"] = rng.choice(FIELD_PATHS)
        if rng.random() < 0.2:
            rule["reason"] = _pick(rng, REASONS, wild, 4)
        if wild and rng.random() < 0.1:
            rule["optionalOldSelf"] = rng.choice((True, False, "yes"))
        if wild and rng.random() < 0.03:
            rule = rng.choice(({}, {"rule": ""}, {"rule": 5}, {"rule": "x" * 200000}))
        out.append(rule)
    return out


def _pick(rng: random.Random, pool: tuple, wild: bool, good: int):
    """One of ``pool``; only of its first ``good`` (the values upstream accepts) unless
    ``wild``."""
    return rng.choice(pool if wild else pool[:good])


def _scalar_keywords(rng: random.Random, node: dict, kind: str, wild: bool) -> None:
    if rng.random() < 0.3:
        node["format"] = _pick(rng, FORMATS, wild, 17)
    if rng.random() < 0.2:
        node["enum"] = rng.sample(("a", "b", 1, 2.5, None, True, {"x": 1}, ["l"], "c"),
                                  rng.randrange(0, 4)) if wild else ["a", "b"]
    if wild and rng.random() < 0.2:
        node["default"] = rng.choice(("a", 1, 2.5, True, None, {}, [], "x" * 100))
    if rng.random() < 0.15:
        node["nullable"] = rng.choice((True, False))
    if kind in ("string", "int-or-string"):
        if rng.random() < 0.4:
            node["pattern"] = _pick(rng, PATTERNS, wild, 6)
        for key in ("maxLength", "minLength"):
            if rng.random() < 0.2:
                node[key] = _pick(rng, (0, 1, 5, 2 ** 63 - 1, -1, 2 ** 64, 1.5), wild, 4) \
                    if wild or key == "maxLength" else 0
    if kind in ("integer", "number", "int-or-string"):
        for key in ("minimum", "maximum", "multipleOf"):
            if rng.random() < 0.25:
                node[key] = rng.choice(ODD_NUMBERS) if wild else \
                    {"minimum": -5, "maximum": 100, "multipleOf": 1}[key]
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if rng.random() < 0.1:
                node[key] = _pick(rng, (True, False, 3), wild, 2)


def _extensions(rng: random.Random, node: dict) -> None:
    """Extensions dropped anywhere, mostly where they do not belong."""
    if rng.random() < 0.05:
        node["x-kubernetes-preserve-unknown-fields"] = rng.choice((True, False))
    if rng.random() < 0.03:
        node["x-kubernetes-embedded-resource"] = rng.choice((True, False))
    if rng.random() < 0.03:
        node["x-kubernetes-int-or-string"] = rng.choice((True, False))
    if rng.random() < 0.03:
        node["x-kubernetes-list-type"] = rng.choice(("set", "map", "atomic", "bag"))
    if rng.random() < 0.03:
        node["x-kubernetes-map-type"] = rng.choice(("atomic", "granular", "x"))
    if rng.random() < 0.02:
        node["x-kubernetes-list-map-keys"] = rng.choice((["a"], [], ["nope"], ["a", "a"]))


def _junctions(rng: random.Random, node: dict, depth: int) -> None:
    """allOf/anyOf/oneOf/not: mostly value-only branches (allowed), sometimes typed
    ones or ones with defaults, descriptions or nested junctions (not structural)."""
    for key in ("allOf", "anyOf", "oneOf", "not"):
        if rng.random() < 0.06:
            branches = []
            for _ in range(rng.randrange(1, 3)):
                branch: dict = rng.choice(({"minLength": 1}, {"maximum": 3},
                                           {"required": ["a"]}, {"pattern": "^a"},
                                           {"enum": ["a", 1]}, {"type": "string"},
                                           {"default": 1}, {"description": "d"},
                                           {"properties": {"a": {"maxLength": 2}}},
                                           {"items": {"type": "integer"}},
                                           {"x-kubernetes-validations": [{"rule": "true"}]},
                                           {"anyOf": [{"minimum": 1}]}))
                branches.append(dict(branch))
            node[key] = branches[0] if key == "not" else branches


def node(rng: random.Random, depth: int = 0, kinds=None, wild: bool = True) -> dict:
    """One random schema node (and what is below it); unless ``wild``, one that a
    definition may hold, mostly (the rules it carries may still be refused)."""
    kinds = kinds or ("object", "object", "map", "array", "string", "string", "integer",
                      "number", "boolean", "int-or-string", "preserve", "embedded",
                      "untyped")[:12 + wild]
    kind = rng.choice(kinds if depth < 6 else ("string", "integer", "boolean"))
    out: dict = {}
    if kind == "object":
        out["type"] = "object"
        names = _names(rng, rng.randrange(0, 5))
        out["properties"] = {n: node(rng, depth + 1, wild=wild) for n in names}
        if rng.random() < 0.3:
            out["required"] = rng.sample(names + ["absent"] * wild,
                                         rng.randrange(0, len(names) + 1 + wild))
        if rng.random() < 0.1:
            out["maxProperties"] = _pick(rng, (0, 2, -1, 2 ** 63), wild, 2)
    elif kind == "map":
        out["type"] = "object"
        out["additionalProperties"] = node(rng, depth + 1, wild=wild) \
            if not wild or rng.random() < 0.8 else rng.choice((True, False, "x"))
        if rng.random() < 0.3:
            out["maxProperties"] = _pick(rng, (0, 3, 10 ** 6, -5, 2 ** 63), wild, 3)
        if wild and rng.random() < 0.05:
            out["properties"] = {"a": {"type": "string"}}  # both: refused
    elif kind == "array":
        out["type"] = "array"
        if rng.random() < 0.3:
            item = node(rng, depth + 1, ("object",), wild)
            item["properties"] = dict(item.get("properties", {}), a={"type": "string"},
                                      b={"type": "integer"})
            out["items"] = item
            out["x-kubernetes-list-type"] = "map"
            out["x-kubernetes-list-map-keys"] = _pick(rng, (["a"], ["a", "b"], ["nope"], [],
                                                            ["a", "a"]), wild, 2)
            if not wild or rng.random() < 0.5:
                item["required"] = ["a"]
                item["properties"]["b"]["default"] = 0
        elif rng.random() < 0.95:
            out["items"] = node(rng, depth + 1, wild=wild)
            if rng.random() < 0.3:
                out["x-kubernetes-list-type"] = _pick(rng, ("atomic", "set", "map", "x"), wild, 1)
        for key in ("maxItems", "minItems"):
            if rng.random() < 0.25:
                out[key] = _pick(rng, (0, 2, 10 ** 7, -1, 2 ** 63), wild, 3)
        if wild and rng.random() < 0.05:
            out["uniqueItems"] = True
    elif kind == "int-or-string":
        out["x-kubernetes-int-or-string"] = True
        if wild and rng.random() < 0.2:
            out["type"] = rng.choice(("string", "integer"))  # not with the extension
        _scalar_keywords(rng, out, kind, wild)
    elif kind == "preserve":
        out["type"] = "object"
        out["x-kubernetes-preserve-unknown-fields"] = True
        if rng.random() < 0.5:
            out["properties"] = {"a": node(rng, depth + 1, wild=wild)}
    elif kind == "embedded":
        out["type"] = "object"
        out["x-kubernetes-embedded-resource"] = True
        out["x-kubernetes-preserve-unknown-fields"] = not wild or rng.random() < 0.8
        if rng.random() < 0.5:
            out["properties"] = {"spec": node(rng, depth + 1, wild=wild),
                                 "metadata": {"type": "object"}}
    elif kind == "untyped":
        if rng.random() < 0.5:
            out["description"] = "no type"
        if rng.random() < 0.3:
            out["type"] = rng.choice(("null", "nope", "", "Object", ["string"]))
    else:
        out["type"] = kind
        _scalar_keywords(rng, out, kind, wild)
    if rng.random() < 0.15:
        out["x-kubernetes-validations"] = _rules(rng, kind if kind != "object" or
                                                 "additionalProperties" not in out else "map",
                                                 wild)
    if not wild:
        return out
    _junctions(rng, out, depth)
    _extensions(rng, out)
    if rng.random() < 0.05:
        out["description"] = rng.choice(("d", "x" * 5000, "\x00"))
    if rng.random() < 0.02:
        out[rng.choice(("$ref", "id", "definitions", "patternProperties", "dependencies",
                        "additionalItems", "externalDocs", "example", "title",
                        "x-unknown"))] = {"a": 1}
    return out


def deep(depth: int, leaf: dict) -> dict:
    """Objects nested ``depth`` levels, ``leaf`` at the bottom, built without recursion."""
    out = leaf
    for _ in range(depth):
        out = {"type": "object", "properties": {"a": out}}
    return out


def schema(rng: random.Random, wild: bool = True) -> dict:
    """A root ``openAPIV3Schema``: ``spec`` and ``status`` (for the subresources), with
    now and then a deep chain or a huge object, or (``wild``) the root itself broken."""
    roll = rng.random()
    root: dict = {"type": "object", "properties": {
        "spec": node(rng, 1, ("object",), wild),
        "status": node(rng, 1, ("object", "preserve"), wild)}}
    spec = root["properties"]["spec"]
    spec.setdefault("properties", {})
    spec["properties"]["replicas"] = {"type": "integer"}
    spec["properties"]["selector"] = {"type": "string"}
    if roll < 0.06:
        spec["properties"]["deep"] = deep(rng.choice((20, 40, 60, 120, 200)), rng.choice(
            ({"type": "string"}, {"type": "string", "x-kubernetes-validations":
                                  [{"rule": "self == oldSelf"}]})))
    elif roll < 0.09:
        spec["properties"]["wide"] = {"type": "object", "properties": {
            f"p{i}": {"type": rng.choice(("string", "integer"))}
            for i in range(rng.choice((500, 3000)))}}
    elif roll < 0.12 and wild:
        root = rng.choice(({}, {"type": "string"}, {"type": "object", "nullable": True},
                           {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                           {"type": "object", "properties": {"metadata": {
                               "type": "object", "properties": {"name": {
                                   "type": "string", "default": "x"}}}}},
                           {"type": "object", "additionalProperties": {"type": "string"}}))
    elif roll < 0.15:
        root["x-kubernetes-validations"] = _rules(rng, "object", wild)
    return root


def value(rng: random.Random, node: dict, depth: int = 0):
    """A plausible instance of ``node`` (which ``schema`` made); iterative below a chain
    of single-property objects so that a deep schema gives an equally deep value."""
    if not isinstance(node, dict):
        return None
    chain = []
    while depth + len(chain) < 400 and set(node.get("properties", {})) == {"a"} \
            and node.get("type") == "object":
        chain.append("a")
        node = node["properties"]["a"]
    out = _value(rng, node, depth + len(chain))
    for key in reversed(chain):
        out = {key: out}
    return out


def _value(rng: random.Random, node: dict, depth: int):
    if "enum" in node and isinstance(node["enum"], list) and node["enum"] and \
            rng.random() < 0.8:
        return rng.choice(node["enum"])
    if node.get("x-kubernetes-int-or-string"):
        return rng.choice((1, "1", "50%", 0, -1, 2 ** 63, "", "aaaaaaaaaaaaaaaaaaaaaaaaaa!"))
    kind = node.get("type")
    if kind == "object" or "properties" in node or "additionalProperties" in node:
        if node.get("x-kubernetes-embedded-resource"):
            return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"},
                    "spec": value(rng, node.get("properties", {}).get("spec", {}), depth + 1)}
        out = {}
        if depth < 60:
            for name, child in node.get("properties", {}).items():
                if rng.random() < 0.7 or name in node.get("required", ()):
                    out[name] = value(rng, child, depth + 1)
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                for key in rng.sample(("k1", "k2", "k3"), rng.randrange(0, 3)):
                    out[key] = value(rng, extra, depth + 1)
        return out
    if kind == "array":
        items = node.get("items", {})
        return [value(rng, items, depth + 1) for _ in range(rng.randrange(0, 3))] \
            if depth < 60 else []
    if kind == "integer":
        return rng.choice((0, 1, 3, -1, 7, 2 ** 31, 2 ** 53 + 1))
    if kind == "number":
        return rng.choice((0, 0.5, 1, 1e10, -2.5))
    if kind == "boolean":
        return rng.choice((True, False))
    if kind == "string":
        return rng.choice(TEXTS)
    return rng.choice(("x", 1, {}, [], None))
