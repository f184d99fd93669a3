"""Calls made with twisted.web's client ``Agent``: bytes bodies, a deadline, Go's words."""

from __future__ import annotations

from twisted.internet import defer
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer


@implementer(IBodyProducer)
class BytesBody:
    """
    A request body that is one bytes string, written at once: ``FileBodyProducer`` would
    need a cooperator (the real reactor), which a webhook call on an injected clock and
    the in-memory test harness do not have.
    """

    def __init__(self, data: bytes):
        self.data = data
        self.length = len(data)

    def startProducing(self, consumer):
        consumer.write(self.data)
        return defer.succeed(None)

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def stopProducing(self):
        pass


def post(agent, url: str, headers, body: bytes, timeout: float, clock):
    """
    Deferred[response]: ``body`` POSTed to ``url`` through ``agent``, cancelled when
    ``timeout`` seconds pass on ``clock`` (so a call never outlives its deadline and the
    reactor never waits on it).
    """
    answer = agent.request(b"POST", url.encode(), headers, BytesBody(body))
    timer = clock.callLater(timeout, answer.cancel)

    def done(result):
        if timer.active():
            timer.cancel()
        return result

    return answer.addBoth(done)


def failure_text(failure, url: str) -> str:
    """A failed call worded as Go's HTTP client words it; our cancellation at the
    deadline is ``context deadline exceeded``."""
    reasons = getattr(failure.value, "reasons", None) or [failure]
    if any(r.check(defer.CancelledError) for r in reasons):
        return f'Post "{url}": context deadline exceeded'
    return f'Post "{url}": ' + "; ".join(r.getErrorMessage() for r in reasons)
