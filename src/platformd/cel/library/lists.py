"""
Upstream's ``kubernetes.lists`` library (``library/lists.go``, version 0 as
``base.go`` enables it): ``isSorted``, ``sum``, ``min``, ``max`` over lists of
comparable or summable types, ``indexOf`` and ``lastIndexOf`` over any list.

The overloads are upstream's, one per element type (``list_int_sum_int``); they run as
one Python function each, over the list's values.  The results are upstream's but for
the element types Python does not keep: the sum or extreme of a ``uint`` list is an
``int``, and the sum of an empty list is ``0`` whatever its element type (upstream:
``0u``, ``0.0``, ``duration('0s')``); CEL compares numbers across types, so ``0 ==
0.0`` either way.
"""

from __future__ import annotations

import datetime

from google.protobuf import duration_pb2, timestamp_pb2

from platformd.cel.library.overloads import Implementation, Library, Overload

_COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
_SUMMABLE = ("int", "uint", "double", "duration")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _returned(value):
    """``value`` as a function of dynamic result type may return it: the binding converts
    no ``timedelta`` or ``datetime`` then, but it converts their protobuf messages."""
    if isinstance(value, datetime.timedelta):
        out = duration_pb2.Duration()
        out.FromTimedelta(value)
        return out
    if isinstance(value, datetime.datetime):
        out = timestamp_pb2.Timestamp()
        out.FromDatetime(value)
        return out
    return value


def _is_sorted(items: list) -> bool:
    return all(not items[i] > items[i + 1] for i in range(len(items) - 1))


def _sum(items: list):
    if not items:
        return 0
    total = datetime.timedelta(0) if isinstance(items[0], datetime.timedelta) else 0
    for item in items:
        total = total + item
    if isinstance(total, int) and not _INT64[0] <= total <= _INT64[1]:
        raise ValueError("integer overflow")
    return _returned(total)


def _extreme(name: str, pick):
    def extreme(items: list):
        if not items:
            raise ValueError(f"{name} called on empty list")
        return _returned(pick(items))
    return extreme


def equal(a, b) -> bool:
    """CEL's ``==`` on two plain values: a bool equals no number (Python's ``True == 1``)."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _index_of(items: list, item) -> int:
    return next((i for i, x in enumerate(items) if equal(x, item)), -1)


def _last_index_of(items: list, item) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if equal(items[i], item)), -1)


def _typed(function: str, id_format: str, names, result_is_element: bool) -> tuple:
    return tuple(Overload(id_format.format(n=n), function, (f"list<{n}>",),
                          n if result_is_element else "bool", member=True) for n in names)


LIBRARY = Library(
    "kubernetes.lists",
    _typed("isSorted", "list_{n}_is_sorted_bool", _COMPARABLE, False)
    + _typed("sum", "list_{n}_sum_{n}", _SUMMABLE, True)
    + _typed("max", "list_{n}_max_{n}", _COMPARABLE, True)
    + _typed("min", "list_{n}_min_{n}", _COMPARABLE, True)
    + (Overload("list_a_index_of_int", "indexOf", result="int",
                signature="list<~A>.indexOf(~A)"),
       Overload("list_a_last_index_of_int", "lastIndexOf", result="int",
                signature="list<~A>.lastIndexOf(~A)")),
    (Implementation("isSorted", ("list<dyn>",), _is_sorted, member=True),
     Implementation("sum", ("list<dyn>",), _sum, member=True),
     # upstream keeps the first of equal elements (a later one must compare less/greater)
     Implementation("max", ("list<dyn>",), _extreme("max", lambda xs: max(xs)), member=True),
     Implementation("min", ("list<dyn>",), _extreme("min", lambda xs: min(xs)), member=True),
     Implementation("indexOf", ("list<dyn>", "dyn"), _index_of, member=True),
     Implementation("lastIndexOf", ("list<dyn>", "dyn"), _last_index_of, member=True)))
