"""
The daemon's authenticator and authorizer chains from its flags.

Authentication (upstream's ``BuiltInAuthenticationOptions.ToAuthenticationConfig``):
client certificates, the token file, then the JWT issuers of ``--authentication-config``
(reloaded when the file changes) or of the ``--oidc-*`` flags, then the extra
authenticators the caller gives (service-account tokens), then anonymous access when
``--anonymous-auth`` or the file's ``anonymous`` block turns it on.  Token
authenticators that verify signatures sit behind a cache keyed by the token's hash.

Authorization (upstream's ``BuiltInAuthorizationOptions.ToAuthorizationConfig`` and
``authorizer.New``):
``system:masters`` first (``PrivilegedGroups``), then either the authorizers of
``--authorization-config`` (reloaded when the file changes) or those
``--authorization-mode`` names in order, a ``Webhook`` mode built from the
``--authorization-webhook-*`` flags as upstream builds its legacy webhook (failure
policy NoOpinion, a 30 s timeout, both answers cached).

The JWT issuers (joserfc, CEL, the egress selector), the configuration files and webhooks
are imported only when a flag asks for them: together they were ~130 ms of every start
(``python -X importtime``), and most servers use none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from platformd.auth.authenticators import AnonymousAuthenticator, UnknownBearerToken
from platformd.auth.authorizers import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from platformd.auth.tokencache import CachedTokenAuthenticator

if TYPE_CHECKING:
    from platformd.auth.authnreload import AuthenticationReloader
    from platformd.auth.reloading import AuthorizationReloader

#: Upstream's legacy webhook: ``--authorization-webhook-*`` flags, these fixed values.
LEGACY_WEBHOOK_TIMEOUT = 30.0


class AuthFlagError(Exception):
    """A file the flags name cannot be used (one line)."""


#: Upstream's words when both the file and the flag configure anonymous access.
ANONYMOUS_BOTH = ("anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous "
                  "field is configured in authentication configuration file")


def authenticators_from_flags(options, chain, prefix, suffix, clock, reactor,
                              reloads=None, egress=None) -> Optional[AuthenticationReloader]:
    """
    Fill ``chain.authenticators``: ``prefix`` (certificates, the token file), the JWT
    issuers, ``suffix`` (service-account tokens; cached here too), the refusal of a
    bearer token none of them knew, anonymous access.  The JWT issuers fetch their keys
    through ``egress`` (the server's ``egress.selector.EgressSelector``; None: directly),
    those of a reload too.
    The reloader of ``--authentication-config`` (not started; its reloads counted by
    ``reloads("authentication")``, a ``metrics.configreloads.ConfigReloads``, when given),
    or None.  Raises ``AuthFlagError``.
    """
    config = _authentication_config(options)
    anonymous: list = []
    if config is not None and config.anonymous is not None:
        if options["anonymous-auth"] is not None:
            raise AuthFlagError(ANONYMOUS_BOTH)
        if config.anonymous.enabled:
            anonymous = [AnonymousAuthenticator(frozenset(config.anonymous.conditions))]
    elif options["anonymous-auth"]:
        anonymous = [AnonymousAuthenticator()]

    def cached(authenticator):
        return CachedTokenAuthenticator(authenticator, clock)

    issuers: list = []
    if config is not None:
        from platformd.auth import jwt
        issuers = [cached(a) for a in jwt.build_authenticators(config, clock, reactor, egress)]
    after = [*(cached(a) for a in suffix), UnknownBearerToken(), *anonymous]
    chain.authenticators = [*prefix, *issuers, *after]
    if not options["authentication-config"]:
        return None
    from platformd.auth.authnreload import AuthenticationReloader
    return AuthenticationReloader(options["authentication-config"], chain, config,
                                  clock=clock, reactor=reactor, prefix=prefix, suffix=after,
                                  wrap=cached,
                                  reloads=reloads("authentication") if reloads else None,
                                  egress=egress)


def _authentication_config(options):
    if not (options["authentication-config"] or options["oidc-issuer-url"]):
        return None
    from platformd.auth import authnconfig
    try:
        if options["authentication-config"]:
            return authnconfig.load_authentication_config(options["authentication-config"])
        return authnconfig.from_legacy_flags(
            options["oidc-issuer-url"], options["oidc-client-id"],
            options["oidc-ca-file"] or "", options["oidc-username-claim"] or "sub",
            options["oidc-username-prefix"] or "", options["oidc-groups-claim"] or "",
            options["oidc-groups-prefix"] or "", options["oidc-required-claim"])
    except authnconfig.AuthenticationConfigError as e:
        flag = "--authentication-config" if options["authentication-config"] else "--oidc-*"
        raise AuthFlagError(f"{flag}: {e}") from None


def authorizers_from_flags(options, chain, rbac, reactor,
                           reloads=None, egress=None) -> Optional[AuthorizationReloader]:
    """
    Fill ``chain.authorizers`` as the flags say, webhooks (and those of a reload)
    dialling through ``egress`` (the server's ``EgressSelector``; None: directly); the
    reloader of ``--authorization-config`` (not started; counted by
    ``reloads("authorization")`` when given), or None.  Raises ``AuthFlagError``.
    """
    prefix = (PrivilegedGroups(),)
    path = options["authorization-config"]
    if path:
        from platformd.auth import authzconfig
        from platformd.auth.modes import build_authorizers
        from platformd.auth.reloading import AuthorizationReloader
        try:
            config = authzconfig.load_authorization_config(path)
            built = build_authorizers(config, rbac, reactor, reactor, egress)
        except authzconfig.AuthorizationConfigError as e:
            raise AuthFlagError(f"--authorization-config: {e}") from None
        chain.authorizers = [*prefix, *built]
        return AuthorizationReloader(path, chain, config, rbac=rbac, clock=reactor,
                                     reactor=reactor, prefix=prefix,
                                     reloads=reloads("authorization") if reloads else None,
                                     egress=egress)
    chain.authorizers = [*prefix, *(_by_mode(mode, options, rbac, reactor, egress)
                                    for mode in options["authorization-mode"])]
    return None


def _by_mode(mode: str, options, rbac, reactor, egress):
    if mode == "AlwaysAllow":
        return AlwaysAllow()
    if mode == "AlwaysDeny":
        return AlwaysDeny()
    if mode == "RBAC":
        return rbac
    from platformd.auth.kubeconfig import KubeconfigError, load_kubeconfig
    from platformd.auth.webhook import WebhookAuthorizer
    path = options["authorization-webhook-config-file"]
    try:
        connection = load_kubeconfig(path)
    except KubeconfigError as e:
        raise AuthFlagError(f"--authorization-webhook-config-file: {e}") from None
    return WebhookAuthorizer(
        "webhook", connection, version=options["authorization-webhook-version"],
        timeout=LEGACY_WEBHOOK_TIMEOUT,
        authorized_ttl=options["authorization-webhook-cache-authorized-ttl"],
        unauthorized_ttl=options["authorization-webhook-cache-unauthorized-ttl"],
        failure_policy="NoOpinion", clock=reactor, reactor=reactor, egress=egress)
