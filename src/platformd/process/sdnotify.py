"""
systemd's service notification protocol (``sd_notify(3)``): one datagram of
``KEY=VALUE`` lines to the ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET``.

A ``Type=notify`` unit is "started" only once the service says ``READY=1``; platformd says
it once serving with the cache loaded (after the boot sequence's ``ready`` step, as
upstream calls ``SdNotify(true, "READY=1\\n")`` after its post-start hooks).  ``STATUS=``
lines name the boot step under way (``systemctl status`` shows the last one);
``STOPPING=1`` starts the shutdown; with ``WatchdogSec=`` set, systemd restarts a service
that stops pinging: ``WATCHDOG=1`` is sent every half of ``$WATCHDOG_USEC`` from the
reactor, so a blocked reactor is what the watchdog catches.

The address is read once, when the ``Notifier`` is made, and the variables are removed
from the environment (upstream's ``unsetEnvironment=true``) so that no child process
(a credential plugin, a test helper) reports for platformd.  Without ``$NOTIFY_SOCKET``
every call does nothing.  A datagram is sent without waiting; when the socket's queue is
full (the kernel holds only ``net.unix.max_dgram_qlen`` datagrams, 10 by default, until
systemd reads them) the messages wait in order in a bounded queue and are sent again
every ``RETRY`` seconds, so neither is the reactor blocked nor READY=1 lost.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from typing import MutableMapping, Optional

from twisted.application import service
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()

_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
#: Seconds between attempts to send messages the socket's queue had no room for.
RETRY = 0.05
#: Messages kept while the socket's queue is full; beyond, the oldest are dropped.
MAX_WAITING = 64


def socket_address(value: str) -> str | bytes:
    """``$NOTIFY_SOCKET`` as a socket address: ``@name`` is the abstract name ``\\0name``."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


def watchdog_interval(environ, pid: int) -> Optional[float]:
    """
    Seconds between ``WATCHDOG=1`` pings: half of ``$WATCHDOG_USEC``, as ``sd_watchdog_enabled(3)``
    advises; None when the watchdog is off, or meant for another process
    (``$WATCHDOG_PID`` set and not ``pid``).
    """
    usec = environ.get("WATCHDOG_USEC")
    watchdog_pid = environ.get("WATCHDOG_PID")
    try:
        if not usec or int(usec) <= 0:
            return None
        if watchdog_pid and int(watchdog_pid) != pid:
            return None
    except ValueError:
        log.warn("ignoring a malformed watchdog setting: WATCHDOG_USEC={usec} "
                 "WATCHDOG_PID={pid}", usec=usec, pid=watchdog_pid)
        return None
    return int(usec) / 2_000_000


class Notifier:
    """Sends notifications to the service manager named by ``environ`` (see module)."""

    def __init__(self, clock, environ: MutableMapping[str, str] | None = None,
                 pid: int | None = None):
        self.clock = clock
        if environ is None:
            environ = os.environ
        value = environ.get("NOTIFY_SOCKET", "")
        #: Where datagrams go; None: not started by a service manager that listens.
        self.address = socket_address(value) if value else None
        self.watchdog_interval = watchdog_interval(environ, os.getpid() if pid is None else pid)
        for name in _VARIABLES:
            environ.pop(name, None)
        self._socket = (socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                        if self.address is not None else None)
        #: Messages waiting for room in the socket's queue, oldest first.
        self._waiting: deque = deque(maxlen=MAX_WAITING)
        self._retry = None

    def notify(self, *lines: str) -> None:
        """Send ``lines`` as one datagram (after any still waiting)."""
        if self._socket is None:
            return
        self._waiting.append("\n".join(lines).encode() + b"\n")
        if self._retry is None:
            self._send_waiting()

    def _send_waiting(self) -> None:
        self._retry = None
        sock, address = self._socket, self.address
        assert sock is not None and address is not None  # notify() sends nothing otherwise
        while self._waiting:
            try:
                sock.sendto(self._waiting[0], socket.MSG_DONTWAIT, address)
            except BlockingIOError:
                self._retry = self.clock.callLater(RETRY, self._send_waiting)
                return
            except OSError as e:
                log.warn("cannot notify the service manager ({notice}): {error}",
                         notice=self._waiting[0].decode().strip(),
                         error=e.strerror or str(e))
            self._waiting.popleft()

    def status(self, text: str) -> None:
        self.notify(f"STATUS={text}")

    def ready(self, status: str) -> None:
        self.notify("READY=1", f"STATUS={status}")

    def stopping(self, status: str = "shutting down") -> None:
        self.notify("STOPPING=1", f"STATUS={status}")

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")


class WatchdogService(service.Service):
    """Pings the watchdog every ``notifier.watchdog_interval`` seconds while running."""

    name = "watchdog"

    def __init__(self, notifier: Notifier, clock):
        self.notifier = notifier
        self.clock = clock
        self._loop: Optional[LoopingCall] = None

    def startService(self):
        super().startService()
        interval = self.notifier.watchdog_interval
        if interval is None or self.notifier.address is None:
            return
        self._loop = LoopingCall(self.notifier.watchdog)
        self._loop.clock = self.clock
        self._loop.start(interval, now=True)

    def stopService(self):
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
