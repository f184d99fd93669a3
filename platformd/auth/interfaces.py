"""
The seams of authentication and authorization.

Authenticators turn a request into a user (or say nothing); they are tried in order and
the first answer wins.  Authorizers decide what a user may do; they are tried in order
until one allows or denies.  x509 and static tokens come first; JWT/OIDC, RBAC and
webhooks plug into the same chains later.
"""

from __future__ import annotations

import attrs
from zope.interface import Interface

AUTHENTICATED_GROUP = "system:authenticated"


@attrs.frozen
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple = ()
    extra: tuple = ()


@attrs.frozen
class Attributes:
    """What is asked: the authorizer's view of a request (from its RequestInfo)."""

    user: UserInfo
    verb: str
    is_resource: bool
    path: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


ALLOW, DENY, NO_OPINION = "Allow", "Deny", "NoOpinion"


@attrs.frozen
class Decision:
    verdict: str
    reason: str = ""


class IAuthenticator(Interface):
    def authenticate(request):
        """
        ``UserInfo`` for the request, or ``None`` when this authenticator has nothing to
        say (no credentials of its kind).  Raises ``AuthenticationError`` when
        credentials of its kind are present but wrong.
        """


class IAuthorizer(Interface):
    def authorize(attributes):
        """A ``Decision`` (or a Deferred firing with one) for ``attributes``."""


class AuthenticationError(Exception):
    """Credentials were presented and are not valid."""
