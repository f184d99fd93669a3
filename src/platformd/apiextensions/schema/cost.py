"""
Static cost estimation of validation rules: cel-go's ``checker/cost.go`` as upstream's
CRD validation runs it (``ruleEnv.EstimateCost`` with the Kubernetes size estimator),
over the checked AST cel-expr-python gives (``Expression.serialize()``: a
``cel.expr.CheckedExpr`` with every node's type and every call's overloads, see
proto/cel/README.md).

Sizes are upstream's DeclTypes' (``Decl``, after ``common.SchemaDeclType``): a string's
``maxLength`` × 4 (bytes), else what fits in a 3 MiB request (``MaxRequestSizeBytes`` −
2; 32 for a duration or date-time); a list's ``maxItems``, else the request over its
items' smallest serialized size plus one; a map's ``maxProperties``, else the request
over its values' smallest size plus six.  A value reached from ``self`` by fields,
``@items``, ``@values`` and ``@keys`` has the size of its schema, as upstream's
``sizeEstimator`` walks it.

The costs are cel-go's: literals 0, identifiers 1, selecting a field of an object or map
1 (``has()`` 0: ``PresenceTestHasCost(false)``), a call 1 plus its arguments, except
string and bytes traversals (0.1 per element: ``startsWith``, ``endsWith``,
``contains`` (product of both), comparisons and ``==`` on the smaller size, ``+``,
conversions between strings and bytes), ``matches`` (traversal × 0.25 per regex
character), ``in`` on a list (its size), ``&&``/``||`` (both sides), ``?:`` (the
condition and the costlier branch), list literals 10, map literals 30, messages 40, and
comprehensions: their range's size × (loop condition + step) plus the rest
(``cel.bind`` once).  A rule's cost is its maximum times its cardinality: the product of
the ``maxItems``/``maxProperties`` above it, or, under an unbounded list or map, how
many values of its schema fit in a request.
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

#: Serialized sizes (k8s.io/apiserver/pkg/cel/limits.go).
MAX_DURATION_SIZE_JSON = 32
MAX_DATETIME_SIZE_JSON = 32
MIN_DURATION_SIZE_JSON = 3
JSON_DATE_SIZE = 12
MIN_DATETIME_SIZE_JSON = 21
MIN_STRING_SIZE = 2
MIN_BOOL_SIZE = 4
MIN_NUMBER_SIZE = 1


class Decl:
    """
    The sizes upstream's ``DeclType`` of a schema carries (``common.SchemaDeclType``):
    the most elements a value holds (``MaxElements``: a string's bytes, a list's items,
    a map's entries; 0 for scalars and objects) and its smallest serialized size; an
    object's fields by CEL name, a list's or map's element type, a map's key type.
    """

    __slots__ = ("max_elements", "min_size", "fields", "elem", "key", "is_object")

    def __init__(self, max_elements: int = 0, min_size: int = 1, fields=None, elem=None,
                 key=None, is_object: bool = False):
        self.max_elements, self.min_size = max_elements, min_size
        self.fields: dict = fields or {}
        self.elem: Optional[Decl] = elem
        self.key: Optional[Decl] = key
        #: an object type (a struct to CEL, even without fields)
        self.is_object = is_object


def _string_per_request(node: Node) -> int:
    """``estimateMaxStringLengthPerRequest``."""
    if node.int_or_string:
        return MAX_REQUEST_SIZE - 2
    return {"duration": MAX_DURATION_SIZE_JSON, "date": JSON_DATE_SIZE,
            "date-time": MAX_DATETIME_SIZE_JSON}.get(node.format, MAX_REQUEST_SIZE - 2)


def decl(node: Optional[Node], resource_root: bool = False) -> Optional[Decl]:
    """``SchemaDeclType(node, resource_root)``'s sizes; None where upstream has no type."""
    from platformd.apiextensions.schema.celtypes import escape, resource_properties

    if node is None:
        return None
    raw = node.raw
    if node.int_or_string:
        limit = raw.get("maxLength")
        return Decl(max(int(limit), 0) * 4 if limit is not None else _string_per_request(node),
                    1)
    kind = node.type
    if kind == "array":
        if node.items is None:
            return None
        items = decl(node.items, node.items.embedded)
        if items is None:
            return None
        limit = raw.get("maxItems")
        count = max(int(limit), 0) if limit is not None else \
            (MAX_REQUEST_SIZE - 2) // (items.min_size + 1)
        return Decl(count, 2, elem=items)
    if kind == "object":
        if node.additional is not None:
            values = decl(node.additional, node.additional.embedded)
            if values is None:
                return None
            limit = raw.get("maxProperties")
            count = max(int(limit), 0) if limit is not None else \
                (MAX_REQUEST_SIZE - 2) // (values.min_size + 6)
            return Decl(count, 2, elem=values, key=Decl(0, MIN_STRING_SIZE))
        props = resource_properties(node) if resource_root else node.properties
        required = set(raw.get("required") or ())
        fields = {}
        min_size = 2
        for name, prop in props.items():
            field = decl(prop, prop.embedded)
            if field is None:
                continue
            escaped = escape(name)
            if escaped is not None:
                fields[escaped] = field
                fields[name] = field  # a keyword by its own name too (celtypes)
            if name in required and not prop.has_default:
                min_size += len(name) + field.min_size + 4
        return Decl(0, min_size, fields, is_object=True)
    if kind == "string":
        limit = raw.get("maxLength")
        if node.format == "byte":
            return Decl(max(int(limit), 0) if limit is not None else _string_per_request(node),
                        MIN_STRING_SIZE)
        if node.format == "duration":
            return Decl(_string_per_request(node), MIN_DURATION_SIZE_JSON)
        if node.format == "date":
            return Decl(_string_per_request(node), JSON_DATE_SIZE)
        if node.format == "date-time":
            return Decl(_string_per_request(node), MIN_DATETIME_SIZE_JSON)
        if limit is not None:
            count = max(int(limit), 0) * 4
        elif raw.get("enum"):
            count = max((len(v) for v in raw["enum"] if isinstance(v, str)), default=0)
        else:
            count = _string_per_request(node)
        return Decl(count, MIN_STRING_SIZE)
    if kind == "boolean":
        return Decl(0, MIN_BOOL_SIZE)
    if kind in ("number", "integer"):
        return Decl(0, MIN_NUMBER_SIZE)
    return None


def unbounded_cardinality(node: Optional[Node], resource_root: bool = False) -> int:
    """``maxCardinality(MinSerializedSize)``: how many such values fit in a request."""
    found = decl(node, resource_root)
    size = found.min_size if found is not None else 1
    return MAX_REQUEST_SIZE // (size + 1)


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


# -- cel-go's checker/cost.go over the checked AST --------------------------------------

M = MAX_UINT64


def _add(x: int, y: int) -> int:
    return M if x > M - y else x + y


def _mul(x: int, y: int) -> int:
    return M if y and x > M // y else x * y


def _factor(x: int, factor: float) -> int:
    as_float = float(x)
    if as_float > 0 and factor > 0 and as_float > M / factor:
        return M
    result = math.ceil(as_float * factor)
    return M if result >= 2.0 ** 64 else int(result)


STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
_SCALAR_PRIMITIVES = frozenset((1, 2, 3, 4))  # BOOL INT64 UINT64 DOUBLE
_SCALAR_WELL_KNOWN = frozenset((2, 3))  # TIMESTAMP DURATION


def checked(serialized: bytes) -> checked_pb2.CheckedExpr:
    envelope = any_pb2.Any()
    envelope.ParseFromString(serialized)
    out = checked_pb2.CheckedExpr()
    out.ParseFromString(envelope.value)
    return out


def estimate(serialized: bytes, scope: Node, resource_root: bool = False) -> int:
    """The maximum estimated cost of one evaluation of a compiled expression whose
    ``self`` is of ``scope`` (``ruleEnv.EstimateCost(ast, estimator).Max``)."""
    tree = checked(serialized)
    return _Coster(tree, decl(scope, resource_root)).cost(tree.expr)


class _Var:
    __slots__ = ("path", "size", "entry")

    def __init__(self, path: Optional[list], size: Optional[int], entry):
        self.path, self.size, self.entry = path, size, entry


class _Coster:
    def __init__(self, tree, root: Optional[Decl]):
        self.types = tree.type_map
        self.refs = tree.reference_map
        self.root = root
        self.sizes: dict = {}
        self.entries: dict = {}
        self.paths: dict = {}
        self.scopes: list = []

    # -- local variables

    def _local(self, name: str) -> Optional[_Var]:
        for scope in reversed(self.scopes):
            if scope[0] == name:
                return scope[1]
        return None

    def _push(self, name: str, var: _Var) -> None:
        self.scopes.append((name, var))

    def _pop(self, name: str) -> None:
        for i in range(len(self.scopes) - 1, -1, -1):
            if self.scopes[i][0] == name:
                del self.scopes[i]
                return

    # -- types and sizes

    def _kind(self, e) -> str:
        t = self.types.get(e.id)
        if t is None:
            return "dyn"
        return t.WhichOneof("type_kind") or "dyn"

    def _is_scalar(self, e) -> bool:
        t = self.types.get(e.id)
        if t is None:
            return False
        kind = t.WhichOneof("type_kind")
        if kind == "primitive":
            return t.primitive in _SCALAR_PRIMITIVES
        if kind == "well_known":
            return t.well_known in _SCALAR_WELL_KNOWN
        return False

    def _container(self, e) -> str:
        entry = self.entries.get(e.id)
        if entry is None and e.WhichOneof("expr_kind") == "ident_expr":
            var = self._local(e.ident_expr.name)
            entry = var.entry if var is not None else None
        if entry is not None:
            return entry[0]
        kind = self._kind(e)
        return {"list_type": "list", "map_type": "map"}.get(kind, "")

    def _entry(self, e):
        entry = self.entries.get(e.id)
        if entry is None and e.WhichOneof("expr_kind") == "ident_expr":
            var = self._local(e.ident_expr.name)
            entry = var.entry if var is not None else None
        return entry

    def _path(self, e) -> list:
        return self.paths.get(e.id) or []

    def _decl_at(self, path: list) -> Optional[Decl]:
        """The DeclType along ``path`` from ``self`` (upstream's ``sizeEstimator`` walk)."""
        if not path or self.root is None:
            return None
        node: Optional[Decl] = self.root
        for name in path[1:]:
            assert node is not None
            if name in ("@items", "@values"):
                node = node.elem
            elif name == "@keys":
                node = node.key
            else:
                node = node.fields.get(name)
            if node is None:
                return None
        return node

    def _estimate_size(self, path: list) -> Optional[int]:
        """upstream's ``sizeEstimator.EstimateSize``: the DeclType's ``MaxElements``."""
        found = self._decl_at(path)
        return found.max_elements if found is not None else None

    def size(self, e) -> Optional[int]:
        """``computeSize``: None is unknown."""
        if e.id in self.sizes:
            return self.sizes[e.id]
        kind = e.WhichOneof("expr_kind")
        if kind == "const_expr":
            const = e.const_expr
            which = const.WhichOneof("constant_kind")
            if which == "string_value":
                return len(const.string_value)
            if which == "bytes_value":
                return len(const.bytes_value)
            return 1
        if kind == "list_expr":
            return len(e.list_expr.elements)
        if kind == "struct_expr" and not e.struct_expr.message_name:
            return len(e.struct_expr.entries)
        found = self._estimate_size(self._path(e))
        if found is not None:
            self.sizes[e.id] = found
            return found
        if self._is_scalar(e):
            return 1
        if kind == "ident_expr":
            var = self._local(e.ident_expr.name)
            if var is not None and var.size is not None:
                return var.size
        return None

    def size_or_unknown(self, e) -> int:
        found = self.size(e)
        return M if found is None else found

    # -- costs

    def cost(self, e) -> int:
        kind = e.WhichOneof("expr_kind")
        if kind == "const_expr":
            return 0
        if kind == "ident_expr":
            name = e.ident_expr.name
            var = self._local(name)
            self.paths[e.id] = list(var.path) if var is not None and var.path is not None \
                else [name]
            return 1
        if kind == "select_expr":
            return self._select(e)
        if kind == "call_expr":
            return self._call(e)
        if kind == "list_expr":
            total = 0
            for item in e.list_expr.elements:
                total = _add(total, self.cost(item))
            sizes = [self.size_or_unknown(item) for item in e.list_expr.elements]
            self.entries[e.id] = ("list", 1, max(sizes) if sizes else 0)
            return _add(total, 10)
        if kind == "struct_expr":
            total = 0
            values = []
            for entry in e.struct_expr.entries:
                if entry.WhichOneof("key_kind") == "map_key":
                    total = _add(total, self.cost(entry.map_key))
                total = _add(total, self.cost(entry.value))
                values.append(self.size_or_unknown(entry.value))
            if e.struct_expr.message_name:
                return _add(total, 40)
            self.entries[e.id] = ("map", 0, max(values) if values else 0)
            return _add(total, 30)
        if kind == "comprehension_expr":
            return self._comprehension(e)
        return 0

    def _select(self, e) -> int:
        select = e.select_expr
        if select.test_only:
            return self.cost(select.operand)  # PresenceTestHasCost(false)
        total = self.cost(select.operand)
        kind = self._kind(select.operand)
        if kind == "dyn":
            # the declared type is dyn where protobuf cannot nest a map or an object in
            # a list or map (celtypes); upstream's is the schema's
            found = self._decl_at(self._path(select.operand))
            if found is not None and (found.is_object or found.key is not None):
                kind = "map_type"
        if kind in ("map_type", "message_type", "type_param"):
            total = _add(total, 1)
        self.paths[e.id] = self._path(select.operand) + [select.field]
        return total

    def _comprehension(self, e) -> int:
        c = e.comprehension_expr
        if c.iter_range.WhichOneof("expr_kind") == "list_expr" and \
                not c.iter_range.list_expr.elements and \
                c.loop_condition.WhichOneof("expr_kind") == "const_expr" and \
                c.loop_condition.const_expr.bool_value is False and \
                c.accu_var != "@result" and c.accu_var != "__result__":
            # cel.bind
            total = _add(self.cost(c.iter_range), self.cost(c.accu_init))
            self._push(c.accu_var, _Var(self._path(c.accu_init), self.size(c.accu_init),
                                        self._entry(c.accu_init)))
            total = _add(total, self.cost(c.result))
            self._pop(c.accu_var)
            if self.size(c.result) is not None:
                self.sizes[e.id] = self.size(c.result)
            return total
        total = _add(self.cost(c.iter_range), self.cost(c.accu_init))
        self._push(c.accu_var, _Var(self._path(c.accu_init), self.size(c.accu_init),
                                    self._entry(c.accu_init)))
        entry = self._entry(c.iter_range)
        container = self._container(c.iter_range)
        path = self._path(c.iter_range)
        if c.iter_var2:
            key_size = entry[1] if entry else None
            value_size = entry[2] if entry else None
            self._push(c.iter_var, _Var(path + ["@indices" if container == "list" else "@keys"],
                                        key_size, None))
            self._push(c.iter_var2, _Var(path + ["@items" if container == "list" else "@values"],
                                         value_size, None))
        elif container == "list":
            self._push(c.iter_var, _Var(path + ["@items"], entry[2] if entry else None, None))
        else:
            self._push(c.iter_var, _Var(path + ["@keys"], entry[1] if entry else None, None))
        loop = self.cost(c.loop_condition)
        step = self.cost(c.loop_step)
        self._pop(c.iter_var)
        if c.iter_var2:
            self._pop(c.iter_var2)
        total = _add(total, self.cost(c.result))
        self._pop(c.accu_var)
        count = self.size_or_unknown(c.iter_range)
        total = _add(total, _mul(count, _add(step, loop)))
        init_kind = c.accu_init.WhichOneof("expr_kind")
        if init_kind == "const_expr":
            self.sizes[e.id] = self.size(c.accu_init)
        elif init_kind in ("list_expr", "struct_expr"):
            self.sizes[e.id] = count
            step_entry = self.entries.get(c.loop_step.id)
            if step_entry is not None:
                self.entries[e.id] = step_entry
        return total

    def _call(self, e) -> int:
        call = e.call_expr
        if call.function == "dyn" and len(call.args) == 1:
            arg = call.args[0]
            cost = _add(1, self.cost(arg))
            if self.size(arg) is not None:
                self.sizes[e.id] = self.size(arg)
            if self._entry(arg) is not None:
                self.entries[e.id] = self._entry(arg)
            self.paths[e.id] = self._path(arg)
            return cost
        args = list(call.args)
        arg_costs = [self.cost(a) for a in args]
        ref = self.refs.get(e.id)
        overloads = list(ref.overload_id) if ref is not None else []
        if not overloads:
            return 0
        total = 0
        target = None
        if call.HasField("target"):
            total = self.cost(call.target)
            target = call.target
        arg_sum = 0
        for cost in arg_costs:
            arg_sum = _add(arg_sum, cost)
        function_cost = 0
        for overload in overloads:
            function_cost = max(function_cost, self._function(e, overload, target, args,
                                                              arg_costs, arg_sum))
            if overload == "index_list" and args:
                entry = self._entry(args[0])
                if entry is not None:
                    self.sizes[e.id] = entry[2]
                self.paths[e.id] = self._path(args[0]) + ["@items"]
            elif overload == "index_map" and args:
                entry = self._entry(args[0])
                if entry is not None:
                    self.sizes[e.id] = entry[2]
                self.paths[e.id] = self._path(args[0]) + ["@values"]
        return _add(total, function_cost)

    def _function(self, e, overload: str, target, args, arg_costs, arg_sum) -> int:
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return _add(_factor(self.size_or_unknown(args[0]), STRING_TRAVERSAL), arg_sum)
        if overload in ("string_to_bytes", "bytes_to_string") and len(args) == 1:
            size = self.size_or_unknown(args[0])
            self.sizes[e.id] = _mul(size, 4) if overload == "string_to_bytes" else size
            return _add(_factor(size, STRING_TRAVERSAL), arg_sum)
        if overload == "in_list" and len(args) == 2:
            return _add(self.size_or_unknown(args[1]), arg_sum)
        if overload == "matches_string" and target is not None and len(args) == 1:
            text = _factor(_add(self.size_or_unknown(target), 1), STRING_TRAVERSAL)
            regex = _factor(self.size_or_unknown(args[0]), REGEX_LENGTH)
            return _add(_mul(text, regex), arg_sum)
        if overload == "contains_string" and target is not None and len(args) == 1:
            text = _factor(self.size_or_unknown(target), STRING_TRAVERSAL)
            sub = _factor(self.size_or_unknown(args[0]), STRING_TRAVERSAL)
            return _add(_mul(text, sub), arg_sum)
        if overload in ("logical_or", "logical_and"):
            return _add(arg_costs[0], arg_costs[1])
        if overload == "conditional":
            sizes = [self.size(args[1]), self.size(args[2])]
            self.sizes[e.id] = M if None in sizes else max(s for s in sizes if s is not None)
            return _add(arg_costs[0], max(arg_costs[1], arg_costs[2]))
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            size = _add(self.size_or_unknown(args[0]), self.size_or_unknown(args[1]))
            self.sizes[e.id] = size
            if overload == "add_list":
                entries = [x for x in (self._entry(args[0]), self._entry(args[1])) if x]
                if entries:
                    self.entries[e.id] = ("list", 1, max(x[2] for x in entries))
                return _add(1, arg_sum)
            return _add(_factor(size, STRING_TRAVERSAL), arg_sum)
        if overload in _COMPARISONS and len(args) == 2:
            smallest = min(self.size_or_unknown(args[0]), self.size_or_unknown(args[1]))
            return _add(_factor(smallest, STRING_TRAVERSAL), arg_sum)
        return _add(1, arg_sum)


_COMPARISONS = frozenset(("less_string", "greater_string", "less_equals_string",
                          "greater_equals_string", "less_bytes", "greater_bytes",
                          "less_equals_bytes", "greater_equals_bytes", "equals",
                          "not_equals"))
