"""
A file looked at every ``interval`` seconds on an injected clock (the reloadable
configuration files, as upstream polls its own once a minute).
"""

from __future__ import annotations

from typing import Optional

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()

#: upstream checks its configuration files once a minute.
DEFAULT_INTERVAL = 60.0


class FilePoller:
    """
    ``start()`` calls ``check()`` every ``interval`` seconds; ``changed()`` answers the
    file's new bytes when they differ from the last seen (None otherwise, and when the
    file cannot be read: ``unreadable`` is then logged with ``{path}`` and ``{error}``).
    Subclasses implement ``check``, calling ``failed()`` or ``reloaded(data)`` as a new
    file is refused or takes effect; with ``reloads`` (``metrics.configreloads``) those,
    an unreadable file and the file read at start are counted as upstream counts them.
    """

    def __init__(self, path: str, clock, unreadable: str,
                 interval: float = DEFAULT_INTERVAL, reloads=None):
        self.path = path
        self.clock = clock
        self.interval = interval
        self.reloads = reloads
        self._unreadable = unreadable
        self._data = self._read()
        self._loop: Optional[LoopingCall] = None
        if reloads is not None and self._data is not None:
            reloads.applied(self._data)

    def start(self) -> None:
        self._loop = LoopingCall(self.check)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def check(self) -> bool:
        raise NotImplementedError

    def changed(self) -> Optional[bytes]:
        data = self._read()
        if data is None:
            self.failed()  # upstream counts each read that fails, and tries again
        if data is None or data == self._data:
            return None
        self._data = data
        return data

    def failed(self) -> None:
        """A new file did not take effect."""
        if self.reloads is not None:
            self.reloads.failure()

    def reloaded(self, data: bytes) -> None:
        """``data`` took effect."""
        if self.reloads is not None:
            self.reloads.success(data)

    def _read(self) -> Optional[bytes]:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError as error:
            log.error(self._unreadable, path=self.path, error=error.strerror)
            return None
