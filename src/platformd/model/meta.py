"""
Object metadata: its schema, the name rules, and the checks every kind shares.

The rules and messages follow upstream's apimachinery validation (``ValidateObjectMeta``,
``NameIsDNSSubdomain`` and friends) so that clients see the wording they expect.
"""

from __future__ import annotations

import re

from platformd.goformat import gotext
from platformd.model import fielderrors as fe
from platformd.model.schema import (
    BOOLEAN, INT64, STRING, TIME, ListOf, MapOf, Prop, Struct,
)

META_GROUP = "meta.platform.io"

OWNER_REFERENCE = Struct("io.platform.apimachinery.pkg.apis.meta.v1.OwnerReference", {
    "apiVersion": Prop(STRING, "API version of the referent.", required=True),
    "kind": Prop(STRING, "Kind of the referent.", required=True),
    "name": Prop(STRING, "Name of the referent.", required=True),
    "uid": Prop(STRING, "UID of the referent.", required=True),
    "controller": Prop(BOOLEAN, "If true, this reference points to the managing controller."),
    "blockOwnerDeletion": Prop(BOOLEAN, "If true, the owner cannot be deleted before this object."),
}, doc="Identifies an owning object.")

FREE_FORM = Struct("io.platform.apimachinery.pkg.apis.meta.v1.FieldsV1", {},
                   doc="The set of fields a manager owns, in the FieldsV1 format.",
                   preserve_unknown=True)

MANAGED_FIELDS_ENTRY = Struct("io.platform.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry", {
    "manager": Prop(STRING, "The workflow managing these fields."),
    "operation": Prop(STRING, "Apply or Update."),
    "apiVersion": Prop(STRING, "The API version the fields are in."),
    "time": Prop(TIME, "When the fields were last changed."),
    "fieldsType": Prop(STRING, "The format of fieldsV1; only FieldsV1."),
    "fieldsV1": Prop(FREE_FORM, "The fields owned."),
    "subresource": Prop(STRING, "The subresource the fields were written through."),
}, doc="A workflow's ownership of a set of fields.")

OBJECT_META = Struct("io.platform.apimachinery.pkg.apis.meta.v1.ObjectMeta", {
    "name": Prop(STRING, "Name, unique within a namespace (or the cluster for cluster-scoped kinds)."),
    "generateName": Prop(STRING, "Prefix from which the server generates a unique name when name is empty."),
    "namespace": Prop(STRING, "The namespace of a namespaced object."),
    "selfLink": Prop(STRING, "Deprecated; never set."),
    "uid": Prop(STRING, "Unique identifier, set by the server at creation."),
    "resourceVersion": Prop(STRING, "Opaque version of the object as stored; pass it back unmodified."),
    "generation": Prop(INT64, "A sequence number of the desired state."),
    "creationTimestamp": Prop(TIME, "When the object was created, set by the server."),
    "deletionTimestamp": Prop(TIME, "When deletion was requested; the object is terminating."),
    "deletionGracePeriodSeconds": Prop(INT64, "Seconds allowed for graceful termination."),
    "labels": Prop(MapOf(STRING), "Map of string keys and values for selecting objects."),
    "annotations": Prop(MapOf(STRING), "Unstructured key-value data for tools."),
    "ownerReferences": Prop(ListOf(OWNER_REFERENCE, "map", ("uid",), "merge", "uid"),
                            "Objects this object depends on."),
    "finalizers": Prop(ListOf(STRING, "set", (), "merge"),
                       "Conditions that must be cleared before the object is removed."),
    "managedFields": Prop(ListOf(MANAGED_FIELDS_ENTRY), "Field ownership for server-side apply."),
}, doc="Metadata every persisted object has.")

LIST_META = Struct("io.platform.apimachinery.pkg.apis.meta.v1.ListMeta", {
    "selfLink": Prop(STRING, "Deprecated; never set."),
    "resourceVersion": Prop(STRING, "The version at which the collection was constructed."),
    "continue": Prop(STRING, "Token for the next page; empty when the list is complete."),
    "remainingItemCount": Prop(INT64, "Items not in this page."),
}, doc="Metadata of a list.")

#: ObjectMeta's fields before ``resourceVersion`` (Go's struct order).
#: DeleteOptions: a delete's body, and an Eviction's ``deleteOptions``.
PRECONDITIONS = Struct("io.platform.apimachinery.pkg.apis.meta.v1.Preconditions", {
    "resourceVersion": Prop(STRING, "The target resourceVersion."),
    "uid": Prop(STRING, "The target UID."),
}, doc="Must be fulfilled before an operation (update, delete, etc.) is carried out.")

DELETE_OPTIONS = Struct("io.platform.apimachinery.pkg.apis.meta.v1.DeleteOptions", {
    "apiVersion": Prop(STRING, "The versioned schema of this representation."),
    "kind": Prop(STRING, "The REST resource this object represents."),
    "dryRun": Prop(ListOf(STRING), "When present, modifications are not persisted; only 'All'."),
    "gracePeriodSeconds": Prop(INT64, "Seconds before the object is deleted; zero deletes "
                                      "at once."),
    "preconditions": Prop(PRECONDITIONS, "Must be fulfilled before the deletion is carried out; "
                                         "otherwise 409 Conflict."),
    "orphanDependents": Prop(BOOLEAN, "Deprecated: use propagationPolicy."),
    "propagationPolicy": Prop(STRING, "Whether and how garbage collection is performed: "
                                      "Orphan, Background or Foreground."),
}, doc="May be provided when deleting an API object.")

