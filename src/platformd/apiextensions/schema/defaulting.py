"""
Defaulting: upstream's ``defaulting.Default`` and ``PruneNonNullableNullsWithoutDefaults``
(``pkg/apiserver/schema/defaulting/``), applied by the CRD handler on read (from
storage) and on write (the request body), before pruning.

A property's default fills it when it is absent, or null and not ``nullable``; a null
map value or list item that is not nullable takes its schema's default; defaults are
deep copies.  ``prune_nulls`` then drops a null that is neither nullable nor defaulted.
"""

from __future__ import annotations

import copy
from typing import Optional

from platformd.apiextensions.schema.node import DEFAULTS, Node


def _non_nullable_null(value, schema: Optional[Node]) -> bool:
    return value is None and schema is not None and not schema.nullable


def default(value, schema: Optional[Node]) -> None:
    if schema is None or DEFAULTS not in schema.below:
        return  # without a default below, a null can only be set to null again
    if isinstance(value, dict):
        for key, prop in schema.properties.items():
            if not prop.has_default:
                continue
            if key not in value or _non_nullable_null(value[key], prop):
                value[key] = copy.deepcopy(prop.default)
        for key in list(value):
            prop = schema.properties.get(key)
            if prop is not None:
                default(value[key], prop)
            elif schema.additional_allows:
                extra = schema.additional
                if extra is not None and _non_nullable_null(value[key], extra):
                    value[key] = copy.deepcopy(extra.default) if extra.has_default else None
                default(value[key], extra)
    elif isinstance(value, list):
        items = schema.items
        for i in range(len(value)):
            if items is not None and _non_nullable_null(value[i], items):
                value[i] = copy.deepcopy(items.default) if items.has_default else None
            default(value[i], items)


def prune_nulls(value, schema: Optional[Node]) -> None:
    """Drop nulls that are neither nullable nor defaulted (fields of objects only)."""
    if isinstance(value, dict):
        for key in list(value):
            sub = schema.field(key) if schema is not None else None
            item = value[key]
            if item is None and sub is not None and not sub.nullable and not sub.has_default:
                del value[key]
            else:
                prune_nulls(item, sub)
    elif isinstance(value, list):
        items = schema.items if schema is not None else None
        for item in value:
            prune_nulls(item, items)
