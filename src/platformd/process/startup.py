"""
Startup errors and the edge that reports them.

Library code that finds the daemon cannot start as configured (a data directory it
cannot make, a certificate it cannot read, a port in use, a bad pods socket path)
raises ``StartupError`` with one line for the operator.  Only the edge —
``service.make_service`` (what the twistd plugin's ``makeService`` returns) and ``Edge``,
the service twistd runs — turns it into that line on standard error and a non-zero
exit, so tests and other callers see an ordinary exception.

This module is at the bottom of the package: it imports nothing from ``platformd``, so
anything may import it.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from twisted.application import service
from twisted.logger import Logger

log = Logger()


class StartupError(Exception):
    """The daemon cannot start as configured; ``str()`` is the operator's one line."""


def report(message: str) -> None:
    """
    Write ``platformd: <message>`` as one line to the real standard error.  Once
    twistd's logging has started, ``sys.stderr`` is redirected into the log; the line
    goes to the process's standard error, where an operator and systemd's journal see it.
    """
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"platformd: {message}\n")
    stream.flush()


def exit_with(error: StartupError) -> NoReturn:
    """Report ``error`` and exit with status 1 (twistd would print a traceback)."""
    report(str(error))
    raise SystemExit(1)


class Edge(service.MultiService):
    """
    The service twistd runs: the daemon as its one child, and the edge between library
    code and the operator.

    * A ``StartupError`` from ``privilegedStartService`` (files, the listening port, the
      pods socket) is one line on standard error and exit status 1, before the reactor
      runs.
    * If the daemon's ``booted`` Deferred fails (storage cannot open, the cache cannot
      load, or a listener that reports late cannot listen), the failure is logged, one
      line is written and the reactor is stopped.
    """

    def __init__(self, daemon, reactor):
        super().__init__()
        self.daemon = daemon
        self.reactor = reactor
        daemon.setServiceParent(self)

    def privilegedStartService(self):
        try:
            super().privilegedStartService()
        except StartupError as e:
            exit_with(e)

    def startService(self):
        super().startService()
        booted = getattr(self.daemon, "booted", None)
        if booted is not None:
            booted.addErrback(self._boot_failed)

    def _boot_failed(self, failure):
        if not self.running:
            log.failure("platformd stopped while starting", failure)
            return None
        if failure.check(StartupError):
            report(failure.getErrorMessage())
        else:
            log.failure("platformd could not start", failure)
            report(f"could not start: {failure.getErrorMessage()}")
        # startService runs before the reactor does: stop it once it runs.
        self.reactor.callWhenRunning(self.reactor.stop)
