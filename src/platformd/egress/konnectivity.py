"""
konnectivity's gRPC tunnel (``proxyProtocol: GRPC``) as a Twisted client endpoint:
upstream's ``udsGRPCConnector`` + konnectivity-client's ``grpcTunnel``.

As upstream, every dial is one tunnel (``CreateSingleUseGrpcTunnel``): a gRPC channel to
the proxy's UNIX socket, one ``ProxyService.Proxy`` stream on it, ``DIAL_REQ{protocol
"tcp", address host:port, random}``; ``DIAL_RSP`` with an ``error`` fails the dial with
that error (as upstream, the error's text alone), ``DIAL_CLS`` with ``dial closed``;
otherwise ``DATA{connectID}`` packets carry the bytes both ways.  Closing sends
``CLOSE_REQ{connectID}``; the proxy's ``CLOSE_RSP`` (or the stream's end) is the
connection lost, after which the channel is closed.

grpcio's streams block, so each tunnel's responses are read in a thread of its own and
handed to the reactor with ``blockingCallFromThread`` — one packet in flight, so the
reader waits for the reactor (and, while the protocol has paused the transport, for
``resumeProducing``) instead of buffering.  Requests go through a queue that grpcio's
own thread drains; past ``HIGH_WATER`` packets the producer writing to the transport is
paused until it drains.  The reactor never waits on gRPC.
"""

from __future__ import annotations

import queue
import random
import threading
from typing import Any, Optional

import grpc
from twisted.internet import defer, threads
from twisted.internet.address import UNIXAddress
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IConsumer, IPushProducer, IStreamClientEndpoint, ITransport
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from platformd.protos.konnectivity.client import client_pb2 as pb
from platformd.util.ratelog import RateLimitedLog, origin
from platformd.protos.konnectivity.client import client_pb2_grpc as pb_grpc

#: Queued DATA packets beyond which the transport's producer is paused.
HIGH_WATER = 16
#: The largest DATA packet sent (grpcio's default message limit is 4 MiB).
CHUNK = 64 * 1024
_END = object()
_log = Logger()


class DialError(Exception):
    """The proxy refused the dial (``DIAL_RSP`` error, ``DIAL_CLS``) or the tunnel broke."""


@implementer(IStreamClientEndpoint)
class GRPCTunnel:
    def __init__(self, reactor, uds_name: str, address: str):
        self.reactor = reactor
        #: The proxy's UNIX socket.
        self.uds_name = uds_name
        #: ``host:port`` the proxy dials.
        self.address = address
        #: Each request through the tunnel may fail the same way: one traceback a
        #: minute per bug (logged from the tunnels' threads).
        self.failures = RateLimitedLog(_log, clock=reactor)

    def connect(self, factory):
        opened: defer.Deferred = defer.Deferred()
        tunnel = _Tunnel(self, factory, opened)
        threading.Thread(target=tunnel.run, name=f"konnectivity {self.address}",
                         daemon=True).start()
        return opened


