"""
How long a connection may take to say something: the deadlines kube-apiserver's Go
``http.Server`` enforces (``k8s.io/apiserver/pkg/server/secure_serving.go``), so that
half-open connections — a TLS handshake never finished, a request line never ended, a
keep-alive connection never used again — are closed instead of held forever.

=================  =======  ====================================================
phase              Go       here
=================  =======  ====================================================
TLS handshake      32 s     Go's ``tlsHandshakeTimeout()``: the smallest of the
                            read, write and read-header timeouts, i.e.
                            ``ReadHeaderTimeout``; the connection is aborted
request headers    32 s     ``ReadHeaderTimeout``, from the handshake's end or
                            from the first byte after an idle wait; a fixed
                            deadline, not reset by each byte (slowloris); aborted
request body       60 s     ``ReadTimeout`` is 0: the body is read by the handler,
                            within the request timeout (``api/deadline.py``:
                            ``--request-timeout``, or a shorter ``?timeout=``;
                            504, then closed); and only once the request is
                            authorized (``api/request.py``), so a client without
                            credentials has none read at all
handling, answer   60 s     the request timeout again (watches excepted);
                            ``WriteTimeout`` is 0: a watch or a large answer to a
                            slow reader takes as long as it takes
idle keep-alive    90 s     ``IdleTimeout``; closed politely (HTTP/2: ``GOAWAY``)
closing with a     0.5 s    Go's ``rstAvoidanceDelay``: after the answer, the TCP
body unread                 connection is closed (``api/site.py``)
=================  =======  ====================================================

``Deadline`` is the one timer a connection needs for this, on the injected clock.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import attrs

#: secure_serving.go: ``ReadHeaderTimeout: 32 * time.Second // just shy of
#: requestTimeoutUpperBound``; Go bounds the TLS handshake by it too.
READ_HEADER_TIMEOUT = 32.0
#: secure_serving.go: ``IdleTimeout: 90 * time.Second // matches http.DefaultTransport
#: keep-alive timeout`` (also the HTTP/2 idle timeout).
IDLE_TIMEOUT = 90.0
#: net/http server.go: ``rstAvoidanceDelay = 500 * time.Millisecond``, how long Go waits
#: after its answer before closing a connection with unread request data (closing then
#: sends a TCP reset, which can destroy the answer before the client has read it).
RST_AVOIDANCE_DELAY = 0.5


@attrs.frozen
class ConnectionTimeouts:
    """The deadlines of one listener (tests shorten them)."""

    handshake: float = READ_HEADER_TIMEOUT
    read_header: float = READ_HEADER_TIMEOUT
    idle: float = IDLE_TIMEOUT


class Deadline:
    """
    One pending action at a time: ``set(seconds, action)`` replaces whatever was set,
    ``clear()`` drops it, ``stop()`` drops it and the timer too (the connection is
    gone).  ``clock`` is the ``IReactorTime`` the deadlines run on.

    A kept-alive connection sets and clears its deadline three times a request (headers
    due, headers in, idle), so the timer is moved lazily: a new deadline only records
    its time when the timer is due no later; the timer, when it fires, acts if the
    deadline has passed, else waits again for the rest.  A request then costs no
    reactor timer at all, instead of two ``callLater`` and two cancels.
    """

    def __init__(self, clock: Any):
        self._clock = clock
        self._call: Optional[Any] = None
        self._action: Optional[Callable[[], None]] = None
        self._due = 0.0

    def set(self, seconds: float, action: Callable[[], None]) -> None:
        self._action = action
        self._due = due = self._clock.seconds() + seconds
        call = self._call
        if call is None:
            self._call = self._clock.callLater(seconds, self._fire)
        elif call.getTime() > due:
            call.reset(seconds)

    def clear(self) -> None:
        self._action = None

    def stop(self) -> None:
        self._action = None
        if self._call is not None:
            if self._call.active():
                self._call.cancel()
            self._call = None

    def _fire(self) -> None:
        self._call = None
        action = self._action
        if action is None:
            return
        rest = self._due - self._clock.seconds()
        if rest > 0:
            self._call = self._clock.callLater(rest, self._fire)
            return
        self._action = None
        action()
