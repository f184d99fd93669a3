"""
The TLS transport of the HTTPS listener.

Twisted's server-side TLS transport (``BufferingTLSTransport``) costs two reactor turns
per write, which watch fan-out — one change written to hundreds of connections in one
turn — pays hundreds of times over:

1. it gathers the small writes of a turn and encrypts them together on the next one,
   each connection scheduling its own ``callLater(0)`` flush.  Good for a response
   written as headers then a small body (one TLS record, not two); for a watch stream,
   whose every write is already a whole event, ``write_now`` skips it (anything still
   gathered is flushed first, so order is kept).  A large write (a list body) skips it
   too: gathering would join it with the headers, copying the whole body once more, and
   those big short-lived copies are what made LIST throughput swing between ~400 and
   ~1,000 a second (glibc's malloc handing them out as fresh, page-faulting memory);
2. the TCP transport never sends at once: it buffers, registers the socket with epoll,
   sends when the next poll says it is writable, and unregisters it.  ``_flushSendBIO``
   here sends the encrypted bytes at once when nothing is queued before them and queues
   only what the kernel does not take.

Together these took about 40 % of the reactor's time off a fan-out of 25,000 events a
second (``docs/performance.md``).  ``write_now``, and the gatherer's flush at the turn's
end, then seal a write of up to four records (``SEAL_AT_ONCE``: a watch stream's events of
one turn, ``WatchStream.offer_many``) with OpenSSL directly (``SSL_write`` a record at a
time, ``BIO_read`` into one buffer shared by the reactor thread, one ``send`` from it), skipping pyOpenSSL's checks, its error lookup after every
call, a fresh 32 KiB buffer per read and Twisted's record loop: 2.2 µs a record against
4.6 µs, and 10-25 % less server CPU in a fan-out; anything unusual (a refused write, a
larger one) takes Twisted's own way.  Both lean on Twisted internals (the aggregator and the
TCP transport's send buffer), which the end-to-end tests exercise on every run:
``BufferingTLSTransport``'s ``_aggregator`` (its ``write``, ``flush`` and ``_write``) and
its instance attribute ``write``,
``TLSMemoryBIOProtocol``'s ``_write``, ``_flushSendBIO``, ``_flushReceiveBIO``,
``_producer``, ``_tlsConnection``, ``_handshakeDone``, ``_appSendBuffer``,
``_lostTLSConnection`` and ``_aborted``, and ``tcp.Connection``'s
``_writeDisconnected``, ``_tempDataLen`` and ``dataBuffer``; for HTTP/2,
``twisted.web._http2.H2Stream`` and its ``_conn``; of pyOpenSSL, its OpenSSL binding
(``OpenSSL._util``'s ``ffi`` and ``lib``) and a ``Connection``'s ``_ssl``,
``_from_ssl`` and ``_into_ssl``.  Received records are opened the same way
(``dataReceived``: ``BIO_write``, ``SSL_read`` into one buffer, no exception per read).
``tests/test_private_parts.py`` checks each by name and fails naming the one a Twisted
release dropped; since any release may change them (Twisted's versions are
dates, not API promises), ``setup.cfg`` bounds Twisted to the releases checked.
"""

from __future__ import annotations

from OpenSSL._util import ffi as _ffi, lib as _lib
from twisted.internet import tcp
from twisted.protocols.policies import ProtocolWrapper
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOProtocol
from twisted.web._http2 import H2Stream


#: Writes at least this large are encrypted at once instead of gathered (Twisted's
#: aggregator flushes at 64 KiB anyway).
DIRECT_WRITE = 64 * 1024

#: The most plaintext one TLS record carries (RFC 8446 5.1), and the most ciphertext it
#: becomes (header, padding and tag included: 5.2 bounds the record at 2^14 + 256).
RECORD = 2**14
SEALED = 5 + RECORD + 256

#: The most plaintext ``_seal`` seals with OpenSSL directly, in records of ``RECORD``
#: bytes sent together: several watch events written together (``WatchStream.offer_many``).
SEAL_AT_ONCE = 4 * RECORD
#: What those records become at most.
SEALED_AT_ONCE = 4 * SEALED

