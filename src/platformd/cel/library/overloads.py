"""
A library's two tables (see ``platformd.cel.library``): the overloads the type checker
sees and the Python functions that run.
"""

from __future__ import annotations

from typing import Callable

import attrs
from cel_expr_python import cel as _cel


@attrs.frozen
class Overload:
    """One overload as the type checker sees it: upstream's id, its parameter types
    (receiver first for a member function) and result, as ``cel.Type`` signatures
    (``list<int>``, ``kubernetes.Quantity``); or, with type parameters, the whole
    ``signature`` (``list<~A>.indexOf(~A)``)."""

    id: str
    function: str
    params: tuple = ()
    result: str = "dyn"
    member: bool = False
    signature: str = ""

    def declared(self):
        result = _cel.Type(self.result)
        if self.signature:
            return _cel.Overload(self.id, result, signature=self.signature)
        return _cel.Overload(self.id, result, [_cel.Type(p) for p in self.params],
                             is_member=self.member)


@attrs.frozen
class Implementation:
    """What runs for every overload of ``function`` with these parameter kinds
    (``dyn`` unless a built-in function of the same name needs them told apart:
    ``list<dyn>`` for a list, a message name for an opaque value)."""

    function: str
    params: tuple
    call: Callable
    member: bool = False

    def registered(self, number: int):
        return _cel.Overload(f"platformd_{self.function}_{number}", _cel.Type.DYN,
                             [_cel.Type(p) for p in self.params], is_member=self.member,
                             impl=self.call)


@attrs.frozen
class Library:
    """One of upstream's libraries: its name (``kubernetes.lists``), its overloads, and
    its implementations."""

    name: str
    overloads: tuple
    implementations: tuple


def sign(value) -> int:
    """-1, 0 or 1 as ``value`` is negative, zero or positive."""
    return (value > 0) - (value < 0)


def comparisons(prefix: str, type_name: str) -> tuple:
    """The three comparisons of ``type_name`` with upstream's ids (``<prefix>_compare_to``)."""
    pair = (type_name, type_name)
    return (Overload(f"{prefix}_is_greater_than", "isGreaterThan", pair, "bool", member=True),
            Overload(f"{prefix}_is_less_than", "isLessThan", pair, "bool", member=True),
            Overload(f"{prefix}_compare_to", "compareTo", pair, "int", member=True))


def parses(parse: Callable) -> Callable:
    """A predicate: whether ``parse`` accepts its arguments (``isQuantity``, ``isURL``
    ... are their parser without the error)."""
    def accepted(*args) -> bool:
        try:
            parse(*args)
        except ValueError:
            return False
        return True
    return accepted
