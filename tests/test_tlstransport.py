"""
Tests for platformd.edge.tlstransport over loopback TLS with the real reactor: bytes written
through the gathering ``write``, the immediate ``write_now`` and the eager socket send
arrive complete and in order, and a peer that stops reading still pushes back on a
producer.  ``TwistedInternalsTests`` names every private part of Twisted the module
relies on, so a Twisted that dropped one fails here, saying which.
"""

import socket
import ssl
import threading

from OpenSSL import SSL
from twisted.internet import reactor, tcp
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IHandshakeListener, IPushProducer
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.threads import deferToThread
from twisted.protocols.tls import (
    TLSMemoryBIOFactory,
    TLSMemoryBIOProtocol,
)
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from platformd.files.pki import ensure_pki
from platformd.edge.tlscontext import server_tls_options
from platformd.edge.tlstransport import (
    DIRECT_WRITE, RECORD, SEAL_AT_ONCE, PlatformTLSTransport, release_idle_buffers,
    send_now,
)


@implementer(IPushProducer)
class Flag:
    """A producer that remembers whether it was asked to pause."""

    def __init__(self):
        self.paused = self.ever_paused = False
        self.resumed = Deferred()

    def pauseProducing(self):
        self.paused = self.ever_paused = True

    def resumeProducing(self):
        self.paused = False
        if not self.resumed.called:
            self.resumed.callback(None)

    def stopProducing(self):
        pass


@implementer(IHandshakeListener)
class Writer(Protocol):
    """Runs ``script(transport)`` once connected; ``handshaken`` fires with the transport."""

    def __init__(self, script, handshaken):
        self.script, self.handshaken = script, handshaken
        self.lost = Deferred()

    def connectionLost(self, reason):
        self.lost.callback(reason.value)

    def connectionMade(self):
        self.script(self.transport)

    def handshakeCompleted(self):
        self.handshaken.callback(self.transport)


def read_all(port, ca_cert, start: threading.Event) -> bytes:
    """Connect, wait for ``start``, then read until the server closes (run in a thread)."""
    context = ssl.create_default_context(cafile=ca_cert)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            start.wait(20)
            pieces = []
            while True:
                try:
                    piece = tls.recv(1 << 20)
                except ssl.SSLZeroReturnError:
                    break
                if not piece:
                    break
                pieces.append(piece)
            return b"".join(pieces)


