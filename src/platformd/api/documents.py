"""
Discovery and OpenAPI documents, encoded once and served as cached bytes.

They depend only on the catalog, so each is built on first request and kept: startup
stays fast and every later request is a dict lookup.  The OpenAPI builder (``openapi``,
the largest module the daemon would otherwise load at startup) is imported with the
first OpenAPI request too.  OpenAPI v3 documents are encoded
with ``openapi.encode_document``, the bytes the index's hashes are computed over.

Discovery documents (``APIVersions``, ``APIGroupList``, ``APIGroup``,
``APIResourceList``) are negotiated like any object, as upstream writes them with
``WriteObjectNegotiated``: JSON, YAML, Protobuf or CBOR, each encoding made once.  The
OpenAPI documents and ``/version`` are JSON whatever the ``Accept`` (upstream writes
``/version`` as raw JSON, and the OpenAPI handlers' other form is their own Protobuf).
The aggregated discovery documents of ``/api`` and ``/apis`` are kept beside them, each
with its ETag (``aggregateddiscovery.py``).
"""

from __future__ import annotations

import platform
import sys
from typing import Optional

import attrs

from platformd import __version__
from platformd.api import aggregateddiscovery, discovery
from platformd.codecs.jsoncodec import JSON, dumps


@attrs.frozen
class Document:
    """
    A document's JSON bytes and, for a discovery document, its value (None: served as
    JSON only) and its other encodings, made on first request.
    """

    json: bytes
    value: Optional[dict] = None
    _encodings: dict = attrs.field(factory=dict, eq=False)
    #: An aggregated discovery document's ETag value (``aggregateddiscovery.etag``).
    etag: str = ""

    @property
    def api_version(self) -> str:
        assert self.value is not None  # asked of discovery documents only
        return self.value.get("apiVersion", "")

    @property
    def kind(self) -> str:
        assert self.value is not None  # asked of discovery documents only
        return self.value["kind"]

    def encoded(self, codec) -> bytes:
        """The document in ``codec``'s encoding, made once."""
        if codec.media_type == JSON:
            return self.json
        body = self._encodings.get(codec.media_type)
        if body is None:
            body = self._encodings[codec.media_type] = codec.encode(self.value)
        return body


class Documents:
    def __init__(self, catalog, server_address: str):
        self.catalog = catalog
        self.server_address = server_address
        self._cache: dict = {}
        #: The aggregated discovery documents, by root (``/api``, ``/apis``).
        self._aggregated: dict = {}
        #: Every OpenAPI v3 document's bytes by index path (``_v3_encoded``).
        self._v3: Optional[dict] = None
        #: The paths ``add`` serves (kept when the catalog changes).
        self._added: dict = {}
        when_changed = getattr(catalog, "when_changed", None)
        if when_changed is not None:
            when_changed(self.invalidate)

    def invalidate(self) -> None:
        """The catalog changed (a kind added or removed at run time): every discovery and
        OpenAPI document is built again on its next request."""
        self._cache = dict(self._added)
        self._aggregated = {}
        self._v3 = None

    def lookup(self, path: str) -> Optional[Document]:
        """The document at ``path``, or None when there is none."""
        path = path.rstrip("/")
        doc = self._cache.get(path)
        if doc is None:
            doc = self._build(path)
            if doc is None:
                return None
            self._cache[path] = doc
        return doc

    def aggregated(self, path: str) -> Document:
        """The aggregated discovery document of ``path`` (one of
        ``aggregateddiscovery.ROOTS``), built once per catalog change with its ETag."""
        path = aggregateddiscovery.root(path)
        doc = self._aggregated.get(path)
        if doc is None:
            value = aggregateddiscovery.document(self.catalog, path)
            doc = self._aggregated[path] = Document(
                dumps(value), value, etag=aggregateddiscovery.etag(value))
        return doc

    def add(self, path: str, value: dict) -> None:
        """
        Serve ``value`` at ``path`` as JSON whatever the Accept: a document beside
        discovery, such as the service-account issuer's OpenID documents.
        """
        document = Document(dumps(value))
        self._cache[path.rstrip("/")] = self._added[path.rstrip("/")] = document

    def _openapi(self, parts: list) -> Optional[Document]:
        from platformd.api import openapi
        if parts == ["openapi", "v2"]:
            return Document(dumps(openapi.openapi_v2(self.catalog, __version__)))
        if len(parts) == 2:
            return Document(dumps(openapi.openapi_v3_index_of(self._v3_encoded())))
        body = self._v3_encoded().get("/".join(parts[2:]))
        return None if body is None else Document(body)

    def _v3_encoded(self) -> dict:
        """
        Every OpenAPI v3 document encoded (``openapi.encode_document``), by its index
        path, made once per catalog change for the index's hashes and the documents
        alike.  Only the bytes are kept: the documents as dicts were three times their
        size (2.2 MiB against 0.7 for the built-in kinds), held from the first request.
        """
        if self._v3 is None:
            from platformd.api import openapi
            self._v3 = {path: openapi.encode_document(document) for path, document
                        in openapi.openapi_v3_documents(self.catalog).items()}
        return self._v3

    def _build(self, path: str) -> Optional[Document]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["openapi", "v3"] or parts == ["openapi", "v2"]:
            return self._openapi(parts)
        if parts == ["version"]:
            return Document(dumps(version_info()))
        value: Optional[dict]
        if parts == ["api"]:
            value = discovery.api_versions(self.server_address)
        elif parts == ["apis"]:
            value = discovery.api_group_list(self.catalog)
        elif len(parts) == 2 and parts[0] == "api":
            value = discovery.api_resource_list(self.catalog, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            value = discovery.api_group(self.catalog, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            value = discovery.api_resource_list(self.catalog, parts[1], parts[2])
        else:
            value = None
        return None if value is None else Document(dumps(value), value)


def version_info() -> dict:
    """``/version``, in upstream's shape (``version.Info``)."""
    major, minor = __version__.split(".")[:2]
    return {
        "major": major, "minor": minor, "gitVersion": f"v{__version__}",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{sys.platform}/{platform.machine().lower()}",
    }
