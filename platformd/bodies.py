"""Request bodies for twisted.web's client ``Agent``."""

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
