"""
Static cost estimation of validation rules, after cel-go's ``checker/cost.go`` as
upstream's CRD validation uses it (``ruleEnv.EstimateCost`` with the Kubernetes
library's estimator), over the checked AST cel-expr-python gives
(``Expression.serialize()``: a ``cel.expr.CheckedExpr``, see proto/cel/README.md).

Sizes come from the schema as upstream's DeclTypes carry them: ``self.x`` of a string
with ``maxLength`` is that long, a list with ``maxItems``/map with ``maxProperties`` that
big; without a limit, as many as fit in a 3 MiB request (``MaxRequestSizeBytes``
divided by the smallest serialized element, plus one for a comma).  A rule's cost is
its maximum estimate times the number of times it may run (its schema's cardinality:
the product of the ``maxItems``/``maxProperties`` of the lists and maps above it, or,
under an unbounded one, the 3 MiB estimate for the rule's own schema).

What is modelled (cel-go's constants): constants 0, identifiers and selections 1, a
call 1 plus its arguments (``&&``, ``||`` and ``?:``: the costlier branch), string
traversals (``contains``, ``startsWith``, ``endsWith``, ``==`` on strings, ``+``) 0.1
per character, ``matches`` the string's traversal times 0.25 per regex character,
list literals 10, map literals 30, and comprehensions (``all``, ``exists``,
``exists_one``, ``map``, ``filter``) their range's size times the cost of one step.
Functions of the Kubernetes CEL libraries cost 1 each here plus their arguments.
"""

from __future__ import annotations

import math
from typing import Optional

from google.protobuf import any_pb2

from platformd.apiextensions.schema.node import Node
from platformd.protos.cel.expr import checked_pb2

#: ``StaticEstimatedCostLimit``: one rule or messageExpression.
LIMIT = 10_000_000
#: ``StaticEstimatedCRDCostLimit``: all of a schema's rules together.
CRD_LIMIT = 100_000_000
#: ``PerCallLimit`` and ``RuntimeCELCostBudget`` (k8s.io/apiserver/pkg/apis/cel).
PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
MAX_REQUEST_SIZE = 3 * 1024 * 1024
MAX_UINT64 = (1 << 64) - 1

_MIN_SIZE = {"string": 2, "integer": 1, "number": 1, "boolean": 4, "object": 2, "array": 2}


def min_serialized_size(node: Optional[Node]) -> int:
    if node is None:
        return 1
    if node.type == "string" and node.raw.get("minLength"):
        return 2 + int(node.raw["minLength"])
    return _MIN_SIZE.get(node.type, 1)


def unbounded_cardinality(node: Optional[Node]) -> int:
    """``maxCardinality(minSize)``: how many such values fit in a request."""
    return MAX_REQUEST_SIZE // (min_serialized_size(node) + 1)


def times(cardinality: Optional[int], limit) -> Optional[int]:
    """The cardinality below a list or map of at most ``limit`` elements (None: unbounded)."""
    if cardinality is None or limit is None:
        return None
    return cardinality * int(limit)


def guarded_product(base: int, cardinality: int) -> int:
    if base == 0:
        return 0
    return min(base * cardinality, MAX_UINT64)


def message(name: str, estimated: int, limit: int) -> str:
    """``getCostErrorMessage``."""
    factor = estimated / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (f"{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding "
            "maxItems, maxProperties, and maxLength where arrays, maps, and strings are "
            "declared)")


class Total:
    """``TotalCost``: the rules' costs summed, and the (at most 4) costliest of those
    contributing at least 1% of ``CRD_LIMIT``, costliest first."""

    def __init__(self):
        self.total = 0
        self.expensive: list = []

    def observe(self, path: str, cost: int) -> None:
        self.total = min(self.total + cost, MAX_UINT64)
        if cost < CRD_LIMIT // 100:
            return
        self.expensive.append((cost, path))
        self.expensive.sort(key=lambda c: -c[0])
        del self.expensive[4:]

    def most_expensive(self) -> list:
        return [path for _cost, path in self.expensive]


def _size(node: Optional[Node]) -> int:
    """The most elements (characters, items, entries) a value of ``node`` holds."""
    if node is None:
        return MAX_REQUEST_SIZE
    raw = node.raw
    if node.type == "string":
        limit = raw.get("maxLength")
        return int(limit) if limit is not None else MAX_REQUEST_SIZE - 2
    if node.type == "array":
        limit = raw.get("maxItems")
        return int(limit) if limit is not None else unbounded_cardinality(node.items)
    if node.type == "object":
        limit = raw.get("maxProperties")
        if limit is not None:
            return int(limit)
        if node.additional is not None:
            return unbounded_cardinality(node.additional)
        return len(node.properties) or MAX_REQUEST_SIZE // 3
    return 1


class _Estimate:
    __slots__ = ("cost", "node", "size")

    def __init__(self, cost: int, node: Optional[Node] = None, size: Optional[int] = None):
        self.cost, self.node, self.size = cost, node, size

    def elements(self) -> int:
        return self.size if self.size is not None else _size(self.node)


def checked(serialized: bytes) -> checked_pb2.CheckedExpr:
    envelope = any_pb2.Any()
    envelope.ParseFromString(serialized)
    out = checked_pb2.CheckedExpr()
    out.ParseFromString(envelope.value)
    return out


def estimate(serialized: bytes, scope: Node) -> int:
    """The maximum estimated cost of one evaluation of a compiled expression."""
    tree = checked(serialized)
    return min(_Estimator(scope).expr(tree.expr, {}).cost, MAX_UINT64)


