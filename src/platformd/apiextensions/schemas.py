"""
The one seam between the definitions and the structural-schema library
(``apiextensions/schema/``: validation with upstream's messages, pruning, defaulting,
CEL rules, conversion to ``model.schema``).  Everything else reaches a version's schema
through ``checked`` (at a definition's write) and ``for_version`` (a served version's
``VersionSchema``).

"""

from __future__ import annotations

from typing import Optional

from platformd.apiextensions.schema import structural
from platformd.model.schema import Struct


def checked(openapi: Optional[dict], path: str, status_enabled: bool = False) -> list:
    """Causes for ``openapi`` (a version's ``openAPIV3Schema``, reported at ``path``) as a
    definition's schema: structural, its shape rules, defaults, and its CEL rules
    compiled within their cost (``status_enabled``: the version has the status
    subresource)."""
    if openapi is None:
        return []
    return list(structural.check(openapi, path, status_enabled))


class VersionSchema:
    """One served version's schema, as the served kind uses it."""

    def __init__(self, openapi: Optional[dict]):
        self.openapi = openapi or {}
        self._structural = structural.Structural.parse(self.openapi)

    def model(self, kind_name: str) -> Struct:
        """The kind's fields for decoding, OpenAPI and apply (besides apiVersion, kind and
        metadata, which ``ResourceType`` adds)."""
        return self._structural.to_model(kind_name)

    def admit(self, obj: dict) -> list:
        """Prune unknown fields (their JSON paths returned) and default, in place."""
        unknown = self._structural.prune(obj)
        self._structural.default(obj)
        return unknown

    def default(self, obj: dict) -> None:
        self._structural.default(obj)

    def validate(self, obj: dict) -> list:
        """A new object's causes: values, embedded resources, lists, CEL rules."""
        return list(self._structural.validate_object(obj))

    def validate_update(self, new: dict, old: dict) -> list:
        """An update's causes, ratcheting against ``old`` (replaces ``validate``'s on an
        update: ``ResourceType.update_validates_whole``)."""
        return list(self._structural.validate_object(new, old))


def props_of(model: Struct) -> dict:
    """A model's fields without the three every kind has (``ResourceType`` adds them)."""
    return {k: v for k, v in model.props.items()
            if k not in ("apiVersion", "kind", "metadata")}

