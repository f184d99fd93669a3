"""
The controllers' work queue, with client-go's ``util/workqueue`` semantics (a rate-
limiting, delaying queue):

- ``add(item)``: an item already waiting is not queued twice (the dirty set); an item
  being processed is queued again only once ``done(item)`` is called, so no two workers
  ever hold the same item;
- ``get()``: a Deferred firing with the next item (``QueueShutDown`` once shut down); a
  worker waiting is handed an added item on a later reactor turn, never inside the
  ``add`` (an informer's handler), so the changes of one turn are gathered first;
- ``add_after(item, delay)`` on the injected clock (an item already waiting for a later
  time is brought forward); ``add_rate_limited(item)`` waits as the rate limiter says,
  ``forget(item)`` resets its count, ``num_requeues(item)`` reads it;
- ``shut_down()``: delayed adds are cancelled and waiting workers hear ``QueueShutDown``.

Rate limiters: ``ItemExponentialFailureRateLimiter`` (``default_rate_limiter()`` is
``DefaultControllerRateLimiter``'s per-item part: 5 ms, doubling, at most 1000 s) and
``FixedRateLimiter`` (the same delay each time).
"""

from __future__ import annotations

from collections import deque
from typing import Hashable, Optional

from twisted.internet.defer import Deferred, fail, succeed


class QueueShutDown(Exception):
    """The queue was shut down: a worker waiting on it stops."""


class ItemExponentialFailureRateLimiter:
    """``base * 2 ** requeues`` seconds per item, at most ``maximum``."""

    def __init__(self, base: float = 0.005, maximum: float = 1000.0):
        self.base = base
        self.maximum = maximum
        self._failures: dict = {}

    def when(self, item: Hashable) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        return min(self.base * 2 ** min(exponent, 64), self.maximum)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)


class FixedRateLimiter(ItemExponentialFailureRateLimiter):
    """The same ``delay`` before every retry (requeues still counted)."""

    def __init__(self, delay: float):
        super().__init__(delay, delay)

    def when(self, item: Hashable) -> float:
        super().when(item)
        return self.base


def default_rate_limiter() -> ItemExponentialFailureRateLimiter:
    """Upstream's ``DefaultControllerRateLimiter``'s item limiter: 5 ms doubling to 1000 s."""
    return ItemExponentialFailureRateLimiter(0.005, 1000.0)


class WorkQueue:
    """``WorkQueue(clock, rate_limiter=None)``: see the module docstring."""

    def __init__(self, clock, rate_limiter=None):
        self.clock = clock
        self.rate_limiter = rate_limiter if rate_limiter is not None else default_rate_limiter()
        self._queue: deque = deque()
        self._dirty: set = set()
        self._processing: set = set()
        self._getters: deque = deque()
        self._wake_call = None
        #: Delayed adds: item -> (ready time, DelayedCall).
        self._waiting: dict = {}
        self.shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, item: Hashable) -> None:
        if self.shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake()

    def _wake(self) -> None:
        if self._getters and self._queue and self._wake_call is None:
            self._wake_call = self.clock.callLater(0, self._hand_out)

    def _hand_out(self) -> None:
        self._wake_call = None
        while self._getters and self._queue:
            self._getters.popleft().callback(self._take())

    def _take(self) -> Hashable:
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def get(self) -> Deferred:
        if self.shutting_down:
            return fail(QueueShutDown())
        if self._queue and not self._getters:
            return succeed(self._take())
        d: Deferred = Deferred()
        self._getters.append(d)
        self._wake()
        return d

    def done(self, item: Hashable) -> None:
        self._processing.discard(item)
        if item in self._dirty and not self.shutting_down:
            self._queue.append(item)
            self._wake()

    def add_after(self, item: Hashable, delay: float) -> None:
        if self.shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        ready = self.clock.seconds() + delay
        found: Optional[tuple] = self._waiting.get(item)
        if found is not None:
            if found[0] <= ready:
                return
            found[1].cancel()

        def due():
            del self._waiting[item]
            self.add(item)
        self._waiting[item] = (ready, self.clock.callLater(delay, due))

    def add_rate_limited(self, item: Hashable) -> None:
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: Hashable) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.rate_limiter.num_requeues(item)

    def shut_down(self) -> None:
        """Drop what waits, cancel delayed adds; waiting workers hear ``QueueShutDown``."""
        self.shutting_down = True
        for _ready, call in self._waiting.values():
            if call.active():
                call.cancel()
        self._waiting.clear()
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        self._wake_call = None
        self._queue.clear()
        self._dirty.clear()
        getters, self._getters = self._getters, deque()
        for d in getters:
            d.errback(QueueShutDown())
