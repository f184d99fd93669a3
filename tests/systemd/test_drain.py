"""
ListenerService.drain on a real in-process server over TLS: an idle connection is closed
at once, a connection with a request in flight only when the grace period ends.
"""

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.endpoints import SSL4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Protocol
from twisted.internet.ssl import CertificateOptions
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from tests.e2e.harness import start_server


class Client(Protocol):
    def __init__(self, data: bytes):
        self.data = data
        self.lost: Deferred = Deferred()

    def connectionMade(self):
        if self.data:
            self.transport.write(self.data)

    def connectionLost(self, reason):
        self.lost.callback(reactor.seconds())


class DrainTests(TestCase):
    timeout = 30

    @inlineCallbacks
    def test_idle_closed_at_once_busy_at_the_end_of_grace(self):
        server = yield start_server(self)
        endpoint = SSL4ClientEndpoint(reactor, "127.0.0.1", server.port_number,
                                      CertificateOptions(verify=False))
        idle = yield connectProtocol(endpoint, Client(b""))
        # The request line and half the headers: a request in flight.
        busy = yield connectProtocol(endpoint, Client(b"GET /api/v1/namespaces HTTP/1.1\r\n"
                                                      b"Host: 127.0.0.1\r\n"))
        while len(server.listener.connections()) < 2 or server.listener.in_flight() < 1:
            yield deferLater(reactor, 0.01)  # the server has read the request line
        self.assertEqual(server.listener.in_flight(), 1)
        yield server.listener.stop_listening()
        started = reactor.seconds()
        drained = server.listener.drain(reactor, 0.5)
        idle_lost = yield idle.lost
        self.assertLess(idle_lost - started, 0.4)
        self.assertNoResult(busy.lost)
        busy_lost = yield busy.lost
        self.assertGreaterEqual(busy_lost - started, 0.5)
        yield drained
        self.assertEqual(server.listener.connections(), [])

