"""
An HTTP CONNECT tunnel as a Twisted client endpoint: upstream's ``tunnelHTTPConnect``.

``ConnectTunnel(proxy, address, proxy_name).connect(factory)`` connects to the proxy
through ``proxy`` (an endpoint: TCP, TLS over TCP, or a UNIX socket), sends exactly what
upstream sends — ``CONNECT <host:port> HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n`` — and
reads the proxy's answer.  On ``200`` the connection is handed to ``factory``'s protocol
as if it had connected straight to ``address`` (a TLS endpoint wrapped around this one
then speaks TLS to the destination through the tunnel); the endpoint's Deferred fires
with that protocol.  Any other answer, a closed connection or bytes sent after the
answer's head (the destination may not speak first: TLS clients do) fail the connect
with upstream's words.  The answer's head is limited to 64 KiB.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

MAX_HEAD = 65536


class TunnelError(Exception):
    """The proxy refused or broke the tunnel; ``str`` is upstream's message."""


@implementer(IStreamClientEndpoint)
class ConnectTunnel:
    def __init__(self, proxy: IStreamClientEndpoint, address: str, proxy_name: str):
        #: The endpoint of the proxy itself.
        self.proxy = proxy
        #: ``host:port`` the tunnel is asked for.
        self.address = address
        #: How errors name the proxy (its ``host:port`` or socket path).
        self.proxy_name = proxy_name

    def connect(self, factory):
        opened: Deferred = Deferred()
        connecting = self.proxy.connect(_TunnelFactory(self, factory, opened))

        def proxy_failed(failure):
            if not opened.called:
                opened.errback(TunnelError(
                    f'dialing proxy "{self.proxy_name}" failed: {failure.getErrorMessage()}'))

        connecting.addErrback(proxy_failed)
        return opened


class _TunnelFactory(Factory):
    def __init__(self, tunnel: ConnectTunnel, factory, opened: Deferred):
        self.tunnel = tunnel
        self.factory = factory
        self.opened = opened

    def buildProtocol(self, addr):
        return _TunnelProtocol(self)


class _TunnelProtocol(Protocol):
    """Speaks CONNECT, then relays the connection to the wrapped protocol."""

    def __init__(self, owner: _TunnelFactory):
        self.owner = owner
        self.head = b""
        self.inner: Any = None
        self.connection: Any = None

    def connectionMade(self):
        self.connection = self.transport
        address = self.owner.tunnel.address.encode("ascii")
        self.connection.write(b"CONNECT " + address + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

    def dataReceived(self, data: bytes):
        if self.inner is not None:
            self.inner.dataReceived(data)
            return
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            if len(self.head) > MAX_HEAD:
                self._fail(self._reading("response head too long"))
            return
        status_line = self.head.split(b"\r\n", 1)[0].decode("latin-1")
        rest = self.head[end + 4:]
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            self._fail(self._reading(f"malformed HTTP response {status_line!r}"))
            return
        code = int(parts[1])
        if code != 200:
            tunnel = self.owner.tunnel
            self._fail(f"proxy error from {tunnel.proxy_name} while dialing {tunnel.address}, "
                       f"code {code}: {' '.join(parts[1:])}")
            return
        if rest:
            self._fail(f"unexpected {len(rest)} bytes of buffered data from CONNECT proxy "
                       f'"{self.owner.tunnel.proxy_name}"')
            return
        self.inner = self.owner.factory.buildProtocol(self.connection.getPeer())
        if self.inner is None:
            self.connection.loseConnection()
            self.owner.opened.errback(TunnelError("the connection was refused by its factory"))
            return
        self.inner.makeConnection(self.connection)
        self.owner.opened.callback(self.inner)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self.inner is not None:
            self.inner.connectionLost(reason)
        elif not self.owner.opened.called:
            self._fail(self._reading("EOF"))

    def _reading(self, why: str) -> str:
        tunnel = self.owner.tunnel
        return (f"reading HTTP response from CONNECT to {tunnel.address} via proxy "
                f"{tunnel.proxy_name} failed: {why}")

    def _fail(self, message: str) -> None:
        if not self.owner.opened.called:
            self.owner.opened.errback(TunnelError(message))
        self.connection.loseConnection()
