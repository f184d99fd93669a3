"""ConfigMap (core ``v1``): configuration data for pods."""

from __future__ import annotations

from platformd.model.schema import BOOLEAN, BYTES, STRING, MapOf, Prop
from platformd.registry.kinds import configdata
from platformd.registry.kinds.coreshapes import core_kind
from platformd.registry.tables import AGE, NAME, Column


def _validate(obj: dict) -> list:
    # ValidateConfigMap's size error is on the whole object: field.NewPath(""), "[]".
    return (configdata.validate_keys(obj, ("data", "binaryData"))
            + configdata.validate_size(obj, "[]", text="data", binary="binaryData")
            + configdata.validate_binary(obj, "binaryData"))


COLUMNS = (
    NAME,
    Column("Data", "integer", lambda obj, now: len(obj.get("data") or {})
           + len(obj.get("binaryData") or {}), "Data contains the configuration data."),
    AGE,
)

KIND = core_kind("ConfigMap", "configmaps", True, {
    "immutable": Prop(BOOLEAN, "If true, data cannot be updated."),
    "data": Prop(MapOf(STRING), "Configuration data (UTF-8 strings)."),
    "binaryData": Prop(MapOf(BYTES), "Binary configuration data, base64-encoded."),
}, "ConfigMap holds configuration data for pods to consume.",
    {"ConfigMap": "metadata"}, short_names=("cm",),
    validate=_validate, validate_update=configdata.immutable_data(("data", "binaryData")),
    columns=COLUMNS)
