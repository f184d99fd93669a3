"""
The bulk lane: where the reactor does the work of bulk writes, Events, so that they do
not slow the other requests (issue 32: 1,000 Events a second must not slow other writes
by more than 10 %; ``docs/performance.md``, "Events beside other writes").

Events are written often and waited on by few.  On one reactor thread, every piece of
an Event's work that runs while another request waits adds to that request's latency,
and in bursts the waits add up.  Three rules keep them out of the way:

- A write to a bulk kind, once authenticated, admitted by the in-flight limit and
  authorized, waits here (``BulkRequests``, the last filter); its acknowledgement by the
  storage, which carries on into its response, waits here too (``SQLiteStorage``).
- The lane works in turns of its own, scheduled with ``callLater(0)``: the turn's reads
  from sockets and the calls already due run first, and a turn ends once it has worked
  ``budget`` (0.1 ms: one Event's handling, or a few responses), so another request's
  next step never waits for more than about one Event's.
- While a write others wait on is with the storage's writer thread (``hold`` to
  ``release``), the lane does nothing, for up to ``max_hold`` seconds from the first
  such write.  The reactor then sleeps in ``epoll`` rather than running Python, and the
  writer thread gets the GIL at once.  Otherwise CPython's GIL, taken back by a busy
  thread after each short release (the "convoy effect"), lets the writer wait up to the
  switch interval (5 ms) at each of its SQLite calls.  Measured under bursts of Events
  (``bench_events.py --bursty``), this rule took a RoleBinding's commit from p90 3.2 ms
  to 0.8 ms.  The limit keeps Events moving under a steady stream of other writes: the
  pause ends after ``max_hold``, and the next one starts only once no other write is
  with the writer.

Bounded: the lane holds only requests the in-flight limit already admitted and
acknowledgements of writes already made.  A request cancelled while it waits (its
client gone, its deadline passed) is dropped when its turn comes.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Optional

import attrs
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime

#: The writes of these kinds (by storage prefix) are bulk: Events, core ``v1`` and
#: ``events.platform.io`` alike (one storage).
EVENTS = ("/registry/events/",)

#: Seconds of work after which the lane ends its turn (the reactor polls its sockets
#: again): an Event's handling takes longer, so it is one a turn, but a few
#: acknowledgements share one.  Against one piece of work a turn, Event creates/s
#: ×1.08 and CPU per Event ×0.94 (``bench/ab.py``), the RoleBindings beside 1,000
#: Events/s as fast; 0.5 ms let their p90 rise by about a fifth.
BUDGET = 0.0001

#: Seconds the lane waits for other writes at most, from the first: a RoleBinding's
#: commit beside 1,000 Events a second took p99 2 ms with the lane waiting.
MAX_HOLD = 0.005


@attrs.define(eq=False)
class BulkLane:
    """The lane (module docstring) on ``clock``; ``prefixes``: the bulk kinds' keys."""

    clock: IReactorTime
    prefixes: tuple = EVENTS
    max_hold: float = MAX_HOLD
    budget: float = BUDGET
    #: What measures ``budget`` (CPU-bound work: a monotonic high-resolution timer).
    timer: Callable[[], float] = time.perf_counter
    _work: deque = attrs.field(factory=deque, init=False)
    _call: Optional[IDelayedCall] = attrs.field(default=None, init=False)
    #: Other writes with the writer, and until when the lane waits for them.
    _held: int = attrs.field(default=0, init=False)
    _until: float = attrs.field(default=0.0, init=False)

    def later(self, work: Callable) -> Deferred:
        """A Deferred of ``work()``'s result; ``work`` runs in a turn of the lane, unless
        the Deferred was cancelled first."""
        done: Deferred = Deferred()

        def run():
            if not done.called:
                maybeDeferred(work).chainDeferred(done)
        self._work.append(run)
        self._schedule()
        return done

    def passing(self, result):
        """``result``, passed on in a turn of the lane (a callback for a Deferred)."""
        return self.later(lambda: result)

    def hold(self) -> None:
        """Another write went to the writer: the lane waits (module docstring)."""
        self._held += 1
        if self._held == 1:
            self._until = self.clock.seconds() + self.max_hold

    def release(self, result=None):
        """That write came back (a callback: ``result`` passes through)."""
        self._held -= 1
        if self._held == 0 and self._call is not None:
            self._call.cancel()  # it waited for the hold to end: run now
            self._call = None
            self._schedule()
        return result

    def _waiting(self) -> float:
        """Seconds the lane still waits for other writes (0: none)."""
        if not self._held:
            return 0.0
        return max(0.0, self._until - self.clock.seconds())

    def _schedule(self) -> None:
        if self._call is None and self._work:
            self._call = self.clock.callLater(self._waiting(), self._run)

    def _run(self) -> None:
        """A turn: work until the lane is empty, held, or past ``budget``."""
        self._call = None
        end = self.timer() + self.budget
        while self._work and not self._waiting():
            self._work.popleft()()
            if self.timer() >= end:
                break
        self._schedule()


def is_bulk(request, prefixes: tuple) -> bool:
    """
    Whether the storage's ``request`` (a commit: a list of writes; or a compaction) is
    bulk: writes of keys all under ``prefixes``.
    """
    return (bool(prefixes) and isinstance(request, list)
            and all(op.key.startswith(prefixes) for op in request))


_READS = frozenset({"get", "list", "watch"})


@attrs.define
class BulkRequests:
    """
    The filter (last in the chain) that sends writes to the bulk ``resources``
    ((group, resource) pairs) through ``lane``; reads go on at once.
    """

    lane: BulkLane
    resources: frozenset

    def __call__(self, ctx, proceed):
        info = ctx.info
        if (info.group, info.resource) not in self.resources or info.verb in _READS:
            return proceed(ctx)
        return self.lane.later(lambda: proceed(ctx))
