"""
The audit log file, rotated as upstream's (``gopkg.in/natefinch/lumberjack.v2``, which
``--audit-log-maxsize/-maxbackup/-maxage/-compress`` configure).

Used only from the writer thread (``sink.py``): every call here blocks on the disk.

* A write that would take the file past ``max_size`` MB (0: lumberjack's 100 MB)
  first renames the file to ``<name>-<UTC 2006-01-02T15-04-05.000><ext>`` and starts a
  new one (mode 0600); a single write larger than the limit is refused.
* After a rotation, backups beyond ``max_backups`` (0: all kept) and older than
  ``max_age`` days (0: any age) are removed, newest kept first; with ``compress`` the
  remaining ones are gzipped (``.gz``) and the plain copy removed.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import time
from datetime import datetime, timezone
from typing import Callable, Optional

MEGABYTE = 1024 * 1024
#: lumberjack's ``defaultMaxSize``, used when ``--audit-log-maxsize`` is 0.
DEFAULT_MAX_SIZE = 100
_STAMP = "%Y-%m-%dT%H-%M-%S"


class RotatingFile:
    def __init__(self, path: str, max_size: int = 0, max_backups: int = 0, max_age: int = 0,
                 compress: bool = False, now: Callable[[], float] = time.time):
        self.path = path
        self.limit = (max_size or DEFAULT_MAX_SIZE) * MEGABYTE
        self.max_backups = max_backups
        self.max_age = max_age
        self.compress = compress
        self.now = now
        self._file: Optional[io.RawIOBase] = None
        self._size = 0
        directory, name = os.path.split(path)
        self._dir = directory or "."
        self._prefix, self._ext = os.path.splitext(name)

    def write_lines(self, lines: list) -> None:
        """
        Write ``lines`` (each one upstream write, so rotation falls between them) with
        as few system calls as the limit allows; unbuffered, so a failed write leaves
        nothing behind to grow.  ``OSError`` on failure (a line over the limit is
        refused as lumberjack refuses it, after the others are written).
        """
        chunk: list = []
        too_long = 0
        for line in lines:
            if len(line) > self.limit:
                too_long = len(line)
                continue
            if self._file is None:
                self._open_existing_or_new(len(line))
            elif self._size + len(line) > self.limit:
                self._write(chunk)
                chunk = []
                self._rotate()
            chunk.append(line)
            self._size += len(line)
        self._write(chunk)
        if too_long:
            raise OSError(f"write length {too_long} exceeds maximum file size {self.limit}")

    def _write(self, chunk: list) -> None:
        if not chunk:
            return
        assert self._file is not None
        view = memoryview(b"".join(chunk))
        while view:
            written = self._file.write(view)
            view = view[written or 0:]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open_existing_or_new(self, length: int) -> None:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            self._open_new()
            return
        if size + length >= self.limit:
            self._rotate()
            return
        self._file = open(self.path, "ab", buffering=0)
        self._size = size

    def _rotate(self) -> None:
        self.close()
        self._open_new()
        self._mill()

    def _open_new(self) -> None:
        os.makedirs(self._dir, mode=0o755, exist_ok=True)
        mode = 0o600
        if os.path.exists(self.path):
            mode = os.stat(self.path).st_mode & 0o777
            os.rename(self.path, self._backup_name())
        fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode)
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._size = 0

    def _backup_name(self) -> str:
        now = datetime.fromtimestamp(self.now(), timezone.utc)
        stamp = f"{now.strftime(_STAMP)}.{now.microsecond // 1000:03d}"
        return os.path.join(self._dir, f"{self._prefix}-{stamp}{self._ext}")

    def backups(self) -> list:
        """(time, file name) of every backup, newest first (lumberjack's ``oldLogFiles``)."""
        found = []
        for name in os.listdir(self._dir):
            stamp = self._stamp_of(name)
            if stamp is not None:
                found.append((stamp, name))
        return sorted(found, reverse=True)

    def _stamp_of(self, name: str) -> Optional[float]:
        start = self._prefix + "-"
        for ext in (self._ext, self._ext + ".gz"):
            if name.startswith(start) and name.endswith(ext) and len(name) > len(start + ext):
                text = name[len(start):len(name) - len(ext)]
                try:
                    parsed = datetime.strptime(text, _STAMP + ".%f")
                except ValueError:
                    continue
                return parsed.replace(tzinfo=timezone.utc).timestamp()
        return None

    def _mill(self) -> None:
        backups = self.backups()
        remove = []
        if self.max_backups > 0 and len(backups) > self.max_backups:
            # As lumberjack: a backup and its compressed copy count once.
            kept: set = set()
            for stamp, name in backups:
                base = name.removesuffix(".gz")
                if base in kept or len(kept) < self.max_backups:
                    kept.add(base)
                else:
                    remove.append(name)
        if self.max_age > 0:
            cutoff = self.now() - self.max_age * 86400
            remove += [name for stamp, name in backups if stamp < cutoff and name not in remove]
        for name in remove:
            os.remove(os.path.join(self._dir, name))
        if self.compress:
            for _stamp, name in backups:
                if name not in remove and not name.endswith(".gz"):
                    self._compress(os.path.join(self._dir, name))

    @staticmethod
    def _compress(path: str) -> None:
        """
        Gzip ``path`` to ``path.gz`` and remove it.  The copy is created with the log's
        mode (lumberjack's ``compressLogFile``): made with the default mode and narrowed
        after, it was open to other users while it was written.
        """
        mode = stat.S_IMODE(os.stat(path).st_mode)
        fd = os.open(path + ".gz", os.O_CREAT | os.O_TRUNC | os.O_WRONLY, mode)
        with open(path, "rb") as source, os.fdopen(fd, "wb") as raw, \
                gzip.GzipFile(fileobj=raw, mode="wb") as target:
            shutil.copyfileobj(source, target)
        os.remove(path)


def ensure(path: str) -> None:
    """
    Upstream's ``ensureLogFile``, at startup: the directory (0700) and the file (0600)
    exist and the file can be opened for appending (``OSError`` otherwise).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_RDWR, 0o600))
