"""
Go's text forms that upstream's messages are made of: ``%q`` of a string
(``strconv.Quote``) and of a ``[]string`` (``["a" "b"]``), ``%#v`` of a ``[]string``, the text of an
aggregated error (``utilerrors.NewAggregate(errs).Error()``) and of an ``*os.PathError``.  At the bottom of the
layers: validation, authorization and the flags all word errors with them.
"""

from __future__ import annotations

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """Go's ``%q`` (strconv.Quote): printable characters as they are, others escaped."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'



def quote(text: str) -> str:
    """``strconv.Quote`` (``go_quote``), at once for plain text."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return go_quote(text)


def quote_list(items) -> str:
    """``%q`` of a ``[]string``: ``["a" "b"]`` (``[]`` when empty)."""
    return "[" + " ".join(quote(item) for item in items) + "]"


def string_slice(items) -> str:
    """``%#v`` of a ``[]string``: ``[]string{"a", "b"}`` (``[]string{}`` when empty)."""
    return "[]string{" + ", ".join(quote(item) for item in items) + "}"


def aggregate(messages) -> str:
    """
    ``utilerrors.NewAggregate(errs).Error()``: one error as itself; several as
    ``[a, b]``, each distinct message once (and without brackets when only one is left).
    """
    messages = list(messages)
    if len(messages) <= 1:
        return messages[0] if messages else ""
    distinct = list(dict.fromkeys(messages))
    if len(distinct) == 1:
        return distinct[0]
    return "[" + ", ".join(distinct) + "]"


def os_error(error: OSError) -> str:
    """An OS error's text as Go writes it (``no such file or directory``)."""
    return (error.strerror or str(error)).lower()


def path_error(op: str, path: str, error: OSError) -> str:
    """An ``*os.PathError`` as Go prints it (``open /x: no such file or directory``)."""
    return f"{op} {path}: {os_error(error)}"


def json_kind(value, other: str = "value") -> str:
    """How Go's encoding/json names a decoded JSON value's type in an unmarshal error
    (``json: cannot unmarshal <kind> into ...``); ``other`` for anything else (null)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return _JSON_KINDS.get(type(value), other)


_JSON_KINDS: dict = {str: "string", list: "array", dict: "object"}
