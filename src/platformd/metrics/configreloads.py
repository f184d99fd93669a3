"""
Upstream's metrics of a configuration file the server reloads while it runs
(``apiserver/pkg/server/options/authenticationconfig/metrics``, ``.../authorizationconfig/
metrics``): ``apiserver_<what>_config_controller_automatic_reloads_total`` and
``..._automatic_reload_last_timestamp_seconds`` by ``status`` (``success``, ``failure``)
and ``apiserver_id_hash`` count each reload that failed or took effect and say when;
``..._last_config_info{apiserver_id_hash, hash} 1`` names the configuration in use (the
file read at start, then each one that took effect).  A hash is upstream's ``getHash``:
``sha256:<hex>`` of the server's identity or of the file's bytes.
"""

from __future__ import annotations

import hashlib

from platformd.metrics.core import ALPHA, BETA, Counter, Gauge

SUCCESS, FAILURE = "success", "failure"


def config_hash(data: bytes) -> str:
    """``getHash``: ``sha256:<hex>``, or empty for nothing."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}" if data else ""


class ConfigReloads:
    """The three families of one reloaded file (``what``: ``authentication``, ...)."""

    def __init__(self, registry, server_id: str, clock, what: str):
        prefix = f"apiserver_{what}_config_controller"
        labels = ("status", "apiserver_id_hash")
        self.clock = clock
        self.server = config_hash(server_id.encode())
        self.total = registry.add(Counter(
            f"{prefix}_automatic_reloads_total",
            f"Total number of automatic reloads of {what} configuration split by status "
            "and apiserver identity.", labels, BETA))
        self.timestamp = registry.add(Gauge(
            f"{prefix}_automatic_reload_last_timestamp_seconds",
            f"Timestamp of the last automatic reload of {what} configuration split by "
            "status and apiserver identity.", labels, BETA))
        self.info = registry.add(Gauge(
            f"{prefix}_last_config_info",
            f"Information about the last applied {what} configuration with hash as label, "
            "split by apiserver identity.", ("apiserver_id_hash", "hash"), ALPHA))

    def failure(self) -> None:
        """A reload that did not take effect (the file unreadable, refused, unusable)."""
        self._count(FAILURE)

    def success(self, data: bytes) -> None:
        """A reload of ``data`` that took effect."""
        self._count(SUCCESS)
        self.applied(data)

    def applied(self, data: bytes) -> None:
        """``data`` is the configuration in use (upstream's ``RecordLastConfigInfo``)."""
        self.info.values.clear()
        self.info.set((self.server, config_hash(data)), 1)

    def _count(self, status: str) -> None:
        self.total.inc((status, self.server))
        self.timestamp.set((status, self.server), self.clock.seconds())
