"""
The values read when ``/metrics`` is scraped, from the parts that keep them as plain
numbers: objects stored and watch-cache counts per kind (``WatchCache.kind_counts``), the
in-flight counts (``api/filters.MaxInFlight``) and the database file's size.  Reading
them costs nothing on the request path; the database size is read in a thread.
"""

from __future__ import annotations

import os

from twisted.internet.threads import deferToThreadPool

#: Upstream truncates the watch cache's resource version to 15 digits.
_RV_DIGITS = 10 ** 15


def qualified(kind) -> str:
    """``groupResource.String()``: ``pods``, ``roles.rbac.authorization.platform.io``."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def install(metrics, cache, in_flight: dict, reactor, database: str = "") -> None:
    """
    Point ``metrics``' scraped families at ``cache`` (a ``WatchCache``), ``in_flight``
    (``MaxInFlight.in_flight``: mutating → count) and the SQLite file ``database``
    (its size read in ``reactor``'s thread pool).
    """
    counts = cache.kind_counts

    def per_kind(value):
        return lambda: {(kind.group, kind.plural): value(c) for kind, c in counts()}

    metrics.storage_objects.read = lambda: {(qualified(kind),): c.objects
                                            for kind, c in counts()}
    metrics.resource_objects.read = per_kind(lambda c: c.objects)
    metrics.cache_events_received.read = per_kind(lambda c: c.events_received)
    metrics.cache_events_dispatched.read = per_kind(lambda c: c.events_dispatched)
    metrics.cache_initializations.read = per_kind(lambda c: c.initializations)
    metrics.init_events.read = per_kind(lambda c: c.init_events)
    metrics.cache_resource_version.read = per_kind(lambda c: cache.revision % _RV_DIGITS)
    metrics.inflight.read = lambda: {("readOnly",): in_flight[False],
                                     ("mutating",): in_flight[True]}
    if database:
        size = DatabaseSize(database, reactor)
        metrics.probes.append(size.refresh)
        metrics.storage_size.read = lambda: {("",): size.value}
        metrics.storage_db_size.read = lambda: {(database,): size.value}


class DatabaseSize:
    """The SQLite file's size with its write-ahead log, read off the reactor."""

    def __init__(self, path: str, reactor):
        self.path = path
        self.reactor = reactor
        self.value = 0

    def refresh(self):
        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(),
                                 self._read).addCallback(self._store)

    def _read(self) -> int:
        total = 0
        for path in (self.path, self.path + "-wal"):
            try:
                total += os.stat(path).st_size
            except FileNotFoundError:
                pass
        return total

    def _store(self, value: int) -> None:
        self.value = value
