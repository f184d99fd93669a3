"""
``ResourceType``: everything the generic handlers need to know about one kind.

The handlers are written once for every kind (as upstream's generic registry store is);
what differs per kind lives here: names and scope, the schema, defaulting, validation,
the status split, table columns, field selector labels and the Protobuf presence of the
kind's messages.  Adding a kind means writing one of these in its own module under
``registry/kinds/`` and naming it in ``catalog.builtin()``, nothing else.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
from zope.interface import implementer

from platformd.admission.interfaces import IKind
from platformd.model.meta import (
    LIST_META, OBJECT_META, validate_object_meta, validate_object_meta_update,
)
from platformd.model.schema import STRING, ListOf, Prop, Struct
from platformd.registry import deletion
from platformd.registry.tables import DEFAULT


def _no_causes(*_args) -> list:
    return []


def _nothing(*_args) -> None:
    return None


def _no_finalizers(_obj) -> tuple:
    return ()


#: Every standard verb, sorted as upstream's discovery lists them.
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@implementer(IKind)
@attrs.frozen
class ResourceType:
    """One served kind (see module docstring)."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    #: The top-level fields besides apiVersion, kind and metadata.
    fields: dict
    doc: str
    short_names: tuple = ()
    categories: tuple = ()
    #: ``name_rule(name) -> [problem, ...]`` for metadata.name.
    name_rule: Callable = attrs.field(default=None)
    #: ``name_rule_for(obj) -> name_rule`` when the rule depends on the object (a
    #: CustomResourceDefinition's name is ``<plural>.<group>``), else None.
    name_rule_for: Optional[Callable] = None
    #: Whether the kind has ``spec``/``status`` split and a ``status`` subresource.
    has_status: bool = False
    #: ``default(obj)`` fills defaults in place (after decoding, before validation).
    default: Callable = _nothing
    #: ``validate(obj) -> causes`` beyond metadata.
    validate: Callable = _no_causes
    #: ``validate_update(new, old) -> causes`` beyond ``validate(new)``.
    validate_update: Callable = _no_causes
    #: ``validate_status_update(new, old) -> causes`` for a write to ``status`` beyond
    #: ``validate_update`` (upstream's ``Validate<Kind>StatusUpdate``: what only the
    #: status may not say, a namespace's phase).
    validate_status_update: Callable = _no_causes
    #: Whether an update's metadata changes are checked after the new object as a whole,
    #: as the RBAC kinds' ``ValidateRoleBindingUpdate`` and friends order them; most
    #: kinds check them first (``ValidateConfigMapUpdate``).
    metadata_update_last: bool = False
    #: ``prepare_for_create(obj)``: server-owned initial state (for example ``status``).
    prepare_for_create: Callable = _nothing
    #: ``prepare_for_update(new, old)``: what an update of the main resource may not
    #: change, put back from ``old`` (upstream's ``PrepareForUpdate``; ``status`` is
    #: carried over for every kind that has one).
    prepare_for_update: Callable = _nothing
    #: ``extra_finalizers(obj)``: what holds the object back from removal besides
    #: ``metadata.finalizers`` (a namespace's ``spec.finalizers``).
    extra_finalizers: Callable = _no_finalizers
    #: ``decide_delete(kind, current, options, now)``: one step of a delete, an
    #: ``outcomes`` value (``deletion.decide``; namespaces have their own).
    decide_delete: Callable = deletion.decide
    #: Whether a delete that removes an object answers with it rather than a Status
    #: (upstream's ``ReturnDeletedObject``: pods and service accounts).
    returns_deleted_object: bool = False
    #: Whether PUT of an absent object creates it (upstream: RBAC kinds yes, core no).
    allow_create_on_update: bool = False
    #: Whether an update without ``metadata.resourceVersion`` is written unconditionally
    #: (upstream's ``AllowUnconditionalUpdate``; Lease says no: 422).
    allow_unconditional_update: bool = True
    #: Field selector label -> the path it reads, where the two differ (an Event's
    #: ``source`` is ``source.component``); other labels read their own path.
    field_paths: dict = attrs.field(factory=dict)
    #: For a kind served from another kind's storage (events.platform.io/v1 Event from
    #: core Events, upstream's one storage in several versions): that kind, and the
    #: conversions of an object between the two forms, ``to_storage(obj) -> obj`` and
    #: ``from_storage(obj) -> obj`` (``cache/versions.py``).
    storage_kind: Optional["ResourceType"] = None
    to_storage: Optional[Callable] = None
    from_storage: Optional[Callable] = None
    #: Whether the schema carries strategic-merge keys (built-in kinds do; custom
    #: resources will not, and then strategic merge patch is 415, as upstream).
    strategic: bool = True
    #: Definition-name prefix for OpenAPI, for example ``io.platform.api.core.v1``.
    definition_prefix: str = ""
    #: The ``as=Table`` columns (``tables.Column``); upstream's default is Name and
    #: Created At.
    columns: tuple = DEFAULT
    #: The field selector labels the kind's own conversion accepts (upstream's per-kind
    #: field label conversion func), or None for apimachinery's default:
    #: ``metadata.name`` and ``metadata.namespace`` (``api/selectors.py``).
    field_labels: Optional[tuple] = None
    #: What a field label reads when the object omits the field (Go's zero value as
    #: upstream's field set formats it): ``{"spec.unschedulable": "false"}``.
    field_zeros: dict = attrs.field(factory=dict)
    #: Protobuf message full name → the fields upstream writes even when zero, in
    #: ``gopresence``'s notation, for the messages of this kind (registered with
    #: ``gopresence`` when a catalog adds the kind).
    presence: dict = attrs.field(factory=dict)
    #: For a create-only kind that stores nothing (upstream's access reviews):
    #: ``review(context, obj) -> answer`` (or a Deferred), the object with its ``status``
    #: filled from the request's ``RequestContext``.  Such a kind has no store, no watch
    #: cache and no list; discovery lists only ``create`` (``api/reviews.py``).
    review: Optional[Callable] = None
    #: Whether ``review`` is called as ``review(context, obj, server)``, ``server`` the
    #: ``APIServer`` (its ``authenticator``, ``token_issuer``): TokenReview, TokenRequest.
    review_takes_server: bool = False
    #: A deprecation warning every request to the kind is answered with (upstream's
    #: ``v1 Endpoints is deprecated in v1.33+; ...``), or "".
    warning: str = ""
    #: Create-only subresources besides ``status``: name → the review-like
    #: ``ResourceType`` a POST to ``{plural}/{name}/{subresource}`` is decoded as and
    #: answered by (``api/reviews.serve_subresource``): ``serviceaccounts/token``.
    subresources: dict = attrs.field(factory=dict)
    #: The ``scale`` subresource (``autoscaling/v1`` Scale) of a custom resource: its
    #: ``specReplicasPath``, ``statusReplicasPath`` and ``labelSelectorPath``; None: none.
    scale: Optional[dict] = None
    #: Whether an update's ``validate_update(new, old)`` replaces ``validate(new)`` (a
    #: custom resource's schema validation ratchets against the old object).
    update_validates_whole: bool = False
    #: Whether upstream serves the kind as unstructured objects (a custom resource: Go's
    #: ``*unstructured.Unstructured``, what its errors name).
    unstructured: bool = False
    #: Whether top-level fields the kind does not name are kept (a custom resource whose
    #: schema preserves unknown fields at its root).
    preserve_unknown: bool = False
    #: Other apiVersions a body of this (subresource) kind may name (upstream's
    #: ``AcceptsGroupVersion``: an Eviction in ``policy/v1`` or ``policy/v1beta1``).
    accepts_versions: tuple = ()
    schema: Struct = attrs.field(init=False)
    list_schema: Struct = attrs.field(init=False)
    #: ``(group, version, plural)``: what the catalog, the stores and the watch cache
    #: key a kind by (a kind replaced at run time keeps its key).
    gvr: tuple = attrs.field(init=False)

    def __attrs_post_init__(self):
        # TypeMeta's order (kind, then apiVersion), then ObjectMeta, then the kind's own
        # fields: Go's struct order, which ``Struct.order`` writes objects in.
        props = {
            "kind": Prop(STRING, "The REST resource this object represents."),
            "apiVersion": Prop(STRING, "The versioned schema of this representation."),
            "metadata": Prop(OBJECT_META, "Standard object metadata."),
        }
        props.update(self.fields)
        object.__setattr__(self, "gvr", (self.group, self.version, self.plural))
        object.__setattr__(self, "schema", Struct(
            f"{self.definition_prefix}.{self.kind}", props, doc=self.doc,
            preserve_unknown=self.preserve_unknown))
        object.__setattr__(self, "list_schema", Struct(
            f"{self.definition_prefix}.{self.kind}List", {
                "kind": Prop(STRING, "The REST resource this object represents."),
                "apiVersion": Prop(STRING, "The versioned schema of this representation."),
                "metadata": Prop(LIST_META, "Standard list metadata."),
                "items": Prop(ListOf(self.schema), f"List of {self.kind} objects.",
                              required=True),
            }, doc=f"A list of {self.kind} objects."))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def verbs(self) -> tuple:
        """The verbs discovery lists: only ``create`` for a review, else every verb."""
        return ("create",) if self.review is not None else ALL_VERBS

    @property
    def stored(self) -> bool:
        """Whether objects of this kind are stored (and so cached and listed)."""
        return self.review is None

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def qualified_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_prefix(self) -> str:
        """Every object of this kind lives under this key prefix (its storage kind's)."""
        if self.storage_kind is not None:
            return self.storage_kind.storage_prefix
        return f"/registry/{self.qualified_resource}/"

    def storage_key(self, namespace: Optional[str], name: str) -> str:
        if self.namespaced:
            return f"{self.storage_prefix}{namespace}/{name}"
        return self.storage_prefix + name

    def namespace_prefix(self, namespace: str) -> str:
        return f"{self.storage_prefix}{namespace}/"

    def finalizers(self, obj: dict) -> list:
        """Everything that holds ``obj`` back from removal once it is terminating."""
        return list(obj["metadata"].get("finalizers") or ()) + list(self.extra_finalizers(obj))

    def validate_all(self, obj: dict) -> list:
        """Every cause for ``obj`` as a new object: metadata first, then the kind's own."""
        rule = self.name_rule if self.name_rule_for is None else self.name_rule_for(obj)
        causes = validate_object_meta(obj.get("metadata") or {}, rule, self.namespaced)
        causes.extend(self.validate(obj))
        return causes

    def validate_update_all(self, new: dict, old: dict, subresource: str = "") -> list:
        """Every cause for ``new`` replacing ``old``, in upstream's order for the kind:
        metadata changes and ``new`` as a new object (``metadata_update_last``), then
        the kind's ``validate_update``, then for a ``status`` write its
        ``validate_status_update``."""
        changes = validate_object_meta_update(new["metadata"], old["metadata"])
        if self.update_validates_whole:
            rule = self.name_rule if self.name_rule_for is None else self.name_rule_for(new)
            whole = validate_object_meta(new.get("metadata") or {}, rule, self.namespaced)
        else:
            whole = self.validate_all(new)
        ordered = whole + changes if self.metadata_update_last else changes + whole
        ordered += self.validate_update(new, old)
        if subresource == "status":
            ordered += self.validate_status_update(new, old)
        return ordered
