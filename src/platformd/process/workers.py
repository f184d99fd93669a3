"""
``--workers N``: N processes serving HTTPS on one port over one ``--data-dir``, so the
server uses N cores (docs/workers.md).

This process, worker 0, opens everything first: it listens, loads, bootstraps and is
ready (and tells systemd so) as a server alone would.  Then ``Workers`` starts workers
1 .. N-1, each ``twistd -n platformd`` with this process's own arguments and
``--worker I``, and keeps them running:

- descriptor 3 of a worker is the listening socket (the kernel hands each new
  connection to whichever process accepts it first, so a busy worker takes fewer); a
  worker adopts it only once it is ready (``ListenerService(at_start=False)``);
- descriptor 0 is a pipe from this process, which never writes to it: when this
  process ends, however it ends, the worker reads end-of-file and stops gracefully
  (``parentwatch.py``), so no worker outlives worker 0;
- descriptors 1 and 2 are pipes read here, each line logged as ``worker I: ...`` at
  the level the worker wrote it at, so the workers' logs are in this process's log
  (journald, with their priorities; a file);
- with an audit log, descriptor 4 is a pipe of audit lines written to the one log here
  (``audit/sink.Pipe``, ``LogSink.relay``), read no further while the log's queue is full;
- the environment loses systemd's notification, watchdog and socket-activation
  variables (this process speaks to systemd for all).

Every worker is a whole server over the shared storage (``SQLiteStorage(shared=True)``,
or etcd): its own cache, controllers and metrics.  Only worker 0 serves the pods socket.

A worker that exits while this one runs is logged and started again, after 1 s, then
doubling up to 30 s while it keeps exiting within a minute of its start.  SIGHUP is
passed on (each reloads its configuration files).  Stopping (``terminate``, at the start
of this process's graceful termination, so both run at once): SIGTERM to each worker,
which terminates gracefully as this one does; one still running after ``STOP_TIMEOUT``
is killed.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Optional

from twisted.application import service
from twisted.internet import error
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import InvalidLogLevelError, LogLevel, Logger

log = Logger()

#: A worker's descriptors (module docstring).
LISTENING_FD = 3
AUDIT_FD = 4
#: Seconds before a worker that exited is started again, doubled per quick exit.
RESTART_DELAY, MAX_RESTART_DELAY = 1.0, 30.0
#: A worker that ran this long before exiting is started again after RESTART_DELAY.
STEADY = 60.0
#: Seconds a worker has to exit after SIGTERM: the graceful termination's bound
#: (service.SHUTDOWN_TIMEOUT plus the watches' WATCH_END_TIMEOUT) and some.
STOP_TIMEOUT = 75.0
#: A log or audit line longer than this is cut there (a worker is trusted, but a
#: buffer here is bounded all the same).
MAX_LINE = 1 << 20
#: The time twistd's log puts first on a line (this process's log adds its own).
_STAMP = re.compile(rb"^\d{4}-\d\d-\d\dT[\d:]+[+-]\d{4} ")
#: The level in twistd's text form of a log line: ``[namespace#level] ``.
_LEVEL = re.compile(r"^\[[^\]#]*#(\w+)\] ")
#: ``twistd``, run by this interpreter.
_TWISTD = "from twisted.scripts.twistd import run; run()"
#: Variables meant for this process only.
_OWN_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID",
                  "LISTEN_FDS", "LISTEN_FDNAMES")


def worker_arguments(argv, index: int) -> list:
    """This process's platformd arguments for worker ``index``: ``--workers`` dropped,
    ``--worker index`` added."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            out.append(arg)
    return [*out, "--worker", str(index)]


def level_of(line: str) -> LogLevel:
    """
    The level a worker's log line was written at (twistd's text form names it:
    ``[platformd.service#warn] ...``), so that worker 0 logs it at that level (a
    journal's priority); info for a line that names none (a traceback's lines).
    """
    match = _LEVEL.match(line)
    if match is None:
        return LogLevel.info
    try:
        return LogLevel.levelWithName(match.group(1))
    except InvalidLogLevelError:
        return LogLevel.info


def worker_environment(environ) -> dict:
    return {k: v for k, v in environ.items() if k not in _OWN_VARIABLES}


class Lines:
    """Complete lines out of a stream's chunks, each at most MAX_LINE bytes."""

    def __init__(self):
        self._partial = b""

    def feed(self, data: bytes) -> list:
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            lines.append(self._partial[:MAX_LINE])
            self._partial = b""
        return [line + b"\n" for line in lines]


