"""
The twisted.web Site the API is served by, tuned for an API server.

* Request bodies are never parsed as HTML form submissions
  (``parsePOSTFormSubmission=False``): an API body is JSON, YAML or another declared
  encoding, and twisted.web's form parsing (which also costs an email-header parse of
  Content-Type on every POST) would otherwise consume an
  ``application/x-www-form-urlencoded`` body into query arguments.
* A request is served as soon as its headers are in; its body is read only when the
  handler asks, past authentication and authorization, and is bounded in size
  (``request.py``).  Until then ``APIChannel`` holds it unread: what came with the
  headers stays in twisted.web's pipelining buffer, which stops reading from the socket
  past 16 KiB; ``Expect: 100-continue`` is answered only then.  A request answered
  before its body was all read is answered with ``Connection: close`` and the rest is
  never read (as Go closes a connection whose request body was not read to its end).
* Bodies are buffered in memory up to 100 kB and in a temporary file above, through
  the ``getContentFile`` hook (cheaper than twisted.web's fallback, which first raises
  AttributeError on every request).
* No per-request access log line on the hot path, and no tracebacks in responses.
* Request lines and headers up to 1 MiB are read, as Go's ``http.Server`` (what
  kube-apiserver serves with) reads them; twisted.web's own limit (16 KiB) dropped the
  connection without an answer.  Beyond the limit, and for requests twisted.web cannot
  parse, the answer is a ``Status`` (431, 400) and the connection is closed.
* A connection is closed when it stays silent too long, as Go's ``http.Server`` closes
  it (``timeouts.py``): TLS handshake and request headers each within 32 s (a fixed
  deadline: trickling bytes does not extend it), the next request on a kept-alive
  connection within 90 s.  twisted.web's own sliding 12-hour idle timeout is off.
* A connection closed with a request's body unread (a refusal, an answer before the
  body) drops whatever else comes, and its TCP connection is closed 0.5 s after the
  answer (Go's ``rstAvoidanceDelay``: time for the answer to reach the client before a
  reset can destroy it) whether or not the client has answered TLS's close_notify;
  aborted if the client has still not taken the answer 32 s later.
* A connection's addresses are asked of its transport once, not on every request.
* A path whose percent-decoding is not UTF-8 is read with U+FFFD in place of the bad
  bytes, as Go's strings carry them into upstream's request info, instead of
  twisted.web's HTML "Non-UTF-8 encoding in URL" page.
"""

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.protocol import connectionDone
from twisted.internet.interfaces import IHandshakeListener, ITCPTransport
from twisted.python import log
from twisted.python.failure import Failure
from twisted.web import http, server
from twisted.web.resource import IResource
from zope.interface import implementer

from platformd import errors
from platformd.api.http2 import APIProtocol
from platformd.api.request import APIRequest, content_file
from platformd.codecs.jsoncodec import dumps
from platformd.edge.timeouts import RST_AVOIDANCE_DELAY, ConnectionTimeouts, Deadline

#: Go's http.DefaultMaxHeaderBytes: the request line and headers together.
MAX_HEADER_BYTES = 1 << 20


