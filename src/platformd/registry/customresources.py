"""
The kinds a CustomResourceDefinition serves: one ``ResourceType`` per served version,
built from the definition (``kinds_for``), as upstream's ``crdHandler`` builds its
serving info: names from ``status.acceptedNames``, the version's schema through the
structural-schema seam (``apiextensions/schemas.py``: decoding, pruning, defaulting,
validation, OpenAPI), the status and scale subresources, the printer columns
(``additionalPrinterColumns``, else Name and Age), no strategic merge (415) and no
Protobuf message (406/415).  The strategy is upstream's ``customResourceStrategy``:
status is the status subresource's, ``metadata.generation`` starts at 1 and moves with
every change but metadata's (and status's, when it is a subresource).
"""

from __future__ import annotations

import re

import orjson

from platformd.apiextensions import jsonpath, names as crdnames
from platformd.apiextensions.schemas import VersionSchema, props_of
from platformd.cache.webhookversions import stored_in
from platformd.model.meta import dns_subdomain
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE_DOC, NAME, Column, human_duration

import calendar
import time


def definition_prefix(group: str, version: str) -> str:
    """OpenAPI definition names: ``com.example.v1.Widget`` for ``example.com/v1``."""
    return ".".join(reversed(group.split("."))) + "." + version


def kinds_for(crd: dict) -> list:
    """A ``ResourceType`` per served version of ``crd``, in upstream's version priority
    (the first is the group's preferred version)."""
    versions = sorted(crdnames.served_versions(crd), key=lambda v: version_priority(
        v.get("name") or ""))
    return [kind_for(crd, version) for version in versions]


def storage_kind(crd: dict) -> ResourceType:
    """The kind of the storage version (served or not: its objects are cached)."""
    for version in (crd.get("spec") or {}).get("versions") or ():
        if version.get("storage"):
            return kind_for(crd, version)
    raise ValueError("no storage version")


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?\Z")


def version_priority(name: str) -> tuple:
    """apimachinery's ``CompareKubeAwareVersionStrings`` as a sort key: GA before beta
    before alpha, higher numbers first, then other names alphabetically."""
    m = _KUBE_VERSION.match(name)
    if m is None:
        return (3, 0, 0, name)
    major, level, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[level], -major, -minor, name)


def api_version_converter(api_version: str):
    """Conversion strategy ``None``: the stored bytes with ``apiVersion`` rewritten (the
    field keeps its place; bytes already of ``api_version`` are left as they are)."""
    def convert(raw: bytes) -> bytes:
        if stored_in(raw, api_version):
            return raw
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw  # reported as corrupt when read
        if isinstance(obj, dict):
            obj["apiVersion"] = api_version
        return orjson.dumps(obj)
    return convert


def kind_for(crd: dict, version: dict) -> ResourceType:
    spec = crd.get("spec") or {}
    accepted = (crd.get("status") or {}).get("acceptedNames") or spec.get("names") or {}
    group = spec.get("group") or ""
    name = version.get("name") or ""
    schema = VersionSchema((version.get("schema") or {}).get("openAPIV3Schema"))
    prefix = definition_prefix(group, name)
    kind_name = accepted.get("kind") or ""
    model = schema.model(f"{prefix}.{kind_name}")
    subresources = version.get("subresources") or {}
    has_status = "status" in subresources and subresources["status"] is not None
    strategy = _Strategy(schema, has_status)
    return ResourceType(
        group=group, version=name, kind=kind_name, plural=accepted.get("plural") or "",
        singular=accepted.get("singular") or kind_name.lower(),
        namespaced=spec.get("scope") == "Namespaced", fields=props_of(model),
        doc=model.doc, short_names=tuple(accepted.get("shortNames") or ()),
        categories=tuple(accepted.get("categories") or ()), name_rule=dns_subdomain,
        has_status=has_status, default=schema.default, validate=schema.validate,
        validate_update=schema.validate_update, update_validates_whole=True,
        prepare_for_create=strategy.prepare_for_create,
        prepare_for_update=strategy.prepare_for_update, strategic=False,
        definition_prefix=prefix, columns=columns(version.get("additionalPrinterColumns")),
        preserve_unknown=model.preserve_unknown, presence={},
        scale=subresources.get("scale"), unstructured=True,
        field_labels=_field_labels(version.get("selectableFields")))


def _field_labels(selectable):
    """``metadata.name``, ``metadata.namespace`` and the version's ``selectableFields``
    (``.spec.color`` selects as ``spec.color``); None (apimachinery's default) without
    any."""
    if not selectable:
        return None
    return ("metadata.name", "metadata.namespace") + tuple(
        (f.get("jsonPath") or "").lstrip(".") for f in selectable)


class _Strategy:
    """Upstream's ``customResourceStrategy`` for one version."""

    def __init__(self, schema: VersionSchema, has_status: bool):
        self.schema = schema
        self.has_status = has_status

    def prepare_for_create(self, obj: dict) -> None:
        if self.has_status:
            obj.pop("status", None)
        obj.setdefault("metadata", {})["generation"] = 1

    def prepare_for_update(self, new: dict, old: dict) -> None:
        skip = ("metadata", "status") if self.has_status else ("metadata",)
        generation = (old.get("metadata") or {}).get("generation") or 1
        if {k: v for k, v in new.items() if k not in skip} != \
                {k: v for k, v in old.items() if k not in skip}:
            generation += 1
        new.setdefault("metadata", {})["generation"] = generation


# Tables (upstream's ``tableconvertor``).

AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
              "description": AGE_DOC}


def columns(defined) -> tuple:
    """Name, then the printer columns (Age when there are none)."""
    return (NAME,) + tuple(_column(c) for c in (defined or [AGE_COLUMN]))


def _column(defined: dict) -> Column:
    steps = jsonpath.parse(defined.get("jsonPath") or ".")
    kind = defined.get("type") or "string"

    def cell(obj, now):
        values = jsonpath.find(obj, steps)
        if not values:
            return None
        return _cell(kind, values[0], now)
    return Column(defined.get("name") or "", kind, cell, defined.get("description") or "",
                  defined.get("priority") or 0, defined.get("format") or "")


def _cell(kind: str, value, now: float):
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        return orjson.dumps(value).decode()
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return int(value)
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return value
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date":
        if not isinstance(value, str):
            return None
        try:
            stamp = calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            return "<invalid>"
        return human_duration(now - stamp)
    return None


