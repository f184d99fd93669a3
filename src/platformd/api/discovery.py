"""
The discovery documents: ``/api``, ``/api/v1``, ``/apis``, ``/apis/{group}`` and
``/apis/{group}/{version}``.

Clients (kubectl, client-go's RESTMapper, the Python client) learn from these which kinds
exist, under which plural, whether they are namespaced, which verbs they accept and
which short names and categories expand to them.  The shapes, field names and field
order are upstream's (``k8s.io/apimachinery/pkg/apis/meta/v1`` ``APIVersions``,
``APIGroupList``, ``APIGroup``, ``APIResourceList``), because clients decode them with
upstream's types.

Aggregated discovery is served under the platform group alone
(``g=apidiscovery.platform.io``: ``aggregateddiscovery.py``).  Stock kubectl asks for
``apidiscovery.k8s.io`` first; that range is skipped, so it gets these documents as plain
``application/json`` (the range it lists last), decodes the ``APIVersions``/
``APIGroupList`` below and walks the group-versions one by one.

Every function here is pure over a ``Catalog`` and returns a dict ready to encode; the
server encodes each once.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Optional

from platformd.registry.resource import ALL_VERBS

#: Every stored kind accepts every standard verb (``ResourceType.verbs``; a review only
#: ``create``); upstream lists them sorted.
VERBS = ALL_VERBS
#: The ``status`` subresource is read, replaced and patched, never created or listed.
STATUS_VERBS = ("get", "patch", "update")


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """
    Upstream's opaque storage-version hash: base64 of the first 8 bytes of the SHA-256 of
    ``group/version/kind``.  Clients (the storage-version migrator, kubectl's discovery
    cache) only compare it for equality; computing it as upstream does keeps it stable
    across restarts and identical for the same kind everywhere.
    """
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_versions(server_address: str) -> dict:
    """``GET /api``: the legacy core group, which only ever has ``v1``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address},
        ],
    }


def _group_version(group: str, version: str) -> dict:
    return {"groupVersion": f"{group}/{version}", "version": version}


def _group_entry(group: str, versions: list) -> dict:
    """One group as ``APIGroup`` lists it; the first version served is preferred."""
    return {
        "name": group,
        "versions": [_group_version(group, v) for v in versions],
        "preferredVersion": _group_version(group, versions[0]),
    }


def api_group_list(catalog) -> dict:
    """``GET /apis``: every named group (the core group lives under ``/api`` instead)."""
    groups = [_group_entry(group, versions)
              for group, versions in catalog.group_versions().items() if group]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog, group: str) -> Optional[dict]:
    """``GET /apis/{group}``, or None when the group is not served (a 404)."""
    versions = catalog.group_versions().get(group) if group else None
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource(kind) -> dict:
    entry = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    if kind.stored:
        # Upstream names a storage version only for kinds with storage (not the reviews).
        entry["storageVersionHash"] = storage_version_hash(kind.group, kind.version, kind.kind)
    return entry


def _status_resource(kind) -> dict:
    """Subresources carry an empty singularName and no storage hash, as upstream's do."""
    return {
        "name": f"{kind.plural}/status",
        "singularName": "",
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(STATUS_VERBS),
    }


def _scale_resource(kind) -> dict:
    """A custom resource's ``scale``: ``autoscaling/v1`` Scale, as upstream lists it."""
    return {"name": f"{kind.plural}/scale", "singularName": "", "namespaced": kind.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale",
            "verbs": list(STATUS_VERBS)}


def _subresource(kind, name: str, sub) -> dict:
    """
    A create-only subresource (``serviceaccounts/token``): its own kind, named with its
    group and version as upstream names them when they differ from the parent's.
    """
    entry = {"name": f"{kind.plural}/{name}", "singularName": "",
             "namespaced": kind.namespaced}
    if (sub.group, sub.version) != (kind.group, kind.version):
        entry["group"], entry["version"] = sub.group, sub.version
    entry["kind"] = sub.kind
    entry["verbs"] = ["create"]
    return entry


def api_resource_list(catalog, group: str, version: str) -> Optional[dict]:
    """
    ``GET /api/v1`` (group ``""``) or ``GET /apis/{group}/{version}``, or None when that
    group-version is not served.  Resources are sorted by name as upstream sorts them, so
    ``pods/status`` follows ``pods``.

    The core list carries no ``apiVersion``: upstream's legacy ``/api/v1`` handler writes
    the list without it, while every named group's list has ``apiVersion: v1``.
    """
    kinds = catalog.kinds_in(group, version)
    if not kinds:
        return None
    resources = [_resource(k) for k in kinds]
    resources.extend(_status_resource(k) for k in kinds if k.has_status)
    resources.extend(_scale_resource(k) for k in kinds if k.scale is not None)
    resources.extend(_subresource(k, name, sub) for k in kinds
                     for name, sub in k.subresources.items())
    resources.sort(key=lambda r: r["name"])
    document: dict = {"kind": "APIResourceList"}
    if group:
        document["apiVersion"] = "v1"
    document["groupVersion"] = f"{group}/{version}" if group else version
    document["resources"] = resources
    return document
