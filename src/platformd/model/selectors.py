"""
The text form of label and field selectors read into requirements, as upstream's
``labels.Parse`` and ``fields.ParseSelector`` read them: what the API's list and watch
compile into predicates (``api/selectors.py``) and what the webhook authorizer sends in
a review (``auth/selectorattributes.py``).

Both are work for ``slices.run`` (a request line may hold a megabyte of terms).
"""

from __future__ import annotations

import re

from platformd import errors
from platformd.util import slices
from platformd.model.meta import qualified_name

_LABEL_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|=|\(|\)|,|!)|(?P<word>[A-Za-z0-9_./-]+)|(?P<bad>\S))")

#: The lexer's operator tokens; every other token is a word (a key, a value, in, notin).
_OPERATORS = frozenset(("==", "!=", "=", "(", ")", ",", "!"))


def _label_error(detail: str):
    return errors.bad_request(f"unable to parse requirement: {detail}")


def label_requirements(text: str) -> slices.Work[list]:
    """
    ``labelSelector``'s requirements in the order written: ``(key, op, values)`` with
    ``op`` one of ``=`` (``=`` and ``==``), ``!=``, ``in``, ``notin`` (``values`` a tuple),
    ``exists``, ``!`` (``values`` None); every key validated.  A malformed selector is a
    400 BadRequest in upstream's words.
    """
    # Tokens, requirements and their values are strings and tuples of strings: objects
    # the garbage collector need not follow, though there may be a million of them.
    tokens: list = []
    for count, m in enumerate(_LABEL_TOKEN.finditer(text), 1):
        if m.group("bad"):
            raise _label_error(f"found '{m.group('bad')}', expected: identifier")
        tokens.append(m.group("op") or m.group("word"))
        if not count % slices.STEP:
            yield
    if text.strip() and not tokens:
        raise _label_error("found '', expected: identifier")
    requirements: list[tuple[str, str, tuple | None]] = []
    pos = 0

    def take():
        nonlocal pos
        tok = tokens[pos] if pos < len(tokens) else None
        pos += 1
        return tok

    def word(tok, what):
        if tok is None or tok in _OPERATORS:
            raise _label_error(f"found '{tok or ''}', expected: {what}")
        return tok

    while pos < len(tokens):
        if requirements and not len(requirements) % slices.STEP:
            yield
        tok = take()
        if tok == "!":
            requirements.append((word(take(), "identifier"), "!", None))
        else:
            key = word(tok, "identifier")
            nxt = take()
            if nxt is None or nxt == ",":
                requirements.append((key, "exists", None))
                pos -= 1 if nxt is None else 0
                if nxt == ",":
                    continue
                break
            if nxt in ("=", "==", "!="):
                value_tok = tokens[pos] if pos < len(tokens) else None
                if value_tok is not None and value_tok not in _OPERATORS:
                    pos += 1
                    value = value_tok
                else:
                    value = ""
                requirements.append((key, "!=" if nxt == "!=" else "=", (value,)))
            elif nxt in ("in", "notin"):
                if take() != "(":
                    raise _label_error("found '', expected: '('")
                values = []
                while True:
                    tok = take()
                    if tok == ")":
                        break
                    if tok == ",":
                        continue
                    values.append(word(tok, "',', ')' or identifier"))
                requirements.append((key, nxt, tuple(values)))
            else:
                raise _label_error(f"found '{nxt}', expected: in, notin, =, ==, !=, "
                                   "gt, lt, identifier, or ','")
        if pos < len(tokens):
            sep = take()
            if sep != ",":
                raise _label_error(f"found '{sep}', expected: ',' or 'end of string'")
    checked: set = set()
    for count, (key, _, _) in enumerate(requirements, 1):
        if key not in checked:
            _check_label_key(key)
            checked.add(key)
        if not count % slices.STEP:
            yield
    return requirements


def _check_label_key(key: str):
    problems = qualified_name(key)
    if problems:
        raise _label_error(f"key: Invalid value: {key!r}: {'; '.join(problems)}")


#: upstream's ``termOperators``, "==" tried before "=" so that no "=" is left in a value.
_FIELD_OPERATORS = ("!=", "==", "=")


class FieldSelectorError(ValueError):
    """A field selector upstream's ``fields.ParseSelector`` refuses (its words)."""


def field_requirements(text: str) -> slices.Work[list]:
    """
    upstream's ``fields.ParseSelector(text).Requirements()``: ``[(field, op, value)]``
    with ``op`` ``=`` (``=``, ``==``) or ``!=``; the terms split at unescaped commas and
    sorted, each split at its first operator (nothing trimmed), its value unescaped.
    ``FieldSelectorError`` when it does not parse.  (The API's own reading of a field
    selector, limited to a kind's fields, is ``api/selectors.field_selector``.)
    """
    terms = sorted(_split_terms(text))
    requirements = []
    for count, term in enumerate(terms, 1):
        if not count % slices.STEP:
            yield
        if not term:
            continue
        for index in range(len(term)):
            op = next((op for op in _FIELD_OPERATORS if term.startswith(op, index)), None)
            if op is not None:
                break
        else:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        value = _unescape(term[index + len(op):])
        requirements.append((term[:index], "!=" if op == "!=" else "=", value))
    return requirements


def _split_terms(text: str) -> list:
    """upstream's ``splitTerms``: at each comma not escaped by a backslash."""
    if not text:
        return []
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _unescape(value: str) -> str:
    """upstream's ``UnescapeValue``: ``\\\\``, ``\\,`` and ``\\=`` only; a bare ``,`` or
    ``=`` is refused."""
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise FieldSelectorError(
                    f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise FieldSelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)
