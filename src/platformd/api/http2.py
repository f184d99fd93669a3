"""
HTTP/2 next to HTTP/1.1 on the one TLS listener, chosen by ALPN (``tlscontext``), as
kube-apiserver serves both.

twisted.web already speaks HTTP/2 (``twisted.web._http2.H2Connection`` over the ``h2``
package): its ``_GenericHTTPChannelProtocol`` starts as HTTP/1.1 and becomes an
``H2Connection`` when the handshake picked ``h2``.  ``APIProtocol`` is that wrapper with
these changes:

* the switch builds ``APIH2Connection`` on the site's clock (Twisted's builds one on
  the global reactor), and first stops the HTTP/1.1 channel's deadlines (``site.py``);
* the TLS transport's ``handshakeCompleted`` reaches the HTTP/1.1 channel (the header
  deadline starts there), which Twisted's proxy does not forward;
* ``APIH2Connection``'s idle timeout is Go's: 90 s *without any stream*, ``GOAWAY``
  then.  Twisted's counts silence even while streams are open, which would cut a quiet
  watch (a watch client sends nothing while no event comes);
* a request with a body is served when its headers are in, its stream paused: what the
  client sends is held in the stream without reopening its flow-control window (at most
  64 KiB, which the connection's window also bounds for all its streams together) until
  the handler lets the body in (``request.py``); ``Expect: 100-continue`` is answered
  then, not at the headers.  A stream answered before its body ended is reset with
  ``NO_ERROR`` after the answer, as Go's server does (RFC 9113 8.1: the client stops
  sending), and what it held is given back to the connection's window; so is, at once,
  whatever of its body still arrives after the reset, as Go's server returns a closed
  stream's DATA (``h2`` returns it only once half a window's worth has been processed,
  which could leave the client without window for its next request);
* an answer with ``Connection: close`` (a 401: ``filters.Authentication``) has the header
  removed, as HTTP/2 allows no connection header, and ends the connection with
  ``GOAWAY`` as Go's server does; once no stream is left rather than at once, since the
  ``h2`` package sends nothing more on a connection after its ``GOAWAY``.

What HTTP/2 gives for free, per Twisted's ``H2Connection``: each stream keeps to its own
flow-control window (a client not reading one stream blocks only that stream, whose
producer — a watch — is paused; the others keep going), at most 100 concurrent streams
(``h2``'s default, upstream's too: ``http2-max-streams-per-connection`` 0 means 100),
and a ``GOAWAY`` on a flood of stream resets (CVE-2023-44487).
"""

from __future__ import annotations

from typing import Any

from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError, StreamClosedError
from twisted.internet.interfaces import IHandshakeListener
from twisted.web import http
from twisted.web._http2 import H2Connection, H2Stream
from zope.interface import implementer


class APIH2Connection(H2Connection):
    """Twisted's HTTP/2 connection with Go's idle timeout (see module docstring)."""

    #: An answer said ``Connection: close``: ``GOAWAY`` once no stream is left.
    _closing = False

    def __init__(self, reactor, idle: float):
        super().__init__(reactor)
        self.idle = idle
        self.timeOut: Any = idle

    def _requestReceived(self, event):
        super()._requestReceived(event)
        self.setTimeout(None)
        if event.stream_ended is None:  # a body follows
            stream = self.streams[event.stream_id]
            stream.pauseProducing()
            stream._request.serve_before_body(stream.command, stream.path, b"HTTP/2")

    def _send100Continue(self, streamID):
        """Not at the headers: when the body is let in (``let_body_in``)."""

    def let_body_in(self, stream: H2Stream) -> None:
        """The handler reads ``stream``'s body: 100 Continue if asked for, and read on."""
        expect = stream._request.requestHeaders.getRawHeaders(b"expect")
        if expect and expect[0].lower() == b"100-continue":
            super()._send100Continue(stream.streamID)
        stream.resumeProducing()

    def writeHeaders(self, version, code, reason, headers, streamID):
        connection = [value.lower() for name, value in headers if name.lower() == b"connection"]
        if connection:
            self._closing = self._closing or b"close" in connection
            headers = [(name, value) for name, value in headers
                       if name.lower() != b"connection"]
        super().writeHeaders(version, code, reason, headers, streamID)

    def _requestDone(self, streamID):
        stream = self.streams[streamID]
        super()._requestDone(streamID)
        if stream._request.body_pending:
            try:
                self.conn.reset_stream(streamID, ErrorCodes.NO_ERROR)
            except StreamClosedError:
                pass  # the client reset it
            stream.resumeProducing()  # drops what it held, opening the window again
        if self.streams:
            return
        if self._closing:
            self.loseConnection()
        else:
            self.setTimeout(self.idle)

    def dataReceived(self, data):
        super().dataReceived(data)
        self._return_window()

    def _return_window(self) -> None:
        """
        Give the connection's window back for every byte ``h2`` counts as processed but
        has not yet returned: DATA of a stream reset after an early answer (h2 acknowledges
        it on arrival and batches the update; Go's server returns it at once), and the
        acknowledged data of live streams (returned sooner than h2's batching would).
        Data a paused stream holds is not processed yet, so its bound stays.
        """
        # h2's window manager (bounded with Twisted's http2 extra; tests/test_private_parts.py).
        manager = self.conn._inbound_flow_control_window_manager
        pending = manager._bytes_processed
        if not pending or self.transport is None:
            return
        try:
            self.conn.increment_flow_control_window(pending)
        except ProtocolError:
            return  # the connection is closing: no window to give
        manager._bytes_processed = 0
        self.transport.write(self.conn.data_to_send())

    def loseConnection(self) -> None:
        """
        Close as ``HTTPChannel.loseConnection`` does (the graceful shutdown closes idle
        connections through it, ``listening.py``): ``GOAWAY`` first, then stop being the
        TLS connection's producer, without which TLS would not send its close_notify.
        """
        transport: Any = self.transport  # the TLS transport: a producer's consumer
        if transport is None or transport.disconnecting:
            return
        self.conn.close_connection()
        transport.write(self.conn.data_to_send())
        transport.unregisterProducer()
        transport.loseConnection()


@implementer(IHandshakeListener)
class APIProtocol(http._GenericHTTPChannelProtocol):
    """HTTP/1.1, or HTTP/2 when ALPN chose ``h2`` (see module docstring)."""

    def handshakeCompleted(self):
        listener = IHandshakeListener(self._channel, None)
        if listener is not None:
            listener.handshakeCompleted()

    def dataReceived(self, data):
        if (self._negotiatedProtocol is None
                and getattr(self._channel.transport, "negotiatedProtocol", None) == b"h2"):
            self._become_h2()
        return super().dataReceived(data)

    def _become_h2(self) -> None:
        http1: Any = self._channel
        site: Any = self._site
        http1.stop_deadlines()
        network = http1._networkProducer
        network.unregisterProducer()
        h2: Any = APIH2Connection(site.reactor, site.timeouts.idle)
        h2.requestFactory = self._requestFactory
        h2.site = site
        h2.factory = self._factory
        h2.callLater = self._callLater
        self._channel = h2
        self._negotiatedProtocol = b"h2"  # type: ignore[assignment]
        h2.makeConnection(http1.transport)
        network.registerProducer(h2, True)


def let_body_in(channel) -> None:
    """Have a request's ``channel`` (HTTP/1.1's, or an HTTP/2 stream) read its body on."""
    if isinstance(channel, H2Stream):
        channel._conn.let_body_in(channel)
    else:
        channel.let_body_in()
