"""
The invariants of ``set`` and ``map`` lists: upstream's ``listtype.ValidateListSetsAndMaps``
(``pkg/apiserver/schema/listtype/validation.go``).  A set's repeated item, or a map
list's item repeating another's keys, is ``Duplicate value`` at its index (the keys as
an object: ``Duplicate value: {"name":"a"}``; ``{}`` for an item without them); an item
of a map list that is not an object is ``must be an object for an array of list-type
map``.  Items compare as Go does: scalars by value (an int and a float are different),
objects and lists by their JSON.
"""

from __future__ import annotations

import json
from typing import Optional

from platformd.apiextensions.schema import causes
from platformd.apiextensions.schema.node import LIST_TYPES, Node


def validate(path: str, schema: Optional[Node], value) -> list:
    out: list = []
    if isinstance(value, dict):
        _object(path, schema, value, out)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _object(path: str, schema: Optional[Node], value: dict, out: list) -> None:
    if schema is None or LIST_TYPES not in schema.below:
        return
    if schema.additional is not None:
        for key, item in value.items():
            _value(f"{path}[{key}]", schema.additional, item, out)
    if schema.properties:
        for key, item in value.items():
            prop = schema.properties.get(key)
            if prop is not None:
                _value(_join(path, key), prop, item, out)


def _value(path: str, schema: Node, value, out: list) -> None:
    if LIST_TYPES not in schema.below:
        return
    if isinstance(value, list):
        _list(path, schema, value, out)
    elif isinstance(value, dict):
        _object(path, schema, value, out)


def _identity(value):
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True, separators=(",", ":")))
    return (type(value).__name__ if not isinstance(value, bool) else "bool", value)


def _repeated(items: list) -> list:
    """The indices of the second occurrence of each repeated item."""
    seen: dict = {}
    out = []
    for i, item in enumerate(items):
        key = _identity(item)
        count = seen.get(key, 0)
        if count == 1:
            out.append(i)
        seen[key] = count + 1
    return out


_UNSPECIFIED = object()


def _list(path: str, schema: Node, value: list, out: list) -> None:
    if schema.list_type == "set":
        for i in (_repeated(value) if len(value) > 1 else ()):
            out.append(causes.duplicate(f"{path}[{i}]", value[i]))
    elif schema.list_type == "map":
        out.extend(_map_list(path, schema, value))
    if schema.items is not None:
        for i, item in enumerate(value):
            _value(f"{path}[{i}]", schema.items, item, out)


def _map_list(path: str, schema: Node, value: list) -> list:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [causes.invalid(f"{path}[{i}]", item,
                                   "must be an object for an array of list-type map")]
    if len(value) <= 1:
        return []
    keys = []
    for item in value:
        key = {}
        for name in schema.list_map_keys:
            if isinstance(item, dict) and name in item:
                key[name] = item[name]
        keys.append(key)
    if len(schema.list_map_keys) == 1:
        name = schema.list_map_keys[0]
        singles = [k.get(name, _UNSPECIFIED) for k in keys]
        identities = [("unspecified",) if k is _UNSPECIFIED else _identity(k) for k in singles]
    else:
        identities = [_identity(k) for k in keys]
    seen: dict = {}
    out = []
    for i, identity in enumerate(identities):
        count = seen.get(identity, 0)
        if count == 1:
            out.append(causes.duplicate(f"{path}[{i}]", keys[i]))
        seen[identity] = count + 1
    return out
