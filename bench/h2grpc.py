"""
The prototype of issue 28's target 4 that ``bench_etcd_calls.py`` measures: gRPC unary
calls over one HTTP/2 connection, made and completed on the reactor (``h2``), instead
of grpcio futures completed on grpcio's thread.  Not platformd's transport: measured,
it was not clearly cheaper (docs/etcd.md, "Why the unary calls stay grpcio's"), so the
client keeps grpcio.  Kept beside the benchmark so that the measurement can be made
again (a faster h2, a loaded machine that lets the figures settle).

A call is a HEADERS frame and the request as one length-prefixed message (gRPC's
"Length-Prefixed-Message": a compression flag, 0, and a 4-byte big-endian length), a
reply one such message then trailers with ``grpc-status`` and ``grpc-message``; an
error alone is "Trailers-Only" (one HEADERS frame ending the stream).  The ``h2``
library keeps the HTTP/2 state (flow control, stream states); this module turns its
events into each call's Deferred.  Failures are ``CallError``, a ``grpc.RpcError``
with grpcio's ``code()`` and ``details()`` (what platformd's client maps to
Statuses), and ``sent``: False when the call cannot have reached the server.

As integrated and tested against a real etcd (errors, messages too large either way,
a member killed or hung mid-call, TLS with client certificates, keepalive) on branch
``etcdh2`` at commit c895043 (``src/platformd/storage/etcd3/grpcwire.py``,
``member.py``).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Optional
from urllib.parse import unquote

import attrs
import grpc
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated, DataReceived, PingAckReceived, RemoteSettingsChanged,
    ResponseReceived, StreamEnded, StreamReset, TrailersReceived, WindowUpdated)
from h2.exceptions import ProtocolError, StreamClosedError
from h2.settings import SettingCodes
from hpack.hpack import encode_integer
from hpack.table import HeaderTable
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol

#: grpcio's codes by number (``grpc-status``).
_CODES = {code.value[0]: code for code in grpc.StatusCode}

#: Each stream's receive window, and what the connection's is raised by: a reply of
#: some megabytes (a page of a list) arrives without waiting for WINDOW_UPDATEs.  Bounded
#: by the largest reply taken (``max_receive``): received data is acknowledged as it
#: arrives, since it is kept until the message is whole anyway.
_STREAM_WINDOW = 4 * 1024 * 1024
_CONNECTION_WINDOW = 16 * 1024 * 1024

_PREFIX = struct.Struct(">BI")

#: h2 checking and normalising every header it sends and receives costs about a fifth
#: of a call; the headers sent are this module's own, and the ones received are read
#: only for ``:status``, ``grpc-status`` and ``grpc-message``.
_CONFIG = dict(client_side=True, header_encoding=None, validate_outbound_headers=False,
               normalize_outbound_headers=False, validate_inbound_headers=False,
               normalize_inbound_headers=False)


class CallError(grpc.RpcError):
    """A failed call: its gRPC status code and message, and whether it may have been
    sent."""

    def __init__(self, code: grpc.StatusCode, details: str, sent: bool = True):
        super().__init__(f"{code.name}: {details}")
        self._code, self._details, self.sent = code, details, sent

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def unsent(details: str) -> CallError:
    """The failure of a call the server cannot have seen."""
    return CallError(grpc.StatusCode.UNAVAILABLE, details, sent=False)


def _status_of_http(status: bytes) -> grpc.StatusCode:
    """gRPC's mapping of an HTTP status other than 200 (a proxy's answer, say)."""
    return {b"400": grpc.StatusCode.INTERNAL, b"401": grpc.StatusCode.UNAUTHENTICATED,
            b"403": grpc.StatusCode.PERMISSION_DENIED, b"404": grpc.StatusCode.UNIMPLEMENTED,
            b"429": grpc.StatusCode.UNAVAILABLE, b"502": grpc.StatusCode.UNAVAILABLE,
            b"503": grpc.StatusCode.UNAVAILABLE, b"504": grpc.StatusCode.UNAVAILABLE,
            }.get(status, grpc.StatusCode.UNKNOWN)


@attrs.define(eq=False)
class _Stream:
    """One call in flight: its Deferred, the reply's bytes so far, and what of the
    request the flow control windows have not let out yet."""

    result: Deferred
    received: bytearray = attrs.field(factory=bytearray)
    unsent: memoryview = memoryview(b"")
    http_status: bytes = b""
    #: The length the reply's prefix announced (None until its five bytes are in).
    length: Optional[int] = None


class GRPCConnection(Protocol):
    """
    One HTTP/2 connection to a gRPC server, its unary calls multiplexed on it.

    ``ready(self)`` is called once the server's first SETTINGS arrived; ``lost(self)`` once the connection is gone, after
    every call on it failed.  While calls are in flight, a PING every ``keepalive[0]``
    seconds must be answered within ``keepalive[1]`` or the connection is dropped
    (grpcio's ``keepalive_time_ms``/``keepalive_timeout_ms``): a server that hangs with
    its connection open frees its calls that way.
    """

    transport: Any  # ITCPTransport, or TLS over it (abortConnection, setTcpNoDelay)

    def __init__(self, reactor, authority: str, scheme: str, max_receive: int,
                 metadata: tuple = (), keepalive: tuple = (30.0, 10.0),
                 ready: Callable[["GRPCConnection"], None] = lambda _: None,
                 lost: Callable[["GRPCConnection"], None] = lambda _: None):
        self.reactor = reactor
        self.max_receive = max_receive
        self.keepalive = keepalive
        self._ready, self._lost = ready, lost
        self._h2 = H2Connection(H2Configuration(**_CONFIG))  # type: ignore[arg-type]
        self._h2.encoder = _Encoder()  # type: ignore[assignment]
        self._streams: dict[int, _Stream] = {}
        #: The headers of every call but its path and timeout (pseudo-headers first).
        self._scheme = [(b":method", b"POST"), (b":scheme", scheme.encode())]
        self._headers = [(b":authority", authority.encode("idna")), (b"te", b"trailers"),
                         (b"content-type", b"application/grpc"),
                         *((k.encode(), v.encode()) for k, v in metadata)]
        self._ping: Any = None  # IDelayedCall: the next ping, or the wait for its ack
        #: Set once the connection is lost or going away: calls are refused unsent.
        self.closing: Optional[str] = None
        #: Set once the server's first SETTINGS came: it speaks HTTP/2 (over TLS, the
        #: handshake is done).
        self.settled = False

    # -- the calls ------------------------------------------------------------------

    def call(self, path: bytes, message: bytes, timeout: float) -> Deferred:
        """
        Deferred of the reply's message (bytes) to ``message`` sent to ``path``
        (``/etcdserverpb.KV/Range``), failing with ``CallError``; ``timeout`` (seconds)
        is sent as ``grpc-timeout``, the caller keeps its own deadline.  Cancelling it
        resets the stream.
        """
        if self.closing is not None:
            return failed(unsent(self.closing))
        h2 = self._h2
        stream_id = h2.get_next_available_stream_id()
        result: Deferred = Deferred(lambda _: self._cancel(stream_id))
        stream = self._streams[stream_id] = _Stream(result)
        h2.send_headers(stream_id, [*self._scheme, (b":path", path), *self._headers,
                                    (b"grpc-timeout", b"%dm" % max(1, int(timeout * 1000)))])
        stream.unsent = memoryview(_PREFIX.pack(0, len(message)) + message)
        self._send(stream_id, stream)
        self.transport.write(h2.data_to_send())
        if self._ping is None:
            self._ping = self.reactor.callLater(self.keepalive[0], self._send_ping)
        return result

    def _send(self, stream_id: int, stream: _Stream):
        """As much of the stream's request as the windows let out; the stream's end
        with its last byte."""
        h2 = self._h2
        while stream.unsent:
            size = min(len(stream.unsent), h2.local_flow_control_window(stream_id),
                       h2.max_outbound_frame_size)
            if size <= 0:
                return  # the rest when the server's WINDOW_UPDATE comes
            chunk, stream.unsent = stream.unsent[:size], stream.unsent[size:]
            try:
                h2.send_data(stream_id, chunk.tobytes(), end_stream=not stream.unsent)
            except StreamClosedError:  # answered already (refused): its end is in events
                stream.unsent = memoryview(b"")

    def _cancel(self, stream_id: int):
        if self._streams.pop(stream_id, None) is not None and self.closing is None:
            self._reset(stream_id)
            self.transport.write(self._h2.data_to_send())

    def _reset(self, stream_id: int):
        try:
            self._h2.reset_stream(stream_id, ErrorCodes.CANCEL)
        except StreamClosedError:  # closed on the server's side already
            pass

    # -- what the server sends ------------------------------------------------------

    def connectionMade(self):
        # A call is one write; Nagle would hold the next one back for the last's ACK.
        no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if no_delay is not None:
            no_delay(True)
        h2 = self._h2
        h2.initiate_connection()
        h2.update_settings({SettingCodes.ENABLE_PUSH: 0,
                            SettingCodes.INITIAL_WINDOW_SIZE: _STREAM_WINDOW})
        h2.increment_flow_control_window(_CONNECTION_WINDOW)
        self.transport.write(h2.data_to_send())

    def dataReceived(self, data: bytes):
        try:
            events: list[Any] = self._h2.receive_data(data)  # dispatched on type()
        except ProtocolError as error:
            self._drop(f"etcd HTTP/2 protocol error: {error}")
            return
        streams = self._streams
        for event in events:
            kind = type(event)
            if kind is DataReceived:
                stream = streams.get(event.stream_id)
                self._h2.acknowledge_received_data(event.flow_controlled_length,
                                                   event.stream_id)
                if stream is not None:
                    self._received(event.stream_id, stream, event.data)
            elif kind is ResponseReceived or kind is TrailersReceived:
                stream = streams.get(event.stream_id)
                if stream is not None:
                    self._headers_received(event.stream_id, stream, event.headers,
                                           event.stream_ended is not None)
            elif kind is StreamEnded:
                stream = streams.get(event.stream_id)
                if stream is not None:  # ended without a grpc-status
                    self._finish(event.stream_id, CallError(
                        grpc.StatusCode.INTERNAL, "server closed the stream without"
                        " sending trailers"))
            elif kind is StreamReset:
                stream = streams.get(event.stream_id)
                if stream is not None:
                    self._finish(event.stream_id, _reset(event.error_code))
            elif kind is WindowUpdated:
                self._window_opened(event.stream_id)
            elif kind is PingAckReceived:
                self._acked()
            elif kind is ConnectionTerminated:
                self._going_away(event.last_stream_id, event.error_code)
            elif kind is RemoteSettingsChanged and not self.settled:
                self.settled = True
                self._ready(self)
        out = self._h2.data_to_send()
        if out:
            self.transport.write(out)

    def _received(self, stream_id: int, stream: _Stream, data: bytes):
        stream.received += data
        if stream.length is None and len(stream.received) >= 5:
            flag, stream.length = _PREFIX.unpack_from(stream.received)
            if flag:
                self._fail_stream(stream_id, CallError(
                    grpc.StatusCode.INTERNAL, "grpc: compressed reply not asked for"))
            elif stream.length > self.max_receive:
                self._fail_stream(stream_id, CallError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "grpc: received message larger "
                    f"than max ({stream.length} vs. {self.max_receive})"))
        elif stream.length is not None and len(stream.received) > stream.length + 5:
            self._fail_stream(stream_id, CallError(
                grpc.StatusCode.UNIMPLEMENTED, "grpc: more than one reply to a unary call"))

    def _headers_received(self, stream_id: int, stream: _Stream, headers: list,
                          ended: bool):
        status = message = None
        for name, value in headers:
            if name == b"grpc-status":
                status = value
            elif name == b"grpc-message":
                message = value
            elif name == b":status":
                stream.http_status = value
        if status is None:
            if ended:  # no gRPC status: the HTTP status says what went wrong
                code = _status_of_http(stream.http_status)
                self._finish(stream_id, CallError(
                    code, f"unexpected HTTP status code {stream.http_status.decode()}"))
            return  # the reply's headers; trailers to come
        code = _CODES.get(int(status), grpc.StatusCode.UNKNOWN) if status.isdigit() \
            else grpc.StatusCode.UNKNOWN
        if code is not grpc.StatusCode.OK:
            details = unquote(message.decode("utf-8", "replace")) if message else ""
            self._finish(stream_id, CallError(code, details))
        elif stream.length is None or len(stream.received) != stream.length + 5:
            self._finish(stream_id, CallError(grpc.StatusCode.INTERNAL,
                                              "grpc: OK without a whole reply message"))
        else:
            self._finish(stream_id, bytes(memoryview(stream.received)[5:]))

    def _finish(self, stream_id: int, outcome):
        stream = self._streams.pop(stream_id)
        if self.closing is not None and not self._streams:
            self.transport.loseConnection()  # gone away: its last call is done
        if isinstance(outcome, Exception):
            stream.result.errback(outcome)
        else:
            stream.result.callback(outcome)

    def _fail_stream(self, stream_id: int, error: CallError):
        """A reply refused on our side: the stream reset, the call failed."""
        self._reset(stream_id)
        self._finish(stream_id, error)

    def _window_opened(self, stream_id: int):
        if stream_id:
            stream = self._streams.get(stream_id)
            if stream is not None:
                self._send(stream_id, stream)
            return
        for stream_id, stream in list(self._streams.items()):
            if stream.unsent:
                self._send(stream_id, stream)

    def _going_away(self, last_stream_id: Optional[int], error_code):
        """GOAWAY: the streams above its last are refused unread; the others finish.
        No new call starts here."""
        self.closing = f"etcd closed the connection (GOAWAY {error_code!r})"
        self._lost(self)  # the member dials again now
        for stream_id in [s for s in self._streams if s > (last_stream_id or 0)]:
            self._finish(stream_id, unsent(self.closing))
        if not self._streams:
            self.transport.loseConnection()

    # -- keepalive and the end ------------------------------------------------------

    def _send_ping(self):
        if not self._streams:
            self._ping = None  # pings only while calls are in flight, as grpcio's
            return
        self._h2.ping(b"platform")
        self.transport.write(self._h2.data_to_send())
        self._ping = self.reactor.callLater(self.keepalive[1], self._drop,
                                            "keepalive ping not answered")

    def _acked(self):
        if self._ping is not None and self._ping.active():
            self._ping.cancel()
        self._ping = self.reactor.callLater(self.keepalive[0], self._send_ping)

    def _drop(self, why: str):
        self._ping = None
        self.closing = why
        self.transport.abortConnection()

    def connectionLost(self, reason=None):
        if self._ping is not None and self._ping.active():
            self._ping.cancel()
        self._ping = None
        why = self.closing or "etcd connection lost"
        if reason is not None and self.closing is None:
            why = f"etcd connection lost: {reason.getErrorMessage()}"
        self.closing = why
        self._fail_all(lambda: CallError(grpc.StatusCode.UNAVAILABLE, why))
        self._lost(self)

    def _fail_all(self, error: Callable[[], CallError]):
        """Every call in flight fails (taken out one by one: a caller's errback may
        close the connection, or cancel another call, while this runs)."""
        while self._streams:
            _, stream = self._streams.popitem()
            stream.result.errback(error())

    def close(self):
        """Ends the connection; the calls in flight fail with ``stopped()``."""
        if self.closing is None:
            self.closing = stopped().details()
            self._fail_all(stopped)
            self.transport.abortConnection()


class _Encoder:
    """
    HPACK for the calls' headers without the dynamic table (RFC 7541 allows an encoder
    never to use it; the first block sets its size to 0): each header's encoding is
    then the same every time, kept once made (but for ``grpc-timeout``'s, which
    varies), and a header block is a join.  hpack's own ``Encoder`` searched and grew
    the table for every header of every call, about a sixth of the call's CPU.
    """

    #: Set by h2 from the server's SETTINGS; nothing to do with no table in use.
    header_table_size = 4096
    _STATIC = {entry: n for n, entry in enumerate(HeaderTable.STATIC_TABLE, 1)}
    _NAMES = {name: n for (name, _), n in reversed(list(_STATIC.items()))}
    _VARYING = b"grpc-timeout"

    def __init__(self):
        self._first = True
        self._known: dict = {}

    def encode(self, headers, huffman: bool = True) -> bytes:
        blocks = [b"\x20"] if self._first else []  # dynamic table size update: 0
        self._first = False
        known = self._known
        for header in headers:
            block = known.get(header)
            if block is None:
                block = self._literal(*header)
                if header[0] != self._VARYING:
                    known[tuple(header)] = block
            blocks.append(block)
        return b"".join(blocks)

    def _literal(self, name: bytes, value: bytes) -> bytes:
        """Indexed from the static table, else a literal not indexed."""
        index = self._STATIC.get((name, value))
        if index is not None:
            return bytes([0x80 | index])  # the static table's 61 fit the 7-bit prefix
        index = self._NAMES.get(name)
        head = (bytes(encode_integer(index, 4)) if index is not None
                else b"\x00" + _string(name))
        return head + _string(value)


def _string(data: bytes) -> bytes:
    """An HPACK string literal, not Huffman-coded."""
    return bytes(encode_integer(len(data), 7)) + data


def _reset(error_code) -> CallError:
    """A stream the server reset: refused unread (``REFUSED_STREAM``) is unsent."""
    if error_code == ErrorCodes.REFUSED_STREAM:
        return unsent("etcd refused the stream")
    if error_code == ErrorCodes.CANCEL:
        return CallError(grpc.StatusCode.CANCELLED, "stream cancelled by etcd")
    return CallError(grpc.StatusCode.UNAVAILABLE, f"stream reset by etcd ({error_code!r})")


def stopped() -> CallError:
    """A call ended by the client's stop, as grpcio's channel close ended them."""
    return CallError(grpc.StatusCode.CANCELLED, "etcd client stopped")


def failed(error: Exception) -> Deferred:
    """A Deferred failed with ``error``."""
    d: Deferred = Deferred()
    d.errback(error)
    return d


