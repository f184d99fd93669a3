"""
One etcd member's connection for the unary calls: dialled at start, dialled again with
backoff whenever it fails or is lost, and a call's way onto it (``Member.call``).

grpcio's channels did this for the client before (``client.py``); the connection is
now ``grpcwire.GRPCConnection`` on the reactor, and a member's ``state`` takes grpcio's
connectivity values so that ``client.pick`` chooses among members as it did among
channels.  A call to a member that is not connected either waits for it (``wait``:
grpcio's ``wait_for_ready``; the caller's deadline ends the wait) or fails at once
unsent, to be tried elsewhere.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import attrs
import grpc
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.storage.etcd3.grpcwire import GRPCConnection, failed, stopped, unsent

log = Logger()

READY = grpc.ChannelConnectivity.READY
CONNECTING = grpc.ChannelConnectivity.CONNECTING
FAILED = grpc.ChannelConnectivity.TRANSIENT_FAILURE
SHUTDOWN = grpc.ChannelConnectivity.SHUTDOWN

#: Waits before dialling a member again, doubling from the first to the last (grpcio's
#: ``initial_reconnect_backoff_ms``/``max_reconnect_backoff_ms`` as the client set them).
_BACKOFF = (0.1, 1.0)

#: How long a connection may take to be up (TCP, TLS, the server's SETTINGS): grpcio's
#: minimum connect timeout.
CONNECT_TIMEOUT = 20.0

#: Each KV method's path and reply type.
_KV = rpc_pb2.DESCRIPTOR.services_by_name["KV"]
_METHODS = {m.name: (f"/{_KV.full_name}/{m.name}".encode(), getattr(rpc_pb2, m.output_type.name))
            for m in _KV.methods}


@attrs.define(eq=False)
class Member:
    """
    An ``--etcd-servers`` URL: ``endpoint()`` dials it (TCP, through the egress
    selection, with TLS when the URL asks for it), ``protocol()`` makes the connection.

    attrs for the declared state of a connection's life.
    """

    reactor: Any
    name: str  # for logs: the URL
    endpoint: Callable[[], Any]  # () -> IStreamClientEndpoint
    protocol: Callable[..., GRPCConnection]  # (ready=, lost=) -> GRPCConnection
    state: grpc.ChannelConnectivity = grpc.ChannelConnectivity.IDLE
    #: The connection once up (``state`` READY).
    connection: Optional[GRPCConnection] = None
    _dialling: Optional[Deferred] = None
    _timer: Any = None  # IDelayedCall: the next dial, or the current one's timeout
    _backoff: float = _BACKOFF[0]
    _waiting: list = attrs.field(factory=list)  # Deferreds of calls waiting for READY
    _pending: Optional[GRPCConnection] = None  # connected, its SETTINGS not yet in

    def start(self):
        self._dial()

    def stop(self):
        """Close the connection (its calls fail), stop dialling, fail the waiting calls."""
        self.state = SHUTDOWN
        self._cancel_timer()
        if self._dialling is not None:
            self._dialling.cancel()
        for connection in (self.connection, self._pending):
            if connection is not None:
                connection.close()
        self.connection = self._pending = None
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.errback(stopped())

    def call(self, method: str, request, timeout: float, wait: bool) -> Deferred:
        """
        Deferred of KV's ``method`` reply to ``request`` (a protobuf message), failing
        with ``grpcwire.CallError``; with ``wait``, made once the member is connected if
        it is not.  Cancelling it cancels the call, or its wait.
        """
        path, reply = _METHODS[method]
        connection = self.connection
        if connection is None:
            if self.state is SHUTDOWN:
                return failed(stopped())
            if not wait:
                return failed(unsent(f"etcd member {self.name} is not connected"))
            waiter: Deferred = Deferred(self._waiting.remove)
            self._waiting.append(waiter)
            return waiter.addCallback(lambda c: c.call(path, request.SerializeToString(),
                                                       timeout)).addCallback(reply.FromString)
        return connection.call(path, request.SerializeToString(),
                               timeout).addCallback(reply.FromString)

    # -- the connection's life -------------------------------------------------------

    def _dial(self):
        self._timer = self.reactor.callLater(CONNECT_TIMEOUT, self._gave_up)
        if self.state is not READY:
            self.state = CONNECTING
        self._dialling = self.endpoint().connect(Factory.forProtocol(
            lambda: self.protocol(ready=self._ready, lost=self._lost)))
        self._dialling.addCallbacks(self._connected, self._failed)

    def _connected(self, connection: GRPCConnection):
        self._dialling = None
        self._pending = connection  # ready once its SETTINGS come (_ready)

    def _ready(self, connection: GRPCConnection):
        self._cancel_timer()
        self._pending, self.connection = None, connection
        self.state, self._backoff = READY, _BACKOFF[0]
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(connection)

    def _failed(self, failure):
        self._dialling = None
        if self.state is SHUTDOWN:
            return None
        log.info("etcd member {name}: cannot connect: {why}", name=self.name,
                 why=failure.getErrorMessage())
        self._cancel_timer()
        self._again()
        return None

    def _gave_up(self):
        """The dial's time is up: the connection attempt (or its handshake) ends."""
        self._timer = None
        if self._dialling is not None:
            self._dialling.cancel()  # _failed dials again
        elif self._pending is not None:
            self._pending.close()  # _lost dials again

    def _lost(self, connection: GRPCConnection):
        if connection is self._pending:
            self._pending = None
        elif connection is self.connection:
            self.connection = None
        else:
            return
        if self.state is not SHUTDOWN:
            self._cancel_timer()
            self._again()

    def _again(self):
        """Dial again after the backoff, the next wait twice as long (up to the last)."""
        self.state = FAILED
        wait, self._backoff = self._backoff, min(self._backoff * 2, _BACKOFF[1])
        self._timer = self.reactor.callLater(wait, self._dial)

    def _cancel_timer(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
