"""
The API site's connection handling (api/site.py, api/request.py, timeouts.py): Go's
deadlines on a Clock — TLS handshake, request headers (fixed, not slid by trickled bytes),
idle keep-alive — the 3 MiB body limit refused as the body arrives, and a body held
unread until the handler lets it in (closed 0.5 s after an answer that did not read it);
then over real TLS on loopback, hundreds of half-open connections closed by the
deadlines.
"""

from __future__ import annotations

import json
import socket
from io import BytesIO
import ssl
import time

from twisted.internet import reactor
from twisted.internet.address import IPv4Address
from twisted.internet.defer import succeed
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import StringTransport
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from platformd.api.body import MAX_BODY
from platformd.api.site import make_site
from platformd.edge.listening import tls_factory
from platformd.files.pki import ensure_pki
from platformd.edge.timeouts import ConnectionTimeouts
from platformd.edge.tlscontext import server_tls_options

GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


class Echo(Resource):
    """Answers any request with the size of its body, let in as the API lets it in."""

    isLeaf = True

    def render(self, request):
        (request.receive_body() or succeed(None)).addCallback(self.answer, request)
        return NOT_DONE_YET

    @staticmethod
    def answer(_, request) -> None:
        body = b"%d" % len(request.content.read())
        request.setHeader(b"Content-Length", b"%d" % len(body))
        request.write(body)
        request.finish()


def connect(site):
    """A channel of ``site`` on a StringTransport (the TLS handshake done when told)."""
    channel = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 5000))
    transport = StringTransport()
    channel.makeConnection(transport)
    return channel, transport


class DeadlineTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.site = make_site(Echo(), reactor=self.clock)

    def closed(self, transport) -> bool:
        return transport.disconnecting

    def test_handshake(self):
        """No handshake within 32 s: the connection is aborted."""
        _, transport = connect(self.site)
        self.clock.advance(31.9)
        self.assertFalse(self.closed(transport))
        self.clock.advance(0.1)
        self.assertTrue(transport.disconnected)  # StringTransport: aborted

    def test_headers_by_a_fixed_deadline(self):
        """A request line and headers trickled in stay bound by 32 s from the handshake."""
        channel, transport = connect(self.site)
        self.clock.advance(20)
        channel.handshakeCompleted()
        channel.dataReceived(b"GET / HTTP/1.1\r\n")
        for _ in range(3):
            self.clock.advance(10)
            channel.dataReceived(b"X-Slow: 1\r\n")
            self.assertFalse(self.closed(transport))
        self.clock.advance(2)
        self.assertTrue(transport.disconnected)  # StringTransport: aborted

    def test_idle_keep_alive(self):
        """A kept-alive connection may wait 90 s for its next request; then headers are due
        within 32 s of its first byte; an unused one is closed politely."""
        channel, transport = connect(self.site)
        channel.handshakeCompleted()
        channel.dataReceived(GET)
        self.assertIn(b"200 OK", transport.value())
        self.clock.advance(89)
        channel.dataReceived(b"GET / HT")
        self.clock.advance(31)
        self.assertFalse(self.closed(transport))
        channel.dataReceived(b"TP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(transport.value().count(b"200 OK"), 2)
        self.clock.advance(89.9)
        self.assertFalse(self.closed(transport))
        self.clock.advance(0.1)
        self.assertTrue(transport.disconnecting)
        self.assertFalse(transport.disconnected)  # not aborted

    def test_long_handling_is_not_cut(self):
        """Once the headers are in, the body and the answer have no deadline (Go's
        ReadTimeout and WriteTimeout are 0)."""
        channel, transport = connect(self.site)
        channel.handshakeCompleted()
        channel.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")
        self.clock.advance(3600)
        self.assertFalse(self.closed(transport))
        channel.dataReceived(b"{}")
        self.assertIn(b"\r\n\r\n2", transport.value())

    def test_body_refused_from_content_length(self):
        """Content-Length over 3 MiB: upstream's 413 Status at once, connection closed."""
        channel, transport = connect(self.site)
        channel.handshakeCompleted()
        channel.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{"
                             % (MAX_BODY + 1))
        head, _, body = transport.value().partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 413 Request Entity Too Large"), head)
        self.assertEqual(json.loads(body), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Request entity too large: limit is 3145728",
            "reason": "RequestEntityTooLarge", "code": 413})
        self.assertTrue(transport.disconnecting)
        channel.dataReceived(b"x" * 65536)  # the rest is dropped
        self.assertEqual(transport.value().count(b"HTTP/1.1"), 1)

    def test_chunked_body_refused_past_the_limit(self):
        """A chunked body is counted as it comes; past 3 MiB it is refused, and no more
        than the limit (and a byte) was kept."""
        channel, transport = connect(self.site)
        channel.handshakeCompleted()
        channel.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(MAX_BODY // len(chunk)):
            channel.dataReceived(b"10000\r\n" + chunk + b"\r\n")
        self.assertEqual(transport.value(), b"")
        request = channel._channel.requests[-1]
        channel.dataReceived(b"10000\r\n" + chunk + b"\r\n")
        self.assertIn(b"413 Request Entity Too Large", transport.value())
        request.content.seek(0, 2)
        self.assertEqual(request.content.tell(), MAX_BODY + 1)
        channel.dataReceived(b"0\r\n\r\n")
        self.assertEqual(transport.value().count(b"HTTP/1.1"), 1)

    def test_body_at_the_limit_is_served(self):
        channel, transport = connect(self.site)
        channel.handshakeCompleted()
        channel.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                             % MAX_BODY + b"x" * MAX_BODY)
        self.assertTrue(transport.value().endswith(b"\r\n\r\n%d" % MAX_BODY))


