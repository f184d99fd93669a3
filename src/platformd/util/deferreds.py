"""
Values that may come now or later.

The seams that answer per request (authenticators, authorizers, admission plugins,
filters) may answer at once or with a Deferred: a static token is a dict lookup, a JWKS
fetch or an authorization webhook is a network call.  ``then`` keeps the first case free
of Deferred overhead on the hot path and the second correct.
"""

from __future__ import annotations

from typing import Callable, Optional

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure


def then(result, callback, *args):
    """``callback(result, *args)`` at once, or when ``result`` fires if it is a Deferred."""
    if isinstance(result, Deferred):
        return result.addCallback(callback, *args)
    return callback(result, *args)


class Shared:
    """
    One run of ``work`` at a time, shared by every caller that asks while it runs (a
    KMS plugin asked once for all the writes and health checks waiting on it).

    ``join(*args)`` is a Deferred of the run's result, a fresh one per caller, so that
    cancelling it (a request's deadline) ends that caller's wait and not the run; a run
    ``work(*args)`` is started when none is under way, else ``args`` are unused.  A
    failure reaches each caller as its own ``Failure`` of the same exception.
    """

    def __init__(self, work: Callable[..., Deferred]):
        self._work = work
        self._waiting: Optional[list] = None

    @property
    def running(self) -> bool:
        return self._waiting is not None

    def join(self, *args) -> Deferred:
        waiting: Deferred = Deferred()
        if self._waiting is not None:
            self._waiting.append(waiting)
            return waiting
        self._waiting = [waiting]
        maybeDeferred(self._work, *args).addBoth(self._done)
        return waiting

    def _done(self, outcome) -> None:
        assert self._waiting is not None
        waiting, self._waiting = self._waiting, None
        for caller in waiting:
            if caller.called:  # cancelled
                continue
            if isinstance(outcome, Failure):
                caller.errback(Failure(outcome.value))
            else:
                caller.callback(outcome)
