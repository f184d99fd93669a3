"""
Discovery and OpenAPI documents, encoded once and served as cached bytes.

They depend only on the catalog, so each is built on first request and kept: startup
stays fast and every later request is a dict lookup.  OpenAPI v3 documents are encoded
with ``openapi.encode_document``, the bytes the index's hashes are computed over.
"""

from __future__ import annotations

import platform
import sys
from typing import Optional

from platformd import __version__
from platformd.api import discovery, openapi
from platformd.codecs.jsoncodec import dumps


class Documents:
    def __init__(self, catalog, server_address: str):
        self.catalog = catalog
        self.server_address = server_address
        self._cache: dict = {}
        self._v3 = None

    def lookup(self, path: str) -> Optional[bytes]:
        """JSON bytes of the document at ``path``, or None when there is none."""
        path = path.rstrip("/")
        doc = self._cache.get(path)
        if doc is None:
            doc = self._build(path)
            if doc is None:
                return None
            self._cache[path] = doc
        return doc

    def _v3_documents(self) -> dict:
        if self._v3 is None:
            self._v3 = openapi.openapi_v3_documents(self.catalog)
        return self._v3

    def _build(self, path: str) -> Optional[bytes]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["openapi", "v3"]:
            if len(parts) == 2:
                return dumps(openapi.openapi_v3_index(self.catalog, encode=openapi.encode_document))
            document = self._v3_documents().get("/".join(parts[2:]))
            return None if document is None else openapi.encode_document(document)
        if parts == ["openapi", "v2"]:
            return dumps(openapi.openapi_v2(self.catalog, __version__))
        if parts == ["version"]:
            return dumps(version_info())
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
        return None if value is None else dumps(value)


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
