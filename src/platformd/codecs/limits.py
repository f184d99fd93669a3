"""
What every decoded request body may hold, whatever its encoding: at most ``MAX_DEPTH``
levels of nested objects and arrays, only JSON's kinds of values (YAML's ``!!binary``,
``!!set`` or ``!!omap`` pairs are not), and only numbers JSON can carry back out:
floats that are finite, integers within int64, and JSON numbers beyond those as written
(``gonumbers.BigNumber``: JSON and YAML make one of an integer past int64, CBOR refuses
it as upstream's decode mode does; the schema judges them where they land).

Upstream's decoders stop far deeper (JSON 10,000 levels, CBOR 64); no object of any
built-in kind comes near 100 (a Pod is about 8 deep), and a limit here keeps every
later step safe: the schema walk and the patch engines recurse per level, orjson refuses
to encode past 254 levels, and libyaml's composer recurses in C (a few hundred thousand
levels crash the process).  A NaN or an infinity (YAML's ``.inf``, a CBOR float) would
be stored and then fail to encode (or encode as null) in every later response;
upstream's decoders refuse them too.  Codecs call ``check_value`` on what
they decoded (YAML checks its event stream's depth before composing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from platformd.codecs.interface import CodecError
from platformd.goformat.gonumbers import BigNumber

MAX_DEPTH = 100


def too_deep() -> CodecError:
    return CodecError(f"nested deeper than the limit of {MAX_DEPTH} levels")


def check_value(value) -> None:
    """Raise ``CodecError`` if ``value`` breaks a limit of the module docstring."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if type(key) is not str or not key.isascii():
                    check_scalar(key)
            children: Iterable = item.values()
        elif isinstance(item, list):
            children = item
        else:
            check_scalar(item)
            continue
        if depth > MAX_DEPTH:
            raise too_deep()
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif type(child) is str and child.isascii() or type(child) is int:
                continue  # what most values are, and always fine: no call to find so
            else:
                check_scalar(child)


def check_scalar(item) -> None:
    if isinstance(item, str):
        if not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise CodecError("a string holds a lone UTF-16 surrogate") from None
        return
    if isinstance(item, (bool, int, BigNumber)) or item is None:
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise CodecError(f"{item} is not a number JSON can carry")
    else:
        raise CodecError(f"a value of type {type(item).__name__} has no JSON form")
