"""
A real HTTP CONNECT proxy for tests (Twisted, on loopback TCP, TLS or a UNIX socket).

It answers ``CONNECT host:port`` by connecting to ``hosts.get(host, host):port`` and then
relays bytes both ways; it records each request's head (``heads``) and, over TLS, the
client certificate's identity (``identities``).  ``refuse`` makes it answer every
CONNECT with that status line instead.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory, Protocol

from platformd.edge.tlscontext import peer_identity


class _Relay(Protocol):
    def __init__(self, peer: "_ProxyProtocol"):
        self.peer = peer

    def dataReceived(self, data):
        self.peer.transport.write(data)

    def connectionLost(self, reason=None):
        self.peer.transport.loseConnection()


class _ProxyProtocol(Protocol):
    def __init__(self, proxy: "ConnectProxy"):
        self.proxy = proxy
        self.head = b""
        self.relay = None

    def dataReceived(self, data):
        if self.relay is not None:
            self.relay.transport.write(data)
            return
        self.head += data
        if b"\r\n\r\n" not in self.head:
            return
        head, _, _ = self.head.partition(b"\r\n\r\n")
        self.proxy.heads.append(head.decode("latin-1"))
        if self.proxy.tls:
            self.proxy.identities.append(peer_identity(self.transport))
        if self.proxy.refuse:
            self.transport.write(self.proxy.refuse + b"\r\n\r\n")
            self.transport.loseConnection()
            return
        method, target, _ = head.split(b"\r\n")[0].decode("latin-1").split(" ", 2)
        host, _, port = target.rpartition(":")
        host = self.proxy.hosts.get(host.strip("[]"), host.strip("[]"))
        endpoint = TCP4ClientEndpoint(reactor, host, int(port))
        endpoint.connect(Factory.forProtocol(lambda: _Relay(self))).addCallbacks(
            self._connected, self._failed)

    def _connected(self, relay):
        self.relay = relay
        self.transport.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

    def _failed(self, failure):
        self.transport.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
        self.transport.loseConnection()

    def connectionLost(self, reason=None):
        if self.relay is not None:
            self.relay.transport.loseConnection()


class ConnectProxy(Factory):
    def __init__(self, hosts=None, tls: bool = False):
        self.hosts = dict(hosts or {})
        self.tls = tls
        self.heads: list = []
        self.identities: list = []
        self.refuse = b""

    def buildProtocol(self, addr):
        return _ProxyProtocol(self)
