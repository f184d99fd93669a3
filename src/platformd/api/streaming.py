"""
Writing large responses piece by piece (spec 4.2.5).

A list is produced item by item and written as it is produced, paced by the transport
(``IPullProducer``): the whole response never exists as one string, so serving a 100 MB
list costs little more memory than the objects themselves.  With gzip each piece is
compressed as it goes.
"""

from __future__ import annotations

import zlib

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IPullProducer
from zope.interface import implementer

#: Bytes gathered before one write.
PIECE = 256 * 1024


@implementer(IPullProducer)
class PieceWriter:
    """Writes ``pieces`` (an iterator of bytes) to ``request`` as the transport asks."""

    def __init__(self, request, pieces, gzip: bool):
        self.request = request
        self.pieces = iter(pieces)
        self.compressor = zlib.compressobj(1, zlib.DEFLATED, 31) if gzip else None
        self.done: Deferred[bytes] = Deferred(lambda _d: self.stopProducing())
        self._stopped = False

    def start(self) -> Deferred:
        self.request.registerProducer(self, False)
        return self.done

    def resumeProducing(self) -> None:
        if self._stopped:
            return
        buffered, size = [], 0
        for piece in self.pieces:
            buffered.append(piece)
            size += len(piece)
            if size >= PIECE:
                break
        else:
            self._finish(b"".join(buffered))
            return
        self._write(b"".join(buffered))

    def _write(self, data: bytes) -> None:
        if self.compressor is not None:
            data = self.compressor.compress(data)
        if data:
            self.request.write(data)

    def _finish(self, data: bytes) -> None:
        self._write(data)
        if self.compressor is not None:
            self.request.write(self.compressor.flush())
        self._stopped = True
        self.request.unregisterProducer()
        self.done.callback(b"")

    def stopProducing(self) -> None:
        self._stopped = True
