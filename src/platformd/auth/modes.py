"""
From a validated AuthorizationConfiguration to the authorizers of an ``AuthorizerChain``
(upstream's ``reloadableAuthorizerResolver.newForConfig``).

``build_authorizers(config, rbac, clock, reactor, egress)`` answers them in the file's
order: ``AlwaysAllow``, ``AlwaysDeny``, the caller's RBAC authorizer for ``RBAC`` (one
instance across reloads, as upstream keeps its RBAC authorizer), a ``WebhookAuthorizer``
per ``Webhook`` (dialling through ``egress``, the server's ``EgressSelector``; None:
directly).  Upstream puts its privileged-group authorizer (``system:masters``) in front
of them; that one is the caller's to add (``AuthorizerChain([privileged, *built])``).
"""

from __future__ import annotations

from platformd.auth import authzconfig
from platformd.auth.authorizers import AlwaysAllow, AlwaysDeny
from platformd.auth.webhook import WebhookAuthorizer


def build_authorizers(config: authzconfig.AuthorizationConfiguration, rbac, clock,
                      reactor, egress=None) -> list:
    """
    The authorizers ``config`` names, in order.  ``rbac``: the RBAC authorizer (any
    ``IAuthorizer``), or None when RBAC was not set up at startup, in which case a
    configuration naming it raises ``AuthorizationConfigError`` as upstream refuses it.
    """
    built: list = []
    for entry in config.authorizers:
        if entry.type == authzconfig.ALWAYS_ALLOW:
            built.append(AlwaysAllow())
        elif entry.type == authzconfig.ALWAYS_DENY:
            built.append(AlwaysDeny())
        elif entry.type == authzconfig.RBAC:
            if rbac is None:
                raise authzconfig.AuthorizationConfigError(
                    "authorizer type RBAC is not allowed if it was not enabled at initial "
                    "server startup")
            built.append(rbac)
        elif entry.type == authzconfig.WEBHOOK:
            hook = entry.webhook
            if hook is None or hook.connection is None:
                raise ValueError(f"webhook {entry.name!r} is not loaded: use "
                                 "load_authorization_config")
            built.append(WebhookAuthorizer(
                entry.name, hook.connection, version=hook.subject_access_review_version,
                timeout=hook.timeout,
                authorized_ttl=hook.authorized_ttl if hook.cache_authorized_requests else 0,
                unauthorized_ttl=(hook.unauthorized_ttl if hook.cache_unauthorized_requests
                                  else 0),
                failure_policy=hook.failure_policy, matcher=hook.matcher, clock=clock,
                reactor=reactor, egress=egress))
        else:
            raise authzconfig.AuthorizationConfigError(
                f"unknown authorization mode {entry.type} specified")
    return built


def close_authorizers(authorizers) -> None:
    """Drop the idle connections of the webhooks among ``authorizers`` (replaced ones)."""
    for authorizer in authorizers:
        if isinstance(authorizer, WebhookAuthorizer):
            authorizer.close()
