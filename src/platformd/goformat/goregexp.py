"""
``pattern`` as Go's RE2 reads it, over Python's ``re``: the constructs RE2 refuses and
``re`` accepts (look-arounds, backreferences, possessive and atomic groups) are refused
with RE2's words, and RE2's own spellings ``re`` lacks are translated (``\\z``, the
Unicode classes ``\\pL``/``\\p{L}``/``\\PL`` for letters, ``N``/``Nd`` for digits).  Other
Unicode classes compile but match nothing in particular: a pattern using them passes
``check`` and its values are not checked against it.

Errors are worded as Go's ``regexp.Compile`` words them (``error parsing regexp: missing
closing ): `(ab`)`` for the common cases; others keep ``re``'s description.
"""

from __future__ import annotations

import re
from typing import Optional

_PERL = re.compile(r"\(\?(<=|<!|=|!|>|P=|\d)")
_BACKREF = re.compile(r"(?<!\\)(?:\\\\)*(\\[1-9])")
_UNICODE = re.compile(r"\\([pP])(\{\^?[A-Za-z_]+\}|[A-Za-z])")
_CLASSES = {"L": "^\\W\\d_", "N": "\\d", "Nd": "\\d"}

_GO_ERRORS = (
    (re.compile(r"missing \), unterminated subpattern"), "missing closing )"),
    (re.compile(r"unbalanced parenthesis"), "unexpected )"),
    (re.compile(r"unterminated character set"), "missing closing ]"),
    (re.compile(r"nothing to repeat"), "missing argument to repetition operator"),
    (re.compile(r"bad escape"), "invalid escape sequence"),
    (re.compile(r"bad character range"), "invalid character class range"),
)


class _Unchecked(Exception):
    """The pattern uses a Unicode class this module cannot translate."""


def _translate(pattern: str) -> str:
    def unicode_class(match) -> str:
        negated = match.group(1) == "P"
        name = match.group(2).strip("{}")
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        inner = _CLASSES.get(name)
        if inner is None:
            raise _Unchecked(name)
        if inner.startswith("^"):
            return f"[{inner[1:]}]" if negated else f"[{inner}]"
        return f"[^{inner}]" if negated else f"[{inner}]"

    text = _UNICODE.sub(unicode_class, pattern)
    return re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", text)


def problem(pattern: str) -> Optional[str]:
    """Go's ``regexp.Compile`` error for ``pattern``, None when RE2 accepts it."""
    perl = _PERL.search(pattern)
    if perl:
        fragment = pattern[perl.start():perl.end()]
        return f"error parsing regexp: invalid or unsupported Perl syntax: `{fragment}`"
    backref = _BACKREF.search(pattern)
    if backref:
        return f"error parsing regexp: invalid escape sequence: `{backref.group(1)}`"
    try:
        re.compile(_translate(pattern))
    except _Unchecked:
        return None
    except re.error as error:
        message = error.msg
        for python, go in _GO_ERRORS:
            if python.search(message):
                message = go
                break
        position = error.pos or 0
        fragment = pattern[position:]
        if message == "unexpected )":
            fragment = pattern  # Go names the whole expression
        elif message == "missing argument to repetition operator":
            fragment = pattern[position:position + 1]
        elif "multiple repeat" in error.msg:
            message, fragment = "invalid nested repetition operator", \
                pattern[max(position - 1, 0):position + 1]
        return f"error parsing regexp: {message}: `{fragment}`"
    return None


_COMPILED: dict = {}


def compiled(pattern: str):
    """``pattern`` compiled as Go's ``regexp.Compile`` would accept it; ``ValueError``
    with Go's message when RE2 refuses it (or this module cannot translate it)."""
    found = _COMPILED.get(pattern)
    if found is not None:
        return found
    refused = problem(pattern)
    if refused is not None:
        raise ValueError(refused)
    try:
        found = re.compile(_translate(pattern))
    except (_Unchecked, re.error) as error:
        raise ValueError(f"error parsing regexp: unsupported here: `{error}`") from None
    if len(_COMPILED) > 4096:
        _COMPILED.clear()
    _COMPILED[pattern] = found
    return found


def find_all(pattern, text: str, limit: int = -1) -> list:
    """Go's ``FindAllString(text, limit)``: the leftmost non-overlapping matches, an empty
    match right after a match left out, at most ``limit`` of them (all if negative)."""
    out: list = []
    previous_end = -1
    for match in pattern.finditer(text):
        if limit >= 0 and len(out) >= limit:
            break
        if match.start() == match.end() == previous_end:
            continue
        out.append(match.group(0))
        previous_end = match.end()
    return out
