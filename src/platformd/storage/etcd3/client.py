"""
The connection to an etcd cluster: an HTTP/2 connection per ``--etcd-servers`` member
for the unary calls, gRPC channels for the watch streams, and the pool for work beside
the calls.

The client does what etcd's Go client (clientv3) does for a cluster: calls turn round
the members that are connected, so a member that is down is skipped, and over TLS each
member's certificate is checked against its own name (``Client``).  Every unary call
has a deadline, and waits for its member unless it goes to one seen connected: while
its member is not connected it waits (rather than failing at the first refused
connection) and gives up at the deadline, as clientv3's retrying calls do within a
request's context.  Upstream then answers ``504 Timeout: request did not complete
within requested timeout - context deadline exceeded``
(``endpoints/handlers/finisher``); ``unreachable`` is that Status.

A unary call is made and completed on the reactor (``grpcwire``, gRPC over HTTP/2 with
``h2``; ``member.py`` keeps each member's connection).  It was a grpcio future before,
its completion handed back with ``callFromThread`` from grpcio's thread: that hand-off,
the GIL changing hands twice, and grpcio's Python layer cost more than the call itself
(``bench/bench_etcd_calls.py``: 0.6-0.75 of the CPU per call on the reactor; the
create's figures in docs/etcd.md).  The watch streams stay grpcio's, each read in a
thread of its own (``watchstream.py``).  Work beside the calls that may take long
(transforming many values, or values through a KMS plugin) goes to the client's pool
(``in_pool``).
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
from typing import Any, Callable, Optional, TypeVar
from urllib.parse import urlsplit

import attrs
import grpc
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.internet import ssl
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from platformd import errors
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2_grpc
from platformd.storage.etcd3.grpcwire import GRPCConnection
from platformd.storage.etcd3.member import READY, Member

log = Logger()

#: Threads for the work beside the calls (``Client.in_pool``).
_THREADS = 8

#: clientv3.WithRequireLeader: a member cut off from the leader ends its watches (and
#: refuses calls) instead of serving stale data, so the client moves to another member.
REQUIRE_LEADER = (("hasleader", "true"),)

#: etcd's refusal of a call with ``hasleader`` while it knows no leader.
_NO_LEADER = "etcdserver: no leader"

#: The largest reply taken (etcd's default --max-request-bytes is 1.5 MiB; replies,
#: a page of a list, may be larger).
MAX_RECEIVE = 256 * 1024 * 1024

#: grpcio's ``keepalive_time_ms``/``keepalive_timeout_ms`` as the channels had them:
#: a PING every 30 s while calls are in flight, the connection dropped when one is
#: unanswered for 10 s.
KEEPALIVE = (30.0, 10.0)

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

    def client_options(self) -> Callable[[str], Any]:
        """
        Twisted's TLS options for a member named ``host`` (a function of it): the CA
        file's certificates as the only roots (else the system's), the client
        certificate when given, ALPN ``h2`` (etcd serves gRPC and HTTP/1 on one port).
        """
        if self.cafile:
            with open(self.cafile, "rb") as f:
                trust = ssl.trustRootFromCertificates(
                    [ssl.Certificate.loadPEM(c.public_bytes(Encoding.PEM))
                     for c in x509.load_pem_x509_certificates(f.read())])
        else:
            trust = ssl.platformTrust()
        client = None
        if self.certfile:
            with open(self.certfile, "rb") as cert, open(self.keyfile or self.certfile,
                                                         "rb") as key:
                client = ssl.PrivateCertificate.loadPEM(cert.read() + b"\n" + key.read())
        return lambda host: ssl.optionsForClientTLS(
            host, trustRoot=trust, clientCertificate=client, acceptableProtocols=[b"h2"])


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


def hosts(servers: list) -> tuple[list, bool]:
    """
    The ``(host, port)`` of each ``--etcd-servers`` URL, and whether they use TLS
    (``https``).
    """
    if not servers:
        raise ValueError("--etcd-servers: at least one URL is needed")
    schemes, found = set(), []
    for server in servers:
        url = urlsplit(server if "://" in server else "http://" + server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"--etcd-servers: {server!r} is not an http(s) URL")
        schemes.add(url.scheme)
        found.append((url.hostname, url.port or 2379))
    if len(schemes) > 1:
        raise ValueError("--etcd-servers: every URL must have the same scheme")
    return found, schemes == {"https"}


def targets(servers: list) -> tuple[list, bool]:
    """
    The gRPC target of each ``--etcd-servers`` URL (for the watch channels), and
    whether they use TLS: an address (``ipv4:``/``ipv6:``) or a DNS name (``dns:///``,
    which may resolve to several members).
    """
    found = []
    pairs, secure = hosts(servers)
    for host, port in pairs:
        try:
            version = ipaddress.ip_address(host).version
        except ValueError:
            found.append(f"dns:///{host}:{port}")
        else:
            found.append(f"ipv4:{host}:{port}" if version == 4 else f"ipv6:[{host}]:{port}")
    return found, secure


def shared(addresses: list) -> list:
    """
    Without TLS, addresses of one family share one watch channel (``round_robin`` over
    them): one grpcio thread for all, where a channel per member costs a thread per
    member taking turns for the GIL.  DNS names keep channels of their own.
    """
    for family in ("ipv4:", "ipv6:"):
        if len(addresses) > 1 and all(a.startswith(family) for a in addresses):
            return [family + ",".join(a.removeprefix(family) for a in addresses)]
    return addresses


@attrs.define(eq=False)
class Endpoint:
    """
    One watch channel (to one ``--etcd-servers`` URL, or to all the addresses
    ``shared`` joins), its Watch stub, and its last known connectivity (set from
    grpcio's thread; one attribute, read on any thread).
    """

    channel: Any  # grpc.Channel
    watch: Any = attrs.field(init=False)
    state: grpc.ChannelConnectivity = grpc.ChannelConnectivity.IDLE

    def __attrs_post_init__(self):
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)

    def follow(self):
        """Keep ``state`` up to date, and connect now (not at the first call)."""
        self.channel.subscribe(self._changed, try_to_connect=True)

    def _changed(self, state: grpc.ChannelConnectivity):
        self.state = state


_Choice = TypeVar("_Choice", Endpoint, Member)

#: The order ``pick`` prefers endpoints in: connected, then not known to have failed.
_FAILED = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


def pick(endpoints: list[_Choice], turn: int) -> _Choice:
    """
    The endpoint (watch channel or member) a stream or call goes to, turn by turn: one
    of the connected ones, in turn (each
    gets an even share); else one not known to have failed (still connecting, or idle:
    a call waits for it); else any.
    """
    for group in ([e for e in endpoints if e.state is READY],
                  [e for e in endpoints if e.state not in _FAILED]):
        if group:
            return group[turn % len(group)]
    return endpoints[turn % len(endpoints)]


class Client:
    """
    The members of the cluster (one per ``--etcd-servers`` URL) for the unary calls,
    the watch channels, and the pool for work beside the calls.

    A connection per member, over TLS checked against that member's own name (a
    cluster whose members have certificates of their own, the usual kind); clientv3
    does the same with a name per address.  Calls turn round the connected members
    (``pick``), as clientv3's round-robin balancer.  The watch channels are grpcio's:
    over TLS one per URL for the same reason (grpcio checks every address of a channel
    against the channel's one name), else the addresses share one (``shared``).

    ``dial(host, port)`` is the stream to a member (the ``etcd`` egress selection's,
    docs/egress.md; directly by default), ``channel_options`` the watch channels' way
    through it (``grpc.http_proxy``).

    A plain class: it owns connections, channels and threads, opened by ``start`` and
    closed by ``stop``.
    """

    def __init__(self, reactor, servers: list, tls: TLSFiles = TLSFiles(),
                 timeout: float = 60.0, channel_options: tuple = (),
                 dial: Optional[Callable[[str, int], Any]] = None,
                 keepalive: tuple = KEEPALIVE):
        self.reactor = reactor
        self.timeout = timeout
        pairs, secure = hosts(servers)
        secure = secure or bool(tls.cafile or tls.certfile)
        dial = dial or (lambda host, port: HostnameEndpoint(reactor, host.encode("idna"),
                                                            port))
        client_tls = tls.client_options() if secure else None
        self.members = [Member(reactor, f"{host}:{port}",
                               functools.partial(_stream, dial, client_tls, host, port),
                               functools.partial(GRPCConnection, reactor, _authority(host, port),
                                                 "https" if secure else "http", MAX_RECEIVE,
                                                 REQUIRE_LEADER, keepalive))
                        for host, port in pairs]
        options = [("grpc.lb_policy_name", "round_robin"),
                   ("grpc.keepalive_time_ms", int(keepalive[0] * 1000)),
                   ("grpc.keepalive_timeout_ms", int(keepalive[1] * 1000)),
                   ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1_000),
                   # The etcd egress selection's (``grpc.http_proxy``), docs/egress.md.
                   *channel_options]
        watched, _ = targets(servers)
        if secure:
            credentials = tls.credentials()
            self.endpoints = [Endpoint(grpc.secure_channel(address, credentials, options))
                              for address in watched]
        else:
            self.endpoints = [Endpoint(grpc.insecure_channel(address, options))
                              for address in shared(watched)]
        self._turns = itertools.count()
        self._pool = ThreadPool(0, _THREADS, "platformd-etcd")
        #: Set by ``stop``: the connections and channels are closed, no call may start.
        self.closed = False

    def start(self):
        self._pool.start()
        for member in self.members:
            member.start()
        if len(self.endpoints) > 1:  # one endpoint is every watch's, whatever its state
            for endpoint in self.endpoints:
                endpoint.follow()

    def stop(self):
        """Close the connections and channels, which ends the calls under way, then
        join the threads (once: a second call does nothing)."""
        if self.closed:
            return
        self.closed = True
        for member in self.members:
            member.stop()
        for endpoint in self.endpoints:
            endpoint.channel.close()
        self._pool.stop()

    def endpoint(self) -> Endpoint:
        """
        The watch channel the next watch stream opens on (any thread).  A single one
        (the usual plain-text cluster, ``shared``) is every stream's without choosing.
        """
        if len(self.endpoints) == 1:
            return self.endpoints[0]
        return pick(self.endpoints, next(self._turns))

    def member(self) -> Member:
        """The member the next unary call goes to; a single one is every call's
        without choosing (this is on every call's path)."""
        if len(self.members) == 1:
            return self.members[0]
        return pick(self.members, next(self._turns))

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
        ...) with ``request``, each attempt made to the member ``member`` then picks,
        waiting for it up to the deadline; a call no member answered in time fails with
        ``unreachable()``.

        Retried within the deadline, as clientv3's retry interceptor does: a
        ``repeatable`` call (a read) on any ``UNAVAILABLE``; a write only when it cannot
        have been applied: the member refused it before proposing it (``etcdserver: no
        leader``, the answer to ``hasleader`` during an election), or it was never sent
        (``grpcwire.CallError.sent``).  Cancelling the Deferred (a request's deadline, a health
        check's timeout) cancels the call.  The deadline is ``timeout`` from now unless
        given (``hedged``'s calls share their first one's).
        """
        if deadline is None:
            deadline = self.reactor.seconds() + self.timeout
        return _UnaryCall(self.reactor, self.member, method, request, repeatable,
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
    One ``Client.unary``: its attempts, each on the member ``member`` then picks, the
    wait before the next, and the deadline's timer (the call's ``grpc-timeout`` tells
    etcd; the timer ends a call whose member does not answer at all).

    attrs for the declared state of a call in flight.
    """

    reactor: Any
    member: Callable[[], Member]  # picks each attempt's member
    method: str  # of the KV service
    request: Any
    repeatable: bool
    deadline: float
    result: Deferred = attrs.field(init=False)
    attempts: int = attrs.field(default=0, init=False)
    _call: Optional[Deferred] = attrs.field(default=None, init=False)
    _retry: Any = attrs.field(default=None, init=False)  # IDelayedCall
    _expiry: Any = attrs.field(default=None, init=False)  # IDelayedCall

    def __attrs_post_init__(self):
        self.result = Deferred(lambda _: self._end())

    def start(self) -> Deferred:
        self._expiry = self.reactor.callLater(
            max(0.0, self.deadline - self.reactor.seconds()), self._expired)
        self._attempt()
        return self.result

    def _attempt(self):
        self._retry = None
        left = self.deadline - self.reactor.seconds()
        if left <= 0:
            self._expired()
            return
        self.attempts += 1
        member = self.member()
        # A call to a member this client saw connected does not wait for it: should
        # that connection just have broken, it is refused unsent and tried on another
        # member.  With none connected, a call waits for its member.
        call = self._call = member.call(self.method, self.request, left,
                                        wait=member.state is not READY)
        call.addCallbacks(self._replied, self._failed)

    def _replied(self, reply):
        self._call = None
        self._end()
        self.result.callback(reply)

    def _failed(self, failure):
        self._call = None
        if failure.check(CancelledError) or self.result.called:
            return None  # cancelled by ``_end``: the outcome has nobody to go to
        error = failure.value
        if not isinstance(error, grpc.RpcError):
            self._end()
            self.result.errback(failure)
            return None
        code = error.code()
        details = error.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE and (
                self.repeatable or details == _NO_LEADER or not getattr(error, "sent", True)):
            wait = _RETRY[min(self.attempts - 1, len(_RETRY) - 1)]
            self._retry = self.reactor.callLater(
                min(wait, max(0.0, self.deadline - self.reactor.seconds())), self._attempt)
            return None
        self._end()
        if code != grpc.StatusCode.OUT_OF_RANGE:  # compacted, future: the store's 410/504
            # Logged as upstream's handler logs an error it has no Status for.
            log.warn("etcd call failed: {code}: {details}", code=code, details=details)
        self.result.errback(unreachable() if code in _UNREACHABLE else refused(error))
        return None

    def _expired(self):
        """The deadline: the attempt under way (or the wait for the next) ends."""
        self._expiry = None
        self._end()
        log.warn("etcd call failed: {code}: {details}", code=grpc.StatusCode.DEADLINE_EXCEEDED,
                 details="deadline exceeded")
        self.result.errback(unreachable())

    def _end(self):
        """Cancel what is still scheduled or under way."""
        for timer in (self._retry, self._expiry):
            if timer is not None and timer.active():
                timer.cancel()
        self._retry = self._expiry = None
        if self._call is not None:
            call, self._call = self._call, None
            call.cancel()


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


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _stream(dial: Callable, client_tls: Optional[Callable], host: str, port: int):
    """The stream to a member: dialled, then TLS checked against its name if asked."""
    endpoint = dial(host, port)
    return endpoint if client_tls is None else wrapClientTLS(client_tls(host), endpoint)
