"""
Static cost estimation of validation rules as upstream's CRD validation runs it
(``ruleEnv.EstimateCost`` with the Kubernetes size estimator): cel-go's estimator is
``platformd.cel.cost``; here are the sizes a schema gives it (``SchemaSizes``, upstream's
``sizeEstimator`` over DeclTypes), the cardinality of a rule, the CRD-wide total and the
messages.  The limits are ``platformd.cel``'s (``STATIC_ESTIMATED_COST_LIMIT``,
``STATIC_ESTIMATED_CRD_COST_LIMIT``, ``MAX_REQUEST_SIZE_BYTES``).

Sizes are upstream's DeclTypes' (``Decl``, after ``common.SchemaDeclType``): a string's
``maxLength`` × 4 (bytes), else what fits in a 3 MiB request (``MaxRequestSizeBytes`` −
2; 32 for a duration or date-time); a list's ``maxItems``, else the request over its
items' smallest serialized size plus one; a map's ``maxProperties``, else the request
over its values' smallest size plus six.  A value reached from ``self`` by fields,
``@items``, ``@values`` and ``@keys`` has the size of its schema, as upstream's
``sizeEstimator`` walks it.

A rule's cost is its maximum times its cardinality: the product of the
``maxItems``/``maxProperties`` above it, or, under an unbounded list or map, how many
values of its schema fit in a request.
"""

from __future__ import annotations

from typing import Optional

from zope.interface import implementer

from platformd import cel
from platformd.apiextensions.schema.node import Node
from platformd.cel.cost import ISizeEstimator, MAX_UINT64, checked
from platformd.cel.cost import estimate as _estimate

__all__ = ["Decl", "decl", "SchemaSizes", "estimate", "checked", "unbounded_cardinality",
           "times", "guarded_product", "message", "Total", "MAX_UINT64"]


#: Serialized sizes (k8s.io/apiserver/pkg/cel/limits.go).
MAX_DURATION_SIZE_JSON = 32
MAX_DATETIME_SIZE_JSON = 32
MIN_DURATION_SIZE_JSON = 3
JSON_DATE_SIZE = 12
MIN_DATETIME_SIZE_JSON = 21
MIN_STRING_SIZE = 2
MIN_BOOL_SIZE = 4
MIN_NUMBER_SIZE = 1


class Decl:
    """
    The sizes upstream's ``DeclType`` of a schema carries (``common.SchemaDeclType``):
    the most elements a value holds (``MaxElements``: a string's bytes, a list's items,
    a map's entries; 0 for scalars and objects) and its smallest serialized size; an
    object's fields by CEL name, a list's or map's element type, a map's key type.
    """

    __slots__ = ("max_elements", "min_size", "fields", "elem", "key", "is_object")

    def __init__(self, max_elements: int = 0, min_size: int = 1, fields=None, elem=None,
                 key=None, is_object: bool = False):
        self.max_elements, self.min_size = max_elements, min_size
        self.fields: dict = fields or {}
        self.elem: Optional[Decl] = elem
        self.key: Optional[Decl] = key
        #: an object type (a struct to CEL, even without fields)
        self.is_object = is_object


def _string_per_request(node: Node) -> int:
    """``estimateMaxStringLengthPerRequest``."""
    if node.int_or_string:
        return cel.MAX_REQUEST_SIZE_BYTES - 2
    return {"duration": MAX_DURATION_SIZE_JSON, "date": JSON_DATE_SIZE,
            "date-time": MAX_DATETIME_SIZE_JSON}.get(node.format,
                                                     cel.MAX_REQUEST_SIZE_BYTES - 2)


def decl(node: Optional[Node], resource_root: bool = False) -> Optional[Decl]:
    """``SchemaDeclType(node, resource_root)``'s sizes; None where upstream has no type."""
    from platformd.apiextensions.schema.celtypes import escape, resource_properties

    if node is None:
        return None
    raw = node.raw
    if node.int_or_string:
        limit = raw.get("maxLength")
        return Decl(max(int(limit), 0) * 4 if limit is not None else _string_per_request(node),
                    1)
    kind = node.type
    if kind == "array":
        if node.items is None:
            return None
        items = decl(node.items, node.items.embedded)
        if items is None:
            return None
        limit = raw.get("maxItems")
        count = max(int(limit), 0) if limit is not None else \
            (cel.MAX_REQUEST_SIZE_BYTES - 2) // (items.min_size + 1)
        return Decl(count, 2, elem=items)
    if kind == "object":
        if node.additional is not None:
            values = decl(node.additional, node.additional.embedded)
            if values is None:
                return None
            limit = raw.get("maxProperties")
            count = max(int(limit), 0) if limit is not None else \
                (cel.MAX_REQUEST_SIZE_BYTES - 2) // (values.min_size + 6)
            return Decl(count, 2, elem=values, key=Decl(0, MIN_STRING_SIZE))
        props = resource_properties(node) if resource_root else node.properties
        required = set(raw.get("required") or ())
        fields = {}
        min_size = 2
        for name, prop in props.items():
            field = decl(prop, prop.embedded)
            if field is None:
                continue
            escaped = escape(name)
            if escaped is not None:
                fields[escaped] = field
                fields[name] = field  # a keyword by its own name too (celtypes)
            if name in required and not prop.has_default:
                min_size += len(name) + field.min_size + 4
        return Decl(0, min_size, fields, is_object=True)
    if kind == "string":
        limit = raw.get("maxLength")
        if node.format == "byte":
            return Decl(max(int(limit), 0) if limit is not None else _string_per_request(node),
                        MIN_STRING_SIZE)
        if node.format == "duration":
            return Decl(_string_per_request(node), MIN_DURATION_SIZE_JSON)
        if node.format == "date":
            return Decl(_string_per_request(node), JSON_DATE_SIZE)
        if node.format == "date-time":
            return Decl(_string_per_request(node), MIN_DATETIME_SIZE_JSON)
        if limit is not None:
            count = max(int(limit), 0) * 4
        elif raw.get("enum"):
            count = max((len(v) for v in raw["enum"] if isinstance(v, str)), default=0)
        else:
            count = _string_per_request(node)
        return Decl(count, MIN_STRING_SIZE)
    if kind == "boolean":
        return Decl(0, MIN_BOOL_SIZE)
    if kind in ("number", "integer"):
        return Decl(0, MIN_NUMBER_SIZE)
    return None


