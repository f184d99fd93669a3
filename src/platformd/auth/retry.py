"""
A failed webhook call tried again, as upstream's ``k8s.io/apiserver/pkg/util/webhook``
does: ``WithExponentialBackoff`` over a ``wait.Backoff``.

The webhook authorizer's backoff is upstream's ``DefaultRetryBackoff()``
(``DefaultRetryBackoffWithInitialDelay(500ms)``): at most 5 attempts, the waits between
them 0.5 s, then each 1.5 times the one before (0.75, 1.125, 1.6875 s), each lengthened
by up to 20 % at random (``wait.Jitter``).  Only an error the caller says is worth
retrying (upstream's ``DefaultShouldRetry``) is retried; any other ends the call at once,
and after the last attempt the last error is the answer.  The waits are on the injected
clock; cancelling the call's Deferred stops it, waiting or calling.
"""

from __future__ import annotations

import random
from typing import Callable, Iterator

import attrs
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater


@attrs.frozen
class Backoff:
    """upstream's ``wait.Backoff`` (no cap): seconds, factor, jitter, attempts."""

    duration: float
    factor: float
    jitter: float
    steps: int

    def waits(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The ``steps - 1`` waits between attempts (``Backoff.Step``, ``wait.Jitter``)."""
        duration = self.duration
        for _ in range(self.steps - 1):
            yield duration + rand() * self.jitter * duration
            duration *= self.factor


#: upstream's webhook authorizer ``DefaultRetryBackoff()``.
DEFAULT_BACKOFF = Backoff(duration=0.5, factor=1.5, jitter=0.2, steps=5)


def with_backoff(attempt: Callable[[], Deferred], should_retry: Callable[[Exception], bool],
                 clock, backoff: Backoff = DEFAULT_BACKOFF,
                 rand: Callable[[], float] = random.random) -> Deferred:
    """
    A Deferred of ``attempt()``'s first success; a failure ``should_retry`` accepts is
    tried again after the next of ``backoff``'s waits on ``clock``, while there is one.
    """
    async def run():
        waits = backoff.waits(rand)
        while True:
            try:
                return await attempt()
            except Exception as error:
                wait = next(waits, None)
                if wait is None or not should_retry(error):
                    raise
            await deferLater(clock, wait)
    return ensureDeferred(run())
