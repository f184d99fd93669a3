"""A child process whose output a test waits on (``kubectl get -w``, leader election
candidates), killed at the test's end if still running."""

from __future__ import annotations

import os

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol


class Output(ProcessProtocol):
    """A child's output; ``wait_for(text)`` fires once stdout holds ``text``."""

    def __init__(self):
        self.out = b""
        self.err = b""
        self.ended = Deferred()
        self._waiting: list = []

    def outReceived(self, data):
        self.out += data
        self._check()

    def errReceived(self, data):
        self.err += data

    def _check(self):
        for entry in list(self._waiting):
            if entry[0].encode() in self.out:
                self._waiting.remove(entry)
                entry[1].callback(None)

    def wait_for(self, text: str, timeout: float) -> Deferred:
        d: Deferred = Deferred()
        entry = (text, d)
        self._waiting.append(entry)
        self._check()

        def expire():
            if entry in self._waiting:
                self._waiting.remove(entry)
                d.errback(AssertionError(f"{text!r} not seen in {timeout}s: "
                                         f"{self.out.decode()}{self.err.decode()[-2000:]}"))
        call = reactor.callLater(timeout, expire)
        d.addBoth(lambda r: (call.active() and call.cancel(), r)[1])
        return d

    def processEnded(self, reason):
        self.ended.callback(None)



def spawn(test, argv, env=None):
    """``(process, Output)`` of ``argv``, killed at ``test``'s cleanup if still running."""
    output = Output()
    process = reactor.spawnProcess(output, argv[0], argv, env=env or dict(os.environ))

    def kill():
        if not output.ended.called:
            try:
                process.signalProcess("KILL")
            except Exception:
                pass
            return output.ended
    test.addCleanup(kill)
    return process, output
