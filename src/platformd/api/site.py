"""
The twisted.web Site the API is served by, tuned for an API server.

* Request bodies are never parsed as HTML form submissions
  (``parsePOSTFormSubmission=False``): an API body is JSON, YAML or another declared
  encoding, and twisted.web's form parsing (which also costs an email-header parse of
  Content-Type on every POST) would otherwise consume an
  ``application/x-www-form-urlencoded`` body into query arguments.
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
* A request body over upstream's 3 MiB is refused as it arrives (``APIRequest``): at
  once from its ``Content-Length``, or when a chunked body passes the limit, with
  upstream's 413 ``RequestEntityTooLarge`` Status, and the connection closed; no more
  than the limit is ever kept.  (Upstream reads the body in the handler, after
  authentication: a client without credentials gets 413 here, 401 there.)  Over
  HTTP/2 a stream cannot be answered before its request ends: the body is kept up to
  the limit and the rest dropped, and the handler answers 413 (``body.read_body``).
* A path whose percent-decoding is not UTF-8 is read with U+FFFD in place of the bad
  bytes, as Go's strings carry them into upstream's request info, instead of
  twisted.web's HTML "Non-UTF-8 encoding in URL" page.
"""

import tempfile
from io import BytesIO

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IHandshakeListener
from twisted.python import log
from twisted.python.failure import Failure
from twisted.web import http, server
from twisted.web.resource import IResource
from zope.interface import implementer

from platformd import errors
from platformd.api.body import MAX_BODY, too_large
from platformd.api.http2 import APIProtocol
from platformd.codecs.jsoncodec import dumps
from platformd.timeouts import ConnectionTimeouts, Deadline

_IN_MEMORY = 100_000
#: Go's http.DefaultMaxHeaderBytes: the request line and headers together.
MAX_HEADER_BYTES = 1 << 20


def content_file(length):
    if length is not None and length < _IN_MEMORY:
        return BytesIO()
    return tempfile.TemporaryFile()


@implementer(IHandshakeListener)
class APIChannel(http.HTTPChannel):
    """
    twisted.web's HTTP/1.1 channel with Go's header limit, Go's connection deadlines
    and Status refusals.
    """

    MAX_LENGTH = MAX_HEADER_BYTES
    totalHeadersSize = MAX_HEADER_BYTES
    #: Waiting for the next request (between requests, or after the handshake).
    _idle = False
    _deadline: Deadline
    _refused = False

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

    def allHeadersReceived(self):
        self._deadline.clear()
        super().allHeadersReceived()

    def requestDone(self, request):
        if self.persistent:
            # Set first: the base class replays any pipelined request at once.
            self._idle = True
            self._deadline.set(self.site.timeouts.idle, self.timeoutConnection)
        super().requestDone(request)

    def stop_deadlines(self) -> None:
        """The connection is another protocol's now (HTTP/2)."""
        self._deadline.stop()

    def connectionLost(self, reason):
        self._deadline.stop()
        super().connectionLost(reason)

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abortConnection()

    def refuse(self, error: errors.StatusError) -> None:
        """Answer ``error`` now, before the request is read, and close."""
        if not self._refused:
            self._refused = True
            self._refuse(error)
            # A peer that neither reads nor closes is cut off.
            self._deadline.set(self.site.timeouts.read_header, self._abort)

    def lineLengthExceeded(self, line):
        self._refuse(errors.StatusError(
            431, "BadRequest",
            f"request header fields too large: at most {MAX_HEADER_BYTES} bytes"))

    def _respondToBadRequestAndDisconnect(self):
        if self._receivedHeaderSize > self.totalHeadersSize:
            self.lineLengthExceeded(b"")
        else:
            self._refuse(errors.bad_request("malformed HTTP request"))

    def _refuse(self, error: errors.StatusError) -> None:
        body = dumps(error.to_status())
        reason = http.RESPONSES.get(error.code, b"Error")
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (error.code, reason, len(body), body))
        self.loseConnection()


class APIRequest(server.Request):
    """
    twisted.web's request keeping at most ``MAX_BODY + 1`` bytes of body, refusing a
    larger one as soon as it shows (see module docstring).
    """

    _received = 0
    _too_large = False

    def gotLength(self, length):
        super().gotLength(length)
        if length is not None and length > MAX_BODY:
            self._refuse_body()

    def handleContentChunk(self, data):
        room = MAX_BODY + 1 - self._received
        self._received += len(data)
        if room > 0:
            super().handleContentChunk(data[:room] if len(data) > room else data)
        if self._received > MAX_BODY:
            self._refuse_body()

    def requestReceived(self, command, path, version):
        if self._too_large and getattr(self.channel, "refuse", None) is not None:
            return  # answered already, the connection is closing
        super().requestReceived(command, path, version)

    def _refuse_body(self) -> None:
        if self._too_large:
            return
        self._too_large = True
        refuse = getattr(self.channel, "refuse", None)
        if refuse is not None:
            refuse(too_large())


class APISite(server.Site):
    requestFactory = APIRequest

    def protocol(self):
        """HTTP/1.1 (``APIChannel``) that becomes HTTP/2 when ALPN says ``h2``."""
        return APIProtocol(APIChannel())

    def __init__(self, resource, timeouts: ConnectionTimeouts, **kwargs):
        super().__init__(resource, **kwargs)
        self.timeouts = timeouts

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
    site.log = lambda request: None
    site.getContentFile = content_file
    return site
