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

The calls are made from a thread pool of their own (``deferToThreadPool``), so the
reactor never waits on the network; the work a caller hands along (transforming values
in and out) runs in the same thread.  Each call is a grpcio future the thread waits on,
so cancelling the caller's Deferred cancels the call and frees the thread.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
import time
from typing import Callable, Optional
from urllib.parse import urlsplit

import attrs
import grpc
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from platformd import errors
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2_grpc

log = Logger()

#: Threads making unary calls: the most calls in flight at once.
_THREADS = 32

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


class _Calls:
    """The grpcio futures of one ``Client.call``, so cancelling it cancels them."""

    def __init__(self):
        self.futures: list = []
        self.cancelled = False

    def cancel(self):
        self.cancelled = True
        for future in list(self.futures):
            future.cancel()


class Client:
    """
    One channel to the cluster, its stubs, and the pool unary calls run in.

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
        self._local = threading.local()

    def start(self):
        self._pool.start()

    def stop(self):
        """Close the channel, which ends the calls under way, then join the threads."""
        self.channel.close()
        self._pool.stop()

    def call(self, work: Callable, *args) -> Deferred:
        """
        Deferred: ``work(*args)`` in a pool thread, where it makes its calls with
        ``unary``; a call no member answered in time fails with ``unreachable()``.
        Cancelling the Deferred (a request's deadline, a health check's timeout)
        cancels the gRPC calls, so no thread stays blocked on them.
        """
        calls = _Calls()
        result: Deferred = Deferred(lambda _: calls.cancel())

        def run():
            self._local.calls = calls
            try:
                return work(*args)
            finally:
                self._local.calls = None

        def relay(outcome):
            if result.called:  # cancelled: the outcome has nobody to go to
                return None
            if isinstance(outcome, Failure):
                result.errback(outcome)
            else:
                result.callback(outcome)
        deferToThreadPool(self.reactor, self._pool, run).addBoth(relay)
        return result

    def unary(self, method, request, repeatable: bool = False):
        """
        In a pool thread: ``method(request)``, waiting for a member up to the deadline.

        Retried within the deadline, as clientv3's retry interceptor does: a
        ``repeatable`` call (a read) on any ``UNAVAILABLE``; a write only when the member
        refused it before proposing it (``etcdserver: no leader``, the answer to
        ``hasleader`` during an election), which cannot have been applied.
        """
        deadline = time.monotonic() + self.timeout
        calls = getattr(self._local, "calls", None)
        for attempt in itertools.count():
            left = deadline - time.monotonic()
            if left <= 0:
                raise unreachable()
            future = method.future(request, timeout=left, wait_for_ready=True,
                                   metadata=REQUIRE_LEADER)
            if calls is not None:
                calls.futures.append(future)
                if calls.cancelled:
                    future.cancel()
            try:
                return future.result()
            except grpc.FutureCancelledError:
                raise CancelledError() from None
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or not (
                        repeatable or error.details() == _NO_LEADER):
                    if error.code() in _UNREACHABLE:
                        log.warn("etcd call failed: {code}: {details}", code=error.code(),
                                 details=error.details())
                        raise unreachable() from error
                    raise
            finally:
                if calls is not None:
                    calls.futures.remove(future)
            time.sleep(min(_RETRY[min(attempt, len(_RETRY) - 1)],
                           max(0.0, deadline - time.monotonic())))
        raise AssertionError("unreachable")  # pragma: no cover
