"""
``isGreaterThan``, ``isLessThan`` and ``compareTo``, which upstream's quantity and semver
libraries both declare (``quantity_is_greater_than``, ``semver_is_greater_than`` ...):
cel-expr-python runs one Python function per name and parameter kinds, so one
implementation here answers for both, by the type of the receiver.
"""

from __future__ import annotations

from platformd.cel.library import opaque, quantity, semver
from platformd.cel.library.overloads import Implementation, Library


def _compare(a, b) -> int:
    if opaque.kind(a) != opaque.kind(b):
        raise TypeError("no such overload")
    if opaque.kind(a) == opaque.QUANTITY:
        return quantity.compare(a, b)
    return semver.compare(a, b)


IMPLEMENTATIONS = (
    Implementation("isGreaterThan", ("dyn", "dyn"), lambda a, b: _compare(a, b) == 1,
                   member=True),
    Implementation("isLessThan", ("dyn", "dyn"), lambda a, b: _compare(a, b) == -1,
                   member=True),
    Implementation("compareTo", ("dyn", "dyn"), _compare, member=True))

LIBRARY = Library("kubernetes.comparisons", (), IMPLEMENTATIONS)
