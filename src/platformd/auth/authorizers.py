"""
Authorizers and the authorizer chain.

Every authorizer answers Allow, Deny or NoOpinion, at once or with a Deferred (a
webhook answers later).  The chain asks them in order until one has an opinion, as
upstream's union authorizer; a request no authorizer allows is 403 with upstream's
message (``responsewriters.Forbidden``).  The daemon's chain starts with
``PrivilegedGroups`` (``system:masters``), then the ``--authorization-mode`` authorizers
or those of ``--authorization-config``; ``AlwaysAllow`` is what tests compose with.
"""

from __future__ import annotations

import attrs
from zope.interface import implementer

from platformd import errors
from platformd.auth.interfaces import ALLOW, NO_OPINION, Attributes, Decision, IAuthorizer
from platformd.util.deferreds import then
from platformd.goformat.gotext import aggregate

_ALLOWED = Decision(ALLOW)
_NO_OPINION = Decision(NO_OPINION)
_EVERYTHING_FORBIDDEN = Decision(NO_OPINION, "Everything is forbidden.")


@implementer(IAuthorizer)
class AlwaysAllow:
    def authorize(self, attributes):
        return _ALLOWED


@implementer(IAuthorizer)
class AlwaysDeny:
    """upstream's ``alwaysDenyAuthorizer``: no opinion, with the reason "Everything is
    forbidden." (so a later authorizer may still allow, and a refusal says why)."""

    def authorize(self, attributes):
        return _EVERYTHING_FORBIDDEN


@implementer(IAuthorizer)
@attrs.frozen
class PrivilegedGroups:
    """
    Upstream's ``authorizerfactory.NewPrivilegedGroups(system:masters)``, first in every
    chain: members of these groups may do anything; everyone else gets no opinion.
    """

    groups: frozenset = frozenset({"system:masters"})

    def authorize(self, attributes):
        if self.groups.intersection(attributes.user.groups):
            return _ALLOWED
        return _NO_OPINION


@implementer(IAuthorizer)
@attrs.define
class AuthorizerChain:
    """The first authorizer with an opinion decides; none at all is NoOpinion."""

    authorizers: list

    def authorize(self, attributes):
        # One request sees one list, even if a reload replaces it while a webhook thinks.
        return self._ask(self.authorizers, 0, attributes, [])

    def _ask(self, authorizers: list, start: int, attributes, opinions: list):
        for index in range(start, len(authorizers)):
            decision = authorizers[index].authorize(attributes)
            if not isinstance(decision, Decision):
                # A Deferred: go on down the chain once it has answered.
                return decision.addCallback(self._answered, authorizers, index, attributes,
                                            opinions)
            if decision.verdict != NO_OPINION:
                return decision
            if decision.reason or decision.error:
                opinions.append(decision)
        if not opinions:
            return _NO_OPINION
        # Upstream's union authorizer: every reason given, one per line; the errors
        # aggregated.
        return Decision(NO_OPINION, "\n".join(d.reason for d in opinions if d.reason),
                        aggregate([d.error for d in opinions if d.error]))

    def _answered(self, decision: Decision, authorizers: list, index: int, attributes,
                  opinions: list):
        if decision.verdict != NO_OPINION:
            return decision
        if decision.reason or decision.error:
            opinions.append(decision)
        return self._ask(authorizers, index + 1, attributes, opinions)


def check(authorizer, attributes: Attributes):
    """
    None when ``authorizer`` allows ``attributes`` (or a Deferred firing with None);
    otherwise raises (or fails with) 403 Forbidden.
    """
    return then(authorizer.authorize(attributes), enforce, attributes)


def enforce(decision: Decision, attributes: Attributes) -> None:
    """Raise 403 Forbidden unless ``decision`` allows ``attributes``."""
    if decision.verdict != ALLOW:
        raise forbidden(attributes, decision.reason)


def forbidden(attributes: Attributes, reason: str = "") -> errors.StatusError:
    """
    Upstream's ``responsewriters.Forbidden``: ``forbiddenMessage`` (what was asked, by
    whom, where), the authorizer's reason after a colon, wrapped by ``NewForbidden``
    with the resource, its group and the object's name.
    """
    info = attributes.info
    user = attributes.user.name if attributes.user is not None else ""
    if not info.is_resource:
        message = f'User "{user}" cannot {info.verb} path "{info.path}"'
    else:
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        message = (f'User "{user}" cannot {info.verb} resource "{resource}" in API group '
                   f'"{info.group}"')
        message += (f' in the namespace "{info.namespace}"' if info.namespace
                    else " at the cluster scope")
    if reason:
        message += f": {reason}"
    return errors.forbidden(info.resource if info.is_resource else "", info.group,
                            info.name if info.is_resource else "", message)
