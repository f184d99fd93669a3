"""
A CRD version's structural schema: ``check`` (is the ``openAPIV3Schema`` acceptable?)
and ``Structural`` (what the CRD handler does with custom objects through it).

    causes = check(schema, "spec.versions[0].schema.openAPIV3Schema")
    s = Structural.parse(schema)       # once check() found nothing
    unknown = s.prune(obj)             # ["spec.foo"]: fieldValidation's unknown fields
    s.default(obj)                     # on read and on write, after pruning
    causes = s.validate_object(obj, old)   # values, embedded metadata, lists, rules
    struct = s.to_model("Widget")      # the project's schema language

See docs/customresources-schema.md for what is supported and what differs from
upstream.
"""

from __future__ import annotations

from typing import Optional

import attrs

from platformd import cel
from platformd.apiextensions.schema import causes, checks, compiledvalues, cost, defaulting
from platformd.apiextensions.schema import listtype, objectmeta, pruning, rules, values
from platformd.apiextensions.schema.node import RULES, Node
from platformd.goformat import gonumbers
from platformd.model import schema as model


def check(openapi_schema: dict, path: str, status_enabled: bool = False) -> list:
    """
    Upstream's validation of ``openAPIV3Schema`` (``path`` names it), as causes:
    structurality, the shape rules, defaults, rules' compilation and estimated cost.
    ``status_enabled``: the version has the status subresource (the root may then hold
    only ``type: object``, ``properties``, ``required``, ``description`` ...).
    """
    return checks.check(openapi_schema, path, status_enabled)


class Structural:
    """A checked schema, ready to default, prune and validate custom objects."""

    def __init__(self, root: Node):
        self.root = root
        #: ``values.validate`` of the root, compiled (``compiledvalues``) at the first
        #: object validated: a server starts with every definition's kinds, most of
        #: whose objects are only read
        self._check_values: Optional[compiledvalues.Check] = None

    @classmethod
    def parse(cls, openapi_schema: dict) -> "Structural":
        """The structural form of a schema ``check`` accepted."""
        return cls(Node(openapi_schema))

    def validate(self, obj, old=None, path: str = "") -> list:
        """Value validation (kube-openapi's validator, upstream's messages) and the
        embedded resources' apiVersion, kind and metadata; ``old`` (an update's previous
        object) ratchets: a value equal to its correlated old one keeps passing."""
        if self._check_values is None:
            self._check_values = compiledvalues.compile_schema(self.root.raw)
        errors: list = []
        self._check_values(obj, "", values.NO_OLD if old is None else old, errors)
        out = values.to_causes(path, errors)
        out.extend(objectmeta.validate(path, obj, self.root))
        return out

    def prune(self, obj) -> list:
        """
        Upstream's ``unstructuredSchemaCoercer.apply`` below the root's metadata, in
        place: remove unknown fields, then nulls neither nullable nor defaulted, then
        coerce embedded resources' metadata.  The unknown fields' paths: the pruned ones
        sorted, then the embedded metadata's.
        """
        unknown = pruning.prune(obj, self.root, True)
        defaulting.prune_nulls(obj, self.root)
        unknown.extend(objectmeta.coerce(obj, self.root))
        return unknown

    def default(self, obj) -> None:
        """Apply defaults in place (upstream's ``structuraldefaulting.Default``), after
        ``prune``: a null left there (non-nullable with a default) takes the default."""
        defaulting.default(obj, self.root)

    def validate_lists(self, obj, old=None) -> list:
        """``set`` and ``map`` lists' duplicates (``listtype``); on update only when the
        old object had none, as upstream."""
        if old is not None and listtype.validate("", self.root, old):
            return []
        return listtype.validate("", self.root, obj)

    def validate_object(self, obj, old=None) -> list:
        """
        Everything upstream's custom resource strategy checks below ObjectMeta, in its
        order: values, embedded resources, lists, then the rules unless an earlier cause
        is blocking (not supported, required, too long, too many, wrong type), which
        adds ``Invalid value: null: some validation rules were not checked because the
        object was invalid; correct the existing errors to complete validation``.
        """
        out = self.validate(obj, old)
        out.extend(self.validate_lists(obj, old))
        if not self.root_has_rules():
            return out
        if any(c.reason in _BLOCKING for c in out):
            out.append(causes.invalid("", None, "some validation rules were not checked "
                                      "because the object was invalid; correct the existing "
                                      "errors to complete validation"))
            return out
        out.extend(self.validate_rules(obj, old))
        return out

    def root_has_rules(self) -> bool:
        """Whether any node has x-kubernetes-validations (upstream has no CEL validator
        otherwise)."""
        return RULES in self.root.below

    def validate_rules(self, obj, old=None, path: str = "") -> list:
        """The ``x-kubernetes-validations`` causes for ``obj`` (``old``: on update)."""
        return rules.validate(self.root, obj, old, path, root=True)

    def rule_cost_causes(self, path: str) -> list:
        """The compile and estimated-cost causes of every rule (also part of ``check``)."""
        total = cost.Total()
        out: list = []
        _rule_costs(self.root, path, True, None, total, 1, out)
        if total.total > cel.STATIC_ESTIMATED_CRD_COST_LIMIT:
            for where in total.most_expensive():
                out.append(checks.forbidden(where, "contributed to estimated rule cost total "
                                            "exceeding cost limit for entire OpenAPIv3 schema"))
            out.append(checks.forbidden(path, cost.message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                total.total, cel.STATIC_ESTIMATED_CRD_COST_LIMIT)))
        return out

    def to_model(self, kind_name: str) -> model.Struct:
        """
        The root as the project's schema language (see ``_model``), named ``kind_name``,
        without ``apiVersion``, ``kind`` and ``metadata``: its ``props`` are a
        ``ResourceType``'s ``fields`` (which adds TypeMeta and ObjectMeta), its
        ``preserve_unknown`` the root's.
        """
        node = _model(self.root, kind_name, root=True)
        assert isinstance(node, model.Struct)
        return node


