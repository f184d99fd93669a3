"""
The file beside a shared SQLite database through which the processes serving it agree
(``docs/storage.md``, "Several processes on one database"): ``PATH.revision``, 0600.

- Its lock (``flock``) is the writers' lock: a writer holds it around each batch
  transaction, so the processes' writers take turns and revisions stay one sequence.
  ``flock`` blocks in the kernel and wakes the next writer as soon as it is released
  (SQLite's own busy handler sleeps 1 to 100 ms between tries), and the kernel releases
  it when a process dies, whatever it was doing.  Each ``SharedRevision`` opens the file
  itself, so two stores in one process exclude each other as two processes do.
- Its first 8 bytes are the newest committed revision, the next 8 the compacted one,
  written by the writer holding the lock after its COMMIT and before its writes are
  acknowledged.  They are memory-mapped: ``newest`` is a load from memory, no system
  call, so ``sync()`` can tell whether this process has seen every committed revision
  without a thread hop.  Each is one aligned 8-byte store, which readers never see torn.
- Its bell: after the store the writer ``pwrite``s the same 16 bytes again.  The bytes
  do not change (a reader still never sees a torn value), but the write is what
  ``inotify`` reports (a store through a mapping is not), so the other processes hear
  of a commit at once instead of at their next poll.
"""

from __future__ import annotations

import fcntl
import mmap
import os
from contextlib import contextmanager
from typing import Iterator

from platformd.files import privatefiles

#: The two revisions, 8 bytes each.
SIZE = 16


class SharedRevision:
    """
    The open file (see module docstring).  A plain class: it owns a descriptor and a
    mapping, opened by the writer thread and closed by it when the store stops.
    """

    def __init__(self, path: str):
        privatefiles.file(path)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            if os.fstat(self._fd).st_size < SIZE:
                os.ftruncate(self._fd, SIZE)  # zeros: a new database's revisions
            self._map = mmap.mmap(self._fd, SIZE)
        except OSError:
            os.close(self._fd)
            raise
        self._slots = memoryview(self._map).cast("q")

    @property
    def newest(self) -> int:
        """The newest revision committed by any process (any thread may read it)."""
        return self._slots[0]

    @property
    def compacted(self) -> int:
        """The revision the database is compacted at."""
        return self._slots[1]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The writers' lock, held for the block (blocking until it is free)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def publish(self, newest: int, compacted: int) -> None:
        """Store both revisions and ring the bell; only under ``locked()``."""
        self._slots[0] = newest
        self._slots[1] = compacted
        os.pwrite(self._fd, self._map[:SIZE], 0)

    def close(self) -> None:
        self._slots.release()
        self._map.close()
        os.close(self._fd)
