"""
Logging each distinct message at most once per interval: errors that a busy client can
make on every request (a bad token, a dangling roleRef) would otherwise flood the log.
"""

from __future__ import annotations

import time

#: Seconds before the same message is logged again.
EVERY = 60.0
#: Distinct messages remembered; past this the memory starts over.
REMEMBERED = 1000


class RateLimitedLog:
    """``warn(message)`` logs through ``log`` with ``format`` (``{detail}`` in it)."""

    def __init__(self, log, format: str, clock=None, every: float = EVERY):
        self._log = log
        self._format = format
        self._now = clock.seconds if clock is not None else time.time
        self._every = every
        self._last: dict = {}

    def warn(self, message: str) -> None:
        now = self._now()
        last = self._last
        if len(last) > REMEMBERED:
            last.clear()
        if now - last.get(message, -self._every) >= self._every:
            last[message] = now
            self._log.warn(self._format, detail=message)
