"""
The parts of ``self`` and ``oldSelf`` a node's rules read, so that evaluation binds
only those.

cel-expr-python converts a variable's Python value into CEL values whole before the
expression runs: ``self.roleRef.name != ''`` over a spec with a hundred subjects
converted all of them (5 µs with none, 20 with one, 120 with a hundred, best of 3 ×
2,000), where cel-go reads an unstructured object through lazy wrappers.  Most rules
reach their values through field selections from ``self`` (``self.a.b``,
``has(self.a)``, ``self.items.all(i, ...)``); ``reads`` finds them in a parsed
expression, and ``bound`` builds the value ``celtypes.cel_value`` would give, keeping
only the fields on those paths (whatever is at a path's end is kept whole).  A rule
that uses the variable any other way (``size(self)``, ``self == x``, ``self['a']``,
``self.?a``, a comprehension variable of the same name, the ``optionalOldSelf``
wrapper's ``oldSelf``) gets the whole value.  What a rule evaluates to, its errors
included (``no such key``, a selection on a list), does not change: every value it can
reach is there, as it would have been.
"""

from __future__ import annotations

from typing import Optional

from platformd.apiextensions.schema import celtypes
from platformd.apiextensions.schema.node import Node

#: In a ``trie``: the value at this point is kept whole.
WHOLE = "whole"


def reads(expr, name: str) -> Optional[frozenset]:
    """The field paths (tuples of CEL field names) of variable ``name`` that the parsed
    ``expr`` (a ``cel.expr.Expr``) selects; None when it needs the whole value."""
    out: set = set()
    return frozenset(out) if _collect(expr, name, out) else None


def _collect(expr, name: str, out: set) -> bool:
    """Add ``expr``'s paths of ``name`` to ``out``; False if it uses ``name`` whole."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "select_expr":
        path = []
        while expr.WhichOneof("expr_kind") == "select_expr":
            path.append(expr.select_expr.field)
            expr = expr.select_expr.operand
        if expr.WhichOneof("expr_kind") == "ident_expr":
            if expr.ident_expr.name == name:
                out.add(tuple(reversed(path)))
            return True
        return _collect(expr, name, out)
    if kind == "ident_expr":
        return expr.ident_expr.name != name
    if kind == "call_expr":
        call = expr.call_expr
        parts = ([call.target] if call.HasField("target") else []) + list(call.args)
        return all(_collect(part, name, out) for part in parts)
    if kind == "list_expr":
        return all(_collect(e, name, out) for e in expr.list_expr.elements)
    if kind == "struct_expr":
        return all(_collect(entry.value, name, out) and (
            entry.WhichOneof("key_kind") != "map_key" or _collect(entry.map_key, name, out))
            for entry in expr.struct_expr.entries)
    if kind == "comprehension_expr":
        c = expr.comprehension_expr
        if name in (c.iter_var, c.iter_var2, c.accu_var):
            return False  # shadowed inside: not worth telling the two apart
        return all(_collect(e, name, out) for e in (c.iter_range, c.accu_init,
                                                    c.loop_condition, c.loop_step, c.result))
    return kind == "const_expr"


def trie(paths: Optional[frozenset]):
    """``paths`` as nested dicts of field names, ``WHOLE`` where a path ends (a path
    that another extends keeps its value whole); ``WHOLE`` itself for None."""
    if paths is None:
        return WHOLE
    root: dict = {}
    for path in sorted(paths, key=len):
        level = root
        for i, field in enumerate(path):
            child = level.get(field)
            if child is WHOLE:
                break
            if i == len(path) - 1:
                level[field] = WHOLE
            else:
                level = level.setdefault(field, {})
    return root


def bound(node: Optional[Node], value, wanted):
    """``celtypes.cel_value(node, value)`` with only the fields ``wanted`` (a ``trie``)
    names, in the same order and under the same names."""
    if wanted is WHOLE or not isinstance(value, dict):
        return celtypes.cel_value(node, value)
    names = celtypes.cel_names(node) if node is not None else {}
    out = {}
    for key, item in value.items():
        prop = node.properties.get(key) if node is not None else None
        if prop is not None:
            name = names[key]
            if name is None:
                continue
            targets: tuple = (name, key) if key in celtypes.RESERVED else (name,)
            sub = prop
        else:
            targets, sub = (key,), node.additional if node is not None else None
        for target in targets:
            inner = wanted.get(target)
            if inner is not None:
                out[target] = bound(sub, item, inner)
    return out
