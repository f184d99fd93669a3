"""
The one seam between the definitions and the structural-schema library
(``apiextensions/schema/``: validation with upstream's messages, pruning, defaulting,
CEL rules, conversion to ``model.schema``).  Everything else reaches a version's schema
through ``checked`` (at a definition's write) and ``for_version`` (a served version's
``VersionSchema``).

``STRUCTURAL`` switches the library on (it is: merged into main with it).  Off, the
stand-in is permissive: every schema is accepted and every object kept whole, as
``x-kubernetes-preserve-unknown-fields: true`` everywhere would.
"""

from __future__ import annotations

import importlib
from typing import Optional

from platformd.model.schema import Struct

#: Whether the structural-schema library is used (False: the permissive stand-in).
STRUCTURAL = True


def _library():
    """``platformd.apiextensions.schema.structural`` (imported by name: it is the
    library's, merged separately)."""
    return importlib.import_module("platformd.apiextensions.schema.structural")


def checked(openapi: Optional[dict], path: str, status_enabled: bool = False) -> list:
    """Causes for ``openapi`` (a version's ``openAPIV3Schema``, reported at ``path``) as a
    definition's schema: structural, its shape rules, defaults, and its CEL rules
    compiled within their cost (``status_enabled``: the version has the status
    subresource)."""
    if not STRUCTURAL or openapi is None:
        return []
    return list(_library().check(openapi, path, status_enabled))


class VersionSchema:
    """One served version's schema, as the served kind uses it."""

    def __init__(self, openapi: Optional[dict]):
        self.openapi = openapi or {}
        self._structural = _library().Structural.parse(self.openapi) if STRUCTURAL else None

    def model(self, kind_name: str) -> Struct:
        """The kind's fields for decoding, OpenAPI and apply (besides apiVersion, kind and
        metadata, which ``ResourceType`` adds)."""
        if self._structural is not None:
            return self._structural.to_model(kind_name)
        return Struct(kind_name, {}, doc=self.openapi.get("description") or "",
                      preserve_unknown=True)

    def admit(self, obj: dict) -> list:
        """Prune unknown fields (their JSON paths returned) and default, in place."""
        if self._structural is None:
            return []
        unknown = self._structural.prune(obj)
        self._structural.default(obj)
        return unknown

    def default(self, obj: dict) -> None:
        if self._structural is not None:
            self._structural.default(obj)

    def validate(self, obj: dict) -> list:
        """A new object's causes: values, embedded resources, lists, CEL rules."""
        if self._structural is None:
            return []
        return list(self._structural.validate_object(obj))

    def validate_update(self, new: dict, old: dict) -> list:
        """An update's causes, ratcheting against ``old`` (replaces ``validate``'s on an
        update: ``ResourceType.update_validates_whole``)."""
        if self._structural is None:
            return []
        return list(self._structural.validate_object(new, old))


def props_of(model: Struct) -> dict:
    """A model's fields without the three every kind has (``ResourceType`` adds them)."""
    return {k: v for k, v in model.props.items()
            if k not in ("apiVersion", "kind", "metadata")}

