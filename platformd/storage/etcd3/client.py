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

The calls are blocking grpcio calls in a thread pool of their own (``deferToThreadPool``),
so the reactor never waits on the network; the work a caller hands along (transforming
values in and out) runs in the same thread.
"""

from __future__ import annotations

import ipaddress
from typing import Callable, Optional
from urllib.parse import urlsplit

import attrs
import grpc
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from platformd import errors
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2_grpc

#: Threads making unary calls: the most calls in flight at once.
_THREADS = 32

#: clientv3.WithRequireLeader: a member cut off from the leader ends its watches (and
#: refuses calls) instead of serving stale data, so the client moves to another member.
REQUIRE_LEADER = (("hasleader", "true"),)

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
    """The Status of a call no etcd member answered within the request timeout."""
    return errors.timeout(
        "Timeout: request did not complete within requested timeout"
        " - context deadline exceeded", retry_after=1)


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
    One channel to the cluster, its stubs, and the pool unary calls run in.

    A plain class: it owns a channel and threads, opened by ``start`` and closed by
    ``stop``.
    """

    def __init__(self, reactor, servers: list, tls: TLSFiles = TLSFiles(),
                 timeout: float = 60.0):
        self.reactor = reactor
        self.timeout = timeout
        address, secure = target(servers)
        options = [("grpc.lb_policy_name", "round_robin"),
                   # etcd's default --max-request-bytes is 1.5 MiB; replies may be larger.
                   ("grpc.max_receive_message_length", 256 * 1024 * 1024),
                   ("grpc.keepalive_time_ms", 30_000),
                   ("grpc.keepalive_timeout_ms", 10_000),
                   ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1_000)]
        if secure or tls.cafile or tls.certfile:
            self.channel = grpc.secure_channel(address, tls.credentials(), options)
        else:
            self.channel = grpc.insecure_channel(address, options)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(self.channel)
        self._pool = ThreadPool(0, _THREADS, "platformd-etcd")

    def start(self):
        self._pool.start()

    def stop(self):
        """Close the channel, which ends the calls under way, then join the threads."""
        self.channel.close()
        self._pool.stop()

    def call(self, work: Callable, *args):
        """
        Deferred: ``work(*args)`` in a pool thread, where it makes its calls with
        ``unary``; a call no member answered in time fails with ``unreachable()``.
        """
        return deferToThreadPool(self.reactor, self._pool, work, *args)

    def unary(self, method, request, timeout: Optional[float] = None):
        """In a pool thread: ``method(request)``, waiting for a member up to the deadline."""
        try:
            return method(request, timeout=timeout or self.timeout, wait_for_ready=True,
                          metadata=REQUIRE_LEADER)
        except grpc.RpcError as error:
            if error.code() in _UNREACHABLE:
                raise unreachable() from error
            raise
