"""
A worker (``--workers``, ``workers.py``) ends when worker 0 does: its descriptor 0 is a
pipe whose other end only worker 0 holds, never written to; end-of-file there means
worker 0 is gone (exited, killed, crashed), and the worker stops as at SIGTERM.  A
pipe needs no polling and no signal the worker could miss while starting.
"""

from __future__ import annotations

import os
from typing import Callable

from twisted.internet import main
from twisted.internet.interfaces import IReadDescriptor
from twisted.python.failure import Failure
from zope.interface import implementer


@implementer(IReadDescriptor)
class ParentWatch:
    """Calls ``gone()`` once descriptor ``fd`` reads end-of-file (or fails)."""

    def __init__(self, reactor, gone: Callable[[], None], fd: int = 0):
        self.reactor = reactor
        self.gone = gone
        self.fd = fd

    def start(self) -> None:
        self.reactor.addReader(self)

    def stop(self) -> None:
        self.reactor.removeReader(self)

    def fileno(self) -> int:
        return self.fd

    def logPrefix(self) -> str:
        return "parent-watch"

    def doRead(self):
        try:
            data = os.read(self.fd, 64)
        except BlockingIOError:
            return None
        except OSError:
            return main.CONNECTION_LOST
        return None if data else main.CONNECTION_DONE

    def connectionLost(self, reason: Failure) -> None:
        self.reactor.removeReader(self)
        self.gone()
