"""
The daemon's authorizer chain from its flags (upstream's
``BuiltInAuthorizationOptions.ToAuthorizationConfig`` and ``authorizer.New``):
``system:masters`` first (``PrivilegedGroups``), then either the authorizers of
``--authorization-config`` (reloaded when the file changes) or those
``--authorization-mode`` names in order, a ``Webhook`` mode built from the
``--authorization-webhook-*`` flags as upstream builds its legacy webhook (failure
policy NoOpinion, a 30 s timeout, both answers cached).
"""

from __future__ import annotations

from typing import Optional

from platformd.auth import authzconfig
from platformd.auth.authorizers import AlwaysAllow, PrivilegedGroups
from platformd.auth.kubeconfig import KubeconfigError, load_kubeconfig
from platformd.auth.modes import AlwaysDeny, build_authorizers
from platformd.auth.reloading import AuthorizationReloader
from platformd.auth.webhook import WebhookAuthorizer

#: Upstream's legacy webhook: ``--authorization-webhook-*`` flags, these fixed values.
LEGACY_WEBHOOK_TIMEOUT = 30.0


class AuthorizationFlagError(Exception):
    """A file the flags name cannot be used (one line)."""


def authorizers_from_flags(options, chain, rbac, reactor) -> Optional[AuthorizationReloader]:
    """
    Fill ``chain.authorizers`` as the flags say; the reloader of
    ``--authorization-config`` (not started), or None.  Raises
    ``AuthorizationFlagError``.
    """
    prefix = (PrivilegedGroups(),)
    path = options["authorization-config"]
    if path:
        try:
            config = authzconfig.load_authorization_config(path)
            built = build_authorizers(config, rbac, reactor, reactor)
        except authzconfig.AuthorizationConfigError as e:
            raise AuthorizationFlagError(f"--authorization-config: {e}") from None
        chain.authorizers = [*prefix, *built]
        return AuthorizationReloader(path, chain, config, rbac=rbac, clock=reactor,
                                     reactor=reactor, prefix=prefix)
    chain.authorizers = [*prefix, *(_by_mode(mode, options, rbac, reactor)
                                    for mode in options["authorization-mode"])]
    return None


def _by_mode(mode: str, options, rbac, reactor):
    if mode == "AlwaysAllow":
        return AlwaysAllow()
    if mode == "AlwaysDeny":
        return AlwaysDeny()
    if mode == "RBAC":
        return rbac
    path = options["authorization-webhook-config-file"]
    try:
        connection = load_kubeconfig(path)
    except KubeconfigError as e:
        raise AuthorizationFlagError(f"--authorization-webhook-config-file: {e}") from None
    return WebhookAuthorizer(
        "webhook", connection, version=options["authorization-webhook-version"],
        timeout=LEGACY_WEBHOOK_TIMEOUT,
        authorized_ttl=options["authorization-webhook-cache-authorized-ttl"],
        unauthorized_ttl=options["authorization-webhook-cache-unauthorized-ttl"],
        failure_policy="NoOpinion", clock=reactor, reactor=reactor)
