"""
cel-go's cost arithmetic: ``uint64`` that saturates at 2^64 − 1 instead of wrapping, so
that an unknown size (2^64 − 1) keeps every cost it enters at the maximum.
"""

from __future__ import annotations

import math

#: 2^64 − 1: an unknown size, and the most any cost can be.
M = (1 << 64) - 1


def add(x: int, y: int) -> int:
    return M if x > M - y else x + y


def mul(x: int, y: int) -> int:
    return M if y and x > M // y else x * y


def factor(x: int, by: float) -> int:
    """``MultiplyByCostFactor``: ceil(x × by), saturating."""
    as_float = float(x)
    if as_float > 0 and by > 0 and as_float > M / by:
        return M
    result = math.ceil(as_float * by)
    return M if result >= 2.0 ** 64 else int(result)
