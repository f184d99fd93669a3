"""
Work that grows with one request, done on the event loop in slices.

A request line may carry a megabyte of selector terms (Go's header limit, as upstream
reads it), and a list may hold a hundred thousand objects: done in one go, either holds
the reactor for a second or more, and every other client with it (a ``/livez`` probe
included); the in-flight limit cannot help, since the time is the loop's.  Such work is
written as a generator that yields (a bare ``yield``) every ``STEP`` units of work and
returns its result; ``run`` does the first slice at once (nearly every request needs no
more, and pays no Deferred for it) and hands the rest to Twisted's cooperator, which
runs every such task for about 10 ms at a time and lets the reactor in between.
"""

from __future__ import annotations

from typing import Generator, TypeVar

from twisted.internet import task
from twisted.internet.defer import Deferred

T = TypeVar("T")

#: Units of work (tokens, terms, objects) between two yields: well under a millisecond.
STEP = 256

Work = Generator[None, None, T]


def run(work: Work):
    """
    ``work``'s return value: at once when it ends within its first slice, else a
    Deferred of it (``deferreds.then`` takes either); what it raises, likewise.
    Cancelling the Deferred (the client went away) stops the work.
    """
    try:
        next(work)
    except StopIteration as finished:
        return finished.value
    result = []

    def rest():
        result.append((yield from work))

    running = task.cooperate(rest())
    done: Deferred = Deferred(lambda _: running.stop())
    running.whenDone().addCallbacks(
        lambda _: done.callback(result[0]),
        lambda failure: None if failure.check(task.TaskStopped) else done.errback(failure))
    return done
