"""
The simple JSONPaths of printer columns and the scale subresource (``.spec.replicas``,
``.status.conditions[0].type``, ``.metadata.labels['app']``): what upstream's
``validateSimpleJSONPath`` accepts, read and written here without a JSONPath engine.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+|\*)\]|\[['\"]([^'\"]*)['\"]\]")


class PathError(ValueError):
    pass


def parse(path: str) -> list:
    """The steps of ``path`` (str keys, int indices, ``'*'``); ``PathError`` when it is not
    a simple path starting with ``.``."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if not path.startswith("."):
        raise PathError("must be a simple json path starting with .")
    steps: list = []
    at = 0
    while at < len(path):
        m = _TOKEN.match(path, at)
        if m is None:
            raise PathError(f"unrecognized character in action: {path[at:]!r}")
        if m.group(1) is not None:
            steps.append(m.group(1))
        elif m.group(2) is not None:
            steps.append("*" if m.group(2) == "*" else int(m.group(2)))
        else:
            steps.append(m.group(3))
        at = m.end()
    return steps


def find(obj, steps: list) -> list:
    """Every value at ``steps`` in ``obj`` (none when the path is absent)."""
    values = [obj]
    for step in steps:
        out = []
        for value in values:
            if step == "*":
                if isinstance(value, list):
                    out.extend(value)
                elif isinstance(value, dict):
                    out.extend(value.values())
            elif isinstance(step, int):
                if isinstance(value, list) and -len(value) <= step < len(value):
                    out.append(value[step])
            elif isinstance(value, dict) and step in value:
                out.append(value[step])
        values = out
    return values


def first(obj, steps: list):
    values = find(obj, steps)
    return values[0] if values else None


def put(obj: dict, steps: list, value) -> None:
    """Set the value at ``steps`` (keys only), making the objects on the way."""
    for step in steps[:-1]:
        nxt = obj.get(step)
        if not isinstance(nxt, dict):
            nxt = obj[step] = {}
        obj = nxt
    obj[steps[-1]] = value
