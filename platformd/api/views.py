"""
The views a client may ask for instead of the object itself (spec 4.2.7, 4.2.8):
``as=Table`` and ``as=PartialObjectMetadata`` / ``as=PartialObjectMetadataList`` of
group ``meta.platform.io``, version ``v1``, in any served encoding.
"""

from __future__ import annotations

from platformd import errors
from platformd.codecs.negotiation import METADATA, METADATA_LIST, TABLE
from platformd.registry.tables import columns_for

META_API_VERSION = "meta.platform.io/v1"
INCLUDE_OBJECT = ("None", "Metadata", "Object")

GET_VIEWS = frozenset({TABLE, METADATA})
LIST_VIEWS = frozenset({TABLE, METADATA_LIST})
WATCH_VIEWS = frozenset({TABLE, METADATA})


def partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": META_API_VERSION,
            "metadata": obj.get("metadata") or {}}


def include_object(call) -> str:
    value = call.arg("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.bad_request(f'includeObject: Unsupported value: "{value}": supported '
                                 'values: "None", "Metadata", "Object"')
    return value


def table(kind, objects, meta: dict, include: str, now: float) -> dict:
    columns = columns_for(kind)
    rows = []
    for obj in objects:
        row = {"cells": [column.cell(obj, now) for column in columns]}
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = partial(obj)
        rows.append(row)
    return {"kind": "Table", "apiVersion": META_API_VERSION, "metadata": meta,
            "columnDefinitions": [c.definition() for c in columns], "rows": rows}


def object_view(view, kind, obj: dict, include: str, now: float) -> dict:
    """One object as ``view`` (None: itself)."""
    if view == TABLE:
        return table(kind, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                     include, now)
    if view in (METADATA, METADATA_LIST):
        return partial(obj)
    return obj


def list_view(view, kind, objects, meta: dict, include: str, now: float) -> dict:
    """A list as ``view`` (None: the kind's List)."""
    if view == TABLE:
        return table(kind, objects, meta, include, now)
    if view == METADATA_LIST:
        return {"kind": "PartialObjectMetadataList", "apiVersion": META_API_VERSION,
                "metadata": meta, "items": [partial(o) for o in objects]}
    return {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta,
            "items": list(objects)}