def unbounded_cardinality(node: Optional[Node], resource_root: bool = False) -> int:
    """``maxCardinality(MinSerializedSize)``: how many such values fit in a request."""
    found = decl(node, resource_root)
    size = found.min_size if found is not None else 1
    return cel.MAX_REQUEST_SIZE_BYTES // (size + 1)


def times(cardinality: Optional[int], limit) -> Optional[int]:
    """The cardinality below a list or map of at most ``limit`` elements (None: unbounded)."""
    if cardinality is None or limit is None:
        return None
    return cardinality * int(limit)


def guarded_product(base: int, cardinality: int) -> int:
    if base == 0:
        return 0
    return min(base * cardinality, MAX_UINT64)


def message(name: str, estimated: int, limit: int) -> str:
    """``getCostErrorMessage``."""
    factor = estimated / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (f"{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding "
            "maxItems, maxProperties, and maxLength where arrays, maps, and strings are "
            "declared)")


class Total:
    """``TotalCost``: the rules' costs summed, and the (at most 4) costliest of those
    contributing at least 1% of ``STATIC_ESTIMATED_CRD_COST_LIMIT``, costliest first."""

    def __init__(self):
        self.total = 0
        self.expensive: list = []

    def observe(self, path: str, cost: int) -> None:
        self.total = min(self.total + cost, MAX_UINT64)
        if cost < cel.STATIC_ESTIMATED_CRD_COST_LIMIT // 100:
            return
        self.expensive.append((cost, path))
        self.expensive.sort(key=lambda c: -c[0])
        del self.expensive[4:]

    def most_expensive(self) -> list:
        return [path for _cost, path in self.expensive]


@implementer(ISizeEstimator)
class SchemaSizes:
    """
    upstream's ``sizeEstimator`` (apiextensions-apiserver's ``schema/cel``): the size of a
    value reached from ``self`` (or ``oldSelf``: the same schema) is its DeclType's
    ``MaxElements``.
    """

    def __init__(self, root: Optional[Decl]):
        self.root = root

    def _decl_at(self, path: list) -> Optional[Decl]:
        """The DeclType along ``path`` from the rule's variable."""
        if not path or self.root is None:
            return None
        node: Optional[Decl] = self.root
        for name in path[1:]:
            assert node is not None
            if name in ("@items", "@values"):
                node = node.elem
            elif name == "@keys":
                node = node.key
            else:
                node = node.fields.get(name)
            if node is None:
                return None
        return node

    def estimate_size(self, path: list) -> Optional[int]:
        found = self._decl_at(path)
        return found.max_elements if found is not None else None

    def is_map_or_object(self, path: list) -> bool:
        # celtypes declares dyn where protobuf cannot nest a map or an object in a list or
        # a map; upstream's declared type is the schema's
        found = self._decl_at(path)
        return found is not None and (found.is_object or found.key is not None)

    def estimate_call_cost(self, function: str, overload: str, target_size: Optional[int],
                           arg_sizes: list) -> Optional[int]:
        return None


def estimate(serialized, scope: Node, resource_root: bool = False) -> int:
    """The maximum estimated cost of one evaluation of a compiled expression whose
    ``self`` is of ``scope`` (``ruleEnv.EstimateCost(ast, estimator).Max``); ``serialized``
    is what ``Expression.serialize()`` answers, a ``cel.Program`` or a checked AST."""
    if isinstance(serialized, cel.Program):
        tree = serialized.checked()
    elif isinstance(serialized, bytes):
        tree = checked(serialized)
    else:
        tree = serialized
    return _estimate(tree, SchemaSizes(decl(scope, resource_root)))
