"""
Where audit events go: a writer thread that writes the encoded lines to the log
(``rotation.RotatingFile``, or standard output), fed from the reactor through a queue
whose bound is kept on the reactor (``capacity`` lines handed over and not yet written).

The reactor never waits on the disk.  What happens when the writer is behind is
``--audit-log-mode``'s (upstream's ``options/audit.go``):

* ``blocking`` (default): upstream writes the event in the request's goroutine, so a
  slow disk slows the requests down and write errors are ignored.  Here the event is
  handed over at once while the queue has room; when it is full, the request waits
  (a Deferred, not the reactor) until the writer has made room, then goes on.
* ``blocking-strict``: as ``blocking``, and the request also waits until its
  RequestReceived event is written; if the write fails, the request is answered 500
  "failed to store audit event" (upstream's check in ``WithAudit``).
* ``batch``: upstream's buffered backend: a full buffer drops the event (logged as
  upstream's "audit buffer queue blocked") and the request goes on; the writer takes
  up to ``max_batch`` events, waiting up to ``max_wait`` seconds for them.

Write errors are logged as upstream's plugin errors (rate limited) and counted as
upstream counts them (``apiserver_audit_error_total{plugin="log"}``, drops under
``plugin="buffered"``).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections import deque
from typing import Callable, Optional

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from platformd.metrics.apiserver import APIServerMetrics
from platformd.util.ratelog import RateLimitedLog

log = Logger()

BLOCKING, BLOCKING_STRICT, BATCH = "blocking", "blocking-strict", "batch"
MODES = (BATCH, BLOCKING, BLOCKING_STRICT)
#: Upstream's ``--audit-log-batch-buffer-size`` default; here it bounds every mode's queue.
DEFAULT_BUFFER = 10000
#: Lines one blocking-mode write takes at most (they are written, then flushed, together).
_GROUP = 1000
_STOP = object()


class Stdout:
    """``--audit-log-path -``: standard output, as upstream."""

    def write_lines(self, lines: list) -> None:
        sys.stdout.buffer.write(b"".join(lines))
        sys.stdout.buffer.flush()

    def close(self) -> None:
        pass


class Pipe:
    """
    A worker's log (``--workers``, ``process/workers.py``): its lines go down the pipe
    at descriptor ``fd`` to the first worker, which writes them to the one log (one
    file, rotated by one process).  A write blocks (in the writer thread) while the
    pipe is full, so the first worker's queue bounds this one's too.
    """

    def __init__(self, fd: int):
        self.fd = fd

    def write_lines(self, lines: list) -> None:
        data = memoryview(b"".join(lines))
        while data:
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        os.close(self.fd)


class LogSink:
    """See module docstring.  ``process(event)`` on the reactor; ``start``/``stop``."""

    def __init__(self, reactor, out, encode: Callable[[dict], bytes], mode: str = BLOCKING,
                 capacity: int = DEFAULT_BUFFER, max_batch: int = 1, max_wait: float = 0.0,
                 metrics: Optional[APIServerMetrics] = None):
        self.reactor = reactor
        self.out = out
        self.encode = encode
        self.mode = mode
        self.capacity = capacity
        self.max_batch = max_batch
        self.max_wait = max_wait
        #: Upstream's ``apiserver_audit_event_total`` and ``apiserver_audit_error_total``
        #: live here (the server's ``APIServerMetrics``, set by ``APIServer.audit``).
        self.metrics = metrics if metrics is not None else APIServerMetrics(process=False)
        #: Lines handed to the writer and not yet reported written (reactor only).
        self._pending = 0
        #: (line, written Deferred or None, queued Deferred) waiting for room (reactor only).
        self._waiting: deque = deque()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._stop_waiters: list = []
        self._ended = False
        self._errors = RateLimitedLog(log, "{detail}")
        self._drops = RateLimitedLog(log, "{detail}")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="audit-log", daemon=True)
        self._thread.start()

    def stop(self) -> Deferred:
        """Write everything handed over or waiting, then end the thread (a Deferred;
        stopping again waits for the same end)."""
        stopped: Deferred = Deferred()
        if self._thread is None or self._ended:
            stopped.callback(None)
            return stopped
        self._stop_waiters.append(stopped)
        if len(self._stop_waiters) == 1:
            while self._waiting:
                line, written, queued = self._waiting.popleft()
                self._put(line, written)
                queued.callback(None)
            self._queue.put(_STOP)
        return stopped

    def process(self, event: dict) -> Optional[Deferred]:
        """
        Hand ``event`` to the writer.  None when nothing needs waiting for; otherwise a
        Deferred: fired when the event is queued (``blocking`` with a full queue) or
        with True/False when it is written or not (``blocking-strict``).
        """
        self.metrics.audit_events.inc()
        return self._hand(self.encode(event), self.mode == BLOCKING_STRICT)

    def relay(self, line: bytes) -> Optional[Deferred]:
        """
        Hand over ``line``, an event another worker encoded and counted (``Pipe``): as
        ``process``, but never waited for until written (the worker's request went on
        once its line was in the pipe).  A Deferred when the queue is full and the line
        waits: the caller reads no more of that worker's pipe until it fires.
        """
        return self._hand(line, False)

    def _hand(self, line: bytes, strict: bool) -> Optional[Deferred]:
        if self.mode == BATCH:
            if self._pending >= self.capacity:
                self.metrics.audit_errors.inc(("buffered",))
                self._drops.warn("Error in audit plugin 'buffered' affecting 1 audit events: "
                                 "audit buffer queue blocked")
                return None
            self._put(line, None)
            return None
        written: Optional[Deferred] = Deferred() if strict else None
        if self._waiting or self._pending >= self.capacity:
            queued: Deferred = Deferred()
            self._waiting.append((line, written, queued))
            return written if written is not None else queued
        self._put(line, written)
        return written

    def _put(self, line: bytes, written: Optional[Deferred]) -> None:
        self._pending += 1
        self._queue.put((line, written))

    def _written(self, count: int, confirm: list, error: str) -> None:
        """On the reactor, after the writer wrote ``count`` lines."""
        self._pending -= count
        if error:
            self.metrics.audit_errors.inc(("log",), count)
            self._errors.warn(f"Error in audit plugin 'log' affecting {count} audit events: "
                              f"{error}")
        for written in confirm:
            written.callback(not error)
        while self._waiting and self._pending < self.capacity:
            line, written_d, queued = self._waiting.popleft()
            self._put(line, written_d)
            queued.callback(None)

    # The writer thread.

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = self._take()
            if batch and batch[-1] is _STOP:
                stopping = True
                batch.pop()
            error = ""
            try:
                self.out.write_lines([line for line, _ in batch])
            except (OSError, ValueError) as e:
                error = str(e)
            confirm = [written for _, written in batch if written is not None]
            self.reactor.callFromThread(self._written, len(batch), confirm, error)
        try:
            self.out.close()
        except OSError:
            pass  # nothing is buffered: every line was written or reported failed
        self.reactor.callFromThread(self._end)

    def _end(self) -> None:
        self._ended = True
        waiters, self._stop_waiters = self._stop_waiters, []
        for stopped in waiters:
            stopped.callback(None)

    def _take(self) -> list:
        """The next lines to write (blocks until there is one)."""
        first = self._queue.get()
        batch = [first]
        if first is _STOP:
            return batch
        if self.mode == BATCH:
            limit, wait = self.max_batch, self.max_wait
        else:
            limit, wait = _GROUP, 0.0
        deadline = time.monotonic() + wait
        while len(batch) < limit:
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            batch.append(item)
            if item is _STOP:
                break
        return batch
