"""
Accepting connections when the process is out of file descriptors, as Go's
``http.Server.Serve`` does: back off, and try again later.

When ``accept()`` fails with ``EMFILE`` (the process's descriptor limit) or ``ENFILE``
(the system's), the listening socket stays readable, so the reactor calls the port again
at once: Twisted accepts and closes the waiting connections with a reserved descriptor,
logs each attempt and, when that descriptor cannot be reserved again, a traceback; then
the same, turn after turn, while the connections that hold the descriptors are served
ever slower.  Go sleeps instead (``Serve``: 5 ms after the first failure, doubled after
each one up to 1 s, reset by a success) and leaves the connections waiting in the
listen queue.  ``accept_with_backoff`` does that to a Twisted port: it stops reading the
listening socket for the delay, and logs once when a backoff starts (through
``ratelog``: once a minute however often descriptors run out; Go logs every retry).
"""

from __future__ import annotations

import errno
from typing import Any

from twisted.internet import tcp
from twisted.logger import Logger

from platformd.util.ratelog import RateLimitedLog

log = Logger()

#: net/http server.go ``Serve``: ``tempDelay = 5 * time.Millisecond`` on the first
#: temporary accept error, ``tempDelay *= 2`` after each one, ``max := 1 * time.Second``.
FIRST_DELAY = 0.005
MAX_DELAY = 1.0
#: The errors after which accepting can only succeed once descriptors are freed (Go's
#: ``syscall.Errno.Temporary``: EMFILE and ENFILE, beside EINTR and timeouts).
OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


def accept_with_backoff(port: Any, clock: Any) -> None:
    """Have ``port`` (a listening ``tcp.Port``) back off when descriptors run out."""
    if isinstance(port, tcp.Port):
        port.socket = _BackingOff(port, port.socket, clock)


class _BackingOff:
    """
    The listening socket as the port sees it: ``accept()`` out of descriptors pauses the
    port and answers as if no connection were waiting (``EAGAIN``), which ends Twisted's
    accept loop quietly; everything else is the socket's.
    """

    def __init__(self, port: Any, listening: Any, clock: Any):
        self._port = port
        self._socket = listening
        self._clock = clock
        self._delay = 0.0
        self._warnings = RateLimitedLog(
            log, "not accepting connections ({detail}): retrying after a backoff of "
            f"{FIRST_DELAY * 1000:.0f} ms doubled up to {MAX_DELAY:.0f} s", clock)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)

    def accept(self):
        try:
            accepted = self._socket.accept()
        except OSError as e:
            if e.errno not in OUT_OF_DESCRIPTORS:
                raise
            self._back_off(e)
            raise BlockingIOError(errno.EAGAIN, "backing off") from None
        self._delay = 0.0
        return accepted

    def _back_off(self, error: OSError) -> None:
        if self._delay:
            self._delay = min(self._delay * 2, MAX_DELAY)
        else:
            self._delay = FIRST_DELAY
            self._warnings.warn(error.strerror or str(error), key="accept")
        self._port.stopReading()
        self._clock.callLater(self._delay, self._resume)

    def _resume(self) -> None:
        port = self._port
        if port.connected and not port.disconnecting:
            port.startReading()


def accept_one_per_turn(port: Any) -> None:
    """
    Have ``port`` (a listening ``tcp.Port``) accept at most one connection each time the
    reactor finds it readable.  For processes sharing one listening socket
    (``--workers``): Twisted accepts up to ``numberAccepts`` (100, growing) in a loop, so
    the first process woken would take a burst of new connections and keep them; one per
    turn, every idle process takes its share, and a busy one, whose turns are long, fewer.
    """
    if not isinstance(port, tcp.Port):
        return
    read = port.doRead

    def do_read():
        try:
            return read()
        finally:
            port.numberAccepts = 1  # tcp.Port.doRead grows it after a full loop
    port.numberAccepts = 1
    setattr(port, "doRead", do_read)  # the instance's own, over the class's
