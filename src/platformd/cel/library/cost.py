"""
The estimated costs of the Kubernetes libraries' functions and of the cel-go extension
functions upstream prices (``library/cost.go``, ``CostEstimator.EstimateCallCost``), for
``platformd.cel.cost``: a call's own cost, without its arguments', and the size of its
result where upstream gives one.  Functions are matched by name, as upstream matches
them (so ``'abc'.indexOf('b')`` of the strings extension is priced as a traversal of
the string, and a global ``quantity(s)`` or ``cidr(s)``, which upstream's switch prices
only as members, costs what cel-go charges any call).

``sizes`` is the estimator's view of the call's nodes (``platformd.cel.cost._Coster``):
``size(e)`` (None: unknown), ``element_size(list)``, ``element_kind(list)``,
``set_size(e, n)`` and ``is_list(e)``.
"""

from __future__ import annotations

import math
from typing import Optional

from platformd.cel.saturating import M
from platformd.cel.saturating import add as _add
from platformd.cel.saturating import factor as _factor
from platformd.cel.saturating import mul as _mul

STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
_NOMINAL = frozenset(("masked", "prefixLength", "family", "isUnspecified", "isLoopback",
                      "isLinkLocalMulticast", "isLinkLocalUnicast", "sign", "asInteger",
                      "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
                      "compareTo", "add", "sub"))
_TRAVERSALS = frozenset(("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"))
_STRING_RESULTS = frozenset(("lowerAscii", "upperAscii", "substring", "trim"))
#: IPv4 or IPv6: 4 to 16 bytes compared (``containsIP``, ``containsCIDR``).
_IP_BYTES = 16


def _size(sizes, e) -> int:
    found = sizes.size(e)
    return M if found is None else found


def _smallest(e) -> int:
    """A node's least size: a literal's own, else 0."""
    if e.WhichOneof("expr_kind") == "const_expr" and \
            e.const_expr.WhichOneof("constant_kind") == "string_value":
        return len(e.const_expr.string_value)
    return 0


def call_cost(sizes, e, function: str, overload: str, target, args) -> Optional[int]:
    """The cost of one call of ``function`` (``overload``) without its arguments', or
    None when upstream leaves it to cel-go."""
    if function == "ip" and target is not None and not args:
        return 1
    if function in _NOMINAL:
        return 1
    if function in _TRAVERSALS and target is not None:
        if sizes.is_list(target):
            element = 1
            if sizes.element_kind(target) in ("string", "bytes"):
                element = _add(element, _factor(sizes.element_size(target), STRING_TRAVERSAL))
            return _mul(_size(sizes, target), element)
        return _factor(_size(sizes, target), STRING_TRAVERSAL)
    if function == "url" and len(args) == 1:
        return _factor(_size(sizes, args[0]), STRING_TRAVERSAL)
    if function in _STRING_RESULTS and target is not None:
        size = _size(sizes, target)
        sizes.set_size(e, size)
        return _factor(size, STRING_TRAVERSAL)
    if function == "replace" and target is not None and len(args) >= 2:
        return _replace(sizes, e, target, args)
    if function == "split" and target is not None:
        size = _size(sizes, target)
        limit = args[1] if len(args) > 1 else None
        if limit is not None and limit.WhichOneof("expr_kind") == "const_expr" and \
                limit.const_expr.int64_value >= 0:
            sizes.set_size(e, limit.const_expr.int64_value)
        else:
            sizes.set_size(e, size)
        return _factor(size, 2 * STRING_TRAVERSAL)
    if function == "join" and target is not None:
        count = _size(sizes, target)
        size = _mul(count, sizes.element_size(target)) if sizes.is_list(target) else 0
        if args:
            size = _add(size, _mul(_size(sizes, args[0]), max(count - 1, 0)))
        sizes.set_size(e, size)
        return _factor(size, STRING_TRAVERSAL)
    if function in ("find", "findAll") and target is not None and args:
        size = _size(sizes, target)
        sizes.set_size(e, size)
        text = _factor(_add(size, 1), STRING_TRAVERSAL)
        return _mul(text, _factor(_size(sizes, args[0]), REGEX_LENGTH))
    if function in ("containsIP", "containsCIDR") and target is not None and args:
        cost = _factor(2 * _IP_BYTES, STRING_TRAVERSAL)
        if function == "containsCIDR":
            cost += _factor(_IP_BYTES, STRING_TRAVERSAL) + 1
        if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
            cost = _add(cost, _factor(_size(sizes, args[0]), STRING_TRAVERSAL))
        return cost
    return None


def _replace(sizes, e, target, args) -> int:
    """``replace``: a traversal and the result's construction; the result's size from
    the most (and fewest) replacements the sizes allow."""
    size = _size(sizes, target)
    old_least, new_most = _smallest(args[0]), _size(sizes, args[1])
    if old_least == 0:
        count, retained = (size + 1 if size < M else size), size
    elif new_most <= old_least:
        count, retained = 0, size
    else:
        count, retained = math.ceil(size / old_least), 0
    sizes.set_size(e, _add(_mul(count, new_most), retained))
    return _factor(size, 2 * STRING_TRAVERSAL)
