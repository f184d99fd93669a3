"""
The catalog of served kinds: lookup by URL segments and by kind, for routing,
discovery and OpenAPI.  Kinds are added and removed by ``(group, version, plural)``
(``ResourceType.gvr``); ``builtin()`` lists the kinds this server serves from the start,
and fixes them: they cannot be removed, so only kinds added at run time (custom
resources) come and go.  Serving a kind at run time is, in order: the watch cache loads
it (``WatchCache.add_kind``), a store is made for it, then ``Catalog.add`` routes to it;
stopping is the reverse (``Catalog.remove``, then ``WatchCache.remove_kind``).
"""

from __future__ import annotations

import attrs

from platformd.codecs import gopresence
from platformd.registry.kinds import (
    clusterrole, clusterrolebinding, configmap, customresourcedefinition, endpoints,
    endpointslice, event, eventsv1, lease, localsubjectaccessreview, mutatingwebhookconfiguration, namespace, pod, role,
    rolebinding, secret, selfsubjectaccessreview, selfsubjectreview, selfsubjectrulesreview,
    service, serviceaccount, subjectaccessreview, tokenreview, validatingadmissionpolicy,
    validatingadmissionpolicybinding, validatingwebhookconfiguration,
)
from platformd.registry.kinds import binding, node, poddisruptionbudget  # issue 32


class Catalog:
    """Every ResourceType this server serves, indexed the ways callers need."""

    def __init__(self, kinds=()):
        self.kinds: tuple = ()
        self._by_path: dict = {}
        #: The GVRs ``fix`` made permanent.
        self._fixed: frozenset = frozenset()
        #: Called with no argument after every ``add`` and ``remove`` (the documents
        #: built from the catalog are dropped then: discovery and OpenAPI follow).
        self._on_change: list = []
        for kind in kinds:
            self.add(kind)

    def fix(self) -> None:
        """Make every kind served now (and every alias) permanent: ``remove`` refuses them."""
        self._fixed = frozenset(self._by_path)

    def fixed(self, kind) -> bool:
        """Whether ``kind.gvr`` is one of the kinds ``fix`` made permanent (built in)."""
        return kind.gvr in self._fixed

    def add(self, kind) -> None:
        """
        Serve ``kind`` (a ``ResourceType``), after the kinds already here; its Protobuf
        presence is registered with ``gopresence``.  Adding a second kind at the same
        ``gvr`` is a ``ValueError``.  Its subresources' kinds' presence is registered too
        (``serviceaccounts/token``: TokenRequest).
        """
        if kind.gvr in self._by_path:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is already served")
        gopresence.register(kind.presence)
        for subresource in kind.subresources.values():
            gopresence.register(subresource.presence)
        self._by_path[kind.gvr] = kind
        self.kinds += (kind,)
        self._changed()

    def when_changed(self, f) -> None:
        """``f()`` after every later ``add`` and ``remove``."""
        self._on_change.append(f)

    def _changed(self) -> None:
        for f in list(self._on_change):
            f()

    def alias(self, kind) -> None:
        """
        Route ``kind.gvr`` to ``kind`` without serving it anywhere else (discovery,
        OpenAPI, storage): unmodified upstream clients' typed paths (``kubectl auth``).
        """
        if kind.gvr in self._by_path:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is already served")
        self._by_path[kind.gvr] = kind

    def remove(self, kind) -> None:
        """
        Stop serving the kind at ``kind.gvr``.  Its Protobuf presence stays registered:
        it describes messages, which other catalogs may still serve.  ``ValueError`` for
        a kind ``fix`` made permanent, ``KeyError`` for one not served.
        """
        if kind.gvr in self._fixed:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is built in: it stays")
        del self._by_path[kind.gvr]
        self.kinds = tuple(k for k in self.kinds if k.gvr != kind.gvr)
        self._changed()

    def lookup(self, group: str, version: str, plural: str):
        """The kind served at ``/apis/{group}/{version}/{plural}``, or None."""
        return self._by_path.get((group, version, plural))

    def group_versions(self):
        """``{group: [version, ...]}`` in first-seen order (core group is ``""``)."""
        out: dict = {}
        for k in self.kinds:
            versions = out.setdefault(k.group, [])
            if k.version not in versions:
                versions.append(k.version)
        return out

    def kinds_in(self, group: str, version: str):
        return [k for k in self.kinds if k.group == group and k.version == version]


#: The upstream groups unmodified kubectl's typed clients name, whatever the server's
#: discovery says: ``auth can-i``/``whoami`` post to their paths, ``create token`` names
#: ``authentication.k8s.io/v1`` in its TokenRequest.
UPSTREAM_REVIEW_GROUPS = {"authorization.platform.io": "authorization.k8s.io",
                          "authentication.platform.io": "authentication.k8s.io"}


def upstream_api_version(api_version: str) -> str:
    """
    ``api_version`` as upstream names it, for the groups of ``UPSTREAM_REVIEW_GROUPS``
    (``authentication.k8s.io/v1``); any other, unchanged.
    """
    group, _, version = api_version.rpartition("/")
    upstream = UPSTREAM_REVIEW_GROUPS.get(group)
    return f"{upstream}/{version}" if upstream else api_version


def builtin() -> Catalog:
    """The built-in kinds; adding one is its module under ``kinds/`` and a line here."""
    catalog = _builtin()
    # The access reviews also answer at upstream's group names, undiscovered, so
    # ``kubectl auth can-i``/``whoami`` work unchanged (docs/api-conventions.md).
    for kind in catalog.kinds:
        if kind.review is not None and kind.group in UPSTREAM_REVIEW_GROUPS:
            catalog.alias(attrs.evolve(kind, group=UPSTREAM_REVIEW_GROUPS[kind.group]))
    catalog.fix()
    return catalog


def _builtin() -> Catalog:
    return Catalog((
        namespace.KIND,
        pod.KIND,
        configmap.KIND,
        secret.KIND,
        serviceaccount.KIND,
        event.KIND,
        service.KIND,
        endpoints.KIND,
        node.KIND,
        binding.KIND,
        # Named groups in upstream's /apis order: events, authentication, authorization,
        # policy, rbac, admissionregistration, coordination, discovery.
        eventsv1.KIND,  # served from event.KIND's storage
        selfsubjectreview.KIND,
        tokenreview.KIND,
        localsubjectaccessreview.KIND,
        selfsubjectaccessreview.KIND,
        selfsubjectrulesreview.KIND,
        subjectaccessreview.KIND,
        poddisruptionbudget.KIND,
        role.KIND,
        clusterrole.KIND,
        rolebinding.KIND,
        clusterrolebinding.KIND,
        mutatingwebhookconfiguration.KIND,
        validatingadmissionpolicy.KIND,
        validatingadmissionpolicybinding.KIND,
        validatingwebhookconfiguration.KIND,
        lease.KIND,  # coordination after admissionregistration, as upstream's /apis
        customresourcedefinition.KIND,  # apiextensions after coordination
        endpointslice.KIND,  # discovery after apiextensions
    ))
