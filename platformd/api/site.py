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
* A path whose percent-decoding is not UTF-8 is read with U+FFFD in place of the bad
  bytes, as Go's strings carry them into upstream's request info, instead of
  twisted.web's HTML "Non-UTF-8 encoding in URL" page.
"""

import tempfile
from io import BytesIO

from twisted.web import http, server

from platformd import errors
from platformd.codecs.jsoncodec import dumps

_IN_MEMORY = 100_000
#: Go's http.DefaultMaxHeaderBytes: the request line and headers together.
MAX_HEADER_BYTES = 1 << 20


def content_file(length):
    if length is not None and length < _IN_MEMORY:
        return BytesIO()
    return tempfile.TemporaryFile()


class APIChannel(http.HTTPChannel):
    """twisted.web's HTTP/1.1 channel with Go's header limit and Status refusals."""

    MAX_LENGTH = MAX_HEADER_BYTES
    totalHeadersSize = MAX_HEADER_BYTES

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


class APISite(server.Site):
    protocol = APIChannel

    def getResourceFor(self, request):
        request.postpath = [_utf8(segment) for segment in request.postpath]
        return super().getResourceFor(request)


def _utf8(segment: bytes) -> bytes:
    try:
        segment.decode("utf-8")
        return segment
    except UnicodeDecodeError:
        return segment.decode("utf-8", "replace").encode("utf-8")


def make_site(resource) -> server.Site:
    site = APISite(resource, parsePOSTFormSubmission=False)
    site.displayTracebacks = False
    site.log = lambda request: None
    site.getContentFile = content_file
    return site
