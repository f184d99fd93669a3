"""
Strategic merge patch (``application/strategic-merge-patch+json``), written by hand:
no Python library implements it.

It is JSON merge patch made list-aware by the schema: a list whose schema says
``patch_strategy="merge"`` merges element by element (lists of objects by their
``merge_key``, lists of scalars as a union); every other list is replaced whole
(``subjects`` and ``rules`` are atomic).  The directives of upstream's
``k8s.io/apimachinery/pkg/util/strategicpatch`` are honoured:

* ``$patch: replace`` in an object replaces it; in a list, replaces the list;
* ``$patch: delete`` in an object deletes it; in a list element, deletes the element
  with that merge key;
* ``$patch: merge`` is the default;
* ``$retainKeys: [...]`` drops the object's fields not listed (before merging);
* ``$deleteFromPrimitiveList/<field>: [...]`` removes those values from a scalar list;
* ``$setElementOrder/<field>: [...]`` gives the final order of a merged list; elements
  it does not name keep their relative place after the named ones.

Fields the schema does not know (free-form objects) merge as in JSON merge patch.
"""

from __future__ import annotations

from platformd import errors
from platformd.model.schema import ListOf, MapOf, Struct

_DELETE = object()
_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_DELETE_FROM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge(original: dict, patch: dict, schema: Struct) -> dict:
    """Apply ``patch`` to ``original`` by ``schema``; neither is modified."""
    if not isinstance(patch, dict):
        raise errors.bad_request("a strategic merge patch must be a JSON object")
    merged = _merge_map(original if isinstance(original, dict) else {}, patch, schema)
    if merged is _DELETE:
        raise errors.bad_request("a strategic merge patch may not delete the whole object")
    return merged


def _child(node, key: str):
    if isinstance(node, Struct):
        prop = node.props.get(key)
        return prop.node if prop is not None else None
    if isinstance(node, MapOf):
        return node.values
    return None


def _merge_map(original: dict, patch: dict, node):
    directive = patch.get(_DIRECTIVE, "merge")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != _DIRECTIVE})
    if directive != "merge":
        raise errors.bad_request(f'Unknown patch type: "{directive}"')
    result = dict(original)
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list):
            raise errors.bad_request(f"{_RETAIN} must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    deletions, orders = {}, {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN):
            continue
        if key.startswith(_DELETE_FROM):
            deletions[key[len(_DELETE_FROM):]] = value
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value
            continue
        if value is None:
            result.pop(key, None)
            continue
        prop = node.props.get(key) if isinstance(node, Struct) else None
        if prop is not None and prop.patch_strategy == "replace" and isinstance(value, dict):
            result[key] = _strip(value)  # upstream's patchStrategy:"replace" struct
            continue
        merged = _merge_value(result.get(key), value, _child(node, key))
        if merged is _DELETE:
            result.pop(key, None)
        else:
            result[key] = merged
    for key, values in deletions.items():
        if not isinstance(values, list):
            raise errors.bad_request(f"{_DELETE_FROM}{key} must be a list")
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, _child(node, key))
    return result


def _merge_value(original, patch, node):
    if isinstance(patch, dict):
        if isinstance(node, ListOf):
            raise errors.bad_request("a strategic merge patch gave an object for a list")
        return _merge_map(original if isinstance(original, dict) else {}, patch, node)
    if isinstance(patch, list):
        if isinstance(node, ListOf) and node.patch_strategy and "merge" in node.patch_strategy:
            return _merge_list(original if isinstance(original, list) else [], patch, node)
        return _strip(patch)
    return patch


def _merge_list(original: list, patch: list, node: ListOf) -> list:
    for element in patch:
        if isinstance(element, dict) and element.get(_DIRECTIVE) == "replace":
            return [_strip(e) for e in patch if e is not element]
    key = node.merge_key
    if not key or not isinstance(node.items, Struct):
        # A merging list of scalars: the union without duplicates (deduplicateScalars).
        merged = []
        for value in original + patch:
            if value not in merged:
                merged.append(value)
        return _patch_order(merged, patch, original, _hashable)
    result = list(original)
    for element in patch:
        if not isinstance(element, dict):
            raise errors.bad_request(f"a strategic merge patch gave a non-object in a list "
                                     f"merged by {key!r}")
        if key not in element:
            raise errors.bad_request(f"map: {element} does not contain declared merge key: {key}")
        index = next((i for i, e in enumerate(result)
                      if isinstance(e, dict) and e.get(key) == element[key]), None)
        if element.get(_DIRECTIVE) == "delete":
            if index is not None:
                del result[index]
            continue
        merged = _merge_map(result[index] if index is not None else {}, element, node.items)
        if index is None:
            result.append(merged)
        else:
            result[index] = merged
    kept = [e for e in patch if e.get(_DIRECTIVE) != "delete"]
    return _patch_order(result, kept, original,
                        lambda e: _hashable(e.get(key)) if isinstance(e, dict) else None)


def _patch_order(merged: list, patch: list, original: list, identity) -> list:
    """
    A merged list in upstream's order (strategicpatch ``normalizeElementOrder`` and
    ``mergeSortedSlice``): the patch's items in the patch's order and the live-only items
    in their live order, interleaved by live position; an item the live list does not
    have goes before the next live-only item.  So ``finalizers: [c]`` patched onto
    ``[a, b]`` is ``[c, a, b]``.
    """
    patch_rank: dict = {}
    live_rank: dict = {}
    for i, item in enumerate(patch):
        patch_rank.setdefault(identity(item), i)
    for i, item in enumerate(original):
        live_rank.setdefault(identity(item), i)
    from_patch = sorted((m for m in merged if identity(m) in patch_rank),
                        key=lambda m: patch_rank[identity(m)])
    live_only = [m for m in merged if identity(m) not in patch_rank]
    out, i, j = [], 0, 0
    while i < len(live_only) or j < len(from_patch):
        if j >= len(from_patch):
            out.append(live_only[i])
            i += 1
        elif i >= len(live_only):
            out.append(from_patch[j])
            j += 1
        else:
            left = live_rank.get(identity(live_only[i]))
            right = live_rank.get(identity(from_patch[j]))
            if left is not None and right is not None and left < right:
                out.append(live_only[i])
                i += 1
            else:
                out.append(from_patch[j])
                j += 1
    return out


def _reorder(values: list, order: list, node) -> list:
    """Elements named by ``order`` first, in its order; the rest after, as they were."""
    key = node.merge_key if isinstance(node, ListOf) else None

    def identity(value):
        return value.get(key) if key and isinstance(value, dict) else _hashable(value)

    rank: dict = {}
    for i, item in enumerate(order):
        rank.setdefault(identity(item), i)
    named = sorted((v for v in values if identity(v) in rank), key=lambda v: rank[identity(v)])
    return named + [v for v in values if identity(v) not in rank]


def _hashable(value):
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _strip(value):
    """Drop directives from a value that is taken whole."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if not (k == _DIRECTIVE or k == _RETAIN or k.startswith(_DELETE_FROM)
                        or k.startswith(_ORDER))}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
