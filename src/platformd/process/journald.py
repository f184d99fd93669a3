"""
Logging to the systemd journal with structured fields: a Twisted log observer that
speaks journald's native protocol (``systemd.journal-fields(7)``, "Native Journal
Protocol"), one datagram per event to ``/run/systemd/journal/socket``, stdlib only.

``twistd --logger platformd.process.journald.observer`` (what the unit runs) calls ``observer()``:
when ``$JOURNAL_STREAM`` names the process's standard error (systemd connected it to the
journal, ``systemd.exec(5)``) and the journal socket exists, events go to the journal
with their fields; otherwise they are the usual text lines on standard error.

Each event becomes ``MESSAGE`` (the formatted text, with the traceback of a failure),
``PRIORITY`` (syslog level from the Twisted level), ``SYSLOG_IDENTIFIER=platformd``,
``LOGGER`` (the Twisted namespace, e.g. ``platformd.service``) and one field per scalar
value the event carries (``host``, ``port``, ``path`` ... upper-cased:
``journalctl -u platformd PATH=/etc/platformd/authz.yaml``).

Sending never blocks the reactor: datagrams go out with ``MSG_DONTWAIT``.  An event too
big for one datagram is passed as a sealed memfd (as ``sd_journal_send`` does); when the
journal cannot take an event (its queue full, the socket gone) the event is written as
a text line to standard error instead, which systemd also sends to the journal.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import socket
import struct
import sys
from typing import IO, Iterator, Optional

from twisted.logger import (
    ILogObserver, LogLevel, formatEvent, textFileLogObserver,
)
from zope.interface import implementer

JOURNAL_SOCKET = "/run/systemd/journal/socket"
IDENTIFIER = "platformd"

_PRIORITY = {LogLevel.debug: 7, LogLevel.info: 6, LogLevel.warn: 4, LogLevel.error: 3,
             LogLevel.critical: 2}
#: Fields this observer sets itself: an event's own value never replaces them.
_OWN = frozenset({"MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "LOGGER"})
_INVALID = re.compile(r"[^A-Z0-9_]")


def field_name(key: str) -> Optional[str]:
    """An event key as a journal field name (upper case, digits, ``_``; not starting
    with ``_`` or a digit, at most 64 characters), or None if nothing is left."""
    name = _INVALID.sub("_", key.upper()).lstrip("_0123456789")[:64]
    return name or None


def _fields(event: dict) -> Iterator[tuple[str, str]]:
    text = formatEvent(event)
    failure = event.get("log_failure")
    if failure is not None:
        text = f"{text}\n{failure.getTraceback()}"
    yield "MESSAGE", text
    yield "PRIORITY", str(_PRIORITY.get(event.get("log_level"), 6))
    yield "SYSLOG_IDENTIFIER", IDENTIFIER
    yield "LOGGER", str(event.get("log_namespace", ""))
    for key, value in event.items():
        if key.startswith("log_") or not isinstance(value, (str, int, float)):
            continue
        name = field_name(key)
        if name is not None and name not in _OWN:
            yield name, str(value)


def serialize(event: dict) -> bytes:
    """The event in the native protocol: ``NAME=value`` lines; a value holding a newline
    as ``NAME``, its length as 64-bit little endian, the bytes."""
    out = bytearray()
    for name, value in _fields(event):
        data = value.encode("utf-8", "replace")
        if b"\n" in data:
            out += name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return bytes(out)


@implementer(ILogObserver)
class JournalObserver:
    """Sends each event to the journal at ``path`` (see module); ``fallback`` takes the
    events the journal could not."""

    def __init__(self, path: str = JOURNAL_SOCKET, fallback=None):
        self.path = path
        self.fallback = fallback or textFileLogObserver(sys.__stderr__ or sys.stderr)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def __call__(self, event: dict) -> None:
        data = serialize(event)
        try:
            try:
                self._socket.sendto(data, socket.MSG_DONTWAIT, self.path)
            except OSError as e:
                if e.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                    raise
                self._send_memfd(data)
        except OSError:
            self.fallback(event)

    def _send_memfd(self, data: bytes) -> None:
        """A big event: its bytes in a sealed memfd, the descriptor in an empty datagram."""
        fd = os.memfd_create("journal-message", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.write(fd, data)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                        | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
            self._socket.sendmsg([], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                       struct.pack("i", fd))],
                                  socket.MSG_DONTWAIT, self.path)
        finally:
            os.close(fd)

    def close(self) -> None:
        self._socket.close()


def connected_to_journal(environ, stream: IO) -> bool:
    """True if ``$JOURNAL_STREAM`` (``device:inode``) is the file ``stream`` writes to."""
    value = environ.get("JOURNAL_STREAM", "")
    device, sep, inode = value.partition(":")
    if not sep:
        return False
    try:
        st = os.fstat(stream.fileno())
        return (st.st_dev, st.st_ino) == (int(device), int(inode))
    except (OSError, ValueError):
        return False


def choose(environ, stderr: IO, path: str = JOURNAL_SOCKET):
    """The journal observer if ``stderr`` is connected to the journal and ``path`` exists;
    else a text observer on ``stderr``."""
    text = textFileLogObserver(stderr)
    if connected_to_journal(environ, stderr) and os.path.exists(path):
        return JournalObserver(path, fallback=text)
    return text


def observer():
    """``twistd --logger platformd.process.journald.observer``: the observer for this process.
    twistd redirects ``sys.stderr`` into the log, so the real standard error is used."""
    return choose(os.environ, sys.__stderr__ or sys.stderr)