@implementer(IHandshakeListener)
class APIChannel(http.HTTPChannel):
    """
    twisted.web's HTTP/1.1 channel with Go's header limit, Go's connection deadlines,
    Status refusals, and requests served before their bodies.
    """

    MAX_LENGTH = MAX_HEADER_BYTES
    totalHeadersSize = MAX_HEADER_BYTES
    #: Waiting for the next request (between requests, or after the handshake).
    _idle = False
    _deadline: Deadline
    #: Set by the site that builds the channel (``Site.buildProtocol``).
    site: "APISite"
    #: TCP or TLS: both can be aborted.
    transport: "ITCPTransport | None"
    #: Closing with a request's body unread: whatever comes is dropped.
    _refused = False
    #: The client waits for ``100 Continue`` before sending the body.
    _continue = False
    #: The connection's own and peer addresses, asked of the transport once: twisted.web
    #: asks for both on every request (the host with a ``getsockname`` call each time).
    _host = _peer = None

    def getHost(self):
        if self._host is None:
            self._host = super().getHost()
        return self._host

    def getPeer(self):
        if self._peer is None:
            self._peer = super().getPeer()
        return self._peer

    def connectionMade(self):
        super().connectionMade()
        self._deadline = Deadline(self.site.reactor)
        self._deadline.set(self.site.timeouts.handshake, self._abort)

    def handshakeCompleted(self):
        """TLS is up (the TLS transport says so): the first request's headers are due."""
        self._deadline.set(self.site.timeouts.read_header, self._abort)

    def dataReceived(self, data):
        if self._refused:
            return
        if self._idle:
            self._idle = False
            self._deadline.set(self.site.timeouts.read_header, self._abort)
        super().dataReceived(data)

    def rawDataReceived(self, data):
        if not self._refused:  # (the rest of a read that ended in a refusal)
            super().rawDataReceived(data)

    def allHeadersReceived(self):
        self._deadline.clear()
        self._continue = False
        super().allHeadersReceived()
        if self.length != 0 and not self._refused:
            # A body follows: the request is served now, and what comes is held in the
            # buffer twisted.web keeps for the next request while one is handled.
            self._handlingRequest = True
            self.requests[-1].serve_before_body(self._command, self._path, self._version)

    def _send100Continue(self):
        """Not at the headers: when the body is let in (``let_body_in``)."""
        self._continue = True

    def let_body_in(self) -> None:
        """The handler reads the body: 100 Continue if asked for, and read on."""
        if self._continue:
            self._continue = False
            super()._send100Continue()
        self._handlingRequest = False
        held = b"".join(self._dataBuffer)
        self._dataBuffer = []
        if not self._waitingForTransport:
            self._networkProducer.resumeProducing()
        if held:
            self.rawDataReceived(held)

    def writeHeaders(self, version, code, reason, headers):
        if self._transferDecoder is not None:
            # Answered before its body was all read: the rest is never read, so the
            # connection cannot carry another request.
            self.persistent = False
            headers.setRawHeaders(b"Connection", [b"close"])
        super().writeHeaders(version, code, reason, headers)

    def requestDone(self, request):
        if self.persistent:
            # Set first: the base class replays any pipelined request at once.
            self._idle = True
            self._deadline.set(self.site.timeouts.idle, self.timeoutConnection)
        elif self._transferDecoder is not None:
            self._close_unread()
        super().requestDone(request)

    def stop_deadlines(self) -> None:
        """The connection is another protocol's now (HTTP/2)."""
        self._deadline.stop()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._deadline.stop()
        super().connectionLost(reason)

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abortConnection()

    def refuse(self, error: errors.StatusError) -> None:
        """Answer ``error`` now, before the request is read (or all of it), and close."""
        if self._refused:
            return
        body = dumps(error.to_status())
        reason = http.RESPONSES.get(error.code, b"Error")
        assert self.transport is not None  # refused while connected
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (error.code, reason, len(body), body))
        self.loseConnection()
        self._close_unread()

    def _close_unread(self) -> None:
        """Closing (TLS's close_notify sent) with a body unread: see module docstring."""
        self._refused = True
        self._deadline.set(RST_AVOIDANCE_DELAY, self._close_tcp)

    def _close_tcp(self) -> None:
        if self.transport is not None:
            # The TCP connection under TLS (a plain transport in tests), once written.
            getattr(self.transport, "transport", self.transport).loseConnection()
            self._deadline.set(self.site.timeouts.read_header, self._abort)

    def lineLengthExceeded(self, line):
        self.refuse(errors.StatusError(
            431, "BadRequest",
            f"request header fields too large: at most {MAX_HEADER_BYTES} bytes"))

    def _respondToBadRequestAndDisconnect(self):
        # Twisted's private hook and header count (tests/test_private_parts.py): the only
        # place an over-long header block is seen, answered here as Go answers it.
        if self._receivedHeaderSize > self.totalHeadersSize:
            self.lineLengthExceeded(b"")
        else:
            self.refuse(errors.bad_request("malformed HTTP request"))


