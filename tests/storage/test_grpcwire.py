"""
The etcd client's transport (``grpcwire`` on ``member.py``) against a real etcd: the
calls' framing both ways, etcd's and gRPC's errors as the client maps them, messages
too large either way (flow control on the way out included), a member killed or hung
mid-call, TLS with client certificates (``--client-cert-auth``), and a clean stop.
"""

from __future__ import annotations

import grpc
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from platformd.errors import StatusError
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.storage import mvcc
from platformd.storage.etcd3.client import Client, TLSFiles
from platformd.storage.etcd3.grpcwire import CallError
from platformd.storage.etcd3.member import READY
from platformd.storage.etcd3.txn import transaction
from tests.etcd.cluster import Cluster


async def turn():
    """One reactor turn: a connection aborted is gone after it."""
    await deferLater(reactor, 0, lambda: None)


class _Case(TestCase):
    """A one-member etcd of its own per test (about 0.1 s to start, fsync off)."""

    timeout = 60
    tls = False

    def setUp(self):
        self.cluster = Cluster.start(1, tls=self.tls)
        self.addCleanup(self.cluster.stop)

    async def client(self, servers=None, tls: TLSFiles = TLSFiles(), timeout=10.0,
                     **options) -> Client:
        """A started client; its first member connected (unless that cannot be)."""
        client = Client(reactor, servers or self.cluster.urls, tls, timeout=timeout,
                        **options)
        client.start()

        async def stop():
            client.stop()
            await turn()
        self.addCleanup(stop)
        for _ in range(200):
            if client.members[0].state is READY:
                break
            await deferLater(reactor, 0.01, lambda: None)
        return client


