"""
Listening for HTTPS through Twisted endpoints.

``listen_description(options)`` turns ``--bind-address`` and ``--secure-port`` into an
endpoint description (``tcp:6443:interface=127.0.0.1:backlog=1024``; IPv6 colons
escaped, ``interface=\\:\\:1``).  ``ListenerService`` listens on *any* stream server
endpoint with any factory.  ``activated_socket`` finds the socket a supervisor handed
over (socket activation, ``activation.py``), adopted as it is; the daemon listens there
instead of ``--secure-port``.

Out of file descriptors, the listener stops accepting for a while, as Go's does, rather
than spinning on ``accept()`` (``accepting.py``).

Stopping is in two steps, as upstream's graceful termination: ``stop_listening`` (no new
connections), then ``drain``: a connection is closed as soon as it has no request in
flight, and whatever is still busy after the grace period is aborted.

TLS is not the endpoint's: ``tls_factory`` wraps the site in twisted's
``TLSMemoryBIOFactory`` with ``PlatformTLSTransport`` as the per-connection protocol
(see tlstransport.py: it is what makes watch fan-out fast), and that factory is what the
plain stream endpoint listens with.
"""

from __future__ import annotations

import os
import socket
from typing import Callable, Optional

import attrs

from twisted.application import service
from twisted.internet import error as net_error
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.endpoints import AdoptedStreamServerEndpoint, quoteStringArgument
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure

from platformd.edge.accepting import accept_one_per_turn, accept_with_backoff
from platformd.edge.activation import initial_environment, passed
from platformd.process.startup import StartupError
from platformd.edge.tlstransport import PlatformTLSTransport

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


#: How often ``drain`` looks for connections that have become idle.
DRAIN_POLL = 0.05


@attrs.frozen
class Inherited:
    """The socket a supervisor passed: the endpoint adopting it, and its address."""

    endpoint: AdoptedStreamServerEndpoint
    host: str
    port: int


def activated_socket(reactor) -> Optional[Inherited]:
    """
    The socket passed to this process to serve HTTPS on, or None when none was passed
    (``activation.py`` finds them).  One passed socket is the HTTPS listener, whatever
    its name (names are optional, and an operator may give the unit's socket any).
    Several are refused (``StartupError``): platformd serves one listener and cannot
    tell which of them is meant, and listening on one while the others' clients wait
    unanswered would be worse.  So is a socket that is not TCP.  The address family
    (``INET`` or ``INET6``) and the address come from the socket itself.
    """
    sockets = passed(initial_environment(), os.getpid())
    if not sockets:
        return None
    if len(sockets) > 1:
        raise StartupError(
            f"{len(sockets)} sockets were passed (LISTEN_FDS, named "
            f"{':'.join(s.name for s in sockets)}) and platformd serves HTTPS on one: "
            "pass only that one")
    [only] = sockets
    return adopted_socket(reactor, only.fd)


def adopted_socket(reactor, fd: int) -> Inherited:
    """
    The listening TCP socket at descriptor ``fd`` (passed by a supervisor, or by the
    first worker to the others: ``process/workers.py``), or ``StartupError``.
    """
    try:
        inherited = socket.socket(fileno=os.dup(fd))
    except OSError as e:
        raise StartupError(f"the passed socket (descriptor {fd}) cannot be used:"
                           f" {e.strerror}") from None
    with inherited:
        if inherited.type != socket.SOCK_STREAM or inherited.family not in (
                socket.AF_INET, socket.AF_INET6):
            raise StartupError("the passed socket is not a TCP socket")
        host, port = inherited.getsockname()[:2]
        family = inherited.family
    return Inherited(AdoptedStreamServerEndpoint(reactor, fd, family), host, port)


def tls_factory(tls_options, site) -> TLSMemoryBIOFactory:
    """``site`` behind TLS, with ``PlatformTLSTransport`` on every connection."""
    factory = TLSMemoryBIOFactory(tls_options, False, site)
    factory.protocol = PlatformTLSTransport
    return factory


