"""ServiceAccount (core ``v1``): a name, a principal and the secrets it may use."""

from __future__ import annotations

from platformd.model.schema import BOOLEAN, ListOf, Prop
from platformd.registry.kinds.coreshapes import (
    LOCAL_OBJECT_REFERENCE, LOCAL_OBJECT_REFERENCE_PRESENCE, OBJECT_REFERENCE,
    OBJECT_REFERENCE_PRESENCE, core_kind,
)
from platformd.registry.kinds import tokenrequest
from platformd.registry.tables import AGE, NAME, Column

COLUMNS = (
    NAME,
    Column("Secrets", "string", lambda obj, now: len(obj.get("secrets") or ()),
           "Secrets is a list of the secrets in the same namespace that pods running using "
           "this ServiceAccount are allowed to use."),
    AGE,
)

KIND = core_kind("ServiceAccount", "serviceaccounts", True, {
    "secrets": Prop(ListOf(OBJECT_REFERENCE, "map", ("name",), "merge", "name"),
                    "Secrets pods running as this account may use."),
    "imagePullSecrets": Prop(ListOf(LOCAL_OBJECT_REFERENCE), "Secrets for pulling images."),
    "automountServiceAccountToken": Prop(BOOLEAN, "Whether pods mount a token automatically."),
}, "ServiceAccount binds together a name, a principal, and a set of secrets.",
    {"ServiceAccount": "metadata", **OBJECT_REFERENCE_PRESENCE,
     **LOCAL_OBJECT_REFERENCE_PRESENCE},
    short_names=("sa",), returns_deleted_object=True, columns=COLUMNS,
    # POST serviceaccounts/<name>/token mints a token (TokenRequest), stores nothing.
    subresources={"token": tokenrequest.SUBRESOURCE})