class CallTests(_Case):

    async def test_create_then_read(self):
        """A put-if-absent as the store's create, again (refused: the key exists), a
        Range reading it back: replies parsed, revisions as etcd's."""
        client = await self.client()
        create = transaction(b"/wire/a", mvcc.Create("/a", b"v"), b"v")
        first = await client.unary("Txn", create)
        again = await client.unary("Txn", create)
        self.assertEqual((first.succeeded, again.succeeded), (True, False))
        read = await client.unary("Range", rpc_pb2.RangeRequest(key=b"/wire/a"),
                                  repeatable=True)
        self.assertEqual([(kv.key, kv.value, kv.mod_revision) for kv in read.kvs],
                         [(b"/wire/a", b"v", first.header.revision)])

    async def test_many_in_flight(self):
        """Calls multiplexed on the connection each get their own reply."""
        client = await self.client()
        for n in range(50):
            await client.unary("Put", rpc_pb2.PutRequest(key=b"/wire/many/%d" % n,
                                                         value=b"%d" % n))
        replies = await _all([client.unary("Range", rpc_pb2.RangeRequest(
            key=b"/wire/many/%d" % n)) for n in range(50)])
        self.assertEqual([r.kvs[0].value for r in replies], [b"%d" % n for n in range(50)])

    async def test_etcd_error(self):
        """etcd's refusal (a future revision): its gRPC code and words, which the
        client answers as upstream's handler does (500, etcd's text)."""
        client = await self.client()
        member = client.members[0]
        with self.assertRaises(CallError) as raised:
            await member.call("Range", rpc_pb2.RangeRequest(key=b"/x", revision=1 << 40),
                              5.0, False)
        self.assertEqual((raised.exception.code(), raised.exception.details()), (
            grpc.StatusCode.OUT_OF_RANGE,
            "etcdserver: mvcc: required revision is a future revision"))
        with self.assertRaises(StatusError) as status:
            await client.unary("Range", rpc_pb2.RangeRequest(key=b"/x", revision=1 << 40))
        self.assertEqual((status.exception.code, status.exception.message), (
            500, "etcdserver: mvcc: required revision is a future revision"))

    async def test_request_too_large(self):
        """
        A value over etcd's ``--max-request-bytes`` (1.5 MiB) is etcd's ``request is too
        large``; a message over its gRPC limit (2 MiB) grpc-go's ResourceExhausted, sent
        in full through the flow control windows first.  The connection goes on.
        """
        client = await self.client()
        with self.assertRaises(StatusError) as raised:
            await client.unary("Put", rpc_pb2.PutRequest(key=b"/big", value=b"x" * 1600_000))
        self.assertEqual((raised.exception.code, raised.exception.message),
                         (500, "etcdserver: request is too large"))
        with self.assertRaises(CallError) as error:
            await client.members[0].call("Put", rpc_pb2.PutRequest(
                key=b"/big", value=b"x" * 3_000_000), 5.0, False)
        self.assertEqual(error.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertRegex(error.exception.details(),
                         r"^grpc: received message larger than max \(300\d{4} vs\. 2097152\)$")
        await client.unary("Put", rpc_pb2.PutRequest(key=b"/wire/after", value=b"ok"))

    async def test_reply_too_large(self):
        """A reply over the client's limit is refused as it arrives (ResourceExhausted,
        Go's words), its stream reset; the next call on the connection answers."""
        client = await self.client()
        await client.unary("Put", rpc_pb2.PutRequest(key=b"/wire/wide", value=b"y" * 5000))
        member = client.members[0]
        member.connection.max_receive = 1000
        with self.assertRaises(CallError) as raised:
            await member.call("Range", rpc_pb2.RangeRequest(key=b"/wire/wide"), 5.0, False)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertRegex(raised.exception.details(),
                         r"^grpc: received message larger than max \(50\d\d vs\. 1000\)$")
        member.connection.max_receive = 1 << 20
        reply = await member.call("Range", rpc_pb2.RangeRequest(key=b"/wire/wide"), 5.0,
                                  False)
        self.assertEqual(len(reply.kvs[0].value), 5000)

    async def test_unknown_method(self):
        """A path etcd does not serve: grpc-go's Unimplemented, in Trailers-Only."""
        client = await self.client()
        connection = client.members[0].connection
        with self.assertRaises(CallError) as raised:
            await connection.call(b"/etcdserverpb.KV/Nothing", b"", 5.0)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    async def test_stop_ends_calls(self):
        """Stopping the client fails the calls under way (etcd client stopped) and
        leaves no connection or timer behind (trial checks the reactor)."""
        client = await self.client()
        calls = [client.unary("Range", rpc_pb2.RangeRequest(key=b"/x")) for _ in range(5)]
        client.stop()
        for call in calls:
            with self.assertRaises(StatusError) as raised:
                await call
            self.assertEqual(raised.exception.message,
                             "rpc error: code = Canceled desc = etcd client stopped")
        await turn()


class MemberLostTests(_Case):
    """The member killed or hung."""

    async def test_killed_mid_call(self):
        """
        A member killed with a write under way (hung first, so that it is): the write's
        outcome is unknown, so it is not made again: 504.  A read waits for the member
        and answers once it is back.
        """
        client = await self.client()
        [member] = self.cluster.members
        member.pause()
        write = client.unary("Put", rpc_pb2.PutRequest(key=b"/k", value=b"v"))
        await deferLater(reactor, 0.1, lambda: None)
        member.kill()
        with self.assertRaises(StatusError) as raised:
            await write
        self.assertEqual(raised.exception.code, 504)
        read = client.unary("Range", rpc_pb2.RangeRequest(key=b"/k"), repeatable=True)
        await deferLater(reactor, 0.3, lambda: None)
        self.assertFalse(read.called)
        member.start()
        member.wait_ready()
        await read

    async def test_hung_member_dropped_by_keepalive(self):
        """A member that hangs with its connection open: the unanswered keepalive ping
        drops the connection, and the call under way fails (not at its deadline)."""
        client = await self.client(keepalive=(0.2, 0.3), timeout=30)
        [member] = self.cluster.members
        member.pause()
        self.addCleanup(member.resume)
        started = reactor.seconds()
        with self.assertRaises(CallError) as raised:
            await client.members[0].call("Range", rpc_pb2.RangeRequest(key=b"/k"), 30,
                                         False)
        self.assertEqual((raised.exception.code(), raised.exception.details()),
                         (grpc.StatusCode.UNAVAILABLE, "keepalive ping not answered"))
        self.assertLess(reactor.seconds() - started, 5)

    async def test_not_connected_refused_unsent(self):
        """A call that may not wait, to a member not connected, is refused unsent: the
        client may make a write so refused again elsewhere."""
        client = await self.client()
        [member] = self.cluster.members
        member.kill()
        for _ in range(100):
            if client.members[0].state is not READY:
                break
            await deferLater(reactor, 0.01, lambda: None)
        with self.assertRaises(CallError) as raised:
            await client.members[0].call("Range", rpc_pb2.RangeRequest(key=b"/k"), 5, False)
        self.assertEqual((raised.exception.code(), raised.exception.sent),
                         (grpc.StatusCode.UNAVAILABLE, False))


class TLSTests(_Case):
    """A member serving clients over TLS with client certificates required."""

    tls = True

    async def test_client_certificate(self):
        """With the CA and a client certificate, calls are made (ALPN h2)."""
        files = self.cluster.tls
        client = await self.client(tls=TLSFiles(files.ca, files.cert, files.key))
        reply = await client.unary("Put", rpc_pb2.PutRequest(key=b"/tls", value=b"v"))
        self.assertGreater(reply.header.revision, 0)

    async def test_without_client_certificate(self):
        """Without a client certificate etcd refuses the handshake: the member never
        connects, and a call waits for it to its deadline (504)."""
        client = await self.client(tls=TLSFiles(self.cluster.tls.ca), timeout=1.0)
        self.assertIsNot(client.members[0].state, READY)
        with self.assertRaises(StatusError) as raised:
            await client.unary("Range", rpc_pb2.RangeRequest(key=b"/tls"))
        self.assertEqual(raised.exception.code, 504)

    async def test_name_checked(self):
        """A member's certificate is checked against the URL's name: one it does not
        name is refused (the call waits to its deadline)."""
        files = self.cluster.tls
        port = self.cluster.members[0].client_port
        client = await self.client([f"https://127.0.0.9:{port}"], timeout=1.0,
                                   tls=TLSFiles(files.ca, files.cert, files.key),
                                   dial=_to_loopback)
        self.assertIsNot(client.members[0].state, READY)
        with self.assertRaises(StatusError):
            await client.unary("Range", rpc_pb2.RangeRequest(key=b"/tls"))


def _to_loopback(host: str, port: int):
    """Dial 127.0.0.1 whatever the member's name (the name checked stays the URL's)."""
    return TCP4ClientEndpoint(reactor, "127.0.0.1", port)


async def _all(calls: list) -> list:
    d: Deferred = gatherResults(calls, consumeErrors=True)
    return await d
