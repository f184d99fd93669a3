"""
The connection to an etcd cluster: one gRPC channel over every ``--etcd-servers``
endpoint, the v3 stubs, and unary calls made off the reactor.

grpcio's channel does what etcd's Go client (clientv3) does for a cluster: several
endpoints behind one ``round_robin`` channel, so a member that is down is skipped.
Every unary call is ``wait_for_ready`` with a deadline: while no member answers it
waits (rather than failing at the first refused connection) and gives up at the
deadline, as clientv3's retrying calls do within a request's context.  Upstream then
answers ``504 Timeout: request did not complete within requested timeout - context
deadline exceeded`` (``endpoints/handlers/finisher``); ``unreachable`` is that Status.

Each call is a grpcio future started on the reactor (starting one does not wait); its
completion comes back with ``callFromThread`` from grpcio's thread, so the reactor
never waits on the network and no thread of ours waits on a call.  That is one hand-off
per call: a thread pool making blocking calls, as the first version did, cost two more
(the pool thread woken by grpcio, then the reactor by the pool thread), each a wait for
the GIL while the reactor is busy, and about a third more CPU per call.  Work beside the
calls that may take long (transforming many values, or values through a KMS plugin)
goes to the client's pool (``in_pool``).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

import attrs
import grpc
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.threadpool import ThreadPool

from platformd import errors
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2_grpc

log = Logger()

#: Threads for the work beside the calls (``Client.in_pool``).
_THREADS = 8

#: clientv3.WithRequireLeader: a member cut off from the leader ends its watches (and
#: refuses calls) instead of serving stale data, so the client moves to another member.
REQUIRE_LEADER = (("hasleader", "true"),)

#: etcd's refusal of a call with ``hasleader`` while it knows no leader.
_NO_LEADER = "etcdserver: no leader"

#: Waits between retries of a call (seconds).
_RETRY = (0.025, 0.05, 0.1, 0.25, 0.5)

#: What a failed call's status code says about etcd: unreachable (no member answered
#: within the deadline), everything else is a bug or a refused request.
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


@attrs.frozen
class TLSFiles:
    """``--etcd-cafile``, ``--etcd-certfile``, ``--etcd-keyfile`` (each may be empty)."""

    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str) -> Optional[bytes]:
            if not path:
                return None
            with open(path, "rb") as f:
                return f.read()
        return grpc.ssl_channel_credentials(read(self.cafile), read(self.keyfile),
                                            read(self.certfile))


def unreachable() -> errors.StatusError:
    """
    The Status of a call no etcd member answered within the request timeout: upstream's
    finisher's ``NewTimeoutError(..., 0)``, so no ``Retry-After`` (upstream sends one,
    2 s, only with ``ServerTimeout`` for a storage "unreachable" error, which its etcd3
    store never raises: clientv3 retries until the request's context ends).  The same
    as the request deadline's 504, whichever of the two fires first.
    """
    return errors.timeout(
        "Timeout: request did not complete within requested timeout"
        " - context deadline exceeded")


#: Go's names of the gRPC codes (``codes.Code.String()``) where they are not grpcio's
#: in CamelCase.
_GO_CODES = {grpc.StatusCode.OK: "OK", grpc.StatusCode.CANCELLED: "Canceled"}


def refused(error: grpc.RpcError) -> errors.StatusError:
    """
    The Status of a call etcd answered with an error other than being out of reach (a
    value over its ``--max-request-bytes``, its space quota used up, too many
    requests).  Upstream's etcd3 store returns clientv3's error unconverted, and the
    handler's ``ErrorToAPIStatus`` makes of an error it does not know a 500 with no
    reason and the error's text: etcd's own (clientv3 turns each ``etcdserver: ...``
    error into one whose text is just that), else gRPC's ``rpc error: code = ... desc =
    ...``.
    """
    details = error.details() or ""
    if not details.startswith("etcdserver: "):
        code = error.code()
        name = _GO_CODES.get(code) or "".join(
            word.capitalize() for word in code.name.split("_"))
        details = f"rpc error: code = {name} desc = {details}"
    return errors.StatusError(500, "", details)


def target(servers: list) -> tuple[str, bool]:
    """
    The gRPC target of ``--etcd-servers`` URLs, and whether they use TLS (``https``).

    Several endpoints must be IP addresses (grpcio's ``ipv4:``/``ipv6:`` targets list
    addresses); one endpoint may be a DNS name, which may resolve to several members.
    """
    if not servers:
        raise ValueError("--etcd-servers: at least one URL is needed")
    schemes, hosts = set(), []
    for server in servers:
        url = urlsplit(server if "://" in server else "http://" + server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"--etcd-servers: {server!r} is not an http(s) URL")
        schemes.add(url.scheme)
        hosts.append((url.hostname, url.port or 2379))
    if len(schemes) > 1:
        raise ValueError("--etcd-servers: every URL must have the same scheme")
    secure = schemes == {"https"}
    if len(hosts) == 1:
        host, port = hosts[0]
        return (f"dns:///{host}:{port}" if not _is_ip(host) else _ip_target(hosts)), secure
    if not all(_is_ip(host) for host, _ in hosts):
        raise ValueError("--etcd-servers: several URLs must name IP addresses")
    return _ip_target(hosts), secure


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _ip_target(hosts: list) -> str:
    if all(ipaddress.ip_address(host).version == 4 for host, _ in hosts):
        return "ipv4:" + ",".join(f"{host}:{port}" for host, port in hosts)
    return "ipv6:" + ",".join(f"[{host}]:{port}" for host, port in hosts)


class Client:
    """
    One channel to the cluster, its stubs, and the pool for work beside the calls.

    A plain class: it owns a channel and threads, opened by ``start`` and closed by
    ``stop``.
    """

    def __init__(self, reactor, servers: list, tls: TLSFiles = TLSFiles(),
                 timeout: float = 60.0, channel_options: tuple = ()):
        self.reactor = reactor
        self.timeout = timeout
        address, secure = target(servers)
        options = [("grpc.lb_policy_name", "round_robin"),
                   # etcd's default --max-request-bytes is 1.5 MiB; replies may be larger.
                   ("grpc.max_receive_message_length", 256 * 1024 * 1024),
                   ("grpc.keepalive_time_ms", 30_000),
                   ("grpc.keepalive_timeout_ms", 10_000),
                   ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1_000),
                   # The etcd egress selection's (``grpc.http_proxy``), docs/egress.md.
                   *channel_options]
        if secure or tls.cafile or tls.certfile:
            self.channel = grpc.secure_channel(address, tls.credentials(), options)
        else:
            self.channel = grpc.insecure_channel(address, options)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)
        self._pool = ThreadPool(0, _THREADS, "platformd-etcd")

    def start(self):
        self._pool.start()

    def stop(self):
        """Close the channel, which ends the calls under way, then join the threads."""
        self.channel.close()
        self._pool.stop()

    def in_pool(self, work: Callable, *args) -> Deferred:
        """
        Deferred: ``work(*args)`` in the client's pool: what may take long beside the
        calls (transforming many values, or values through a KMS plugin).
        """
        return deferToThreadPool(self.reactor, self._pool, work, *args)

    def unary(self, method, request, repeatable: bool = False) -> Deferred:
        """
        On the reactor: Deferred of ``method(request)``'s reply, waiting for a member up
        to the deadline; a call no member answered in time fails with ``unreachable()``.

        Retried within the deadline, as clientv3's retry interceptor does: a
        ``repeatable`` call (a read) on any ``UNAVAILABLE``; a write only when the member
        refused it before proposing it (``etcdserver: no leader``, the answer to
        ``hasleader`` during an election), which cannot have been applied.  Cancelling
        the Deferred (a request's deadline, a health check's timeout) cancels the call.
        """
        return _UnaryCall(self.reactor, method, request, repeatable,
                          self.reactor.seconds() + self.timeout).start()


@attrs.define(eq=False)
class _UnaryCall:
    """
    One ``Client.unary``: each attempt is a grpcio future whose completion comes back
    to the reactor with ``callFromThread`` from grpcio's own thread, so no thread of
    ours waits on it and the reply reaches the reactor in one hand-off.

    attrs for the declared state of a call in flight.
    """

    reactor: Any
    method: Any  # a stub's multi-callable
    request: Any
    repeatable: bool
    deadline: float
    result: Deferred = attrs.field(init=False)
    attempts: int = attrs.field(default=0, init=False)
    _future: Any = attrs.field(default=None, init=False)  # grpc.Future
    _retry: Any = attrs.field(default=None, init=False)  # IDelayedCall

    def __attrs_post_init__(self):
        self.result = Deferred(self._cancel)

    def start(self) -> Deferred:
        self._attempt()
        return self.result

    def _attempt(self):
        self._retry = None
        left = self.deadline - self.reactor.seconds()
        if left <= 0:
            self.result.errback(unreachable())
            return
        self.attempts += 1
        self._future = self.method.future(self.request, timeout=left, wait_for_ready=True,
                                          metadata=REQUIRE_LEADER)
        self._future.add_done_callback(
            lambda future: self.reactor.callFromThread(self._done, future))

    def _done(self, future):
        if self.result.called:  # cancelled: the outcome has nobody to go to
            return
        try:
            reply = future.result()
        except grpc.FutureCancelledError:
            self.result.errback(CancelledError())
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.UNAVAILABLE and (
                    self.repeatable or error.details() == _NO_LEADER):
                wait = _RETRY[min(self.attempts - 1, len(_RETRY) - 1)]
                self._retry = self.reactor.callLater(
                    min(wait, max(0.0, self.deadline - self.reactor.seconds())),
                    self._attempt)
                return
            if code != grpc.StatusCode.OUT_OF_RANGE:  # compacted, future: the store's 410/504
                # Logged as upstream's handler logs an error it has no Status for.
                log.warn("etcd call failed: {code}: {details}", code=code,
                         details=error.details())
            self.result.errback(unreachable() if code in _UNREACHABLE else refused(error))
        else:
            self.result.callback(reply)

    def _cancel(self, _result):
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        if self._future is not None:
            self._future.cancel()