class APISite(server.Site):
    requestFactory = APIRequest

    def protocol(self):
        """HTTP/1.1 (``APIChannel``) that becomes HTTP/2 when ALPN says ``h2``."""
        return APIProtocol(APIChannel())

    def __init__(self, resource, timeouts: ConnectionTimeouts, **kwargs):
        super().__init__(resource, **kwargs)
        self.timeouts = timeouts

    def log(self, request) -> None:
        """No access log."""

    def getContentFile(self, length):
        """Where a request's body goes (``server.Request.gotLength`` asks for it)."""
        return content_file(length)

    def getResourceFor(self, request):
        path = request.path
        if b"%" in path or not path.isascii():
            # Only a percent-escape or a raw non-ASCII byte can make a segment non-UTF-8.
            request.postpath = [_utf8(segment) for segment in request.postpath]
        return super().getResourceFor(request)


@implementer(IResource)
class DirectResource:
    """
    The API's Klein resource with its one route taken directly for plain paths.

    Klein finds a request's route by matching it against werkzeug's URL map: a bind, a
    state-machine match, an adapter put on the request, two ``notifyFinish`` Deferreds
    and four callbacks, about a tenth of a GET's time, to find the route every request
    takes (``/``, a branch).  A plain path (``/`` then ASCII segments, none empty or
    starting with a dot, no percent-escape, no trailing slash) can match nothing else
    and needs none of werkzeug's redirects, so ``handler`` (the route's function) is
    called here and its answer written as Klein writes it: bytes written, the request
    finished unless it is already, a Deferred cancelled if the client goes away, a
    failure answered by ``request.processingFailed`` (Klein's default without error
    handlers).  Every other path goes through ``klein`` as before.
    """

    isLeaf = True

    def __init__(self, klein, handler):
        self.klein = klein
        self.handler = handler

    def getChildWithDefault(self, name, request):
        return self.klein.getChildWithDefault(name, request)

    def putChild(self, path, child):
        self.klein.putChild(path, child)

    def render(self, request):
        if not _plain(request.path):
            return self.klein.render(request)
        try:
            result = self.handler(request)
        except Exception:
            _write(_failed(Failure(), request), request)
            return server.NOT_DONE_YET
        if isinstance(result, Deferred):
            request.notifyFinish().addErrback(lambda _: result.cancel())
            result.addErrback(_failed, request).addCallback(_write, request).addErrback(
                log.err, _why="Unhandled Error writing response")
        else:
            _write(result, request)
        return server.NOT_DONE_YET


def _plain(path: bytes) -> bool:
    """Whether ``path`` can only match the catch-all route (``DirectResource``)."""
    return (len(path) > 1 and path[0] == 47 and path[-1] != 47 and b"//" not in path
            and b"/." not in path and b"%" not in path and path.isascii())


def _done(request) -> bool:
    """Klein's ``request_finished``: finished, or the connection lost."""
    # Twisted's private flag (tests/test_private_parts.py): Request has no public way to
    # ask whether its connection is gone.
    return bool(request.finished or request._disconnected)


def _failed(failure: Failure, request):
    """Klein's ``processing_failed`` without error handlers."""
    if _done(request):
        if not failure.check(CancelledError):
            log.err(failure, "Unhandled Error Processing Request.")
        return None
    request.processingFailed(failure)
    return None


def _write(result, request) -> None:
    """Klein's ``write_response``."""
    if isinstance(result, str):
        result = result.encode("utf-8")
    if isinstance(result, bytes):
        request.write(result)
    if not _done(request):
        request.finish()


def _utf8(segment: bytes) -> bytes:
    try:
        segment.decode("utf-8")
        return segment
    except UnicodeDecodeError:
        return segment.decode("utf-8", "replace").encode("utf-8")


def make_site(resource, timeouts: ConnectionTimeouts = ConnectionTimeouts(),
              reactor=None) -> server.Site:
    """The site over ``resource``; ``reactor`` is the clock of the deadlines."""
    site = APISite(resource, timeouts, parsePOSTFormSubmission=False, timeout=None,
                   reactor=reactor)
    site.displayTracebacks = False
    return site
