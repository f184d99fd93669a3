"""
Pruning: upstream's ``pruning.Prune`` (``pkg/apiserver/schema/pruning/algorithm.go``).
Fields the schema does not specify are removed in place, except below
``x-kubernetes-preserve-unknown-fields`` (whose specified fields are still pruned
below them) and ``apiVersion``, ``kind`` and ``metadata`` of an
``x-kubernetes-embedded-resource`` object (the root is one).  The removed fields' paths
are returned sorted, as upstream records them for ``fieldValidation``
(``spec.foo``, ``spec.list[0].bar``); the root's own unknown ``apiVersion``, ``kind``,
``metadata`` are not recorded.
"""

from __future__ import annotations

from typing import Optional

from platformd.apiextensions.schema.node import Node

META_FIELDS = frozenset(("apiVersion", "kind", "metadata"))


def prune(value, schema: Optional[Node], resource_root: bool = True) -> list:
    unknown: list = []
    _prune(value, schema, "", unknown, resource_root)
    unknown.sort()
    return unknown


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _prune(value, schema: Optional[Node], path: str, unknown: list, embedded: bool = False):
    if schema is not None and schema.preserve_unknown:
        _skip(value, schema, path, unknown, embedded or schema.embedded)
        return
    if isinstance(value, dict):
        if schema is None:
            for key in list(value):
                unknown.append(_join(path, key))
                del value[key]
            return
        embedded = embedded or schema.embedded
        for key in list(value):
            if embedded and key in META_FIELDS:
                continue
            prop = schema.properties.get(key)
            if prop is not None:
                _prune(value[key], prop, _join(path, key), unknown)
            elif schema.additional_allows:
                _prune(value[key], schema.additional, _join(path, key), unknown)
            else:
                if key not in META_FIELDS or path:
                    unknown.append(_join(path, key))
                del value[key]
    elif isinstance(value, list):
        items = schema.items if schema is not None else None
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", unknown)


def _skip(value, schema: Node, path: str, unknown: list, embedded: bool):
    if isinstance(value, dict):
        for key, item in value.items():
            if embedded and key in META_FIELDS:
                continue
            prop = schema.properties.get(key)
            if prop is not None:
                _prune(item, prop, _join(path, key), unknown)
            elif schema.additional_allows:
                _prune(item, schema.additional, _join(path, key), unknown)
    elif isinstance(value, list):
        if schema.items is None:
            return
        for i, item in enumerate(value):
            _skip(item, schema.items, f"{path}[{i}]", unknown, schema.items.embedded)
