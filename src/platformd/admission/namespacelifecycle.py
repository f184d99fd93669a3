"""
``NamespaceLifecycle`` (upstream's ``plugin/pkg/admission/namespace/lifecycle``): a
namespaced object needs a namespace that exists, new content needs one that is not
terminating, and the immortal namespaces cannot be deleted.  It reads namespaces from
their lister (the watch cache's), which is never behind this server's own acknowledged writes; a
namespace missing from it is looked up again once the cache is up to date (``sync``),
as upstream looks one missing from its informer up live: another server over the same
etcd may have just created it.
"""

from __future__ import annotations

from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import CREATE, DELETE, IMutatingPlugin
from platformd.util.deferreds import then

#: Upstream's immortal namespaces (default, kube-system, kube-public), renamed.
IMMORTAL_NAMESPACES = frozenset({"default", "platform-system", "platform-public"})
TERMINATING = "Terminating"
#: Upstream's ``accessReviewResources``: always allowed, since answering about the
#: namespace would leak it (also at the upstream group name, an alias served here).
ACCESS_REVIEWS = frozenset({("authorization.platform.io", "localsubjectaccessreviews"),
                            ("authorization.k8s.io", "localsubjectaccessreviews")})


@implementer(IMutatingPlugin)
class NamespaceLifecycle:
    name = "NamespaceLifecycle"

    def __init__(self, namespaces, namespace_kind, sync, immortal=IMMORTAL_NAMESPACES):
        #: The namespaces' ``ILister``.
        self.namespaces = namespaces
        self.namespace_kind = namespace_kind
        #: ``WatchCache.sync``: the live lookup.
        self.sync = sync
        self.immortal = immortal

    def handles(self, operation: str) -> bool:
        return True

    def admit(self, a) -> None:
        if a.kind is self.namespace_kind:
            if a.operation == DELETE and a.name in self.immortal:
                raise errors.forbidden("namespaces", "", a.name, "this namespace may not be deleted")
            return
        if not a.namespace or a.operation == DELETE or \
                (a.kind.group, a.kind.plural) in ACCESS_REVIEWS:
            return
        entry = self.namespaces.get(None, a.namespace)
        if entry is None:
            return then(self.sync(), lambda _: self._check(
                a, self.namespaces.get(None, a.namespace)))
        return self._check(a, entry)

    def _check(self, a, entry) -> None:
        if entry is None:
            raise errors.not_found("namespaces", "", a.namespace)
        if a.operation == CREATE and (entry.obj.get("status") or {}).get("phase") == TERMINATING:
            raise errors.forbidden(
                a.kind.plural, a.kind.group, _name(a),
                f"unable to create new content in namespace {a.namespace} because it is "
                "being terminated",
                (errors.Cause("NamespaceTerminating",
                              f"namespace {a.namespace} is being terminated",
                              "metadata.namespace"),))


def _name(a) -> str:
    """admission's ``extractResourceName``: the name, the generateName, or Unknown."""
    if a.name:
        return a.name
    meta = (a.obj or {}).get("metadata") or {}
    return meta.get("name") or meta.get("generateName") or "Unknown"