_BLOCKING = frozenset(("FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"))


def _rule_costs(node: Node, path: str, root: bool, uncorrelatable: Optional[str],
                total: cost.Total, cardinality: Optional[int], out: list) -> None:
    if node.rules:
        out.extend(rules.compile_causes(node, path, root or node.embedded, uncorrelatable,
                                        total, cardinality))
    for name, prop in node.properties.items():
        _rule_costs(prop, f"{path}.properties[{name}]", False,
                    uncorrelatable or (path if node.map_type == "atomic" else None), total,
                    cardinality, out)
    if node.additional is not None:
        _rule_costs(node.additional, f"{path}.additionalProperties", False, uncorrelatable,
                    total, cost.times(cardinality, node.raw.get("maxProperties")), out)
    if node.items is not None:
        _rule_costs(node.items, f"{path}.items", False,
                    uncorrelatable or (path if node.list_type != "map" else None), total,
                    cost.times(cardinality, node.raw.get("maxItems")), out)


# -- the project's schema language -----------------------------------------------------
#
# Custom objects are unstructured upstream: a value of the wrong type is not a decoding
# error (400) but a validation error (422, ``values``).  The nodes below describe the
# shape for OpenAPI, strategic merge, apply and managed fields like the built-in ones,
# but decode leniently: a value of another JSON type than the schema's passes through
# unchanged for ``Structural.validate`` to report.


def _unstructured(value, path: str):
    """A value kept as it came, as Go's decoder fills an ``interface{}``: a number past
    int64 is the float64 it is closest to, one past float64 a decoding error."""
    if isinstance(value, gonumbers.BigNumber):
        as_float = value.as_float()
        if as_float is None:
            raise model.DecodeError(path, "float64", value, numeric=True)
        return as_float
    if isinstance(value, dict):
        return {k: _unstructured(v, model.join(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_unstructured(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


@attrs.frozen
class LenientScalar(model.Scalar):
    """A scalar; ``int-or-string`` (format) and ``nullable`` are kept for readers."""

    nullable: bool = False

    def decode(self, value, path, ctx):
        return _unstructured(value, path)


@attrs.frozen
class LenientMap(model.MapOf):
    def decode(self, value, path, ctx):
        if not isinstance(value, dict):
            return _unstructured(value, path)
        return super().decode(value, path, ctx)


@attrs.frozen
class LenientList(model.ListOf):
    def decode(self, value, path, ctx):
        if not isinstance(value, list):
            return _unstructured(value, path)
        return super().decode(value, path, ctx)


@attrs.frozen
class LenientStruct(model.Struct):
    def decode(self, value, path, ctx):
        if not isinstance(value, dict):
            return _unstructured(value, path)
        return super().decode(value, path, ctx)


#: The format marking an ``x-kubernetes-int-or-string`` scalar in the model.
INT_OR_STRING = "int-or-string"


def _model(node: Node, name: str, root: bool = False):
    kind = node.type
    if node.int_or_string:
        return LenientScalar("string", INT_OR_STRING, nullable=node.nullable)
    if kind == "array":
        items = _model(node.items, f"{name}.items") if node.items is not None else \
            LenientStruct(f"{name}.items", {}, preserve_unknown=True)
        return LenientList(items, node.list_type or "atomic", tuple(node.list_map_keys))
    if kind in ("string", "integer", "number", "boolean"):
        enum = tuple(node.raw.get("enum") or ())
        return LenientScalar(kind, node.format or None, enum, nullable=node.nullable)
    if node.additional is not None and not node.properties:
        return LenientMap(_model(node.additional, f"{name}.additionalProperties"))
    required = set(node.raw.get("required") or ())
    props = {}
    for key, prop in node.properties.items():
        if root and key in ("apiVersion", "kind", "metadata"):
            continue  # TypeMeta and ObjectMeta: ResourceType adds its own
        props[key] = model.Prop(_model(prop, f"{name}.{key}"), prop.description,
                                key in required)
    preserve = node.preserve_unknown or (not kind and not node.properties) or \
        node.additional_allows
    return LenientStruct(name, props, node.description, preserve_unknown=preserve,
                         atomic=node.map_type == "atomic")