class ListenerService(service.Service):
    """
    Listens on a stream server endpoint in ``privilegedStartService`` (before twistd
    drops privileges, and first of all so a port in use fails at once); stops listening
    and closes every open connection in ``stopService``.

    ``make_factory()`` is called when listening: the TLS options it needs are read from
    files only at start (constructing a service does no I/O).

    Endpoint ``listen()`` returns a Deferred.  The stream endpoints (tcp, ssl, unix,
    adopted) fire it before returning; when it has failed by then, this raises
    ``StartupError`` at once, naming ``address``.  ``listening()`` is a Deferred of the
    listening port for an endpoint that answers later; it fails with ``StartupError``.
    """

    name = "https"

    def __init__(self, reactor, endpoint, make_factory: Callable, address: str,
                 at_start: bool = True, shared: bool = False):
        self.reactor = reactor
        #: Whether other processes accept from the same socket (``--workers``): then
        #: one connection is accepted per turn (``accepting.accept_one_per_turn``).
        self.shared = shared
        #: Whether to listen in ``privilegedStartService`` (first of all), or in
        #: ``startService``, in the tree's order: a worker (``--workers``) accepts from
        #: the shared socket only once it is ready, so no client of it is answered 503.
        self.at_start = at_start
        self.endpoint = endpoint
        self.make_factory = make_factory
        #: How errors name what could not be listened on.
        self.address = address
        self.factory = None
        #: The ``IListeningPort`` once listening.
        self.port = None
        #: The port, or a Failure of StartupError, once ``listen()`` has answered.
        self._outcome: object = None
        self._waiting: list = []

    def privilegedStartService(self):
        super().privilegedStartService()
        if self.at_start:
            self._listen()

    def startService(self):
        super().startService()
        if not self.at_start:
            self._listen()

    def _listen(self) -> None:
        self.factory = self.make_factory()
        d = self.endpoint.listen(self.factory)
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
            accept_with_backoff(result, self.reactor)
            if self.shared:
                accept_one_per_turn(result)
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
        d: Deferred = Deferred()
        if self._outcome is None:
            self._waiting.append(d)
        else:
            self._fire(d)
        return d

    def stop_listening(self) -> Deferred:
        """Accept no new connection (the open ones are served on)."""
        if self.port is None or not self.port.connected:
            return succeed(None)
        return maybeDeferred(self.port.stopListening)

    def connections(self) -> list:
        """The open connections (``TLSMemoryBIOFactory`` is a ``WrappingFactory``: it
        tracks them)."""
        return list(getattr(self.factory, "protocols", ()))

    def in_flight(self) -> int:
        """The requests in flight on every connection (watches included)."""
        return sum(_requests(protocol) for protocol in self.connections())

    def drain(self, clock, grace: float, settled: Optional[Callable[[], bool]] = None
              ) -> Deferred:
        """
        Close each connection once it has no request in flight, until ``settled()`` is
        true or ``grace`` seconds have passed.  Without ``settled``: until every
        connection is closed, aborting those still busy when the grace period ends.
        Stop listening first, or new connections keep it going.
        """
        deadline = clock.seconds() + grace
        closing: set = set()
        finished = settled or (lambda: not self.connections())

        def look():
            expired = clock.seconds() >= deadline
            for protocol in self.connections():
                if protocol not in closing and not _requests(protocol):
                    closing.add(protocol)
                    _close(protocol)
                elif expired and settled is None:
                    protocol.transport.abortConnection()
            if finished() or expired:
                loop.stop()

        loop = LoopingCall(look)
        loop.clock = clock
        return loop.start(DRAIN_POLL).addCallback(lambda _: None)

    def stopService(self):
        """Stop listening, then close the idle connections and abort the busy ones."""
        super().stopService()
        return self.stop_listening().addCallback(lambda _: self.drain(self.reactor, 0))


def _channel(protocol):
    """
    The HTTP channel under TLS ``protocol``; twisted.web's protocol that chooses between
    HTTP/1.1 and HTTP/2 by ALPN holds the chosen one as ``_channel``.
    """
    channel = protocol.wrappedProtocol
    return getattr(channel, "_channel", channel)


def _close(protocol) -> None:
    """
    Close an idle connection: through HTTP/1.1's channel, which unregisters itself as the
    TLS connection's producer (without which TLS would not send its close_notify; HTTP/2's
    connection has no such method), then TCP once that is written, without waiting for
    the client's close_notify (as Go's server closes).
    """
    getattr(_channel(protocol), "loseConnection", protocol.loseConnection)()
    protocol.transport.loseConnection()


def _requests(protocol) -> int:
    """
    The requests in flight on the HTTP connection under TLS ``protocol``: HTTP/1.1's
    channel keeps its unanswered requests in ``requests`` (from the request line on),
    HTTP/2's its open ``streams``.
    """
    channel = _channel(protocol)
    return len(getattr(channel, "requests", None) or getattr(channel, "streams", None) or ())
