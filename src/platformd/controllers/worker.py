"""
A controller's worker: take an item from its ``WorkQueue``, ``sync(item)`` (a value or
a Deferred), then forget it on success or queue it again through the rate limiter on
failure, logging that failure at most once a minute per message (``ratelog``); never two
workers on one item (the queue's promise).  A failure after the queue has shut down (the
controller stopped, the storage with it) is neither logged nor retried.
"""

from __future__ import annotations

from typing import Callable

from twisted.internet.defer import inlineCallbacks, maybeDeferred

from platformd.controllers.queue import QueueShutDown


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