@implementer(ITransport, IConsumer, IPushProducer)
class _Tunnel:
    """One tunnel: the reader thread (``run``) and, once dialled, the protocol's
    transport (every other method, called in the reactor)."""

    def __init__(self, endpoint: GRPCTunnel, factory, opened: defer.Deferred):
        self.endpoint = endpoint
        self.reactor = endpoint.reactor
        self.factory = factory
        self.opened = opened
        self.random = random.getrandbits(63)
        self.connect_id = 0
        self.requests: queue.Queue = queue.Queue()
        self.pending = 0
        self.protocol: Any = None
        self.producer: Any = None
        self.producer_paused = False
        self.disconnecting = False
        self.lost = False
        self.readable = threading.Event()
        self.readable.set()

    # The reader thread.

    def run(self) -> None:
        channel = grpc.insecure_channel(f"unix:{self.endpoint.uds_name}")
        try:
            self.requests.put(pb.Packet(type=pb.DIAL_REQ, dialRequest=pb.DialRequest(
                protocol="tcp", address=self.endpoint.address, random=self.random)))
            stream = pb_grpc.ProxyServiceStub(channel).Proxy(self._outgoing())
            reason = self._read(stream)
        except grpc.RpcError as error:
            reason = DialError(f'dialing konnectivity proxy "{self.endpoint.uds_name}" '
                               f"failed: {error.details()}")
        finally:
            self.requests.put(_END)
            channel.close()
        self._call(self._ended, reason)

    def _read(self, stream) -> Optional[Exception]:
        for packet in stream:
            if packet.type == pb.DIAL_RSP and packet.dialResponse.random == self.random:
                if packet.dialResponse.error:
                    return DialError(packet.dialResponse.error)
                self.connect_id = packet.dialResponse.connectID
                self._call(self._dialled)
            elif packet.type == pb.DIAL_CLS and packet.closeDial.random == self.random:
                return DialError("dial closed")
            elif packet.type == pb.DATA and packet.data.connectID == self.connect_id \
                    and self.connect_id:
                self.readable.wait()
                self._call(self._received, packet.data.data)
            elif packet.type == pb.CLOSE_RSP and packet.closeResponse.connectID \
                    == self.connect_id and self.connect_id:
                return None
        return None

    def _outgoing(self):
        """grpcio's request iterator (its thread): the queued packets until ``_END``."""
        while True:
            packet = self.requests.get()
            if packet is _END:
                return
            if packet.type == pb.DATA:
                self.reactor.callFromThread(self._drained)
            yield packet

    def _call(self, function, *args) -> None:
        """Run ``function`` in the reactor and wait for it (an error it raised is
        logged: the thread has no one else to tell)."""
        try:
            threads.blockingCallFromThread(self.reactor, function, *args)
        except Exception:
            self.endpoint.failures.failure(f"konnectivity tunnel to {self.endpoint.address}",
                                           key=origin())

    # The reactor.

    def _dialled(self) -> None:
        protocol = self.factory.buildProtocol(self.getPeer())
        if protocol is None:
            self.loseConnection()
            self.opened.errback(DialError("the connection was refused by its factory"))
            return
        self.protocol = protocol
        protocol.makeConnection(self)
        self.opened.callback(protocol)

    def _received(self, data: bytes) -> None:
        if not self.lost:
            self.protocol.dataReceived(data)

    def _ended(self, reason: Optional[Exception]) -> None:
        if self.protocol is None:
            if not self.opened.called:
                self.opened.errback(reason or DialError("tunnel closed"))
            return
        if not self.lost:
            self.lost = True
            self.readable.set()
            failure = Failure(ConnectionDone() if reason is None or self.disconnecting
                              else ConnectionLost(str(reason)))
            if self.producer is not None:
                self.producer.stopProducing()
            self.protocol.connectionLost(failure)

    def _drained(self) -> None:
        self.pending -= 1
        if self.producer_paused and self.pending <= HIGH_WATER // 2:
            self.producer_paused = False
            self.producer.resumeProducing()

    # ITransport

    def write(self, data: bytes) -> None:
        if self.disconnecting or self.lost or not data:
            return
        for start in range(0, len(data), CHUNK):
            self.pending += 1
            self.requests.put(pb.Packet(type=pb.DATA, data=pb.Data(
                connectID=self.connect_id, data=data[start:start + CHUNK])))
        if self.producer is not None and not self.producer_paused \
                and self.pending > HIGH_WATER:
            self.producer_paused = True
            self.producer.pauseProducing()

    def writeSequence(self, data) -> None:
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        if self.disconnecting or self.lost:
            return
        self.disconnecting = True
        self.readable.set()
        self.requests.put(pb.Packet(type=pb.CLOSE_REQ,
                                    closeRequest=pb.CloseRequest(connectID=self.connect_id)))

    def abortConnection(self) -> None:
        self.loseConnection()

    def setTcpNoDelay(self, enabled: bool) -> None:
        """HTTP clients ask for it; the tunnel's stream is no TCP socket of ours."""

    def setTcpKeepAlive(self, enabled: bool) -> None:
        """As ``setTcpNoDelay``."""

    def getPeer(self):
        return UNIXAddress(self.endpoint.uds_name)

    def getHost(self):
        return UNIXAddress(None)

    # IConsumer

    def registerProducer(self, producer, streaming) -> None:
        self.producer = producer
        self.producer_paused = False

    def unregisterProducer(self) -> None:
        self.producer = None

    # IPushProducer: pausing holds the reader thread before its next DATA packet.

    def pauseProducing(self) -> None:
        self.readable.clear()

    def resumeProducing(self) -> None:
        self.readable.set()

    def stopProducing(self) -> None:
        self.loseConnection()
