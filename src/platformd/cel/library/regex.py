"""
Upstream's ``kubernetes.regex`` library (``library/regex.go``): ``<string>.find(<regex>)``
(the first match, ``''`` if none) and ``<string>.findAll(<regex>[, <limit>])``, with Go's
RE2 syntax read by ``goformat.goregexp`` (a pattern RE2 refuses is ``Illegal regex:
error parsing regexp: ...``, as upstream).

RE2 (``cel.re2``) first says whether there is a match at all: a text no match is found
in is where Python's backtracking ``re`` takes exponential time with a catastrophic
pattern (``^(a|a)*$``), so it is then answered without ``re``.  Only a text that does
match is searched by ``re`` for the match itself.
"""

from __future__ import annotations

from platformd.cel import re2
from platformd.cel.library.overloads import Implementation, Library, Overload
from platformd.goformat import goregexp


def _pattern(regex: str, text: str):
    """``regex`` compiled by ``re``, None when RE2 finds no match in ``text``."""
    try:
        compiled = goregexp.compiled(regex)
        refused = re2.refusal(regex)
        if refused is not None:
            raise ValueError(refused)
        return compiled if re2.search(regex, text) else None
    except ValueError as error:
        raise ValueError(f"Illegal regex: {error}") from None


def _find(text: str, regex: str) -> str:
    compiled = _pattern(regex, text)
    match = compiled.search(text) if compiled is not None else None
    return match.group(0) if match else ""


def _find_all(text: str, regex: str, limit: int = -1) -> list:
    compiled = _pattern(regex, text)
    return goregexp.find_all(compiled, text, limit) if compiled is not None else []


LIBRARY = Library(
    "kubernetes.regex",
    (Overload("string_find_string", "find", ("string", "string"), "string", member=True),
     Overload("string_find_all_string", "findAll", ("string", "string"), "list<string>",
              member=True),
     Overload("string_find_all_string_int", "findAll", ("string", "string", "int"),
              "list<string>", member=True)),
    (Implementation("find", ("dyn", "dyn"), _find, member=True),
     Implementation("findAll", ("dyn", "dyn"), _find_all, member=True),
     Implementation("findAll", ("dyn", "dyn", "dyn"), _find_all, member=True)))
