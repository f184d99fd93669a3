"""
The catalog of served kinds: lookup by URL segments and by kind, for routing,
discovery and OpenAPI.
"""

from __future__ import annotations

from platformd.registry import core, rbac


class Catalog:
    """Every ResourceType this server serves, indexed the ways callers need."""

    def __init__(self, kinds):
        self.kinds = tuple(kinds)
        self._by_path = {(k.group, k.version, k.plural): k for k in self.kinds}

    def lookup(self, group: str, version: str, plural: str):
        """The kind served at ``/apis/{group}/{version}/{plural}``, or None."""
        return self._by_path.get((group, version, plural))

    def group_versions(self):
        """``{group: [version, ...]}`` in first-seen order (core group is ``""``)."""
        out = {}
        for k in self.kinds:
            versions = out.setdefault(k.group, [])
            if k.version not in versions:
                versions.append(k.version)
        return out

    def kinds_in(self, group: str, version: str):
        return [k for k in self.kinds if k.group == group and k.version == version]


def builtin() -> Catalog:
    return Catalog(core.KINDS + rbac.KINDS)
