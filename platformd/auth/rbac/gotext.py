"""
Go's text forms that upstream's RBAC messages are made of: ``%q`` of a string
(``strconv.Quote``) and of a ``[]string`` (``["a" "b"]``), and the text of an
aggregated error (``utilerrors.NewAggregate(errs).Error()``).
"""

from __future__ import annotations

from platformd.model.fielderrors import go_quote


def quote(text: str) -> str:
    """``strconv.Quote`` (``fielderrors.go_quote``), at once for plain text."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return go_quote(text)


def quote_list(items) -> str:
    """``%q`` of a ``[]string``: ``["a" "b"]`` (``[]`` when empty)."""
    return "[" + " ".join(quote(item) for item in items) + "]"


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
