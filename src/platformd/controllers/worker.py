"""
A controller's worker: take an item from its ``WorkQueue``, ``sync(item)`` (a value or
a Deferred), then forget it on success or queue it again through the rate limiter on
failure, logging that failure at most once a minute per message (``ratelog``); never two
workers on one item (the queue's promise).  A failure after the queue has shut down (the
controller stopped, the storage with it) is neither logged nor retried.
"""

from __future__ import annotations

from typing import Callable, Optional

from twisted.internet.defer import inlineCallbacks, maybeDeferred

from platformd.controllers.queue import QueueShutDown, WorkQueue


class Controller:
    """
    What every controller shares: event handlers on informers (``follow``) feeding one
    ``WorkQueue`` that ``work`` drains.  ``stop`` removes the handlers and shuts the queue
    down, so a later ``start`` begins afresh.
    """

    def __init__(self, clock):
        self.clock = clock
        self.queue: Optional[WorkQueue] = None
        self._registrations: list = []

    def follow(self, informer, handlers) -> None:
        """Call ``handlers`` (``EventHandlers``) on ``informer``'s events until ``stop``."""
        self._registrations.append((informer, informer.add_handler(handlers)))

    def stop(self) -> None:
        if self.queue is None:
            return
        for informer, registration in self._registrations:
            informer.remove_handler(registration)
        self._registrations = []
        self.queue.shut_down()
        self.queue = None


@inlineCallbacks
def work(queue, sync: Callable, failed: Callable[[object], str], failures):
    """
    Process ``queue`` until it shuts down: ``failed(item)`` words the log line of a
    failed sync, ``failures`` a ``RateLimitedLog``.
    """
    while True:
        try:
            item = yield queue.get()
        except QueueShutDown:
            return
        try:
            yield maybeDeferred(sync, item)
        except Exception:
            if queue.shutting_down:
                return
            failures.failure(failed(item))
            queue.add_rate_limited(item)
        else:
            queue.forget(item)
        finally:
            queue.done(item)
