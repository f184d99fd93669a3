"""
The request timeout: upstream's ``WithRequestDeadline`` and
``WithTimeoutForNonLongRunningRequests`` as one filter.

A request that is not long-running (``requestinfo.long_running``: watches, exec, logs
are not cut) gets ``--request-timeout`` (60 s), or less when its ``timeout`` query
parameter asks for less (a Go duration; ``0``, or more than the maximum, means the
maximum; an unreadable one is a 400).  When the time is up before the answer:

* nothing written yet: the answer is upstream's 504, written as upstream's timeout
  handler writes it (the ``Status`` without kind and apiVersion, plain JSON encoding,
  Go's sniffed ``text/plain`` content type), and the work still under way is cancelled
  (upstream's handler sees its context's deadline pass);
* part of the answer already sent (a large list streaming): the connection (HTTP/1.1)
  or the stream (HTTP/2) is aborted, as upstream's ``panic(http.ErrAbortHandler)``.

The deadline runs on the injected clock, so tests use ``twisted.internet.task.Clock``.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure

from platformd import errors, requestinfo
from platformd.goformat import gonumbers
from platformd.goformat.durations import go_parse_duration
from platformd.api import query
from platformd.goformat.gotext import go_quote
from platformd.edge.tlstransport import abort_stream

#: Upstream's ``--request-timeout`` default.
REQUEST_TIMEOUT = 60.0
INVALID_TIMEOUT = "invalid timeout specified in the request URL"
#: What upstream's timeout handler writes: ``json.NewEncoder`` of the bare
#: ``NewTimeoutError(..., 0).ErrStatus`` (no TypeMeta; ``details`` empty but present).
TIMEOUT_BODY = (b'{"metadata":{},"status":"Failure","message":"Timeout: request did not '
                b'complete within the allotted timeout","reason":"Timeout","details":{},'
                b'"code":504}\n')
#: Go's ``http.DetectContentType`` of that body.
TIMEOUT_CONTENT_TYPE = b"text/plain; charset=utf-8"
_NUMBER = re.compile(r"[+-]?[0-9.]+")


def _unit_missing(text: str) -> bool:
    """Whether Go's ``ParseDuration`` calls ``text`` a number missing its unit: a bare
    number whose whole part does not overflow first (``leadingInt``: past 2**63)."""
    if not _NUMBER.fullmatch(text):
        return False
    whole = text.lstrip("+-").partition(".")[0]
    try:
        return not whole or gonumbers.parse_uint(whole) <= 1 << 63
    except gonumbers.NumError:
        return False


@attrs.define
class RequestDeadline:
    """The filter (see module docstring).  ``maximum`` 0 turns timeouts off."""

    clock: Any
    maximum: float = REQUEST_TIMEOUT

    def __call__(self, ctx, proceed):
        if not self.maximum or requestinfo.long_running(ctx.info):
            return proceed(ctx)
        timeout = self.timeout_of(ctx.request)
        # The headers the outer filters set (Audit-Id): all a timeout answer carries, as
        # upstream's timeout writer keeps the handler's own headers apart.
        outer_headers = list(ctx.request.responseHeaders.getAllRawHeaders())
        result = proceed(ctx)
        # A Deferred that has fired may still wait: one whose callback returned another,
        # unfired Deferred is paused on it (a write whose chain began with ``succeed``
        # waiting for its storage call).  Only a fired, unpaused one holds its answer.
        if not isinstance(result, Deferred) or (result.called and not result.paused):
            return result
        return _Race(ctx.request, result, outer_headers).start(self.clock, timeout)

    def timeout_of(self, request) -> float:
        """The request's time: ``maximum``, or its smaller positive ``timeout``."""
        given = query.values(request, b"timeout")
        if not given or not given[0]:
            return self.maximum
        text = given[0].decode("utf-8", "replace")
        try:
            asked = go_parse_duration(text)
        except ValueError:
            problem = "missing unit in duration" if _unit_missing(text) else "invalid duration"
            raise errors.bad_request(
                f"{INVALID_TIMEOUT} - time: {problem} {go_quote(text)}") from None
        return asked if 0 < asked < self.maximum else self.maximum


class _Race:
    """One request's answer against its deadline; whichever comes first is answered."""

    def __init__(self, request, work: Deferred, outer_headers: list):
        self.request = request
        self.work = work
        self.outer_headers = outer_headers
        #: Klein cancels it when the client goes away: the work is cancelled then too.
        self.answer: Deferred = Deferred(lambda _: self.work.cancel())

    def start(self, clock, timeout: float) -> Deferred:
        self.timer = clock.callLater(timeout, self._expired)
        self.work.addBoth(self._finished)
        return self.answer

    def _finished(self, result):
        if self.timer.active():
            self.timer.cancel()
            if isinstance(result, Failure):
                self.answer.errback(result)
            else:
                self.answer.callback(result)
        elif isinstance(result, Failure):
            result.trap(CancelledError, errors.StatusError)  # anything else is logged
        return None

    def _expired(self) -> None:
        request = self.request
        if request.startedWriting:
            abort_stream(request.channel)
            self.answer.errback(CancelledError())
        else:
            headers = request.responseHeaders
            for name, _ in list(headers.getAllRawHeaders()):
                headers.removeHeader(name)
            for name, values in self.outer_headers:
                headers.setRawHeaders(name, values)
            headers.setRawHeaders(b"Content-Type", [TIMEOUT_CONTENT_TYPE])
            headers.setRawHeaders(b"Content-Length", [b"%d" % len(TIMEOUT_BODY)])
            request.setResponseCode(504)
            self.answer.callback(TIMEOUT_BODY)
        self.work.cancel()
