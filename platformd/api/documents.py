"""
Discovery and OpenAPI documents, encoded once and served as cached bytes.

They depend only on the catalog, so each is built on first request and kept: startup
stays fast and every later request is a dict lookup.
"""

from __future__ import annotations

from typing import Optional

from platformd import __version__, errors
from platformd.api import discovery, openapi
from platformd.codecs.jsoncodec import dumps


class Documents:
    def __init__(self, catalog, server_address: str):
        self.catalog = catalog
        self.server_address = server_address
        self._cache: dict = {}
        self.group_versions = catalog.group_versions()

    def lookup(self, path: str) -> Optional[bytes]:
        """JSON bytes of the document at ``path``, or None when there is none."""
        doc = self._cache.get(path)
        if doc is None:
            value = self._build(path)
            if value is None:
                return None
            doc = self._cache[path] = dumps(value)
        return doc

    def _build(self, path: str):
        parts = [p for p in path.split("/") if p]
        groups = self.group_versions
        if parts == ["api"]:
            return discovery.api_versions(self.server_address)
        if parts == ["apis"]:
            return discovery.api_group_list(self.catalog)
        if parts == ["version"]:
            return version_info()
        if len(parts) == 2 and parts[0] == "api" and parts[1] in groups.get("", ()):
            return discovery.api_resource_list(self.catalog, "", parts[1])
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups and parts[1]:
            return discovery.api_group(self.catalog, parts[1])
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], ()) \
                and parts[1]:
            return discovery.api_resource_list(self.catalog, parts[1], parts[2])
        if parts == ["openapi", "v2"]:
            return openapi.openapi_v2(self.catalog, __version__)
        if parts == ["openapi", "v3"]:
            return openapi.openapi_v3_index(self.catalog)
        if parts[:2] == ["openapi", "v3"]:
            rest = parts[2:]
            if len(rest) == 2 and rest[0] == "api" and rest[1] in groups.get("", ()):
                return openapi.openapi_v3(self.catalog, "", rest[1])
            if len(rest) == 3 and rest[0] == "apis" and rest[2] in groups.get(rest[1], ()):
                return openapi.openapi_v3(self.catalog, rest[1], rest[2])
        return None


def version_info() -> dict:
    """``/version``, in upstream's shape (``version.Info``)."""
    import platform
    import sys
    major, minor = __version__.split(".")[:2]
    return {
        "major": major, "minor": minor, "gitVersion": f"v{__version__}",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{sys.platform}/{platform.machine().lower()}",
    }


def not_found() -> errors.StatusError:
    return errors.not_found_path()
