"""
RBAC (issue 13): the authorizer and the in-memory index it reads, after upstream's
``plugin/pkg/auth/authorizer/rbac`` and ``pkg/registry/rbac/validation``; escalation
prevention, upstream's RBAC registry's own check of a write, reads the same index from
the registry (``registry/escalation.py``).  See docs/rbac.md.

Modules, one job each: ``rules`` (does a PolicyRule allow a request), ``covers`` (does
one set of rules cover another; the compact rule text), ``subjects`` (who a binding's
subject is), ``index`` (roles and bindings from the watch cache, bindings by subject),
``resolver`` (the rules and errors for a user in a namespace), ``authorizer``
(``RBACAuthorizer``: ``IAuthorizer`` and ``IRuleResolver``).

Wiring (compose)::

    authorizer, index = rbac.build(informers, clock)   # cache.informers.Informers
    index.start()          # once the cache has loaded (boot sequence, after "cache")
    chain.authorizers = [PrivilegedGroups(), authorizer]
    escalation.checks(index)   # the RBAC kinds' stores' IWriteCheck (registry/)
    index.stop()           # on the way down
"""

from __future__ import annotations

from platformd.auth.rbac.authorizer import RBACAuthorizer
from platformd.auth.rbac.index import RBACIndex


def build(informers, clock=None) -> tuple:
    """``(RBACAuthorizer, RBACIndex)`` over ``informers`` (``cache.informers.Informers``);
    start the index once the cache has loaded.  ``clock`` paces the error log."""
    index = RBACIndex.from_informers(informers)
    return RBACAuthorizer(index, clock), index


__all__ = ["RBACAuthorizer", "RBACIndex", "build"]