_BEFORE_RESOURCE_VERSION = frozenset({"name", "generateName", "namespace", "selfLink", "uid"})


def set_resource_version(meta: dict, revision: str) -> None:
    """
    Set ``metadata.resourceVersion`` in place, at ObjectMeta's position for it (after
    ``uid``), so an object in upstream's field order stays in it.  Storage holds objects
    without it (the revision is the version), so it is put back on every read and write.
    """
    if "resourceVersion" in meta:
        meta["resourceVersion"] = revision
        return
    items = list(meta.items())
    at = 0
    while at < len(items) and items[at][0] in _BEFORE_RESOURCE_VERSION:
        at += 1
    if at == len(items):
        meta["resourceVersion"] = revision
        return
    items.insert(at, ("resourceVersion", revision))
    meta.clear()
    meta.update(items)


DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
_LABEL_RE = re.compile(DNS1123_LABEL + r"\Z")
_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN + r"\Z")
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_RE = re.compile(_QUALIFIED_NAME + r"\Z")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
    f"'123-abc', regex used for validation is '{DNS1123_LABEL}')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. "
    f"'example.com', regex used for validation is '{DNS1123_SUBDOMAIN}')"
)


def _dns_rule(limit: int, pattern, message: str):
    def problems_with(value: str) -> list:
        problems = []
        if len(value) > limit:
            problems.append(f"must be no more than {limit} characters")
        if not pattern.match(value):
            problems.append(message)
        return problems
    return problems_with


#: Problems with a value as an RFC 1123 label (namespaces, container names).
dns_label = _dns_rule(63, _LABEL_RE, LABEL_MESSAGE)
#: Problems with a value as an RFC 1123 subdomain (most object names).
dns_subdomain = _dns_rule(253, _SUBDOMAIN_RE, SUBDOMAIN_MESSAGE)


def path_segment(value: str) -> list:
    """Problems with ``value`` as a URL path segment (RBAC object names)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list:
    """Problems with ``value`` as a label or annotation key (``prefix/name``)."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems.extend("prefix part " + p for p in dns_subdomain(prefix))
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    # IsQualifiedName checks the pattern whatever the length: an empty name fails both.
    if not _QUALIFIED_RE.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyName',  or "
            f"'my.name',  or '123-abc', regex used for validation is '{_QUALIFIED_NAME}')"
        )
    return problems


def label_value(value: str) -> list:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if value and not _QUALIFIED_RE.match(value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
            f"'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            f"'({_QUALIFIED_NAME})?')"
        )
    return problems


TOTAL_ANNOTATION_SIZE = 256 * 1024


def validate_object_meta(meta: dict, name_rule, namespaced: bool) -> list:
    """Causes for ``metadata`` of an object being created or updated."""
    causes = []
    name = meta.get("name", "")
    if not name:
        if not meta.get("generateName"):
            causes.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(fe.invalid("metadata.name", name, p) for p in name_rule(name))
    namespace = meta.get("namespace", "")
    if namespaced:
        if not namespace:
            causes.append(fe.required("metadata.namespace"))
        else:
            causes.extend(fe.invalid("metadata.namespace", namespace, p) for p in dns_label(namespace))
    elif namespace:
        causes.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    for key, value in (meta.get("labels") or {}).items():
        causes.extend(fe.invalid("metadata.labels", key, p) for p in qualified_name(key))
        causes.extend(fe.invalid("metadata.labels", value, p) for p in label_value(value))
    annotations = meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        causes.extend(fe.invalid("metadata.annotations", key, p) for p in qualified_name(key))
        size += len(key) + len(value)
    if size > TOTAL_ANNOTATION_SIZE:
        causes.append(fe.too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE))
    finalizers = meta.get("finalizers") or []
    for i, finalizer in enumerate(finalizers):
        for p in qualified_name(finalizer):
            causes.append(fe.invalid(f"metadata.finalizers[{i}]", finalizer, p))
    seen = set()
    for i, finalizer in enumerate(finalizers):
        if finalizer in seen:
            causes.append(fe.duplicate(f"metadata.finalizers[{i}]", finalizer))
        seen.add(finalizer)
    return causes


def validate_object_meta_update(new: dict, old: dict) -> list:
    """
    Causes for metadata an update may not change: upstream's
    ``ValidateObjectMetaAccessorUpdate`` (apimachinery ``api/validation/objectmeta.go``),
    finalizers first.  Once deletion has started no finalizer may be added, only removed
    (``ValidateNoNewFinalizers``: the new ones named sorted, as ``sets.String.List``):
    one added then could hold the object back for ever.
    """
    causes = []
    if old.get("deletionTimestamp") is not None:
        added = sorted(set(new.get("finalizers") or ()) - set(old.get("finalizers") or ()))
        if added:
            causes.append(fe.forbidden(
                "metadata.finalizers", "no new finalizers can be added if the object is "
                f"being deleted, found new finalizers {gotext.string_slice(added)}"))
    for field in ("uid", "creationTimestamp"):
        if new.get(field) != old.get(field):
            causes.append(fe.invalid(f"metadata.{field}", new.get(field), "field is immutable"))
    old_deletion = old.get("deletionTimestamp")
    if old_deletion is None and new.get("deletionTimestamp") is not None:
        causes.append(fe.invalid("metadata.deletionTimestamp", new.get("deletionTimestamp"),
                                 "field is immutable; may only be changed via deletion"))
    return causes
