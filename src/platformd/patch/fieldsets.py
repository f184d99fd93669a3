"""
Field sets: which fields of an object a manager owns, in upstream's ``FieldsV1`` form.

A path is a tuple of elements as ``FieldsV1`` spells them: ``f:<field>`` for an object
field or map key, ``k:<json of the key fields>`` for an element of a list merged by keys,
``v:<json value>`` for an element of a set, and ``.`` for "the element itself".  Atomic
values (scalars, atomic lists, atomic objects such as ``roleRef``) are leaves: owning
them means owning the whole value.  The schema decides, so ``subjects`` is one field
while Pod ``containers`` are owned element by element and field by field.
"""

from __future__ import annotations

import json

from platformd.model.schema import ListOf, MapOf, Struct

#: Fields nobody owns: identity, server-set state and the bookkeeping itself.
IGNORED = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata", "f:name"), ("f:metadata", "f:namespace"),
    ("f:metadata", "f:uid"), ("f:metadata", "f:resourceVersion"),
    ("f:metadata", "f:generation"), ("f:metadata", "f:creationTimestamp"),
    ("f:metadata", "f:deletionTimestamp"), ("f:metadata", "f:deletionGracePeriodSeconds"),
    ("f:metadata", "f:managedFields"), ("f:metadata", "f:selfLink"),
    ("f:metadata", "f:generateName"),
})


def key_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def item_key(item: dict, node: ListOf) -> str:
    return "k:" + key_json({k: item[k] for k in node.map_keys if k in item})


def _keyed(node) -> bool:
    return isinstance(node, ListOf) and node.list_type == "map" and bool(node.map_keys) \
        and isinstance(node.items, Struct)


def _granular(node, value) -> bool:
    """Whether ``value`` is owned field by field: an object not atomic, a map, or an
    object the schema does not describe (under ``preserve_unknown``: upstream's deduced
    type, whose maps are granular and lists atomic)."""
    if isinstance(node, Struct):
        return not node.atomic and isinstance(value, dict)
    if isinstance(node, MapOf):
        return not node.atomic and isinstance(value, dict)
    return node is None and isinstance(value, dict)


def fields_of(value, node, prefix: tuple = ()) -> set:
    """Every leaf path of ``value`` by ``node`` (see module docstring)."""
    out: set = set()
    _walk(value, node, prefix, out)
    return {p for p in out if not _ignored(p)}


def _ignored(path: tuple) -> bool:
    return path in IGNORED or path[:2] in IGNORED


def _walk(value, node, prefix, out):
    if _granular(node, value):
        if not value:
            out.add(prefix)
            return
        props = node.props if isinstance(node, Struct) else None
        values = node.values if isinstance(node, MapOf) else None
        for key, item in value.items():
            if item is None:
                continue  # a null (an unset Time Go's JSON shows) is no field, as in SMD
            path = prefix + ("f:" + key,)
            if not isinstance(item, (dict, list)):
                out.add(path)  # a scalar is a leaf whatever its node (the last branch)
                continue
            if props is not None:
                prop = props.get(key)
                _walk(item, None if prop is None else prop.node, path, out)
            else:
                _walk(item, values, path, out)
    elif _keyed(node) and isinstance(value, list):
        if not value:
            out.add(prefix)
        for item in value:
            if isinstance(item, dict):
                element = prefix + (item_key(item, node),)
                out.add(element + (".",))
                _walk(item, node.items, element, out)
    elif isinstance(node, ListOf) and node.list_type == "set" and isinstance(value, list):
        if not value:
            out.add(prefix)
        for item in value:
            out.add(prefix + ("v:" + key_json(item),))
    else:
        out.add(prefix)


def to_fields_v1(paths) -> dict:
    """A set of paths as the nested ``FieldsV1`` object."""
    root: dict = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


def from_fields_v1(tree, prefix: tuple = ()) -> set:
    """The paths a ``FieldsV1`` object holds."""
    out: set = set()
    if not isinstance(tree, dict):
        return out
    for element, child in tree.items():
        path = prefix + (element,)
        if isinstance(child, dict) and child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


_MISSING = object()


def value_at(obj, path: tuple, node):
    """The value at ``path`` in ``obj`` (``_MISSING`` when absent)."""
    current, current_node = obj, node
    for element in path:
        if element == ".":
            return current
        if element.startswith("f:"):
            if not isinstance(current, dict):
                return _MISSING
            key = element[2:]
            current = current.get(key, _MISSING)
            if isinstance(current_node, Struct):
                prop = current_node.props.get(key)
                current_node = prop.node if prop else None
            elif isinstance(current_node, MapOf):
                current_node = current_node.values
            else:
                current_node = None
        elif element.startswith("k:"):
            if not isinstance(current, list) or not _keyed(current_node):
                return _MISSING
            current = next((i for i in current if isinstance(i, dict)
                            and item_key(i, current_node) == element), _MISSING)
            current_node = current_node.items
        elif element.startswith("v:"):
            wanted = json.loads(element[2:])
            return wanted if isinstance(current, list) and wanted in current else _MISSING
        if current is _MISSING:
            return _MISSING
    return current


def remove_path(obj, path: tuple, node) -> None:
    """
    Remove the field, list element or set value at ``path`` (in place), then any object
    left empty above it (as upstream's omitempty fields vanish).
    """
    _remove(obj, path, node)
    for depth in range(len(path) - 1, 0, -1):
        parent = path[:depth]
        if not parent[-1].startswith("f:"):
            break
        value = value_at(obj, parent, node)
        if value != {}:
            break
        _remove(obj, parent, node)


def _remove(obj, path: tuple, node) -> None:
    if not path:
        return
    if path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1], node) if len(path) > 1 else obj
    parent_node = _node_at(node, path[:-1])
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list) and _keyed(parent_node):
        parent[:] = [i for i in parent if not (isinstance(i, dict)
                                               and item_key(i, parent_node) == last)]
    elif last.startswith("v:") and isinstance(parent, list):
        wanted = json.loads(last[2:])
        parent[:] = [i for i in parent if i != wanted]


def _node_at(node, path: tuple):
    for element in path:
        if element.startswith("f:"):
            if isinstance(node, Struct):
                prop = node.props.get(element[2:])
                node = prop.node if prop else None
            elif isinstance(node, MapOf):
                node = node.values
            else:
                return None
        elif element.startswith("k:") and isinstance(node, ListOf):
            node = node.items
    return node


MISSING = _MISSING
