"""
Logging each distinct message at most once per interval: errors that a busy client can
make on every request (a bad token, a dangling roleRef, a bug it keeps reaching) or that
a stored object makes a controller repeat (a write that keeps failing) would otherwise
flood the log, tracebacks above all.

A ``RateLimitedLog`` belongs to the object that logs (a server, a controller, a
listener), so each keeps its own memory and a test's server starts with none::

    self._failures = RateLimitedLog(log, clock=reactor)
    ...
    except Exception:
        self._failures.failure(f"aggregating ClusterRole {name} failed; retrying")

Messages that differ per request (a path, a user) pass a ``key`` naming what repeats:
``origin(failure)`` for a traceback (the same bug, however it is reached), or a fixed
word for a loop that fails the same way each turn (an ``accept()`` out of descriptors).
"""

from __future__ import annotations

import time
from typing import Optional

from twisted.python.failure import Failure

#: Seconds before the same key is logged again.
EVERY = 60.0
#: Distinct keys remembered; past this the memory starts over.
REMEMBERED = 1000


class RateLimitedLog:
    """
    ``warn``, ``error`` and ``failure`` log through ``log`` (a twisted ``Logger``) with
    ``format`` (``{detail}`` in it: the message), at most once per ``every`` seconds per
    ``key`` (default: the message).  ``clock``: a reactor or ``Clock`` (default: time).
    """

    def __init__(self, log, format: str = "{detail}", clock=None, every: float = EVERY):
        self._log = log
        self._format = format
        self._now = clock.seconds if clock is not None else time.time
        self._every = every
        self._last: dict = {}

    def due(self, key: str) -> bool:
        """Whether ``key`` may be logged now (and, if so, note that it is)."""
        now = self._now()
        last = self._last
        if len(last) > REMEMBERED:
            last.clear()
        if now - last.get(key, -self._every) < self._every:
            return False
        last[key] = now
        return True

    def warn(self, message: str, key: Optional[str] = None) -> None:
        if self.due(message if key is None else key):
            self._log.warn(self._format, detail=message)

    def error(self, message: str, key: Optional[str] = None) -> None:
        if self.due(message if key is None else key):
            self._log.error(self._format, detail=message)

    def failure(self, message: str, failure: Optional[Failure] = None,
                key: Optional[str] = None) -> None:
        """``Logger.failure``: the traceback of ``failure`` (default: the exception
        being handled), at critical level."""
        if self.due(message if key is None else key):
            self._log.failure(self._format, failure, detail=message)


def origin(failure: Optional[Failure] = None) -> str:
    """
    Where ``failure`` (default: the exception being handled) was raised: its type and
    innermost frame, the same for every request that reaches one bug.
    """
    failure = failure if failure is not None else Failure()
    where = failure.frames[-1][1:3] if failure.frames else ("?", 0)
    kind = failure.type
    name = f"{kind.__module__}.{kind.__qualname__}" if kind is not None else "?"
    return f"{name} at {where[0]}:{where[1]}"