_STRING_TRAVERSALS = {"contains", "startsWith", "endsWith", "_==_", "_!=_", "_+_",
                      "lowerAscii", "upperAscii", "trim", "split", "replace", "indexOf",
                      "lastIndexOf", "substring", "join"}


class _Estimator:
    def __init__(self, scope: Node):
        self.scope = scope

    def expr(self, e, bound: dict) -> _Estimate:
        kind = e.WhichOneof("expr_kind")
        if kind == "const_expr":
            value = e.const_expr
            text = value.string_value if value.WhichOneof("constant_kind") == "string_value" \
                else None
            return _Estimate(0, size=len(text) if text is not None else 1)
        if kind == "ident_expr":
            name = e.ident_expr.name
            if name in bound:
                found = bound[name]
                return _Estimate(1, found.node, found.size)
            if name in ("self", "oldSelf"):
                return _Estimate(1, self.scope)
            return _Estimate(1)
        if kind == "select_expr":
            operand = self.expr(e.select_expr.operand, bound)
            node = operand.node.field(e.select_expr.field) if operand.node is not None else None
            return _Estimate(operand.cost + 1, node)
        if kind == "list_expr":
            parts = [self.expr(x, bound) for x in e.list_expr.elements]
            return _Estimate(10 + sum(p.cost for p in parts), size=len(parts))
        if kind == "struct_expr":
            cost = 30 if not e.struct_expr.message_name else 40
            for entry in e.struct_expr.entries:
                cost += self.expr(entry.value, bound).cost
                if entry.WhichOneof("key_kind") == "map_key":
                    cost += self.expr(entry.map_key, bound).cost
            return _Estimate(cost, size=len(e.struct_expr.entries))
        if kind == "comprehension_expr":
            return self.comprehension(e.comprehension_expr, bound)
        if kind == "call_expr":
            return self.call(e.call_expr, bound)
        return _Estimate(0)

    def comprehension(self, c, bound: dict) -> _Estimate:
        rng = self.expr(c.iter_range, bound)
        element = None
        if rng.node is not None:
            element = rng.node.items if rng.node.type == "array" else (
                rng.node.additional if rng.node.type == "object" else None)
            if rng.node.type == "object" and not c.iter_var2:
                element = Node({"type": "string"})
        inner = dict(bound)
        inner[c.iter_var] = _Estimate(1, element)
        if c.iter_var2:
            inner[c.iter_var2] = _Estimate(1, element)
        inner[c.accu_var] = _Estimate(1)
        init = self.expr(c.accu_init, inner)
        condition = self.expr(c.loop_condition, inner)
        step = self.expr(c.loop_step, inner)
        result = self.expr(c.result, inner)
        count = rng.elements()
        return _Estimate(rng.cost + init.cost + count * (condition.cost + step.cost) +
                         result.cost, size=count)

    def call(self, call, bound: dict) -> _Estimate:
        function = call.function
        target = self.expr(call.target, bound) if call.HasField("target") else None
        args = [self.expr(a, bound) for a in call.args]
        base = (target.cost if target is not None else 0)
        if function in ("_&&_", "_||_"):
            return _Estimate(sum(a.cost for a in args))
        if function == "_?_:_":
            return _Estimate(args[0].cost + max(args[1].cost, args[2].cost))
        base += sum(a.cost for a in args)
        operands = ([target] if target is not None else []) + args
        if function == "matches":
            text, pattern = operands[0], operands[1] if len(operands) > 1 else None
            traversal = math.ceil(1 + 0.1 * _string_size(text))
            regex = math.ceil(0.25 * _string_size(pattern)) if pattern is not None else 1
            return _Estimate(base + traversal * max(regex, 1), size=1)
        if function in _STRING_TRAVERSALS and any(_is_string(o) for o in operands):
            largest = max(_string_size(o) for o in operands if _is_string(o))
            size = None
            if function == "_+_":
                size = sum(_string_size(o) for o in operands)
            return _Estimate(base + 1 + math.ceil(0.1 * largest), size=size)
        if function == "_+_" and any(_is_list(o) for o in operands):
            return _Estimate(base + 1, size=sum(o.elements() for o in operands))
        if function in ("_==_", "_!=_") and any(_is_list(o) or _is_map(o) for o in operands):
            smallest = min(o.elements() for o in operands if o.node is not None)
            return _Estimate(base + 1 + math.ceil(0.1 * smallest))
        if function in ("size", "_[_]", "_in_"):
            size_cost = 1
            if function == "_in_" and len(operands) == 2 and _is_list(operands[1]):
                size_cost = operands[1].elements()
            node = None
            if function == "_[_]" and operands and operands[0].node is not None:
                container = operands[0].node
                node = container.items if container.type == "array" else container.additional
            return _Estimate(base + size_cost, node)
        return _Estimate(base + 1)


def _is_string(e: _Estimate) -> bool:
    return e.node is not None and e.node.type == "string" or (
        e.node is None and e.size is not None and e.cost == 0)


def _is_list(e: _Estimate) -> bool:
    return e.node is not None and e.node.type == "array"


def _is_map(e: _Estimate) -> bool:
    return e.node is not None and e.node.type == "object"


def _string_size(e: Optional[_Estimate]) -> int:
    if e is None:
        return 0
    if e.node is not None:
        return _size(e.node)
    return e.size if e.size is not None else MAX_REQUEST_SIZE
