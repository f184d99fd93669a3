"""Secret (core ``v1``): secret data of a certain type."""

from __future__ import annotations

import base64

from platformd.model.schema import BOOLEAN, BYTES, STRING, MapOf, Prop
from platformd.registry.kinds import configdata
from platformd.registry.kinds.coreshapes import core_kind
from platformd.registry.tables import AGE, NAME, Column


def _default(obj: dict) -> None:
    """Fold write-only ``stringData`` into ``data``, as upstream does on every write."""
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()


def _validate(obj: dict) -> list:
    return (configdata.validate_keys(obj, ("data",))
            + configdata.validate_size(obj, "data", binary="data")
            + configdata.validate_binary(obj, "data"))


COLUMNS = (
    NAME,
    Column("Type", "string", lambda obj, now: obj.get("type", ""),
           "The type of data stored in the secret"),
    Column("Data", "integer", lambda obj, now: len(obj.get("data") or {}),
           "The number of entries in the secret"),
    AGE,
)

KIND = core_kind("Secret", "secrets", True, {
    "immutable": Prop(BOOLEAN, "If true, data cannot be updated."),
    "data": Prop(MapOf(BYTES), "Secret data, base64-encoded."),
    "stringData": Prop(MapOf(STRING), "Write-only convenience: merged into data on write."),
    "type": Prop(STRING, "Used to facilitate programmatic handling of secret data."),
}, "Secret holds secret data of a certain type.", {"Secret": "metadata type?"},
    default=_default, validate=_validate, validate_update=configdata.immutable_data(("data",)),
    columns=COLUMNS,
    field_labels=("metadata.name", "metadata.namespace", "type"))