#: Where ``write_now`` and ``_flushSendBIO`` read sealed records into: one for the
#: reactor thread, the only thread that writes to connections.
_sealed = _ffi.new("char[]", SEALED_AT_ONCE)

#: Where ``dataReceived`` reads a record's plaintext into, copied out before it goes up.
_opened = _ffi.new("char[]", RECORD)


class PlatformTLSTransport(BufferingTLSTransport):
    """
    ``BufferingTLSTransport`` with an unbuffered ``write_now``, large writes unbuffered,
    and eager sends.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # What the turn's end flushes is sealed as ``write_now`` seals (the gatherer
        # wrote through pyOpenSSL's ``send`` and Twisted's record loop).
        self._aggregator._write = self._write_gathered  # type: ignore[union-attr]
        gather, now = self._aggregator.write, self.write_now

        def write(data: bytes) -> None:
            if len(data) >= DIRECT_WRITE:
                now(data)
            else:
                gather(data)

        # An instance attribute, as the base class sets it (and resets it on close); Twisted
        # declares ``write`` a method though its own __init__ assigns it.
        self.write = write  # type: ignore[method-assign]

    def makeConnection(self, transport) -> None:
        """
        Turn Nagle's algorithm off on the connection, as Go (so upstream) does on every
        TCP connection: a watch event written while the previous one is unacknowledged
        would otherwise wait for that acknowledgement, which a client that only reads
        may delay by up to 40 ms.  Writes here are already whole events and responses.
        """
        no_delay = getattr(transport, "setTcpNoDelay", None)
        if no_delay is not None:
            no_delay(True)
        super().makeConnection(transport)

    def writeSequence(self, sequence) -> None:
        """As ``write`` (the base class hands any joined sequence to the gatherer)."""
        self.write(b"".join(sequence))

    def write_now(self, data: bytes) -> None:
        """Encrypt and send ``data`` now, after whatever earlier writes are gathered."""
        if self.disconnecting and self._producer is None:
            return
        self._aggregator.flush()
        self._seal(data)

    def _write_gathered(self, data: bytes) -> None:
        """Where the gatherer's flush writes (``TLSMemoryBIOProtocol.write``'s rule)."""
        if self.disconnecting and self._producer is None:
            return
        self._seal(data)

    def _seal(self, data: bytes) -> None:
        """
        Encrypt and send ``data``: up to ``SEAL_AT_ONCE`` bytes with OpenSSL directly, in
        records of at most ``RECORD`` bytes, sent with one ``send``.
        """
        size = len(data)
        if 0 < size <= SEAL_AT_ONCE and type(data) is bytes and not self._lostTLSConnection:
            ssl = self._tlsConnection._ssl
            # pyOpenSSL enables partial writes, with which SSL_write returns after each
            # record it writes: so it is given one record's bytes at a time, and what it
            # did not take (the peer renegotiating, a failed connection: OpenSSL refuses,
            # ``written`` <= 0) is left to Twisted's loop below, which writes it again as
            # OpenSSL asks and reports any failure.
            if size <= RECORD:
                done = max(_lib.SSL_write(ssl, data, size), 0)
            else:
                whole = _ffi.from_buffer(data)
                done = 0
                while done < size:
                    written = _lib.SSL_write(ssl, whole + done, min(RECORD, size - done))
                    if written <= 0:
                        break
                    done += written
            if done:
                self._flushSendBIO()  # the records, and anything OpenSSL queued beside them
                if done == size:
                    return
                data = data[done:]
            _lib.ERR_clear_error()  # the retry below reports the failure once
        TLSMemoryBIOProtocol._write(self, data)

    def dataReceived(self, data: bytes) -> None:
        """
        Open the records ``data`` completes and pass their plaintext up, with OpenSSL
        directly once the handshake is done: the bytes into the connection's memory BIO,
        ``SSL_read`` into one buffer until OpenSSL wants more, then whatever it queued to
        send (a ticket, an alert) sent.  pyOpenSSL's ``recv`` costs a fresh 32 KiB buffer
        per call, checks of its callbacks and an error lookup, and every read ends in a
        raised ``WantReadError``: ~6 µs a record against ~2 µs here
        (``docs/performance.md``).  Anything else than wanting more bytes (the peer's
        close_notify, a failure) is left to Twisted's loop, which reads again, gets the
        same answer from OpenSSL and handles it as it always has; so is the handshake.
        """
        tls = self._tlsConnection
        if (not self._handshakeDone or self._appSendBuffer or self._lostTLSConnection
                or type(data) is not bytes
                or _lib.BIO_write(tls._into_ssl, data, len(data)) != len(data)):
            TLSMemoryBIOProtocol.dataReceived(self, data)
            return
        ssl = tls._ssl
        while not self._lostTLSConnection:
            opened = _lib.SSL_read(ssl, _opened, RECORD)
            if opened > 0:
                if not self._aborted:
                    ProtocolWrapper.dataReceived(self, _ffi.buffer(_opened, opened)[:])
            elif _lib.SSL_get_error(ssl, opened) == _lib.SSL_ERROR_WANT_READ:
                break
            else:
                TLSMemoryBIOProtocol._flushReceiveBIO(self)
                return
        self._flushSendBIO()

    def _flushSendBIO(self) -> None:
        """Send what OpenSSL has sealed, if anything (read into ``_sealed``)."""
        bio = self._tlsConnection._from_ssl
        sealed = _lib.BIO_read(bio, _sealed, SEALED_AT_ONCE)
        while sealed > 0:
            send_now(self.transport, _ffi.buffer(_sealed, sealed))
            if sealed < SEALED_AT_ONCE:  # a read short of the buffer emptied the BIO
                break
            sealed = _lib.BIO_read(bio, _sealed, SEALED_AT_ONCE)


def send_now(transport, data) -> None:
    """
    Send ``data`` (bytes, or a buffer only valid until this returns) on ``transport``
    without waiting for a reactor turn when the socket has nothing queued (so order is
    kept); what the kernel does not take, and anything on a transport that is not a live
    TCP connection, goes the usual buffered way (as bytes), which also reports a failed
    send as a lost connection.
    """
    if (isinstance(transport, tcp.Connection) and transport.connected
            and not transport.disconnecting and not transport._writeDisconnected
            and not transport._tempDataLen
            and not transport.dataBuffer):
        sent: object
        try:
            sent = transport.socket.send(data)  # Python retries an interrupted send itself
        except OSError:
            sent = transport.writeSomeData(data)  # again, as Twisted reads the failure
        if sent == len(data):
            return
        if isinstance(sent, int) and sent > 0:
            data = data[sent:]
    transport.write(bytes(data))


def immediate_writer(channel):
    """
    The fastest way to send whole pieces of a response on ``channel`` (a request's):
    an HTTP/1.1 channel's ``write_now`` on the TLS listener's transport (plain
    ``write`` on any other, tests over plain TCP); an HTTP/2 stream's own ``write``,
    which frames the bytes and keeps to the stream's flow-control window.
    """
    if isinstance(channel, H2Stream):
        return channel.write
    transport = channel.transport
    return getattr(transport, "write_now", transport.write)


def release_idle_buffers(channel) -> None:
    """
    Let the TLS connection a request came on give its record buffers back while idle
    (OpenSSL's ``SSL_MODE_RELEASE_BUFFERS``: ~34 KiB a connection, taken again for its
    next record).  For a watch, whose connection idles between events: the connections
    of other requests keep theirs, which their next request would take again at once.
    Nothing on another transport.
    """
    connection = getattr(connection_transport(channel), "_tlsConnection", None)
    ssl = getattr(connection, "_ssl", None)
    if ssl is not None:
        _lib.SSL_set_mode(ssl, _lib.SSL_MODE_RELEASE_BUFFERS)


def connection_transport(channel):
    """
    The transport of the connection a request came on (its TLS transport): an
    HTTP/1.1 channel's own, an HTTP/2 stream's connection's.  What is per connection (the
    client certificate) is read from it.
    """
    if isinstance(channel, H2Stream):
        return channel._conn.transport
    return channel.transport


def abort_stream(channel) -> None:
    """
    End a response that cannot be completed: HTTP/1.1 closes the connection (the only
    way to tell the client), HTTP/2 resets just that stream (``RST_STREAM``).
    """
    if isinstance(channel, H2Stream):
        channel.abortConnection()
    elif channel.transport is not None:
        channel.transport.abortConnection()
