"""
Server-side apply (``application/apply-patch+yaml``), written by hand: no Python library
implements it.

Applying a configuration as manager M:

1. Its field set ``A`` is computed by the schema (``fieldsets.fields_of``).
2. A field in ``A`` owned by another manager whose live value differs from the applied
   value is a conflict: 409 naming each field and its manager, unless ``force=true``,
   which takes those fields away from their owners.
3. The configuration is merged into the live object: objects field by field, lists
   merged by keys element by element, sets as unions, atomic values replaced.
4. Fields M applied before but not now are removed, unless another manager owns them.
5. M's ``Apply`` entry in ``managedFields`` becomes exactly ``A``.
"""

from __future__ import annotations

import copy
import json

from platformd import errors
from platformd.patch.fieldsets import MISSING, fields_of, item_key, remove_path, value_at
from platformd.patch import managedfields
from platformd.model.schema import ListOf, MapOf, Struct


def merge(live, applied, node):
    """
    ``applied`` merged into ``live`` by ``node`` (neither is modified; the result shares
    values with both: copy it before changing it).
    """
    if isinstance(applied, dict) and isinstance(live, dict) and (
            (isinstance(node, Struct) and not node.atomic)
            or (isinstance(node, MapOf) and not node.atomic) or node is None):
        out = dict(live)
        for key, value in applied.items():
            if isinstance(node, Struct):
                prop = node.props.get(key)
                child = prop.node if prop else None
            else:
                child = node.values if node is not None else None
            out[key] = merge(live.get(key), value, child)
        return out
    if isinstance(applied, list) and isinstance(live, list) and isinstance(node, ListOf):
        if node.list_type == "map" and node.map_keys and isinstance(node.items, Struct):
            items = list(live)
            index = {item_key(i, node): n for n, i in enumerate(items) if isinstance(i, dict)}
            for item in applied:
                if not isinstance(item, dict):
                    continue
                key = item_key(item, node)
                if key in index:
                    items[index[key]] = merge(items[index[key]], item, node.items)
                else:
                    index[key] = len(items)
                    items.append(item)
            return items
        if node.list_type == "set":
            return list(live) + [v for v in applied if v not in live]
    return applied


def apply(kind, live, applied: dict, manager, force: bool, now: str) -> dict:
    """
    The object that applying ``applied`` as ``manager`` over ``live`` (None: absent)
    makes, with its managedFields; 409 Conflict when another manager's fields would
    change and ``force`` is false.  Neither ``live`` nor ``applied`` is changed, and the
    result shares nothing with them: the update loop applies the same configuration on
    every attempt.
    """
    applied_paths = managedfields.scope(fields_of(applied, kind.schema), manager.subresource,
                                        kind)
    taken = set()
    if live is not None:
        found = managedfields.conflicts(live, applied, applied_paths, manager, kind)
        if found and not force:
            raise conflict_error(kind, applied, found)
        taken = {path for path, _name, _op in found}
    base = live if live is not None else {}
    # A copy: ``merge`` shares values with both (over no object, the configuration's
    # own ``metadata``), and what follows changes the result in place.  The store's
    # update loop gives the same configuration to every attempt: an attempt that found
    # no object (a replica whose watch had not yet brought another's create) wrote its
    # managedFields into the configuration, and the attempt decided again on the object
    # sent them as the client's own, so the other managers' entries were dropped
    # (docs/etcd.md).  ``live`` stays the record's "before" too, unchanged by removals.
    result = copy.deepcopy(merge(base, applied, kind.schema))
    if live is not None:
        previous = managedfields.owned(live).get(
            (manager.name, "Apply", manager.subresource), (set(), None))[0]
        others = set()
        for key, (paths, _entry) in managedfields.owned(live).items():
            if key != (manager.name, "Apply", manager.subresource):
                others |= paths - taken
        gone = previous - applied_paths - others
        # Whole list elements first, then fields (deepest first) that still exist.
        for path in sorted(gone, key=lambda p: (p[-1] != ".", -len(p), p)):
            if path[-1] == "." and any(o[:len(path) - 1] == path[:-1] for o in others):
                continue  # someone else still owns part of this element
            if value_at(result, path, kind.schema) is not MISSING:
                remove_path(result, path, kind.schema)
    result.setdefault("metadata", {})
    managedfields.record(kind, live, result, manager, now, applied=applied_paths, taken=taken)
    return result


def dotted(path: tuple) -> str:
    """
    A path as structured-merge-diff prints it (``PathElement.String``), in conflicts and
    validation errors: ``.spec.containers[name="web"].image``, ``[=value]`` for a set's
    element, ``[0]`` for an atomic list's.
    """
    out = ""
    for element in path:
        if element.startswith("f:"):
            out += "." + element[2:]
        elif element.startswith("k:"):
            keys = json.loads(element[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif element.startswith("v:"):
            out += f"[={element[2:]}]"
        elif element.startswith("i:"):
            out += f"[{element[2:]}]"
    return out


def conflict_error(kind, applied: dict, found: list) -> errors.StatusError:
    causes = tuple(errors.Cause("FieldManagerConflict",
                                f'conflict with "{name}"'
                                + (f" using {kind.api_version}" if op == "Update" else ""),
                                dotted(path))
                   for path, name, op in found)
    lines = [f'conflict with "{name}"' + (f" using {kind.api_version}" if op == "Update" else "")
             + f": {dotted(path)}" for path, name, op in found]
    plural = "conflict" if len(found) == 1 else "conflicts"
    name = (applied.get("metadata") or {}).get("name", "")
    return errors.StatusError(
        409, "Conflict",
        f"Apply failed with {len(found)} {plural}: " + "\n".join(lines),
        name=name, group=kind.group, kind=kind.plural, causes=causes)
