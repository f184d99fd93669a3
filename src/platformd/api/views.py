"""
The views a client may ask for instead of the object itself (spec 4.2.7, 4.2.8):
``as=Table`` (JSON and YAML) and ``as=PartialObjectMetadata`` /
``as=PartialObjectMetadataList`` (every served encoding) of group ``meta.platform.io``,
version ``v1``.
"""

from __future__ import annotations

from platformd import errors
from platformd.codecs.negotiation import METADATA, METADATA_LIST, TABLE

META_GROUP = "meta.platform.io"
INCLUDE_OBJECT = ("None", "Metadata", "Object")

GET_VIEWS = frozenset({TABLE, METADATA})
LIST_VIEWS = frozenset({TABLE, METADATA_LIST})
WATCH_VIEWS = frozenset({TABLE, METADATA})
#: What a get or a list may be answered as: both metadata views, whatever is read, as
#: upstream's ``RequestScope.AllowsConversion`` allows them (``check_shape`` follows).
READ_VIEWS = frozenset({TABLE, METADATA, METADATA_LIST})


def check_shape(choice, kind, is_list: bool) -> None:
    """
    Refuse a metadata view of the other shape than what was read (one object, or a
    list when ``is_list``) with the 406 of upstream's ``asPartialObjectMetadata`` /
    ``asPartialObjectMetadataList``, which names the Go type read (``_go_type``).
    """
    if is_list and choice.view == METADATA:
        raise _not_acceptable("you requested PartialObjectMetadata, but the requested object "
                              f"is a list ({_go_type(kind, 'List')})")
    if not is_list and choice.view == METADATA_LIST:
        raise _not_acceptable("you requested PartialObjectMetadataList, but the requested "
                              f"object is not a list ({_go_type(kind)})")


def _go_type(kind, suffix: str = "") -> str:
    """
    What Go's ``%T`` prints for the object upstream's handler read: the registry's
    internal type (``*rbac.RoleBindingList``), whose package
    (``k8s.io/kubernetes/pkg/apis/<package>``) is named for the group's first label,
    ``core`` for the legacy group.
    """
    if kind.unstructured:
        return f"*unstructured.Unstructured{suffix}"
    kind = kind.storage_kind or kind  # events.platform.io's Events are core's
    package = kind.group.split(".", 1)[0] or "core"
    return f"*{package}.{kind.kind}{suffix}"


def _not_acceptable(message: str) -> errors.StatusError:
    """Upstream's ``errNotAcceptable`` (handlers/response.go): no details."""
    return errors.StatusError(406, "NotAcceptable", message)


def partial(obj: dict, group: str = META_GROUP) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{group}/v1",
            "metadata": obj.get("metadata") or {}}


def include_object(call, choice) -> str:
    """
    The Table's ``includeObject`` (default ``Metadata``).  As upstream's
    ``ValidateTableOptions``, it is read only when a Table is asked for.
    """
    value = call.arg("includeObject") or "Metadata"
    if choice.view == TABLE and value not in INCLUDE_OBJECT:
        raise errors.bad_request(f'Unable to convert to Table as requested: includeObject: '
                                 f'Invalid value: "{value}": must be \'Metadata\', '
                                 f'\'Object\', \'None\', or empty')
    return value


def table(kind, objects, meta: dict, include: str, now: float, group: str = META_GROUP,
          headers: bool = True) -> dict:
    """
    The Table of ``objects``.  Without ``headers`` (a watch's events after its first,
    upstream's ``NoHeaders``) ``columnDefinitions`` is null.
    """
    columns = kind.columns
    rows = []
    for obj in objects:
        row: dict = {"cells": [column.cell(obj, now) for column in columns]}
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = partial(obj, group)
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"{group}/v1", "metadata": meta,
            "columnDefinitions": [c.definition() for c in columns] if headers else None,
            "rows": rows}


def object_view(choice, kind, obj: dict, include: str, now: float,
                headers: bool = True) -> dict:
    """One object in ``choice``'s view (None: itself); ``headers`` as ``table``'s."""
    view = choice.view
    if view == TABLE:
        return table(kind, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                     include, now, choice.group, headers)
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
