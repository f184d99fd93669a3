"""
The hand-off from the reactor to one WatchPods stream: a bounded, thread-safe queue.

The reactor ``offer``s each change and never waits; the stream's gRPC thread blocks in
``take``.  A stream that cannot keep up is not allowed to make the reactor buffer without
limit: once ``limit`` changes are waiting, the queue is emptied and ended with
RESOURCE_EXHAUSTED, and the client is expected to reconnect (and is sent the current
state again).  ``end`` (a cancelled client, a stopping server) wins over queued changes:
nobody is left to want them.
"""

from __future__ import annotations

import threading
from collections import deque

import grpc

from platformd.podinfo.errors import PodsError

#: Changes a watcher may have waiting before it is ended (see module docstring).  A node
#: runs at most ~110 pods; 256 pending changes means the client has stopped reading.
DEFAULT_LIMIT = 256


class WatchQueue:
    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = limit
        self._items: deque = deque()
        self._ready = threading.Condition(threading.Lock())
        self._ended: PodsError | None = None  # the PodsError that ends the stream, once decided

    def offer(self, item) -> bool:
        """Queue ``item`` (any thread; the reactor); False once this queue has ended."""
        with self._ready:
            if self._ended is not None:
                return False
            if len(self._items) >= self.limit:
                self._end(PodsError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the watcher fell more than {self.limit} changes behind; watch again"))
                return False
            self._items.append(item)
            self._ready.notify()
            return True

    def end(self, error: PodsError) -> None:
        """End the stream with ``error`` as soon as its thread looks (any thread)."""
        with self._ready:
            if self._ended is None:
                self._end(error)

    def take(self):
        """The next item, waiting for one; raises the ``PodsError`` that ended the queue."""
        with self._ready:
            while not self._items and self._ended is None:
                self._ready.wait()
            if self._ended is not None:
                raise self._ended
            return self._items.popleft()

    def __len__(self) -> int:
        with self._ready:
            return len(self._items)

    def _end(self, error: PodsError) -> None:
        self._ended = error
        self._items.clear()
        self._ready.notify_all()