class PlatformTLSTransportTests(TestCase):
    timeout = 60

    def serve(self, script):
        """Listen with the HTTPS listener's stack: (port, Deferred of the handshaken transport)."""
        paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:6443")
        self.ca_cert = paths.ca_cert
        handshaken = Deferred()
        factory = TLSMemoryBIOFactory(
            server_tls_options(paths.serving_cert, paths.serving_key), False,
            Factory.forProtocol(lambda: Writer(script, handshaken)))
        factory.protocol = PlatformTLSTransport
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        return port.getHost().port, handshaken

    async def test_order_kept(self):
        """Gathered, immediate and large writes arrive whole and in the order made."""
        big = bytes(range(256)) * 24_000  # ~6 MB: more than one send takes
        parts = [(b"a" * 10, "write"), (b"b" * 10, "write_now"), (b"c" * 3, "write"),
                 (big, "write_now"), (b"d" * 5, "write"), (b"e", "write_now"),
                 (b"f" * 7, "write"), (big[:DIRECT_WRITE], "write"), (b"g", "write"),
                 ((b"h" * 9, big[:DIRECT_WRITE]), "writeSequence"), (b"i", "write"),
                 (big[:RECORD], "write_now"), (big[:RECORD + 1], "write_now"),
                 (bytearray(b"j" * 5), "write_now"), (b"k", "write_now")]

        def script(transport):
            for data, how in parts:
                getattr(transport, how)(data)
            transport.loseConnection()

        def joined(data):
            return b"".join(data) if isinstance(data, tuple) else bytes(data)

        port, _ = self.serve(script)
        start = threading.Event()
        start.set()
        received = await deferToThread(read_all, port, self.ca_cert, start)
        self.assertEqual(received, b"".join(joined(data) for data, _ in parts))

    async def test_idle_buffers_released(self):
        """
        ``release_idle_buffers`` (a watch's connection) sets OpenSSL's
        ``SSL_MODE_RELEASE_BUFFERS`` on that connection only; what it sends afterwards
        still arrives whole and in order.  Nothing on a transport without TLS.
        """
        from OpenSSL._util import lib
        modes = []
        big = bytes(range(256)) * 200
        parts = [b"a" * 10, big, b"b", big[:RECORD], b"c" * 3]

        class Channel:
            def __init__(self, transport):
                self.transport = transport

        def script(transport):
            ssl_ = transport._tlsConnection._ssl
            modes.append(lib.SSL_set_mode(ssl_, 0) & lib.SSL_MODE_RELEASE_BUFFERS)
            release_idle_buffers(Channel(transport))
            modes.append(lib.SSL_set_mode(ssl_, 0) & lib.SSL_MODE_RELEASE_BUFFERS)
            for data in parts:
                transport.write_now(data)
            transport.write(b"d")
            transport.loseConnection()

        port, _ = self.serve(script)
        start = threading.Event()
        start.set()
        received = await deferToThread(read_all, port, self.ca_cert, start)
        self.assertEqual(received, b"".join(parts) + b"d")
        self.assertEqual(modes, [0, lib.SSL_MODE_RELEASE_BUFFERS])
        release_idle_buffers(Channel(object()))  # plain TCP (tests): nothing to do

    async def test_large_writes_not_gathered(self):
        """
        Small writes wait for the turn's end to be encrypted together; a large one is
        encrypted at once (after them), never copied into a joined buffer.
        """
        port, handshaken = self.serve(lambda transport: None)
        start = threading.Event()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        encrypted = []
        real_seal = PlatformTLSTransport._seal

        def spy(protocol, data):
            encrypted.append(data)
            return real_seal(protocol, data)

        self.patch(PlatformTLSTransport, "_seal", spy)
        body = b"b" * DIRECT_WRITE
        try:
            transport.write(b"headers")
            self.assertEqual(encrypted, [])
            transport.write(body)
            self.assertEqual(encrypted, [b"headers", body])
            self.assertIs(encrypted[1], body)
            transport.writeSequence([b"chunk head ", body])
            self.assertEqual(encrypted[2:], [b"chunk head " + body])
        finally:
            start.set()
            transport.loseConnection()
        self.assertEqual(await reading, b"headers" + body + b"chunk head " + body)

    async def test_no_nagle(self):
        """Every connection sends without Nagle's delay (TCP_NODELAY), as Go's servers."""
        port, handshaken = self.serve(lambda transport: None)
        start = threading.Event()
        start.set()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        handle = transport.transport.getHandle()
        no_delay = handle.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        transport.loseConnection()
        self.assertEqual(await reading, b"")
        self.assertEqual(no_delay, 1)

    async def test_record_sealed_directly(self):
        """
        ``write_now`` of up to ``SEAL_AT_ONCE`` bytes (four records) is sealed and sent
        without Twisted's record loop, in records of at most ``RECORD`` bytes; a larger
        write, or any other buffer than bytes, goes through it.
        """
        port, handshaken = self.serve(lambda transport: None)
        start = threading.Event()
        start.set()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        looped = []
        real_write = TLSMemoryBIOProtocol._write

        def spy(protocol, data):
            looped.append(len(data))
            return real_write(protocol, data)

        self.patch(TLSMemoryBIOProtocol, "_write", spy)
        writes = [b"a" * 900, b"b" * RECORD, b"c" * (RECORD + 1),
                  bytes(range(256)) * (SEAL_AT_ONCE // 256), b"e" * (SEAL_AT_ONCE + 1),
                  bytearray(b"d" * 10)]
        for data in writes:
            transport.write_now(data)
        transport.loseConnection()
        self.assertEqual(await reading, b"".join(bytes(data) for data in writes))
        self.assertEqual(looped, [SEAL_AT_ONCE + 1, 10])

    async def test_gathered_writes_sealed_directly(self):
        """What the turn's end flushes is sealed without Twisted's record loop."""
        port, handshaken = self.serve(lambda transport: None)
        start = threading.Event()
        start.set()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        looped = []
        real_write = TLSMemoryBIOProtocol._write

        def spy(protocol, data):
            looped.append(len(data))
            return real_write(protocol, data)

        self.patch(TLSMemoryBIOProtocol, "_write", spy)
        flushed = Deferred()
        transport.write(b"head;")
        transport.write(b"body")
        reactor.callLater(0, flushed.callback, None)  # after the gatherer's own
        await flushed
        transport.loseConnection()
        self.assertEqual(await reading, b"head;body")
        self.assertEqual(looped, [])

    async def test_records_opened_directly(self):
        """
        Once the handshake is done, received records are opened without pyOpenSSL's
        ``recv``: every byte the client sends arrives in order, one record or many per
        read; the client's close_notify, left to Twisted's loop, ends the connection
        cleanly.
        """
        received = []
        recvs = []
        real_recv = SSL.Connection.recv

        def spy(connection, size, *args):
            recvs.append(size)
            return real_recv(connection, size, *args)

        self.patch(SSL.Connection, "recv", spy)

        class Collect(Writer):
            def dataReceived(self, data):
                if not received:
                    recvs.clear()  # the handshake's reads were Twisted's own
                received.append(data)

            def handshakeCompleted(self):
                self.transport.write_now(b"ready")

        paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:6443")
        handshaken = Deferred()
        collector = Collect(lambda transport: None, handshaken)
        factory = TLSMemoryBIOFactory(
            server_tls_options(paths.serving_cert, paths.serving_key), False,
            Factory.forProtocol(lambda: collector))
        factory.protocol = PlatformTLSTransport
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        pieces = [b"a" * 10, bytes(range(256)) * 200, b"b", b"c" * RECORD, b"d" * 3]

        def send():
            context = ssl.create_default_context(cafile=paths.ca_cert)
            with socket.create_connection(("127.0.0.1", port.getHost().port), timeout=20) as raw:
                tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
                self.assertEqual(tls.recv(5), b"ready")
                for piece in pieces:
                    tls.sendall(piece)
                tls.unwrap()  # close_notify, then the server's

        await deferToThread(send)
        reason = await collector.lost
        self.assertEqual(b"".join(received), b"".join(pieces))
        self.assertEqual(type(reason).__name__, "ConnectionDone")
        self.assertEqual(len(recvs), 1)  # the close_notify's, through Twisted's loop

    async def test_refused_write_ends_connection(self):
        """
        A write OpenSSL refuses (here: after this side's close_notify) is left to
        Twisted's loop, which reports the TLS error and closes the connection.
        """
        port, handshaken = self.serve(lambda transport: None)
        start = threading.Event()
        start.set()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        transport.write_now(b"before")
        transport._tlsConnection.shutdown()
        transport._flushSendBIO()
        transport.write_now(b"after")
        reason = await transport.wrappedProtocol.lost
        self.assertEqual(str(reason), "[('SSL routines', '', 'protocol is shutdown')]")
        self.assertEqual(await reading, b"before")

    async def test_peer_not_reading_pauses_producer(self):
        """What the kernel does not take is queued, and the producer is paused until it drains."""
        producer = Flag()
        payload = b"x" * (24 * 1024 * 1024)  # more than loopback socket buffers hold

        def script(transport):
            transport.registerProducer(producer, True)

        port, handshaken = self.serve(script)
        start = threading.Event()
        reading = deferToThread(read_all, port, self.ca_cert, start)
        transport = await handshaken
        transport.write_now(payload)
        self.assertTrue(producer.paused)
        start.set()
        await producer.resumed
        transport.unregisterProducer()
        transport.loseConnection()
        received = await reading
        self.assertEqual(len(received), len(payload))
        self.assertTrue(producer.ever_paused)



class SendNowTests(TestCase):
    """``send_now`` on a real TCP transport over a socket pair, driven by hand."""

    def setUp(self):
        ours, self.peer = socket.socketpair()
        ours.setblocking(False)
        self.peer.setblocking(False)
        self.transport = tcp.Connection(ours, Protocol(), reactor)
        self.transport.connected = True
        self.addCleanup(self.close, ours)

    def close(self, ours):
        self.transport.stopWriting()
        ours.close()
        self.peer.close()

    def received(self) -> bytes:
        try:
            return self.peer.recv(1 << 16)
        except BlockingIOError:
            return b""

    def test_sends_at_once(self):
        """With nothing queued, the bytes reach the socket without a reactor turn."""
        send_now(self.transport, b"event")
        self.assertEqual(self.received(), b"event")

    def test_queues_behind_earlier_bytes(self):
        """Bytes already queued on the transport go first: nothing overtakes them."""
        self.transport.write(b"first,")
        send_now(self.transport, b"second")
        self.assertEqual(self.received(), b"")
        self.transport.doWrite()
        self.assertEqual(self.received(), b"first,second")

    def test_full_socket_queues_the_rest(self):
        """
        A send the kernel refuses (the socket's buffer full) leaves the bytes queued on
        the transport, in order, sent once the socket can take them.
        """
        ours = self.transport.socket
        filler = b"x" * 65536
        sent_before = 0
        while True:
            try:
                sent_before += ours.send(filler)
            except BlockingIOError:
                break
        send_now(self.transport, b"event")
        self.assertEqual(self.transport._tempDataLen, 5)  # queued, not sent
        received = b""
        while len(received) < sent_before + 5:
            chunk = self.received()
            if not chunk:
                self.transport.doWrite()
                continue
            received += chunk
        self.assertEqual(received, b"x" * sent_before + b"event")
