"""
Periodic compaction of etcd, as upstream's ``storage/etcd3/compact.go``.

Every replica runs one.  Each tick it tries ``Txn(Version(compact_rev_key) == t)
Put(compact_rev_key, rev)``, where ``t`` is how many compactions it knows of and ``rev``
the revision it saw at its previous tick; the one replica whose transaction succeeds
compacts etcd at ``rev``, the others learn the new count and the current revision.  So
the cluster is compacted once per interval, keeping at least one interval of history,
whatever the number of replicas.  The first tick only records the revision ("we don't
compact on bootstrap").
"""

from __future__ import annotations

from typing import Optional

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.storage.etcd3.client import Client
from platformd.storage.etcd3.store import COMPACT_REV_KEY

log = Logger()


@attrs.define(eq=False)
class Compactor:
    """The loop (see module docstring); ``interval`` in seconds, 0 for none."""

    client: Client
    interval: float
    clock: Optional[IReactorTime] = None
    #: Compactions the cluster has seen (compact_rev_key's version).
    count: int = attrs.field(default=0, init=False)
    #: The revision seen at the previous tick: the next compaction's.
    revision: int = attrs.field(default=0, init=False)
    _loop: LoopingCall = attrs.field(init=False)

    @_loop.default
    def _make_loop(self):
        loop = LoopingCall(self.tick)
        if self.clock is not None:
            loop.clock = self.clock
        return loop

    def start(self):
        if self.interval > 0:
            self._loop.start(self.interval, now=False).addErrback(
                lambda f: log.failure("etcd compactor stopped", f))

    def stop(self):
        if self._loop.running:
            self._loop.stop()

    def tick(self):
        """One attempt; its failure is logged and the next tick tries again."""
        done = ensureDeferred(self._compact(self.count, self.revision))
        done.addCallback(self._record)
        return done.addErrback(lambda f: log.failure("compacting etcd failed", f))

    def _record(self, state):
        self.count, self.revision = state

    async def _compact(self, count: int, revision: int):
        """Upstream's ``compact(ctx, client, t, rev)``."""
        client = self.client
        reply = await client.unary("Txn", rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(key=COMPACT_REV_KEY, target=rpc_pb2.Compare.VERSION,
                                     result=rpc_pb2.Compare.EQUAL, version=count)],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                key=COMPACT_REV_KEY, value=str(revision).encode()))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(
                key=COMPACT_REV_KEY))]))
        current = reply.header.revision
        if not reply.succeeded:
            return reply.responses[0].response_range.kvs[0].version, current
        if revision:  # not on bootstrap
            await client.unary("Compact", rpc_pb2.CompactionRequest(revision=revision))
            log.info("etcd: compacted rev ({revision})", revision=revision)
        return count + 1, current
