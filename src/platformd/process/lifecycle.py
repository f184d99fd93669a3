"""
Services that start in order: ``Sequence`` and the small adapters it is made of.

``twisted.application.service.MultiService`` starts its children one after another but
does not wait for them: ``startService`` ignores what a child returns.  The daemon's
parts depend on each other asynchronously — the cache can load only once storage has
opened, the namespace controller and the pods socket need the loaded cache, the
built-in namespaces need all of it — so ``Sequence`` starts each child only once the
previous child's ``startService()`` result (a Deferred, or anything else meaning "done")
has fired, and stops them in reverse, each after the one started after it has stopped.
Storage, started first, stops last, so writes still pending finish.

The adapters give things with plain ``start()``/``stop()`` methods (an ``IStorage``, the
watch cache through ``Step``) a place in the tree without making them depend on twisted.application.
"""

from __future__ import annotations

from typing import Callable, Optional

from twisted.application import service
from twisted.internet.defer import Deferred, inlineCallbacks, maybeDeferred
from twisted.logger import Logger

log = Logger()


class Sequence(service.MultiService):
    """
    A ``MultiService`` whose children start one at a time, in the order added, each once
    the previous one's ``startService()`` result has fired; and stop in reverse, one at a
    time.

    ``startService()`` returns a Deferred firing once every child has started (failing
    with the first child's failure; the children after it are not started).  If the
    sequence is stopped while starting, the children not yet started never are.
    ``privilegedStartService`` is ``MultiService``'s: every child's, in order, at once.

    ``on_step``, if set, is called with each child's name as it starts (the daemon tells
    systemd which step is under way); ``on_stopping``, if set, as stopping begins.
    ``started`` is the Deferred the last ``startService()`` returned.
    """

    on_step: Optional[Callable[[str], None]] = None
    on_stopping: Optional[Callable[[], None]] = None
    started: Optional[Deferred] = None

    def startService(self) -> Deferred:
        service.Service.startService(self)
        self.started = self._start()
        return self.started

    @inlineCallbacks
    def _start(self):
        for child in list(self):
            if not self.running:
                return  # stopped while starting
            if self.on_step is not None:
                self.on_step(child.name)
            yield maybeDeferred(child.startService)

    @inlineCallbacks
    def stopService(self):
        service.Service.stopService(self)
        if self.on_stopping is not None:
            self.on_stopping()
        for child in reversed(list(self)):
            if not child.running:
                continue
            try:
                yield maybeDeferred(child.stopService)
            except Exception:
                # The services started before it still stop (storage last).
                log.failure("stopping {service} failed", service=child)


class Step(service.Service):
    """A service made of two functions (either may return a Deferred or be None)."""

    def __init__(self, name: str, start: Optional[Callable] = None,
                 stop: Optional[Callable] = None):
        self.name = name
        self._start = start
        self._stop = stop

    def startService(self):
        super().startService()
        if self._start is not None:
            return self._start()
        return None

    def stopService(self):
        super().stopService()
        if self._stop is not None:
            return self._stop()
        return None


def storage_service(storage) -> Step:
    """An ``IStorage`` as a service: ``start()`` opens (recovers) it, ``stop()`` lets
    pending writes finish and closes it."""
    return Step("storage", storage.start, storage.stop)

