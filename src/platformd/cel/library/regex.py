"""
Upstream's ``kubernetes.regex`` library (``library/regex.go``): ``<string>.find(<regex>)``
(the first match, ``''`` if none) and ``<string>.findAll(<regex>[, <limit>])``, with Go's
RE2 syntax read by ``goformat.goregexp`` (a pattern RE2 refuses is ``Illegal regex:
error parsing regexp: ...``, as upstream).
"""

from __future__ import annotations

from platformd.cel.library.overloads import Implementation, Library, Overload
from platformd.goformat import goregexp


def _pattern(regex: str):
    try:
        return goregexp.compiled(regex)
    except ValueError as error:
        raise ValueError(f"Illegal regex: {error}") from None


def _find(text: str, regex: str) -> str:
    match = _pattern(regex).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, regex: str, limit: int = -1) -> list:
    return goregexp.find_all(_pattern(regex), text, limit)


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
