"""
Reloading ``--authorization-config`` while the server runs (upstream's
``reloadableAuthorizerResolver.runReload``/``checkFile``).

Every ``interval`` seconds on the clock the file is read; when its bytes changed it is
loaded and validated again, requiring the non-webhook types configured at startup
(``missing required types: [RBAC]`` otherwise); when the configuration differs, new
authorizers are built and put in the chain in one assignment (the reactor thread is the
only one reading the chain, so a request sees the old list or the new one).  Anything
that fails is logged with upstream's words (``reloading authorization config``) and the
running authorizers stay.  Replaced webhooks drop their idle connections.  Each failure
and each reload that takes effect is counted in
``apiserver_authorization_config_controller_*`` (``metrics.configreloads``).
"""

from __future__ import annotations

from twisted.logger import Logger

from platformd.auth import authzconfig, modes
from platformd.files.filepoll import DEFAULT_INTERVAL, FilePoller

log = Logger()


class AuthorizationReloader(FilePoller):
    """
    Keeps ``chain.authorizers`` equal to ``prefix`` + what ``path`` configures.
    ``initial`` is the configuration the chain was built from at startup (its bytes are
    read again at ``start()`` as the baseline).  ``egress``: the server's
    ``EgressSelector`` (None: directly), which the webhooks of every reload dial
    through, as those built at startup did.  ``start()``/``stop()``; ``check()`` runs
    one check now.
    """

    def __init__(self, path: str, chain, initial: authzconfig.AuthorizationConfiguration, *,
                 rbac, clock, reactor, prefix=(), interval: float = DEFAULT_INTERVAL,
                 reloads=None, egress=None):
        super().__init__(path, clock, "reloading authorization config: open {path}: {error}",
                         interval, reloads)
        self.chain = chain
        self.rbac = rbac
        self.reactor = reactor
        self.prefix = tuple(prefix)
        self.egress = egress
        self._require = frozenset(initial.types() - {authzconfig.WEBHOOK})
        self._config = initial

    def check(self) -> bool:
        """One look at the file; True when the chain was replaced."""
        data = self.changed()
        if data is None:
            return False
        log.info("found new authorization config data")
        try:
            config = authzconfig.parse_authorization_config(data, self._require)
        except authzconfig.AuthorizationConfigError as error:
            log.error("reloading authorization config: {error}", error=str(error))
            self.failed()
            return False
        if config == self._config:
            return False
        log.info("found new authorization config")
        self._config = config
        try:
            built = modes.build_authorizers(config, self.rbac, self.clock, self.reactor,
                                           self.egress)
        except authzconfig.AuthorizationConfigError as error:
            log.error("reloading authorization config: {error}", error=str(error))
            self.failed()
            return False
        log.info("constructed new authorizer")
        old = self.chain.authorizers
        self.chain.authorizers = [*self.prefix, *built]
        modes.close_authorizers(a for a in old if a not in built)
        log.info("reloaded authz config")
        self.reloaded(data)
        return True
