"""
Query parameters as upstream reads them (``url.Values`` through the parameter codec),
for the parts where that differs from twisted.web's ``request.args``.

* A bare ``?watch`` or ``?dryRun`` (no ``=``) is one empty value: Go's query parser
  keeps it, twisted.web's drops it.
* Booleans follow ``Convert_Slice_string_To_bool``: absent, ``0`` and ``false`` (any
  case) are false; anything else, the empty string included, is true.  A boolean
  parameter never fails to parse.
* ``pretty`` is the exception: upstream reads it with ``strconv.ParseBool`` and, when it
  is not given, looks at the User-Agent (``pretty_requested``).
"""

from __future__ import annotations

from typing import Optional


def values(request, key: bytes) -> Optional[list]:
    """Every value of parameter ``key`` (bytes), or None when absent."""
    found = request.args.get(key)
    if found is not None:
        return found
    _, _, query = request.uri.partition(b"?")
    if query and key in query.split(b"&"):
        return [b""]
    return None


def flag(found: Optional[list]) -> bool:
    """The boolean ``values`` gave, by upstream's rule (see the module docstring)."""
    if not found:
        return False
    value = found[0].lower()
    return value not in (b"0", b"false")


#: The true spellings of Go's ``strconv.ParseBool``, which reads ``pretty``.
_PARSE_BOOL_TRUE = frozenset({b"1", b"t", b"T", b"TRUE", b"true", b"True"})
#: User agents upstream indents JSON for when ``pretty`` is not given: command-line
#: tools and browsers.
_PRETTY_AGENTS = (b"curl", b"Wget", b"Mozilla/5.0")


def pretty_requested(request) -> bool:
    """
    Whether JSON responses are indented, as upstream's ``isPrettyPrint``: a non-empty
    ``pretty`` parameter decides (true as Go's ``ParseBool`` reads it, anything else
    false); without one, curl, Wget and browsers get indented JSON.
    """
    found = request.args.get(b"pretty")
    if found and found[0]:
        return found[0] in _PARSE_BOOL_TRUE
    return (request.getHeader(b"user-agent") or b"").startswith(_PRETTY_AGENTS)
