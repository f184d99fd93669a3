"""
One node of a structural schema (upstream's ``structuralschema.Structural``): the shape
of a value (type, properties, items, additionalProperties), its generic attributes
(nullable, default), the Kubernetes extensions, and the node's own schema as written
(``raw``: its value validations, allOf/anyOf/oneOf/not included, are read from there by
``values``).  Built from a CRD version's ``openAPIV3Schema`` that ``structural.check``
accepted.
"""

from __future__ import annotations

from typing import Optional

#: A node without ``default``.
MISSING = object()

#: ``Node.below``'s features: x-kubernetes-validations, x-kubernetes-embedded-resource,
#: a ``set`` or ``map`` x-kubernetes-list-type, a default.
RULES, EMBEDDED, LIST_TYPES, DEFAULTS = "rules", "embedded", "list types", "defaults"


class Node:
    __slots__ = ("type", "format", "nullable", "default", "description", "properties",
                 "items", "additional", "additional_allows", "preserve_unknown",
                 "embedded", "int_or_string", "list_type", "list_map_keys", "map_type",
                 "rules", "raw", "cel_converts", "below", "cel_names",
                 "cel_reads")

    def __init__(self, raw: dict):
        self.raw = raw
        self.type: str = raw.get("type") or ""
        self.format: str = raw.get("format") or ""
        self.nullable: bool = bool(raw.get("nullable"))
        self.default = raw["default"] if "default" in raw else MISSING
        self.description: str = raw.get("description") or ""
        self.properties: dict = {k: Node(v) for k, v in (raw.get("properties") or {}).items()}
        items = raw.get("items")
        self.items: Optional[Node] = Node(items) if isinstance(items, dict) else None
        additional = raw.get("additionalProperties")
        #: ``additionalProperties`` as a schema, or None
        self.additional: Optional[Node] = Node(additional) if isinstance(additional, dict) \
            else None
        #: whether ``additionalProperties`` is given at all (a bool or a schema): pruning
        #: keeps the keys of such a map (upstream's ``AdditionalProperties != nil``)
        self.additional_allows: bool = additional is not None
        self.preserve_unknown: bool = bool(raw.get("x-kubernetes-preserve-unknown-fields"))
        self.embedded: bool = bool(raw.get("x-kubernetes-embedded-resource"))
        self.int_or_string: bool = bool(raw.get("x-kubernetes-int-or-string"))
        self.list_type: Optional[str] = raw.get("x-kubernetes-list-type")
        self.list_map_keys: tuple = tuple(raw.get("x-kubernetes-list-map-keys") or ())
        self.map_type: Optional[str] = raw.get("x-kubernetes-map-type")
        self.rules: list = list(raw.get("x-kubernetes-validations") or ())
        #: whether rules see values of this node converted (``celtypes.cel_value``)
        self.cel_converts: Optional[bool] = None
        #: the CEL names of its properties (``celtypes.cel_value``), made on first use
        self.cel_names: Optional[dict] = None
        #: what its rules read of ``self`` and ``oldSelf`` (``celpaths.trie``s), made
        #: on first evaluation
        self.cel_reads: Optional[tuple] = None
        #: what this node or one below it has, of RULES, EMBEDDED, LIST_TYPES and
        #: DEFAULTS: a walk looking for one of them skips a subtree without it
        self.below: frozenset = frozenset(self._features()).union(
            *(child.below for child in self.children()))

    def children(self) -> list:
        """The nodes directly below: properties, items, additionalProperties."""
        out = list(self.properties.values())
        out.extend(n for n in (self.items, self.additional) if n is not None)
        return out

    def _features(self):
        if self.rules:
            yield RULES
        if self.embedded:
            yield EMBEDDED
        if self.list_type in ("set", "map"):
            yield LIST_TYPES
        if self.has_default:
            yield DEFAULTS

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING

    def field(self, name: str) -> Optional["Node"]:
        """The schema of field ``name`` of an object of this schema (a property, else
        additionalProperties), None when it has none."""
        node = self.properties.get(name)
        return node if node is not None else self.additional

    def __repr__(self) -> str:
        return f"Node({self.raw!r})"
