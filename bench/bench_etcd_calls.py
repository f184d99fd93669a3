"""
CPU per unary etcd call (issue 28, target 4): a ``Range`` of one key and a ``Txn``
put-if-absent (the store's create, ``txn.transaction``), 1 and 16 calls in flight,
made by the two transports of the etcd client in one process, in turns:

- ``grpcio``: a grpcio future started on the reactor, its completion handed back with
  ``callFromThread`` from grpcio's thread, as the client makes its calls;
- ``h2``: the prototype ``h2grpc.GRPCConnection``, gRPC over HTTP/2 (``h2``) on a
  Twisted connection, made and completed on the reactor, with a deadline timer per
  call as a client keeps.

Against a 1-member etcd started here (``tests/etcd/cluster.py``, fsync off, so the
calls are quick and the client's CPU shows).  CPU is the process's (every thread:
grpcio's too) and the reactor thread's alone, per call, over ``--calls`` calls per
row; ``--rounds`` alternations, each transport's median printed.  ``--tls`` serves
etcd's clients over TLS with client certificates (``--client-cert-auth``); ``--pin``
keeps this process on CPU 0 and etcd on CPU 1 (grpcio's threads then take turns with
the reactor for one core, as a replica's do on a machine of its own).

    PYTHONPATH=src:. python bench/bench_etcd_calls.py [--calls 4000] [--rounds 3] [--tls]
                                                     [--pin]

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time

import grpc
from twisted.internet import defer, task
from twisted.internet.endpoints import TCP4ClientEndpoint, wrapClientTLS
from twisted.internet.protocol import Factory
from twisted.internet.ssl import Certificate, PrivateCertificate, optionsForClientTLS

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2, rpc_pb2_grpc  # noqa: E402
from platformd.storage import mvcc  # noqa: E402
from platformd.storage.etcd3.client import REQUIRE_LEADER  # noqa: E402
from platformd.storage.etcd3.txn import transaction  # noqa: E402
from tests.etcd.cluster import Cluster  # noqa: E402

from h2grpc import GRPCConnection  # noqa: E402

VALUE = b'{"kind":"RoleBinding","apiVersion":"rbac.authorization.platform.io/v1",' + \
    b'"metadata":{"name":"x","namespace":"default"}}' + b" " * 300
TIMEOUT = 60.0


def requests(kind: str):
    """Endless ``(method, request)`` of ``kind``: one key read, or a new key created."""
    if kind == "Range":
        request = rpc_pb2.RangeRequest(key=b"/bench/read")
        return (("Range", request) for _ in itertools.count())
    run = os.urandom(4).hex()
    return (("Txn", transaction([(f"/bench/{run}/{n}".encode(), mvcc.Create("k", VALUE), VALUE)]))
            for n in itertools.count())


class GrpcioCalls:
    """The former transport: grpcio futures, completed through ``callFromThread``."""

    def __init__(self, reactor, url: str, tls):
        self.reactor = reactor
        target = url.split("://", 1)[1]
        if tls is None:
            self.channel = grpc.insecure_channel(target)
        else:
            with open(tls.ca, "rb") as ca, open(tls.key, "rb") as k, open(tls.cert, "rb") as c:
                credentials = grpc.ssl_channel_credentials(ca.read(), k.read(), c.read())
            self.channel = grpc.secure_channel(target, credentials)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)

    def call(self, method: str, request) -> defer.Deferred:
        result: defer.Deferred = defer.Deferred()

        def done(future):
            try:
                result.callback(future.result())
            except grpc.RpcError as error:
                result.errback(error)
        future = getattr(self.kv, method).future(request, timeout=TIMEOUT,
                                                 metadata=REQUIRE_LEADER)
        future.add_done_callback(lambda f: self.reactor.callFromThread(done, f))
        return result

    def close(self):
        self.channel.close()


class H2Calls:
    """The prototype: ``h2grpc.GRPCConnection``, with a deadline timer per call as a
    client would keep, and the reply parsed on the reactor."""

    REPLIES = {"Range": rpc_pb2.RangeResponse, "Txn": rpc_pb2.TxnResponse}

    def __init__(self, reactor, connection: GRPCConnection):
        self.reactor, self.connection = reactor, connection

    @classmethod
    @defer.inlineCallbacks
    def connect(cls, reactor, url: str, tls):
        scheme, address = url.split("://", 1)
        host, port = address.rsplit(":", 1)
        endpoint = TCP4ClientEndpoint(reactor, host, int(port))
        if tls is not None:
            with open(tls.ca, "rb") as ca, open(tls.key, "rb") as k, open(tls.cert, "rb") as c:
                options = optionsForClientTLS(
                    host, Certificate.loadPEM(ca.read()),
                    PrivateCertificate.loadPEM(c.read() + k.read()),
                    acceptableProtocols=[b"h2"])
            endpoint = wrapClientTLS(options, endpoint)
        ready: defer.Deferred = defer.Deferred()
        connection = yield endpoint.connect(Factory.forProtocol(
            lambda: GRPCConnection(reactor, address, scheme, 256 * 1024 * 1024,
                                   REQUIRE_LEADER, ready=ready.callback)))
        yield ready
        return cls(reactor, connection)

    def call(self, method: str, request) -> defer.Deferred:
        timer = self.reactor.callLater(TIMEOUT, lambda: None)
        d = self.connection.call(b"/etcdserverpb.KV/" + method.encode(),
                                 request.SerializeToString(), TIMEOUT)

        def parse(message):
            timer.cancel()
            return self.REPLIES[method].FromString(message)
        return d.addCallback(parse)

    def close(self):
        self.connection.close()


@defer.inlineCallbacks
def run(transport, kind: str, calls: int, in_flight: int):
    """CPU ms per call (process, reactor thread) of ``calls`` calls, ``in_flight`` at once."""
    source = requests(kind)
    started = 0

    @defer.inlineCallbacks
    def worker():
        nonlocal started
        while started < calls:
            started += 1
            method, request = next(source)
            reply = yield transport.call(method, request)
            if method == "Txn" and not reply.succeeded:
                raise AssertionError("create refused")
    process, thread, wall = time.process_time(), time.thread_time(), time.monotonic()
    yield defer.gatherResults([worker() for _ in range(in_flight)], consumeErrors=True)
    return ((time.process_time() - process) * 1000 / calls,
            (time.thread_time() - thread) * 1000 / calls,
            calls / (time.monotonic() - wall))


@defer.inlineCallbacks
def main(reactor, args):
    cluster = Cluster.start(1, tls=args.tls)
    if args.pin:  # this process on CPU 0, etcd on CPU 1
        os.sched_setaffinity(0, {0})
        for member in cluster.members:
            os.sched_setaffinity(member.process.pid, {1})
    try:
        url = cluster.urls[0]
        tls = cluster.tls
        grpcio = GrpcioCalls(reactor, url, tls)
        h2 = yield H2Calls.connect(reactor, url, tls)
        yield h2.call(*next(requests("Txn")))  # warm-up
        for transport in (grpcio, h2):
            yield run(transport, "Range", 200, 4)
        figures: dict = {}
        for _ in range(args.rounds):
            for kind in ("Range", "Txn"):
                for in_flight in (1, 16):
                    for name, transport in (("grpcio", grpcio), ("h2", h2)):
                        figures.setdefault((kind, in_flight, name), []).append(
                            (yield run(transport, kind, args.calls, in_flight)))
        print(f"{'call':6} {'in flight':>9} {'transport':>9} {'CPU ms/call':>11} "
              f"{'reactor ms':>10} {'calls/s':>8}")
        for (kind, in_flight, name), rows in figures.items():
            cpu, reactor_cpu, rate = (statistics.median(r[i] for r in rows) for i in range(3))
            print(f"{kind:6} {in_flight:>9} {name:>9} {cpu:>11.3f} {reactor_cpu:>10.3f} "
                  f"{rate:>8.0f}")
        for kind in ("Range", "Txn"):
            for in_flight in (1, 16):
                old = statistics.median(r[0] for r in figures[(kind, in_flight, "grpcio")])
                new = statistics.median(r[0] for r in figures[(kind, in_flight, "h2")])
                print(f"{kind} at {in_flight}: h2/grpcio CPU per call {new / old:.2f}")
        grpcio.close()
        h2.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--pin", action="store_true")
    task.react(main, [parser.parse_args()])
