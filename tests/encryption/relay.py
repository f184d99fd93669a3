"""
A UNIX-socket relay in front of a test's KMS plugin, so that the test sees what the
plugin's side sees of platformd's connections: when they open and when they close (a
grpcio server tells its servicer nothing of its connections).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.protocols import portforward


class _Client(portforward.ProxyClient):
    """The relay's connection to the plugin."""

    def connectionLost(self, reason):
        server = self.peer  # the proxy forgets it
        super().connectionLost(reason)
        server.plugin_lost.callback(None)


class _Server(portforward.ProxyServer):
    """One connection of platformd's, forwarded to the plugin's socket."""

    def connectionMade(self):
        self.transport.pauseProducing()  # nothing read before the plugin's end is open
        self.lost: Deferred = Deferred()
        self.plugin_lost: Deferred = Deferred()
        client = portforward.ProxyClientFactory()
        client.protocol = _Client
        client.setServer(self)
        reactor.connectUNIX(self.factory.target, client)
        self.factory.connections.append(self)
        self.factory.ends += [self.lost, self.plugin_lost]

    def connectionLost(self, reason):
        super().connectionLost(reason)
        self.factory.connections.remove(self)
        self.factory.closed += 1
        self.lost.callback(None)


class Relay(portforward.ProxyFactory):
    """
    Connections to ``endpoint`` forwarded to the plugin at ``target`` (a socket path);
    ``connections`` are platformd's open ones, ``closed`` counts those it closed.
    """

    protocol = _Server

    def __init__(self, test, target: str):
        super().__init__(None, None)
        self.target = target
        self.connections: list = []
        self.closed = 0
        #: Each connection's two ends, fired once closed (the test's cleanup waits).
        self.ends: list = []
        directory = tempfile.mkdtemp(prefix="relay", dir="/tmp")  # short: UNIX socket path
        test.addCleanup(shutil.rmtree, directory, True)
        path = os.path.join(directory, "relay.sock")
        self._port = reactor.listenUNIX(path, self)
        test.addCleanup(self._stop)
        self.endpoint = f"unix://{path}"

    def next_close(self) -> Deferred:
        """Fires when the connection of platformd's open now closes (there is one)."""
        [connection] = self.connections
        return connection.lost

    def _stop(self) -> Deferred:
        """Stop listening and end the connections left, once they have ended."""
        for connection in list(self.connections):
            connection.transport.abortConnection()
        return gatherResults([self._port.stopListening(), *self.ends])
