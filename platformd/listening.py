"""
Listening for HTTPS through Twisted endpoints.

``listen_description(options)`` turns ``--bind-address`` and ``--secure-port`` into an
endpoint description (``tcp:6443:interface=127.0.0.1:backlog=1024``; IPv6 colons
escaped, ``interface=\\:\\:1``).  ``ListenerService`` listens on *any* description with
any factory, so another description (``systemd:domain=INET:index=0``, a socket handed
over by systemd) can be given later without touching the application.

TLS is not the endpoint's: ``tls_factory`` wraps the site in twisted's
``TLSMemoryBIOFactory`` with ``PlatformTLSTransport`` as the per-connection protocol
(see tlstransport.py: it is what makes watch fan-out fast), and that factory is what the
plain stream endpoint listens with.
"""

from __future__ import annotations

from typing import Callable

from twisted.application import service
from twisted.internet import error as net_error
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.endpoints import quoteStringArgument, serverFromString
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure

from platformd.startup import StartupError
from platformd.tlstransport import PlatformTLSTransport

log = Logger()

#: A deep accept queue: thousands of watch clients may connect at once.
BACKLOG = 1024


def listen_description(options) -> str:
    """The endpoint description of ``--bind-address``:``--secure-port``."""
    parts = ["tcp", str(options["secure-port"])]
    bind = options["bind-address"]
    if bind:
        parts.append("interface=" + quoteStringArgument(bind))
    parts.append(f"backlog={BACKLOG}")
    return ":".join(parts)


def tls_factory(tls_options, site) -> TLSMemoryBIOFactory:
    """``site`` behind TLS, with ``PlatformTLSTransport`` on every connection."""
    factory = TLSMemoryBIOFactory(tls_options, False, site)
    factory.protocol = PlatformTLSTransport
    return factory


class ListenerService(service.Service):
    """
    Listens on an endpoint description in ``privilegedStartService`` (before twistd
    drops privileges, and first of all so a port in use fails at once); stops listening
    and closes every open connection in ``stopService``.

    ``make_factory()`` is called when listening: the TLS options it needs are read from
    files only at start (constructing a service does no I/O).

    Endpoint ``listen()`` returns a Deferred.  The stream endpoints (tcp, ssl, unix,
    systemd) fire it before returning; when it has failed by then, this raises
    ``StartupError`` at once, naming ``address``.  ``listening()`` is a Deferred of the
    listening port for an endpoint that answers later; it fails with ``StartupError``.
    """

    name = "https"

    def __init__(self, reactor, description: str, make_factory: Callable,
                 address: str | None = None):
        self.reactor = reactor
        self.description = description
        self.make_factory = make_factory
        #: How errors name what could not be listened on.
        self.address = address or description
        self.factory = None
        #: The ``IListeningPort`` once listening.
        self.port = None
        #: The port, or a Failure of StartupError, once ``listen()`` has answered.
        self._outcome = None
        self._waiting: list = []

    def privilegedStartService(self):
        super().privilegedStartService()
        self.factory = self.make_factory()
        d = serverFromString(self.reactor, self.description).listen(self.factory)
        d.addBoth(self._arrived)
        if isinstance(self._outcome, Failure):
            self._outcome.raiseException()  # StartupError: the port is in use

    def _arrived(self, result) -> None:
        if isinstance(result, Failure):
            error = result.value
            reason = (error.socketError if isinstance(error, net_error.CannotListenError)
                      else result.getErrorMessage())
            try:
                raise StartupError(f"cannot listen on {self.address}: {reason}")
            except StartupError:
                self._outcome = Failure()
        else:
            self.port = self._outcome = result
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            self._fire(d)

    def _fire(self, d: Deferred) -> None:
        if isinstance(self._outcome, Failure):
            d.errback(self._outcome)
        else:
            d.callback(self._outcome)

    def listening(self) -> Deferred:
        """A Deferred of the listening port (``StartupError`` if it cannot listen)."""
        d = Deferred()
        if self._outcome is None:
            self._waiting.append(d)
        else:
            self._fire(d)
        return d

    def stopService(self):
        super().stopService()
        if self.port is None:
            return None
        d = maybeDeferred(self.port.stopListening)

        def close(_):
            # TLSMemoryBIOFactory is a WrappingFactory: it tracks the live connections.
            for protocol in list(getattr(self.factory, "protocols", ())):
                protocol.transport.loseConnection()

        return d.addCallback(close)
