"""
The views a client may ask for instead of the object itself (spec 4.2.7, 4.2.8):
``as=Table`` and ``as=PartialObjectMetadata`` / ``as=PartialObjectMetadataList`` of
group ``meta.platform.io``, version ``v1``, in any served encoding.
"""

from __future__ import annotations

from platformd import errors
from platformd.codecs.negotiation import METADATA, METADATA_LIST, TABLE
from platformd.registry.tables import columns_for

META_GROUP = "meta.platform.io"
INCLUDE_OBJECT = ("None", "Metadata", "Object")

GET_VIEWS = frozenset({TABLE, METADATA})
LIST_VIEWS = frozenset({TABLE, METADATA_LIST})
WATCH_VIEWS = frozenset({TABLE, METADATA})


def partial(obj: dict, group: str = META_GROUP) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{group}/v1",
            "metadata": obj.get("metadata") or {}}


def include_object(call) -> str:
    value = call.arg("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.bad_request(f'includeObject: Unsupported value: "{value}": supported '
                                 'values: "None", "Metadata", "Object"')
    return value


def table(kind, objects, meta: dict, include: str, now: float, group: str = META_GROUP) -> dict:
    columns = columns_for(kind)
    rows = []
    for obj in objects:
        row = {"cells": [column.cell(obj, now) for column in columns]}
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = partial(obj, group)
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"{group}/v1", "metadata": meta,
            "columnDefinitions": [c.definition() for c in columns], "rows": rows}


def object_view(choice, kind, obj: dict, include: str, now: float) -> dict:
    """One object in ``choice``'s view (None: itself)."""
    view = choice.view
    if view == TABLE:
        return table(kind, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                     include, now, choice.group)
    if view in (METADATA, METADATA_LIST):
        return partial(obj, choice.group)
    return obj


def list_view(choice, kind, objects, meta: dict, include: str, now: float) -> dict:
    """A list in ``choice``'s view (None: the kind's List)."""
    view, group = choice.view, choice.group
    if view == TABLE:
        return table(kind, objects, meta, include, now, group)
    if view == METADATA_LIST:
        return {"kind": "PartialObjectMetadataList", "apiVersion": f"{group}/v1",
                "metadata": meta, "items": [partial(o, group) for o in objects]}
    return {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta,
            "items": list(objects)}
