"""
Reactor-driven expiry: one ``LoopingCall`` on an injectable clock drops watch history
older than ``--watch-history-ttl`` (compacting the store to match) and continue-token
snapshots older than ``--continue-token-ttl``.  Tests drive it with ``Clock``.

The daemon runs it as a step of its boot sequence (``compose.boot_sequence``), started
once the cache has loaded.
"""

from __future__ import annotations

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()


class Expiry:
    def __init__(self, clock, cache, snapshots, interval: float = 5.0):
        self.cache = cache
        self.snapshots = snapshots
        self._loop = LoopingCall(self.run)
        self._loop.clock = clock
        self.interval = interval

    def start(self) -> None:
        self._loop.start(self.interval, now=False).addErrback(
            lambda f: log.failure("expiry stopped", f))

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def run(self) -> None:
        self.cache.expire()
        self.snapshots.expire()
