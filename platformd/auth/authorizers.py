"""
Authorizers.  For now every authenticated user is allowed (the RBAC authorizer reading
RoleBindings is a later issue); the chain and its seam are in place for it.
"""

from __future__ import annotations

import attrs
from zope.interface import implementer

from platformd import errors
from platformd.auth.interfaces import (
    ALLOW, DENY, NO_OPINION, Attributes, Decision, IAuthorizer,
)

_ALLOWED = Decision(ALLOW)


@implementer(IAuthorizer)
class AlwaysAllow:
    def authorize(self, attributes):
        return _ALLOWED


@attrs.define
class AuthorizerChain:
    """The first authorizer with an opinion decides; none at all denies."""

    authorizers: list

    def authorize(self, attributes) -> Decision:
        for authorizer in self.authorizers:
            decision = authorizer.authorize(attributes)
            if decision.verdict in (ALLOW, DENY):
                return decision
        return Decision(NO_OPINION, "no authorizer had an opinion")


def check(authorizer, user, info) -> None:
    """Raise 403 Forbidden unless ``authorizer`` allows ``user`` the request ``info``."""
    decision = authorizer.authorize(Attributes(user, info))
    if decision.verdict != ALLOW:
        raise errors.forbidden(user.name, info.verb, info.resource, info.group, decision.reason)
