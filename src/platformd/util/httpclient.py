"""Calls made with twisted.web's client ``Agent``: bytes bodies, a deadline, Go's words."""

from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone, readBody
from twisted.web.http import PotentialDataLoss
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


class BodyTooLarge(Exception):
    """An answer's body went past the caller's limit (the rest was not read)."""


class _Bounded(Protocol):
    """Collects a body of at most ``limit`` bytes; past it, the connection is dropped."""

    def __init__(self, done: defer.Deferred, limit: int):
        self.done = done
        self.limit = limit
        self.parts: list = []
        self.size = 0

    def dataReceived(self, data: bytes) -> None:
        if self.done.called:
            return
        self.size += len(data)
        if self.size > self.limit:
            self.parts = []
            self.done.errback(BodyTooLarge(
                f"the response body is larger than {self.limit} bytes"))
            if self.transport is not None:
                self.transport.stopProducing()  # type: ignore[attr-defined]
            return
        self.parts.append(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self.done.called:
            return
        if reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.parts))
        else:
            self.done.errback(reason)


def read_body(response, limit: Optional[int]):
    """Deferred[bytes]: ``response``'s body (``readBody``), failing with
    ``BodyTooLarge`` once it passes ``limit`` bytes (None: no limit)."""
    if limit is None:
        return readBody(response)
    done: defer.Deferred = defer.Deferred()
    response.deliverBody(_Bounded(done, limit))
    return done


def failure_text(failure, url: str) -> str:
    """A failed call worded as Go's HTTP client words it; our cancellation at the
    deadline is ``context deadline exceeded``."""
    reasons = getattr(failure.value, "reasons", None) or [failure]
    if any(r.check(defer.CancelledError) for r in reasons):
        return f'Post "{url}": context deadline exceeded'
    return f'Post "{url}": ' + "; ".join(r.getErrorMessage() for r in reasons)
