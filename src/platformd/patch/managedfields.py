"""
``metadata.managedFields``: who owns which fields (server-side apply's bookkeeping).

Every write records its manager: apply requests as operation ``Apply`` owning exactly
what they applied; every other write (create, update, patch) as ``Update`` owning the
fields it changed, which other managers then lose.  Entries are keyed by (manager,
operation, subresource) as upstream keys them; a manager left owning nothing is dropped.
"""

from __future__ import annotations

from typing import AbstractSet

import attrs

from platformd.patch.fieldsets import MISSING, fields_of, from_fields_v1, to_fields_v1, value_at


@attrs.frozen
class Manager:
    """Who writes, and how: ``operation`` is ``Apply`` or ``Update``."""

    name: str
    operation: str = "Update"
    subresource: str = ""


def owned(obj: dict) -> dict:
    """{(manager, operation, subresource): (set of paths, entry)} of ``obj``."""
    out = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, dict):
            continue
        key = (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))
        out[key] = (from_fields_v1(entry.get("fieldsV1") or {}), entry)
    return out


def scope(paths: set, subresource: str, kind) -> set:
    """The paths a write through ``subresource`` can touch (status vs the rest)."""
    if not kind.has_status:
        return paths
    if subresource == "status":
        return {p for p in paths if p[:1] == ("f:status",)}
    return {p for p in paths if p[:1] != ("f:status",)}


def record(kind, old, new: dict, manager: Manager, now: str, applied: set | None = None,
           taken: AbstractSet = frozenset()) -> None:
    """
    Write ``new``'s managedFields (in place) for a write by ``manager`` over ``old``
    (None on create).  ``applied`` is the apply configuration's field set (apply only);
    ``taken`` are paths forced away from other managers.
    """
    entries = owned(_base(old, new))
    new_fields = scope(fields_of(new, kind.schema), manager.subresource, kind)
    if old is None:
        changed = new_fields
        removed = set()
    else:
        old_fields = scope(fields_of(old, kind.schema), manager.subresource, kind)
        changed = {p for p in new_fields
                   if value_at(old, p, kind.schema) != value_at(new, p, kind.schema)}
        removed = old_fields - new_fields
    mine_key = (manager.name, manager.operation, manager.subresource)
    result = {}
    for key, (paths, entry) in entries.items():
        if key == mine_key:
            continue
        keep = paths - removed - taken
        if manager.operation == "Update":
            keep -= changed
        if keep:
            result[key] = (keep, entry)
    if manager.operation == "Apply":
        mine = set(applied or ())
    else:
        previous = entries.get(mine_key, (set(), None))[0]
        mine = (previous | changed) & new_fields
    if mine:
        previous_entry = entries.get(mine_key, (None, None))
        # A write that changes nothing keeps its entry (and its time): no-op writes stay
        # no-ops.
        keep = previous_entry[0] == mine and not changed and not removed and not taken
        result[mine_key] = (mine, previous_entry[1] if keep else None)
    meta = new.setdefault("metadata", {})
    out = []
    for key, (paths, entry) in result.items():
        name, operation, subresource = key
        if entry is not None and paths == from_fields_v1(entry.get("fieldsV1") or {}):
            out.append(entry)
            continue
        fresh = {"manager": name, "operation": operation, "apiVersion": kind.api_version,
                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}
        if subresource:
            fresh["subresource"] = subresource
        out.append(fresh)
    if out:
        meta["managedFields"] = out
    else:
        meta.pop("managedFields", None)


def _base(old, new: dict) -> dict:
    """
    Whose bookkeeping to start from: the stored object's, unless an update sent
    managedFields of its own that differ (a client resetting ownership, e.g. with []).
    """
    if old is None:
        return {}
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent is not None and sent != (old.get("metadata") or {}).get("managedFields"):
        return new
    return old


def conflicts(live: dict, applied: dict, applied_paths: set, manager: Manager, kind) -> list:
    """[(path, other manager name)] where applying would change another's field."""
    found = []
    for (name, operation, subresource), (paths, _entry) in owned(live).items():
        if (name, operation, subresource) == (manager.name, manager.operation,
                                              manager.subresource):
            continue
        for path in sorted(applied_paths & paths):
            if path[-1] == ".":
                continue
            live_value = value_at(live, path, kind.schema)
            if live_value is not MISSING and live_value != value_at(applied, path, kind.schema):
                found.append((path, name, operation))
    return found