class AddressTests(SynchronousTestCase):
    def test_addresses_asked_once_per_connection(self):
        """Each request has the connection's addresses; the transport is asked once."""
        seen = []

        class Addresses(Resource):
            isLeaf = True

            def render(self, request):
                seen.append((request.getHost(), request.getClientAddress()))
                return b"ok"

        asked = []

        class Counting(StringTransport):
            def getHost(self):
                asked.append("host")
                return super().getHost()

            def getPeer(self):
                asked.append("peer")
                return super().getPeer()

        channel = make_site(Addresses(), reactor=Clock()).buildProtocol(
            IPv4Address("TCP", "127.0.0.1", 5000))
        transport = Counting(hostAddress=IPv4Address("TCP", "10.0.0.1", 6443),
                             peerAddress=IPv4Address("TCP", "10.0.0.2", 40000))
        channel.makeConnection(transport)
        channel.dataReceived(GET + GET)
        self.assertEqual(transport.value().count(b"200 OK"), 2)
        self.assertEqual(seen, [(IPv4Address("TCP", "10.0.0.1", 6443),
                                 IPv4Address("TCP", "10.0.0.2", 40000))] * 2)
        self.assertEqual(sorted(asked), ["host", "peer"])


class Held(Resource):
    """Keeps each request, unanswered, for the test to let its body in or answer it."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.requests: list = []

    def render(self, request):
        self.requests.append(request)
        return NOT_DONE_YET


class BodyTests(SynchronousTestCase):
    """A request is served on its headers, its body held until the handler lets it in."""

    def setUp(self):
        self.clock = Clock()
        self.held = Held()
        self.site = make_site(self.held, reactor=self.clock)
        self.made: list = []
        self.site.getContentFile = lambda length: self.made.append(length) or BytesIO()
        self.channel, self.tls = connect(self.site)
        self.tcp = self.tls.transport = StringTransport()  # what TLS runs over
        self.channel.handshakeCompleted()

    def test_held_until_let_in(self):
        """No 100 Continue, no content file, nothing read (past 16 KiB the socket is no
        longer read) until ``receive_body``; then all of it, and the rest as it comes."""
        self.channel.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n"
                                  b"Expect: 100-continue\r\n\r\n" + b"a" * 17000)
        [request] = self.held.requests
        self.assertEqual((self.tls.value(), self.made, self.tls.producerState),
                         (b"", [], "paused"))
        arrived = request.receive_body()
        self.assertEqual((self.tls.value(), self.made, self.tls.producerState),
                         (b"HTTP/1.1 100 Continue\r\n\r\n", [20000], "producing"))
        self.assertNoResult(arrived)
        self.channel.dataReceived(b"b" * 3000)
        self.successResultOf(arrived)
        self.assertEqual(request.content.read(), b"a" * 17000 + b"b" * 3000)

    def test_answered_before_its_body(self):
        """Refused unread: Connection: close, what comes is dropped, TCP closed 0.5 s after
        (Go's rstAvoidanceDelay), aborted if the client still has not taken the answer 32 s
        later."""
        self.channel.dataReceived(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        [request] = self.held.requests
        request.setResponseCode(401)
        request.setHeader(b"Content-Length", b"0")
        request.finish()
        self.assertIn(b"\r\nConnection: close\r\n", self.tls.value())
        self.assertTrue(self.tls.disconnecting)  # TLS's close_notify
        self.channel.dataReceived(b"x" * 10 + GET)
        self.assertEqual(self.tls.value().count(b"HTTP/1.1"), 1)
        self.clock.advance(0.49)
        self.assertFalse(self.tcp.disconnecting)
        self.clock.advance(0.01)
        self.assertTrue(self.tcp.disconnecting)
        self.clock.advance(32)
        self.assertTrue(self.tls.disconnected)  # aborted
        self.assertEqual(self.made, [])


def half_open(port: int, ca: str, count: int) -> list:
    """
    Open ``count`` connections of three kinds — TCP only, TLS with nothing sent, TLS with
    half a request line — and wait for the server to close each; the seconds each took
    (None: still open after 10 s).  Blocking: run in a thread.
    """
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["http/1.1"])
    sockets = []
    for i in range(count):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        if i % 3:
            tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
            if i % 3 == 2:
                tls.sendall(b"GET /api/v1/namesp")
            sockets.append(tls)
        else:
            sockets.append(raw)
    started = time.monotonic()
    waited = []
    for s in sockets:
        try:
            data = s.recv(1024)
            waited.append(time.monotonic() - started if data == b"" else None)
        except (ConnectionResetError, ssl.SSLError, socket.timeout, OSError) as e:
            waited.append(None if isinstance(e, socket.timeout) else
                          time.monotonic() - started)
        finally:
            s.close()
    return waited


class HalfOpenConnectionsTests(TestCase):
    """Real TLS on loopback with the deadlines shortened to half a second."""

    timeout = 60

    def setUp(self):
        data = self.mktemp()
        self.paths = ensure_pki(data, [], [], "https://127.0.0.1:6443")
        tls = server_tls_options(self.paths.serving_cert, self.paths.serving_key,
                                 self.paths.client_ca)
        self.factory = tls_factory(tls, make_site(Echo(), ConnectionTimeouts(0.5, 0.5, 1.0)))
        self.port = reactor.listenTCP(0, self.factory, interface="127.0.0.1", backlog=512)
        self.addCleanup(self.port.stopListening)

    async def test_half_open_connections_are_closed(self):
        count = 300
        waited = await deferToThread(half_open, self.port.getHost().port,
                                     self.paths.ca_cert, count)
        self.assertEqual([w for w in waited if w is None], [])
        self.assertLess(max(waited), 5)
        for _ in range(100):  # the last aborts reach connectionLost a turn later
            if not self.factory.protocols:
                break
            await deferLater(reactor, 0.02)
        self.assertEqual(len(self.factory.protocols), 0)


class HTTP2DeadlineTests(SynchronousTestCase):
    """After ALPN chose h2: the HTTP/1.1 deadlines stop, and the connection is closed
    (GOAWAY) after 90 s without any stream — never while a stream is open."""

    def test_idle_only_without_streams(self):
        import h2.config
        import h2.connection
        import h2.events

        clock = Clock()
        channel, transport = connect(make_site(Echo(), reactor=clock))
        transport.negotiatedProtocol = b"h2"
        channel.handshakeCompleted()
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        channel.dataReceived(client.data_to_send())
        client.send_headers(1, [(":method", "POST"), (":path", "/"), (":scheme", "https"),
                                (":authority", "x")])
        channel.dataReceived(client.data_to_send())
        self.clock_advance(clock, 1000)  # a request still arriving: no deadline
        self.assertFalse(transport.disconnecting)
        client.send_data(1, b"abc", end_stream=True)
        channel.dataReceived(client.data_to_send())
        self.clock_advance(clock, 0)
        events = client.receive_data(transport.value())
        self.assertEqual(b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived)),
                         b"3")
        transport.clear()
        self.clock_advance(clock, 89.9)
        self.assertFalse(transport.disconnecting)
        self.clock_advance(clock, 0.1)
        self.assertTrue(transport.disconnecting)
        events = client.receive_data(transport.value())
        self.assertTrue(any(isinstance(e, h2.events.ConnectionTerminated) for e in events))

    @staticmethod
    def clock_advance(clock, seconds):
        """Advance, then run what HTTP/2's send loop scheduled for now."""
        clock.advance(seconds)
        for _ in range(10):
            clock.advance(0)

    def test_lose_connection_says_goaway(self):
        """The graceful shutdown's close of an idle HTTP/2 connection: GOAWAY, then
        the TLS connection is closed."""
        import h2.config
        import h2.connection
        import h2.events

        clock = Clock()
        channel, transport = connect(make_site(Echo(), reactor=clock))
        transport.negotiatedProtocol = b"h2"
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        channel.dataReceived(client.data_to_send())
        channel._channel.loseConnection()
        events = client.receive_data(transport.value())
        self.assertTrue(any(isinstance(e, h2.events.ConnectionTerminated) for e in events))
        self.assertTrue(transport.disconnecting)