class _Worker(ProcessProtocol):
    """One worker process: its output logged, its audit lines relayed."""

    #: The process (``IProcessTransport``), set by ``spawnProcess``.
    transport: Any

    def __init__(self, index: int, relay: Optional[Callable], ended: Callable):
        self.index = index
        self.relay = relay
        self.ended = ended
        self.started_at = 0.0
        self.exited: Deferred = Deferred()
        self._streams = {1: Lines(), 2: Lines(), AUDIT_FD: Lines()}

    def childDataReceived(self, fd: int, data: bytes) -> None:
        lines = self._streams[fd].feed(data)
        if fd != AUDIT_FD:
            for line in lines:
                text = _STAMP.sub(b"", line).decode("utf-8", "replace").rstrip()
                log.emit(level_of(text), "worker {index}: {line}", index=self.index,
                         line=text)
            return
        for line in lines:
            waiting = self.relay(line) if self.relay is not None else None
            if waiting is not None:  # the log's queue is full: wait for room
                pipe = self.transport.pipes[AUDIT_FD]
                pipe.pauseProducing()
                waiting.addCallback(lambda _: pipe.resumeProducing())

    def processEnded(self, reason) -> None:
        self.exited.callback(None)
        self.ended(self, reason)


class Workers(service.Service):
    """Starts and supervises workers 1 .. ``count`` - 1 (module docstring)."""

    name = "workers"

    def __init__(self, reactor, count: int, argv, listening_fd: Callable[[], int],
                 relay: Optional[Callable] = None, executable: str = sys.executable,
                 environ=os.environ):
        self.reactor = reactor
        self.count = count
        self.argv = tuple(argv)
        #: The listening socket's descriptor, asked once listening.
        self.listening_fd = listening_fd
        #: ``LogSink.relay`` of the audit log, or None (no audit log).
        self.relay = relay
        self.executable = executable
        self.environ = environ
        #: The running workers by index.
        self.workers: dict[int, _Worker] = {}
        self._delays: dict[int, float] = {}
        self._restarts: dict = {}
        #: Fired once every worker has exited after ``terminate``; None before.
        self._stopped: Optional[Deferred] = None
        self._stop_waiters: list = []

    def startService(self):
        super().startService()
        for index in range(1, self.count):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        self._restarts.pop(index, None)
        worker = _Worker(index, self.relay, self._ended)
        fds: dict = {0: "w", 1: "r", 2: "r", LISTENING_FD: self.listening_fd()}
        if self.relay is not None:
            fds[AUDIT_FD] = "r"
        worker.started_at = self.reactor.seconds()
        self.reactor.spawnProcess(
            worker, self.executable,
            [self.executable, "-c", _TWISTD, "-n", "--pidfile=", "platformd",
             *worker_arguments(self.argv, index)],
            env=worker_environment(self.environ), childFDs=fds)
        self.workers[index] = worker
        log.info("worker {index} started (pid {pid})", index=index,
                 pid=worker.transport.pid)

    def _ended(self, worker: _Worker, reason) -> None:
        if self.workers.get(worker.index) is worker:
            del self.workers[worker.index]
        if self._stopped is not None:
            return
        ran = self.reactor.seconds() - worker.started_at
        delay = (RESTART_DELAY if ran >= STEADY
                 else min(self._delays.get(worker.index, RESTART_DELAY / 2) * 2,
                          MAX_RESTART_DELAY))
        self._delays[worker.index] = delay
        log.warn("worker {index} exited ({reason}); starting it again in {delay:g}s",
                 index=worker.index, reason=reason.getErrorMessage(), delay=delay)
        self._restarts[worker.index] = self.reactor.callLater(delay, self._spawn,
                                                              worker.index)

    def reload(self) -> None:
        """SIGHUP to every worker."""
        self._signal("HUP")

    def terminate(self) -> Deferred:
        """SIGTERM to every worker; fires once all have exited (killed after
        STOP_TIMEOUT).  Calling it again waits for the same end."""
        d: Deferred = Deferred()
        if self._stopped is not None and self._stopped.called:
            d.callback(None)
            return d
        self._stop_waiters.append(d)
        if self._stopped is None:
            for call in self._restarts.values():
                call.cancel()
            self._restarts.clear()
            exits = [w.exited for w in self.workers.values()]
            self._signal("TERM")
            kill = self.reactor.callLater(STOP_TIMEOUT, self._signal, "KILL")
            self._stopped = DeferredList(exits)
            self._stopped.addCallback(self._all_exited, kill)
        return d

    def _all_exited(self, _, kill) -> None:
        if kill.active():
            kill.cancel()
        waiters, self._stop_waiters = self._stop_waiters, []
        for d in waiters:
            d.callback(None)

    def stopService(self):
        super().stopService()
        return self.terminate()

    def _signal(self, name: str) -> None:
        for worker in list(self.workers.values()):
            try:
                worker.transport.signalProcess(name)
            except error.ProcessExitedAlready:
                pass
