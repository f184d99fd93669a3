"""
Reloading ``--authorization-config`` while the server runs (upstream's
``reloadableAuthorizerResolver.runReload``/``checkFile``).

Every ``interval`` seconds on the clock the file is read; when its bytes changed it is
loaded and validated again, requiring the non-webhook types configured at startup
(``missing required types: [RBAC]`` otherwise); when the configuration differs, new
authorizers are built and put in the chain in one assignment (the reactor thread is the
only one reading the chain, so a request sees the old list or the new one).  Anything
that fails is logged with upstream's words (``reloading authorization config``) and the
running authorizers stay.  Replaced webhooks drop their idle connections.
"""

from __future__ import annotations

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from platformd.auth import authzconfig, modes

log = Logger()

#: upstream checks the file once a minute.
DEFAULT_INTERVAL = 60.0


class AuthorizationReloader:
    """
    Keeps ``chain.authorizers`` equal to ``prefix`` + what ``path`` configures.
    ``initial`` is the configuration the chain was built from at startup (its bytes are
    read again at ``start()`` as the baseline).  ``start()``/``stop()``; ``check()`` runs
    one check now.
    """

    def __init__(self, path: str, chain, initial: authzconfig.AuthorizationConfiguration, *,
                 rbac, clock, reactor, prefix=(), interval: float = DEFAULT_INTERVAL):
        self.path = path
        self.chain = chain
        self.rbac = rbac
        self.clock = clock
        self.reactor = reactor
        self.prefix = tuple(prefix)
        self.interval = interval
        self._require = frozenset(initial.types() - {authzconfig.WEBHOOK})
        self._config = initial
        self._data = self._read()
        self._loop: LoopingCall | None = None

    def start(self) -> None:
        self._loop = LoopingCall(self.check)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _read(self) -> bytes | None:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError as error:
            log.error("reloading authorization config: open {path}: {error}",
                      path=self.path, error=error.strerror)
            return None

    def check(self) -> bool:
        """One look at the file; True when the chain was replaced."""
        data = self._read()
        if data is None or data == self._data:
            return False
        log.info("found new authorization config data")
        self._data = data
        try:
            config = authzconfig.parse_authorization_config(data, self._require)
        except authzconfig.AuthorizationConfigError as error:
            log.error("reloading authorization config: {error}", error=str(error))
            return False
        if config == self._config:
            return False
        log.info("found new authorization config")
        self._config = config
        try:
            built = modes.build_authorizers(config, self.rbac, self.clock, self.reactor)
        except authzconfig.AuthorizationConfigError as error:
            log.error("reloading authorization config: {error}", error=str(error))
            return False
        log.info("constructed new authorizer")
        old = self.chain.authorizers
        self.chain.authorizers = [*self.prefix, *built]
        modes.close_authorizers(a for a in old if a not in built)
        log.info("reloaded authz config")
        return True
