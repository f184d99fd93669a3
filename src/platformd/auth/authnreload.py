"""
Reloading ``--authentication-config`` while the server runs (kube-apiserver's
``filesystem.WatchUntil`` callback in ``BuiltInAuthenticationOptions.ApplyTo``).

Every ``interval`` seconds on the clock (a minute, upstream's) the file is read; when its
bytes changed it is decoded and validated again, and the ``anonymous`` block must be the
one the server started with (``anonymous: Forbidden: changed from initial configuration
file``); then new JWT authenticators are built and put in the chain in one assignment,
between ``prefix`` and ``suffix`` (the authenticators that are not the file's).  Upstream's
words are logged: ``failed to read authentication config file``, ``failed to load
authentication config``, ``failed to validate authentication config``, ``reloaded
authentication config``; the running authenticators stay on any failure.  As upstream, a
file that fails to load or validate is not retried until its bytes change again; one that
cannot be read is.  Each failure and each reload that takes effect is counted in
``apiserver_authentication_config_controller_*`` (``metrics.configreloads``).
"""

from __future__ import annotations

from twisted.logger import Logger

from platformd.auth import authnconfig, jwt
from platformd.files.filepoll import DEFAULT_INTERVAL, FilePoller

log = Logger()


class AuthenticationReloader(FilePoller):
    """
    Keeps ``chain.authenticators`` equal to ``prefix`` + the file's authenticators (each
    passed through ``wrap``, e.g. a token cache) + ``suffix``.  ``initial`` is the
    configuration the chain was built from; ``egress`` the server's ``EgressSelector``
    (None: directly), which the issuers of every reload fetch their keys through, as
    those built at startup did.  ``start()``/``stop()``; ``check()`` runs one check now.
    """

    def __init__(self, path: str, chain, initial: authnconfig.AuthenticationConfiguration, *,
                 clock, reactor, prefix=(), suffix=(), wrap=None,
                 interval: float = DEFAULT_INTERVAL, reloads=None, egress=None):
        super().__init__(path, clock,
                         "failed to read authentication config file: open {path}: {error}",
                         interval, reloads)
        self.chain = chain
        self.reactor = reactor
        self.prefix = tuple(prefix)
        self.suffix = tuple(suffix)
        self.wrap = wrap
        self.egress = egress
        self._anonymous = initial.anonymous

    def check(self) -> bool:
        """One look at the file; True when the chain was replaced."""
        data = self.changed()
        if data is None:
            return False
        try:
            config = authnconfig.decode(data)
        except authnconfig.AuthenticationConfigError as error:
            log.error("failed to load authentication config: {error}", error=str(error))
            self.failed()
            return False
        try:
            causes, _ = authnconfig.validate(config)
            errors = [f"{c.field}: {c.message}" for c in causes]
            if config.anonymous != self._anonymous:
                errors.append("anonymous: Forbidden: changed from initial configuration file")
            if errors:
                raise authnconfig.AuthenticationConfigError(
                    authnconfig.gotext.aggregate(errors), errors)
            config = authnconfig.validated(config)
        except authnconfig.AuthenticationConfigError as error:
            log.error("failed to validate authentication config: {error}", error=str(error))
            self.failed()
            return False
        built = jwt.build_authenticators(config, self.clock, self.reactor, self.egress)
        if self.wrap is not None:
            built = [self.wrap(a) for a in built]
        self.chain.authenticators = [*self.prefix, *built, *self.suffix]
        log.info("reloaded authentication config")
        self.reloaded(data)
        return True
