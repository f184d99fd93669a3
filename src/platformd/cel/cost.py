"""
Static cost estimation: cel-go's ``checker/cost.go`` over the checked AST cel-expr-python
gives (``Program.checked()``: a ``cel.expr.CheckedExpr`` with every node's type and every
call's overloads, see proto/cel/README.md), with the sizes of variables' values asked of
a size estimator, as cel-go's ``checker.CostEstimator`` asks Kubernetes' (``EstimateSize``,
``EstimateCallCost``).

The costs are cel-go's: literals 0, identifiers 1, selecting a field of an object or map
1 (``has()`` 0: ``PresenceTestHasCost(false)``), a call 1 plus its arguments, except
string and bytes traversals (0.1 per element: ``startsWith``, ``endsWith``,
``contains`` (product of both), comparisons and ``==`` on the smaller size, ``+``,
conversions between strings and bytes), ``matches`` (traversal × 0.25 per regex
character), ``in`` on a list (its size), ``&&``/``||`` (both sides), ``?:`` (the
condition and the costlier branch), list literals 10, map literals 30, messages 40, and
comprehensions: their range's size × (loop condition + step) plus the rest
(``cel.bind`` once).  Costs saturate at 2^64 − 1, as cel-go's ``uint64`` arithmetic.

Sizes: a literal's own, a list or map literal's element count, a scalar 1; a variable's
value, or a value reached from it (``path``: the variable's name, then field names and
``@items``, ``@values``, ``@keys``, ``@indices`` for a list's or map's elements), is asked
of the ``ISizeEstimator`` (None: unknown, estimated as 2^64 − 1, as cel-go does).
``UNKNOWN_SIZES`` knows nothing: every variable's value is unbounded.

Only the maximum is computed (upstream's checks use ``CostEstimate.Max``).  Kubernetes'
library functions cost what ``library.CostEstimator.EstimateCallCost`` says
(``platformd.cel.library.cost``: ``find`` the string's traversal times the regex's
length, ``isSorted`` a comparison per element ...), unless the estimator's own
``estimate_call_cost`` answers first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from zope.interface import Interface, implementer

from platformd.cel import saturating

if TYPE_CHECKING:
    from platformd.protos.cel.expr import checked_pb2

MAX_UINT64 = (1 << 64) - 1


class ISizeEstimator(Interface):
    """cel-go's ``checker.CostEstimator``: what the type checker cannot know of sizes."""

    def estimate_size(path: list) -> Optional[int]:
        """
        The most elements (a string's bytes, a list's items, a map's entries) the value
        at ``path`` holds (``EstimateSize``), or None: unknown.  ``path`` is a variable's
        name followed by field names and ``@items``, ``@values``, ``@keys`` or
        ``@indices``.
        """

    def is_map_or_object(path: list) -> bool:
        """
        Whether the value at ``path`` is a map or an object although its checked type is
        ``dyn`` (selecting one of its fields then costs 1, as on a declared map or
        object; on ``dyn`` cel-go charges nothing).
        """

    def estimate_call_cost(function: str, overload: str, target_size: Optional[int],
                           arg_sizes: list) -> Optional[int]:
        """
        The cost of one call of ``overload`` without its arguments' own costs
        (``EstimateCallCost``), or None: cel-go's own.
        """


@implementer(ISizeEstimator)
class UnknownSizes:
    """Nothing known: every variable's value is of unknown size."""

    def estimate_size(self, path: list) -> Optional[int]:
        return None

    def is_map_or_object(self, path: list) -> bool:
        return False

    def estimate_call_cost(self, function: str, overload: str, target_size: Optional[int],
                           arg_sizes: list) -> Optional[int]:
        return None


UNKNOWN_SIZES = UnknownSizes()

# -- cel-go's checker/cost.go over the checked AST --------------------------------------

M = MAX_UINT64
_add, _mul, _factor = saturating.add, saturating.mul, saturating.factor

STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
_SCALAR_PRIMITIVES = frozenset((1, 2, 3, 4))  # BOOL INT64 UINT64 DOUBLE
_SCALAR_WELL_KNOWN = frozenset((2, 3))  # TIMESTAMP DURATION


def _unpacked(serialized: bytes, out):
    from google.protobuf import any_pb2
    envelope = any_pb2.Any()
    envelope.ParseFromString(serialized)
    out.ParseFromString(envelope.value)
    return out


def checked(serialized: bytes) -> checked_pb2.CheckedExpr:
    """The ``CheckedExpr`` in what cel-expr-python's ``Expression.serialize()`` answers
    (a ``google.protobuf.Any``)."""
    from platformd.protos.cel.expr import checked_pb2
    return _unpacked(serialized, checked_pb2.CheckedExpr())


def parsed(serialized: bytes) -> checked_pb2.ParsedExpr:
    """The ``ParsedExpr`` in what ``serialize()`` answers for an unchecked expression."""
    from platformd.protos.cel.expr import checked_pb2
    return _unpacked(serialized, checked_pb2.ParsedExpr())


def estimate(tree: checked_pb2.CheckedExpr, sizes=UNKNOWN_SIZES) -> int:
    """The maximum estimated cost of one evaluation of the checked expression ``tree``
    (``env.EstimateCost(ast, estimator).Max``), with ``sizes`` an ``ISizeEstimator``."""
    return _Coster(tree, sizes).cost(tree.expr)


class _Var:
    __slots__ = ("path", "size", "entry")

    def __init__(self, path: Optional[list], size: Optional[int], entry):
        self.path, self.size, self.entry = path, size, entry


class _Coster:
    def __init__(self, tree, sizes):
        # The libraries' own costs: their package imports cel-expr-python, which a
        # checked tree has already brought, and importing this module must not.
        from platformd.cel.library import cost as library
        self.library = library
        self.types = tree.type_map
        self.refs = tree.reference_map
        self.estimator = sizes
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

    def _estimate_size(self, path: list) -> Optional[int]:
        """``EstimateSize`` of the estimator, for a value reached from a variable."""
        if not path:
            return None
        return self.estimator.estimate_size(path)

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

    # -- what the libraries' costs ask (``platformd.cel.library.cost``)

    def is_list(self, e) -> bool:
        return self._kind(e) == "list_type"

    def element_kind(self, e) -> str:
        """"string", "bytes" or "" for the elements of the list ``e``."""
        t = self.types.get(e.id)
        element = t.list_type.elem_type
        if element.WhichOneof("type_kind") == "primitive":
            return {5: "string", 6: "bytes"}.get(element.primitive, "")
        return ""

    def element_size(self, e) -> int:
        """The estimator's size of the elements of the list ``e`` (unknown: 2^64 − 1)."""
        path = self._path(e)
        found = self._estimate_size(path + ["@items"]) if path else None
        return M if found is None else found

    def set_size(self, e, size: int) -> None:
        self.sizes[e.id] = size

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
            # a declared type may be dyn where the estimator knows better (CRD schemas:
            # protobuf cannot nest a map or an object in a list or map)
            path = self._path(select.operand)
            if path and self.estimator.is_map_or_object(path):
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
            custom = self.estimator.estimate_call_cost(
                call.function, overload, None if target is None else self.size(target),
                [self.size(a) for a in args])
            if custom is None:
                custom = self.library.call_cost(self, e, call.function, overload, target, args)
            if custom is not None:
                function_cost = max(function_cost, _add(custom, arg_sum))
            else:
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
