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

from platformd.requestinfo import RequestInfo

AUTHENTICATED_GROUP = "system:authenticated"


@attrs.frozen
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple = ()
    extra: tuple = ()


@attrs.frozen
class Attributes:
    """
    What is asked, by whom: the user and the request's ``RequestInfo`` (verb, group,
    resource, namespace, name ... read once from the URL, see api/requestinfo.py).
    """

    user: UserInfo
    info: RequestInfo
    #: The request's span (``tracing.spans.Trace``; None when not traced): a webhook
    #: authorizer's call is its child.  Not part of what is asked.
    trace: object = attrs.field(default=None, eq=False, repr=False)
    #: The ``fieldSelector`` and ``labelSelector`` of a list, watch or deletecollection
    #: (upstream's ``RequestInfo.FieldSelector``/``LabelSelector``), as given: parsed only
    #: by an authorizer that uses them (a webhook's ``auth/selectorattributes.py``).
    field_selector: str = ""
    label_selector: str = ""


ALLOW, DENY, NO_OPINION = "Allow", "Deny", "NoOpinion"


@attrs.frozen
class Decision:
    verdict: str
    reason: str = ""
    #: What went wrong while deciding (an unresolvable roleRef, a webhook that failed),
    #: reported by access reviews as ``status.evaluationError``.
    error: str = ""


@attrs.frozen
class RulesForUser:
    """
    What a user may do in a namespace, as an authorizer knows it (upstream's
    ``RuleResolver.RulesFor``): ``resource_rules`` and ``non_resource_rules`` as
    PolicyRule-shaped dicts (``verbs``, ``apiGroups``, ``resources``, ``resourceNames``;
    ``verbs``, ``nonResourceURLs``), ``incomplete`` when the list may be partial, and
    ``error`` (the evaluation errors met, joined).
    """

    resource_rules: tuple = ()
    non_resource_rules: tuple = ()
    incomplete: bool = False
    error: str = ""


class IAuthenticator(Interface):
    def authenticate(request):
        """
        ``UserInfo`` for the request, or ``None`` when this authenticator has nothing to
        say (no credentials of its kind), or a Deferred firing with one of those (an
        authenticator that must ask the network, such as a JWT issuer's JWKS, answers
        later and never blocks the reactor).  Raises (or fails with)
        ``AuthenticationError`` when credentials of its kind are present but wrong.
        """


class IAuthorizer(Interface):
    def authorize(attributes):
        """
        A ``Decision`` for ``attributes``, or a Deferred firing with one (a webhook
        answers later).  The chain and the filter handle both.
        """


class IRuleResolver(Interface):
    def rules_for(user, namespace):
        """A ``RulesForUser`` for ``user`` in ``namespace`` ("" for cluster scope)."""


class AuthenticationError(Exception):
    """Credentials were presented and are not valid."""
