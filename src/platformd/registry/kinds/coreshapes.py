"""
What the core ``v1`` kinds share: their ``ResourceType`` factory and the references
several of them hold (``LocalObjectReference``: Pod, ServiceAccount;
``ObjectReference``: ServiceAccount).
"""

from __future__ import annotations

from platformd.model.meta import dns_subdomain
from platformd.model.schema import STRING, Prop, Struct
from platformd.registry.kinds import presence
from platformd.registry.resource import ResourceType

PREFIX = "io.platform.api.core.v1"
#: The package of the core kinds' Protobuf messages.
PROTO = "platform.api.core.v1."


def struct(name, props, doc, **kw) -> Struct:
    return Struct(f"{PREFIX}.{name}", props, doc=doc, **kw)


LOCAL_OBJECT_REFERENCE = struct("LocalObjectReference", {
    "name": Prop(STRING, "Name of the referent."),
}, "A reference to an object in the same namespace.")

OBJECT_REFERENCE = struct("ObjectReference", {
    "kind": Prop(STRING, "Kind of the referent."),
    "namespace": Prop(STRING, "Namespace of the referent."),
    "name": Prop(STRING, "Name of the referent."),
    "uid": Prop(STRING, "UID of the referent."),
    "apiVersion": Prop(STRING, "API version of the referent."),
    "resourceVersion": Prop(STRING, "Specific resourceVersion of the referent."),
    "fieldPath": Prop(STRING, "A piece of the referent, if any."),
}, "A reference to an object.")

#: The references' always-written fields (``presence``'s short names).
LOCAL_OBJECT_REFERENCE_PRESENCE = {"LocalObjectReference": "name?"}
OBJECT_REFERENCE_PRESENCE = {
    "ObjectReference": "kind? namespace? name? uid? apiVersion? resourceVersion? fieldPath?"}


def core_kind(kind, plural, namespaced, fields, doc, own_presence, name_rule=dns_subdomain,
              **kw) -> ResourceType:
    """A core ``v1`` kind; ``own_presence`` as ``kinds.presence``'s ``own``."""
    return ResourceType(
        group="", version="v1", kind=kind, plural=plural, singular=kind.lower(),
        namespaced=namespaced, fields=fields, doc=doc, name_rule=name_rule,
        definition_prefix=PREFIX, presence=presence(PROTO, kind, own_presence), **kw)
