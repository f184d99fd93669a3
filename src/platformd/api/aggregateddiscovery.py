"""
Aggregated discovery (KEP-3352): ``GET /api`` and ``GET /apis`` with ``Accept:
application/json;g=apidiscovery.platform.io;v=v2;as=APIGroupDiscoveryList`` answer one
``APIGroupDiscoveryList`` of every group, version and resource, so a client learns the
whole API in one request instead of one per group-version.

The shape is upstream's (``k8s.io/api/apidiscovery/v2``, written as Go writes the structs:
``kind``, ``apiVersion``, ``metadata``, ``items``; each group ``metadata.name`` and its
``versions``; each version ``version``, ``resources``, ``freshness``), and so is what
fills it:

* built-in resources as upstream's installer publishes them
  (``endpoints.ConvertGroupVersionIntoToDiscovery``): resources and subresources sorted by
  name, a ``responseKind`` naming only the kind (its group and version left empty, as the
  installer leaves them unless the storage names another group, as
  ``serviceaccounts/token``'s TokenRequest does);
* custom resources as the CRD handler's discovery controller publishes them: a
  ``responseKind`` with group and version, the verbs in its order, ``status`` then
  ``scale`` (``autoscaling/v1`` Scale);
* every version ``Current``: this server serves each group itself.

Groups, and the versions within them, come in the order the plain ``/apis`` lists them
(``discovery.api_group_list``), so the first version is the preferred one in both.

Every document is built once per catalog change and kept with its ETag
(``api/documents.py``), since every kubectl call asks for discovery.  The ETag is
upstream's: the upper-case hex SHA-512 of the list's JSON without its TypeMeta
(``calculateETag`` hashes the struct before the encoder stamps ``kind`` and
``apiVersion``), the same whatever the encoding asked for, hence ``Vary: Accept``.
"""

from __future__ import annotations

import hashlib

from platformd.api import discovery, responses
from platformd.codecs.jsoncodec import dumps
from platformd.codecs.negotiation import AGGREGATED, AGGREGATED_GROUP, AGGREGATED_VERSION

#: The paths that answer aggregated discovery (upstream's legacy ``/api`` and ``/apis``).
ROOTS = frozenset({"/api", "/apis"})
#: The views a request to ``ROOTS`` may be answered in.
VIEWS = frozenset({AGGREGATED})
API_VERSION = f"{AGGREGATED_GROUP}/{AGGREGATED_VERSION}"
#: This server's own groups are always up to date (upstream's ``DiscoveryFreshnessCurrent``).
CURRENT = "Current"
#: The CRD handler's verbs, in its order (``customresource_discovery_controller.go``).
CUSTOM_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update",
                "watch")


def root(path: str) -> str:
    """``path`` as ``ROOTS`` names it (a trailing slash dropped)."""
    return path.rstrip("/")


def document(catalog, path: str) -> dict:
    """The ``APIGroupDiscoveryList`` of ``/api`` (the core group) or ``/apis`` (the rest)."""
    core = root(path) == "/api"
    items = [_group(catalog, group, versions)
             for group, versions in catalog.group_versions().items()
             if (group == "") == core]
    return {"kind": AGGREGATED, "apiVersion": API_VERSION, "metadata": {}, "items": items}


def etag(value: dict) -> str:
    """Upstream's ETag value: SHA-512 of the list's JSON without its TypeMeta, hex."""
    hashed = dumps({"metadata": value["metadata"], "items": value["items"]})
    return hashlib.sha512(hashed).hexdigest().upper()


def serve(call, document, choice) -> bytes:
    """
    Answer with ``document`` (a ``documents.Document`` holding the list and its ETag) in
    ``choice``, as upstream's ``ServeHTTPWithETag``: ``ETag``, ``Vary: Accept`` and
    ``Cache-Control: public``, and a bodiless 304 when ``If-None-Match`` is that ETag.
    """
    request = call.request
    quoted = f'"{document.etag}"'.encode("ascii")
    # Go's ``Header.Get``: the first If-None-Match, compared whole (no list, no W/).
    if (request.requestHeaders.getRawHeaders(b"if-none-match") or [None])[0] == quoted:
        request.setResponseCode(304)
        body = b""
    else:
        codec = choice.codec
        encoded = (codec.encode(document.value, True) if call.indented(choice)
                   else document.encoded(codec))
        body = responses.write(request, 200, encoded, responses.content_type(choice))
    headers = request.responseHeaders
    headers.setRawHeaders(b"ETag", [quoted])
    headers.setRawHeaders(b"Vary", [b"Accept"])
    headers.setRawHeaders(b"Cache-Control", [b"public"])
    return body


def _group(catalog, group: str, versions: list) -> dict:
    return {"metadata": {"name": group} if group else {},
            "versions": [_version(catalog, group, v) for v in versions]}


def _version(catalog, group: str, version: str) -> dict:
    kinds = sorted(catalog.kinds_in(group, version), key=lambda k: k.plural)
    return {"version": version, "resources": [_resource(k) for k in kinds],
            "freshness": CURRENT}


def _response_kind(kind) -> dict:
    """A ``GroupVersionKind``: only a custom resource's names its group and version."""
    if kind.unstructured:
        return {"group": kind.group, "version": kind.version, "kind": kind.kind}
    return {"group": "", "version": "", "kind": kind.kind}


def _resource(kind) -> dict:
    entry = {
        "resource": kind.plural,
        "responseKind": _response_kind(kind),
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "singularResource": kind.singular,
        "verbs": list(CUSTOM_VERBS if kind.unstructured else kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    subresources = _subresources(kind)
    if subresources:
        entry["subresources"] = subresources
    return entry


def _subresources(kind) -> list:
    """Sorted by name for a built-in kind (the installer's sorted paths); ``status``
    then ``scale`` for a custom resource (the CRD handler's order)."""
    found = []
    if kind.has_status:
        found.append(_subresource("status", _response_kind(kind), discovery.STATUS_VERBS))
    if kind.scale is not None:
        found.append(_subresource(
            "scale", {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            discovery.STATUS_VERBS))
    for name, sub in kind.subresources.items():
        differs = (sub.group, sub.version) != (kind.group, kind.version)
        found.append(_subresource(name, {"group": sub.group if differs else "",
                                         "version": sub.version if differs else "",
                                         "kind": sub.kind}, ("create",)))
    if not kind.unstructured:
        found.sort(key=lambda s: s["subresource"])
    return found


def _subresource(name: str, response_kind: dict, verbs) -> dict:
    return {"subresource": name, "responseKind": response_kind, "verbs": list(verbs)}
