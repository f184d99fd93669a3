"""
JSON inside a client's token (a continue token, a JWT's header and claims), read as Go's
encoding/json reads it, so that no such text gets a 500 or a traceback:

* numbers of any length through ``gonumbers``' hooks (past int64 or float64 a
  ``BigNumber``, for the caller to refuse as Go's decoder would);
* ``NaN``, ``Infinity`` and ``-Infinity``, which Python's parser takes by default (a
  float no issuer writes, and an ``exp`` that never passes), refused in Go's scanner's
  words;
* nesting: Go's scanner refuses a document past 10,000 levels (``invalid character '['
  exceeded max depth``); Python's parser is recursive and gives up near its recursion
  limit (about 1,000 levels) with a ``RecursionError``, so a document nested that deep
  is refused in Go's words, naming the bracket at level ``MAX_DEPTH`` + 1 — a lower
  limit than Go's, reached only by documents no server or issuer writes.

``loads`` raises ``ValueError`` (``GoSyntaxError``) for all of these, as for any
malformed JSON.
"""

from __future__ import annotations

import itertools
import json
import re

from platformd.goformat import gonumbers
#: Levels of nesting past which a document that Python's parser could not follow is
#: reported (any document it could is read as it is).
MAX_DEPTH = 500

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class GoSyntaxError(ValueError):
    """Go's ``*json.SyntaxError`` text."""


def _constant(name: str):
    """Python's parser found NaN, Infinity or -Infinity: Go's scanner stops at its first
    letter (after a minus sign, inside a number)."""
    if name.startswith("-"):
        raise GoSyntaxError(f"invalid character '{name[1]}' in numeric literal")
    raise GoSyntaxError(f"invalid character '{name[0]}' looking for beginning of value")


def _too_deep(text: str) -> GoSyntaxError:
    """
    Go's words for a document nested past ``MAX_DEPTH``: the bracket that opens level
    ``MAX_DEPTH`` + 1 (outside strings), found without a Python loop per character.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    levels = itertools.accumulate(map(_STEP.__getitem__, brackets))
    # (No bracket that deep only when the caller's own stack was deep: the outermost.)
    past = next(itertools.compress(itertools.count(), map(MAX_DEPTH.__lt__, levels)), 0)
    return GoSyntaxError(f"invalid character '{brackets[past]}' exceeded max depth")


def loads(data: bytes):
    """The JSON value in ``data`` (UTF-8); ``ValueError`` when Go's decoder refuses it."""
    text = data.decode("utf-8")
    try:
        return json.loads(text, parse_constant=_constant, **gonumbers.json_number_hooks)
    except RecursionError:
        raise _too_deep(text) from None
