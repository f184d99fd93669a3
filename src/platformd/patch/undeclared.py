"""
The first thing upstream's field manager does with an apply configuration: make it a
typed value of the kind's schema (``structuredMergeManager.Apply``:
``typeConverter.ObjectToTyped``), which fails on a field the schema does not declare,
whatever ``fieldValidation`` says (apply's field validation only sees repeated YAML keys).

The failure is not an API status upstream, so it is answered as a 500 without a reason:
``failed to create typed patch object (<namespace>/<name>; <group>/<version>,
Kind=<kind>): .spec.containers[name="web"].colour: field not declared in schema``.
structured-merge-diff's ``validatingObjectWalker`` stops walking an object at its first
undeclared field (the first in the configuration's order here; Go's map order is
random) and goes on in the others; several are listed under ``errors:``.
"""

from __future__ import annotations

from platformd import errors
from platformd.model.schema import ListOf, MapOf, Struct
from platformd.patch.apply import dotted
from platformd.patch.fieldsets import key_json, item_key


def check(kind, configuration: dict) -> None:
    """Raise upstream's 500 when ``configuration`` has fields ``kind`` does not declare."""
    found = undeclared(configuration, kind.schema)
    if not found:
        return
    messages = [f"{dotted(path)}: field not declared in schema" for path in found]
    detail = messages[0] if len(messages) == 1 else "errors:\n  " + "\n  ".join(messages)
    meta = configuration.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    where = (f"{_string(meta.get('namespace'))}/{_string(meta.get('name'))}; "
             f"{kind.group}/{kind.version}, Kind={kind.kind}")
    raise errors.StatusError(500, "", f"failed to create typed patch object ({where}): {detail}")


def undeclared(value, node, prefix: tuple = ()) -> list:
    """The paths (``fieldsets``' elements) of the fields ``node`` does not declare."""
    found: list = []
    if isinstance(node, Struct) and isinstance(value, dict):
        if node.preserve_unknown:
            return found
        for key, item in value.items():
            path = prefix + (f"f:{key}",)
            prop = node.props.get(key)
            if prop is None:
                found.append(path)
                break
            found += undeclared(item, prop.node, path)
    elif isinstance(node, MapOf) and isinstance(value, dict):
        for key, item in value.items():
            found += undeclared(item, node.values, prefix + (f"f:{key}",))
    elif isinstance(node, ListOf) and isinstance(value, list):
        for index, item in enumerate(value):
            found += undeclared(item, node.items, prefix + (_element(node, item, index),))
    return found


def _element(node: ListOf, item, index: int) -> str:
    """A list element as structured-merge-diff names it: by its keys, value or index."""
    if node.list_type == "map" and node.map_keys and isinstance(item, dict):
        return item_key(item, node)
    if node.list_type == "set":
        return "v:" + key_json(item)
    return f"i:{index}"


def _string(value) -> str:
    """``GetName``/``GetNamespace`` of an unstructured object: a string, or empty."""
    return value if isinstance(value, str) else ""
