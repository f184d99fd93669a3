"""
The connection to an etcd cluster: gRPC channels to the ``--etcd-servers`` endpoints,
the v3 stubs, and unary calls made off the reactor.

The channels do what etcd's Go client (clientv3) does for a cluster: calls turn round
the members that are connected, so a member that is down is skipped, and over TLS each
member's certificate is checked against its own name (``Client``).  Every unary call
has a deadline, and is ``wait_for_ready`` unless it goes to an endpoint seen connected:
while its endpoint is not connected it waits (rather than failing at the first refused
connection) and gives up at the deadline, as clientv3's retrying calls do within a
request's context.  Upstream then answers ``504 Timeout: request did not complete
within requested timeout - context deadline exceeded``
(``endpoints/handlers/finisher``); ``unreachable`` is that Status.

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
import itertools
from typing import Any, Callable, Optional
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

#: Threads for the work beside the calls (``Client.in_pool``).
_THREADS = 8

#: clientv3.WithRequireLeader: a member cut off from the leader ends its watches (and
#: refuses calls) instead of serving stale data, so the client moves to another member.
REQUIRE_LEADER = (("hasleader", "true"),)

#: etcd's refusal of a call with ``hasleader`` while it knows no leader.
_NO_LEADER = "etcdserver: no leader"

#: How grpcio fails a call it never sent, its member's channel having no connection
#: (pick_first's and round_robin's words): a write so refused is safe to try again, as
#: clientv3 retries a write on grpc-go's "there is no address available".
_NOT_SENT = ("failed to connect to all addresses", "connections to all backends failing")

#: Waits between retries of a call (seconds).
_RETRY = (0.025, 0.05, 0.1, 0.25, 0.5)

#: A quorum read unanswered this long (seconds) is asked again (``Client.hedged``): a
#: healthy cluster answers one in milliseconds, even loaded (p99 13 ms in the create
#: benchmark), and calls in turn round the members can fall so that a replica's every
#: quorum read goes to the same member: a hung one would cost each of them this long.
HEDGE_AFTER = 0.25

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


def targets(servers: list) -> tuple[list, bool]:
    """
    The gRPC target of each ``--etcd-servers`` URL, and whether they use TLS
    (``https``): an address (``ipv4:``/``ipv6:``) or a DNS name (``dns:///``, which may
    resolve to several members).
    """
    if not servers:
        raise ValueError("--etcd-servers: at least one URL is needed")
    schemes, found = set(), []
    for server in servers:
        url = urlsplit(server if "://" in server else "http://" + server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"--etcd-servers: {server!r} is not an http(s) URL")
        schemes.add(url.scheme)
        host, port = url.hostname, url.port or 2379
        try:
            version = ipaddress.ip_address(host).version
        except ValueError:
            found.append(f"dns:///{host}:{port}")
        else:
            found.append(f"ipv4:{host}:{port}" if version == 4 else f"ipv6:[{host}]:{port}")
    if len(schemes) > 1:
        raise ValueError("--etcd-servers: every URL must have the same scheme")
    return found, schemes == {"https"}


def shared(addresses: list) -> list:
    """
    Without TLS, addresses of one family share one channel (``round_robin`` over them):
    one channel's calls complete on one grpcio thread, where a channel per member
    costs a thread per member taking turns for the GIL (CPU per write through the
    store 0.79-0.84 ms against 0.92-1.39).  DNS names keep channels of their own.
    """
    for family in ("ipv4:", "ipv6:"):
        if len(addresses) > 1 and all(a.startswith(family) for a in addresses):
            return [family + ",".join(a.removeprefix(family) for a in addresses)]
    return addresses


@attrs.define(eq=False)
class Endpoint:
    """
    One channel (to one ``--etcd-servers`` URL, or to all the addresses ``shared``
    joins), its stubs, and its last known connectivity (set from grpcio's thread; one
    attribute, read on any thread).
    """

    channel: Any  # grpc.Channel
    kv: Any = attrs.field(init=False)
    watch: Any = attrs.field(init=False)
    state: grpc.ChannelConnectivity = grpc.ChannelConnectivity.IDLE

    def __attrs_post_init__(self):
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)

    def follow(self):
        """Keep ``state`` up to date, and connect now (not at the first call)."""
        self.channel.subscribe(self._changed, try_to_connect=True)

    def _changed(self, state: grpc.ChannelConnectivity):
        self.state = state


#: The order ``pick`` prefers endpoints in: connected, then not known to have failed.
_READY = grpc.ChannelConnectivity.READY
_FAILED = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


def pick(endpoints: list, turn: int) -> Endpoint:
    """
    The endpoint a call goes to, turn by turn: one of the connected ones, in turn (each
    gets an even share); else one not known to have failed (still connecting, or idle:
    a call waits for it); else any.
    """
    for group in ([e for e in endpoints if e.state is _READY],
                  [e for e in endpoints if e.state not in _FAILED]):
        if group:
            return group[turn % len(group)]
    return endpoints[turn % len(endpoints)]


class Client:
    """
    The channels to the cluster (one per ``--etcd-servers`` endpoint), and the pool for
    work beside the calls.

    Over TLS, one channel per endpoint, not one over all of them, so that each member's
    certificate is checked against that member's own name: grpcio checks every address
    of a channel against the channel's one name, so a cluster whose members have
    certificates of their own (the usual kind) could not be reached through a single
    channel.  clientv3 does the same with a name per address.  Calls turn round the
    connected members (``pick``), as clientv3's round-robin balancer; an endpoint that
    is a DNS name balances, within its channel, over the members it resolves to.
    Without TLS, addresses share a channel (``shared``).

    A plain class: it owns channels and threads, opened by ``start`` and closed by
    ``stop``.
    """

    def __init__(self, reactor, servers: list, tls: TLSFiles = TLSFiles(),
                 timeout: float = 60.0, channel_options: tuple = ()):
        self.reactor = reactor
        self.timeout = timeout
        addresses, secure = targets(servers)
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
            credentials = tls.credentials()
            self.endpoints = [Endpoint(grpc.secure_channel(address, credentials, options))
                              for address in addresses]
        else:
            self.endpoints = [Endpoint(grpc.insecure_channel(address, options))
                              for address in shared(addresses)]
        self._turns = itertools.count()
        self._pool = ThreadPool(0, _THREADS, "platformd-etcd")
        #: Set by ``stop``: the channels are closed, no call may start.
        self.closed = False

    def start(self):
        self._pool.start()
        if len(self.endpoints) > 1:  # one endpoint is every call's, whatever its state
            for endpoint in self.endpoints:
                endpoint.follow()

    def stop(self):
        """Close the channels, which ends the calls under way, then join the threads
        (once: a second call does nothing)."""
        if self.closed:
            return
        self.closed = True
        for endpoint in self.endpoints:
            endpoint.channel.close()
        self._pool.stop()

    def endpoint(self) -> Endpoint:
        """
        The endpoint the next call or watch goes to (any thread).  A single one (the
        usual plain-text cluster, ``shared``) is every call's without choosing: this is
        on every call's path.
        """
        if len(self.endpoints) == 1:
            return self.endpoints[0]
        return pick(self.endpoints, next(self._turns))

    def in_pool(self, work: Callable, *args) -> Deferred:
        """
        Deferred: ``work(*args)`` in the client's pool: what may take long beside the
        calls (transforming many values, or values through a KMS plugin).
        """
        return deferToThreadPool(self.reactor, self._pool, work, *args)

    def unary(self, method: str, request, repeatable: bool = False,
              deadline: Optional[float] = None) -> Deferred:
        """
        On the reactor: Deferred of the reply to KV's ``method`` (``"Txn"``, ``"Range"``
        ...) with ``request``, each attempt made to the endpoint ``endpoint`` then picks,
        waiting for it up to the deadline; a call no member answered in time fails with
        ``unreachable()``.

        Retried within the deadline, as clientv3's retry interceptor does: a
        ``repeatable`` call (a read) on any ``UNAVAILABLE``; a write only when it cannot
        have been applied: the member refused it before proposing it (``etcdserver: no
        leader``, the answer to ``hasleader`` during an election), or grpcio never sent
        it (``_NOT_SENT``).  Cancelling the Deferred (a request's deadline, a health
        check's timeout) cancels the call.  The deadline is ``timeout`` from now unless
        given (``hedged``'s calls share their first one's).
        """
        if deadline is None:
            deadline = self.reactor.seconds() + self.timeout
        return _UnaryCall(self.reactor, self.endpoint, method, request, repeatable,
                          deadline).start()

    def hedged(self, method: str, request) -> Deferred:
        """
        ``unary`` for a small call any member answers alike and that may be made twice
        (the quorum read of the current revision, the marker write): while no answer
        has come, the call is made again every ``HEDGE_AFTER`` seconds, each time to
        the next member in turn; the first answer wins and the calls still under way
        are cancelled.  A member that hangs with its connection open (a stalled disk
        or host) keeps a call until the deadline, or until keepalive drops the
        connection (40 s), and every consistent read of a replica waits on one shared
        quorum read; hedged, they wait about ``HEDGE_AFTER`` more.  A failure is the
        answer once no call is left under way.
        """
        return _Hedged(self, method, request).start()


@attrs.define(eq=False)
class _UnaryCall:
    """
    One ``Client.unary``: each attempt is a grpcio future whose completion comes back
    to the reactor with ``callFromThread`` from grpcio's own thread, so no thread of
    ours waits on it and the reply reaches the reactor in one hand-off.

    attrs for the declared state of a call in flight.
    """

    reactor: Any
    endpoint: Callable[[], Endpoint]  # picks each attempt's endpoint
    method: str  # of the KV service
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
        endpoint = self.endpoint()
        # A call to an endpoint this client saw connected does not wait for it: should
        # that connection just have broken, grpcio refuses the call unsent and it is tried
        # on another endpoint.  With none seen connected (or one endpoint, not followed),
        # a call waits for its endpoint.
        wait = endpoint.state is not _READY
        self._future = getattr(endpoint.kv, self.method).future(
            self.request, timeout=left, wait_for_ready=wait, metadata=REQUIRE_LEADER)
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
            details = error.details() or ""
            if code == grpc.StatusCode.UNAVAILABLE and (
                    self.repeatable or details == _NO_LEADER or details.startswith(_NOT_SENT)):
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


@attrs.define(eq=False)
class _Hedged:
    """One ``Client.hedged`` call: its attempts under way, and the timer of the next."""

    client: Client
    method: str
    request: Any
    result: Deferred = attrs.field(init=False)
    #: Every attempt's: the first's, so that the last answer comes by then.
    deadline: float = attrs.field(init=False)
    _calls: list = attrs.field(factory=list, init=False)
    _next: Any = attrs.field(default=None, init=False)  # IDelayedCall

    def __attrs_post_init__(self):
        self.result = Deferred(lambda _: self._stop())
        self.deadline = self.client.reactor.seconds() + self.client.timeout

    def start(self) -> Deferred:
        self._attempt()
        return self.result

    def _attempt(self):
        if self.client.closed:  # the calls under way end with the channels
            if not self._calls:
                self.result.errback(CancelledError())  # asked after ``stop``
            return
        call = self.client.unary(self.method, self.request, True, self.deadline)
        self._calls.append(call)
        reactor = self.client.reactor
        if reactor.seconds() + HEDGE_AFTER < self.deadline:
            self._next = reactor.callLater(HEDGE_AFTER, self._attempt)
        call.addBoth(self._answered, call)

    def _answered(self, outcome, call) -> None:
        self._calls.remove(call)
        if self.result.called or (isinstance(outcome, Failure) and self._calls):
            return  # settled already (these are the calls it cancels), or others go on
        if isinstance(outcome, Failure):
            self.result.errback(outcome)
        else:
            self.result.callback(outcome)
        self._stop()

    def _stop(self):
        if self._next is not None and self._next.active():
            self._next.cancel()
        for call in list(self._calls):
            call.cancel()
