"""
The API's request: served as soon as its headers are in, its body read only when the
handler asks for it, as Go's ``http.Server`` serves a request.

twisted.web processes a request once its whole body has arrived: a client without
credentials could make the server read and spool (to a temporary file above 100 kB) up
to 3 MiB before the 401, have ``Expect: 100-continue`` answered ``100 Continue`` first,
and hold a connection forever by declaring a body it never sends.  Upstream's filters
(authentication, authorization, the request deadline) run on the request line and
headers; the handler reads the body, and Go sends ``100 Continue`` on that first read.
So here: the channel calls ``serve_before_body`` when the headers of a request with a
body are in, the filters run at once, and the body stays where it is — unread in the
socket (HTTP/1.1: ``site.APIChannel``) or in an HTTP/2 stream whose flow-control window
is not reopened (``http2.APIH2Connection``) — until the handler calls ``receive_body``
(``app.py`` does, past the filters, for the verbs that take a body).  Only then is the
content file made and ``100 Continue`` sent.  A request answered before its body was let
in, or before all of it came (a 401, a 403, a 504 on a trickling body), has the rest of
its body dropped unread: the HTTP/1.1 connection is closed after the answer, the HTTP/2
stream reset.

The body is also bounded in size: over upstream's 3 MiB it is refused when the handler
lets it in, at once from its ``Content-Length``, or as it arrives when a chunked body
passes the limit, with upstream's 413 ``RequestEntityTooLarge`` Status, and (HTTP/1.1)
the connection closed; no more than the limit is ever kept.  As upstream's handler reads
the body after the filters, a client without credentials gets its 401 first.  Over HTTP/2 a stream cannot be
answered before its request ends: the body is kept up to the limit and the rest dropped,
and the handler answers 413 (``body.read_body``).
"""

from __future__ import annotations

import tempfile
from io import BytesIO
from typing import Optional

from twisted.internet.defer import Deferred
from twisted.web import server

from platformd.api.body import MAX_BODY, too_large
from platformd.api.http2 import let_body_in

#: Bodies are buffered in memory up to this size, in a temporary file above.
IN_MEMORY = 100_000


def content_file(length):
    """The site's ``getContentFile``: memory for a small declared body, else a file."""
    if length is not None and length < IN_MEMORY:
        return BytesIO()
    return tempfile.TemporaryFile()


class APIRequest(server.Request):
    """twisted.web's request served before its body (see module docstring)."""

    _received = 0
    _too_large = False
    _length: Optional[int] = 0
    #: A body still to come while the request is served (``serve_before_body``): "held"
    #: until the handler lets it in, then "reading" until its end; None once it is all
    #: here, or when the request was served after it (or declared none).
    _body: Optional[str] = None
    _waiting: list

    def render(self, resrc):
        # twisted.web names itself in a Server header (process() sets it); Go's net/http,
        # and so upstream, sends none: nothing to tell a prober which server this is.
        self.responseHeaders.removeHeader(b"server")
        super().render(resrc)

    def gotLength(self, length):
        # The content file is made when the body is let in (``receive_body``), and a
        # declared length over the limit refused then: after the filters, as upstream's
        # handler refuses it (a client without credentials gets its 401 first).
        self._length = length
        self.content = BytesIO()

    def serve_before_body(self, command: bytes, path: bytes, version: bytes) -> None:
        """Process the request now; its body is held until ``receive_body``."""
        self._body = "held"
        self._waiting = []
        server.Request.requestReceived(self, command, path, version)

    @property
    def body_pending(self) -> bool:
        """Whether the request is served while (some of) its body has not come."""
        return self._body is not None

    def receive_body(self) -> Optional[Deferred]:
        """
        What the handler calls before reading ``content``: None when the body is all here
        (or none was declared), else a Deferred that fires once it is.  The first call
        lets the body in: the content file is made, and the channel answers ``Expect:
        100-continue`` and reads on.
        """
        if self._body is None:
            return None
        waiting: Deferred = Deferred(self._waiting.remove)
        self._waiting.append(waiting)
        if self._body == "held":
            self._body = "reading"
            if self._length is not None and self._length > MAX_BODY:
                self._refuse_body()
                return waiting
            # Twisted types channel as HTTPChannel, which declares no site: Site.buildProtocol
            # sets it (and an HTTP/2 stream, also a channel here, has its own).
            self.content = self.channel.site.getContentFile(  # type: ignore[attr-defined]
                self._length)
            let_body_in(self.channel)
        return waiting

    def handleContentChunk(self, data):
        if self.finished:
            return  # answered before its body ended: the rest is dropped
        room = MAX_BODY + 1 - self._received
        self._received += len(data)
        if room > 0:
            super().handleContentChunk(data[:room] if len(data) > room else data)
        if self._received > MAX_BODY:
            self._refuse_body()

    def requestReceived(self, command, path, version):
        if self._too_large and getattr(self.channel, "refuse", None) is not None:
            return  # answered already, the connection is closing
        if self._body is not None:
            self._body_ended()
        else:
            super().requestReceived(command, path, version)

    def _body_ended(self) -> None:
        self._body = None
        waiting = list(self._waiting)
        self._waiting.clear()
        if waiting:  # (an answered request has none, and no content left)
            assert self.content is not None  # made when the body was let in
            self.content.seek(0)
        for each in waiting:
            each.callback(None)

    def _refuse_body(self) -> None:
        if self._too_large:
            return
        self._too_large = True
        refuse = getattr(self.channel, "refuse", None)
        if refuse is not None:
            refuse(too_large())
