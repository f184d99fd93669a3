"""
The API server in memory, for fast tests: the same ``compose`` and boot sequence as the
daemon, over ``MemoryStorage`` on a ``twisted.internet.task.Clock``, with no socket, no
TLS and no thread — in the spirit of treq's ``StubTreq``.

Requests go through the real stack on both sides: twisted.web's ``Agent`` writes real
HTTP/1.1 bytes, the daemon's ``APISite`` parses them (request line, headers, query,
body), and the answers — whole, chunked or streamed — are parsed back by the client.
The two ends are joined by ``twisted.test.iosim`` transports and pumped by hand, so
everything happens synchronously inside ``request()``/``flush()``/``advance()``.

Who is asking is a header (``X-Stub-User``, ``X-Stub-Group``), read by
``HeaderAuthenticator`` in place of client certificates; a client made with
``user=None`` sends none and is anonymous (401).

    stub = StubServer()                      # booted: built-in namespaces exist, ready
    self.addCleanup(stub.stop)
    admin = stub.client()                    # user "admin" in system:masters
    r = admin.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    watch = admin.watch("/api/v1/namespaces/default/configmaps?watch=1")
    admin.delete(".../configmaps/a"); watch.types()   # events read as they arrive
    stub.advance(30)                         # the clock moves: timeouts, bookmarks, expiry
"""

from __future__ import annotations

import json

import attrs
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.web.client import Agent, HTTPConnectionPool, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, UNKNOWN_LENGTH
from zope.interface import implementer

from platformd.auth.interfaces import AUTHENTICATED_GROUP, IAuthenticator, UserInfo
from platformd.util.httpclient import BytesBody
from platformd.compose import Authentication, boot_sequence, compose
from platformd.featuregates import FeatureGates
from platformd.storage.memory import MemoryStorage

from tests.e2e.harness import Response, Verbs

USER_HEADER = b"x-stub-user"
GROUP_HEADER = b"x-stub-group"


@implementer(IAuthenticator)
class HeaderAuthenticator:
    """The user named by ``X-Stub-User`` with the groups of ``X-Stub-Group`` (tests only)."""

    def authenticate(self, request):
        name = request.getHeader(USER_HEADER)
        if not name:
            return None
        groups = request.requestHeaders.getRawHeaders(GROUP_HEADER) or []
        return UserInfo(name.decode(), "",
                        tuple(g.decode() for g in groups) + (AUTHENTICATED_GROUP,))


def headers_only(_internals) -> Authentication:
    """The stub's authentication: ``HeaderAuthenticator`` alone."""
    return Authentication(HeaderAuthenticator())


@implementer(IAgentEndpointFactory)
@attrs.define
class _Endpoints:
    stub: "StubServer"

    def endpointForURI(self, uri):
        return _Endpoint(self.stub)


@implementer(IStreamClientEndpoint)
@attrs.define
class _Endpoint:
    stub: "StubServer"

    def connect(self, factory):
        return succeed(self.stub._connect(factory))


class StubServer:
    """
    The API server over ``MemoryStorage`` and ``clock``, booted (see module docstring).
    ``gates`` is a ``--feature-gates`` value; ``storage`` (default: a ``MemoryStorage``
    on ``clock``) any ``IStorage``; ``rbac_policy``: reconcile the bootstrap RBAC
    policy and aggregate ClusterRoles, as the daemon does (off: an empty server);
    ``authentication`` builds the authenticator (default: ``HeaderAuthenticator``) and
    the other ``compose_args`` go to ``compose``, the daemon's composition root.
    """

    def __init__(self, gates: str = "", clock: Clock | None = None, storage=None,
                 rbac_policy: bool = False, authentication=None, **compose_args):
        self.clock = clock or Clock()
        self.storage = storage if storage is not None else MemoryStorage(self.clock)
        self.components = compose(self.storage, self.clock, FeatureGates.parse(gates),
                                  authentication or headers_only, **compose_args)
        self.api = self.components.api
        self.cache = self.components.cache
        self.site = self.components.site
        self.boot = boot_sequence(self.components, rbac_policy=rbac_policy)
        self._pumps: list = []
        self._ports = iter(range(40000, 65000))
        outcome = []
        self.boot.startService().addBoth(outcome.append)
        self.flush()
        if not outcome or isinstance(outcome[0], Failure):
            raise AssertionError(f"the stub server did not start: {outcome}")

    def client(self, user: str | None = "admin", groups=("system:masters",)) -> "StubClient":
        """A client asking as ``user`` in ``groups`` (``user=None``: anonymous)."""
        return StubClient(self, user, tuple(groups))

    def _connect(self, factory):
        peer = IPv4Address("TCP", "127.0.0.1", next(self._ports))
        host = IPv4Address("TCP", "127.0.0.1", 6443)
        client = factory.buildProtocol(host)
        server = self.site.buildProtocol(peer)
        pump = iosim.connect(server, iosim.FakeTransport(server, True, host, peer),
                             client, iosim.FakeTransport(client, False, peer, host),
                             greet=False, clock=self.clock)
        self._pumps.append(pump)
        return client

    def flush(self) -> None:
        """Move every byte either way and run what is due now, until nothing moves."""
        for _ in range(10_000):
            self.clock.advance(0)
            moved = False
            for pump in list(self._pumps):
                moved = pump.pump() or moved
                if pump.clientIO.disconnected and pump.serverIO.disconnected:
                    self._pumps.remove(pump)
            if not moved and not any(c.getTime() <= self.clock.seconds()
                                     for c in self.clock.getDelayedCalls()):
                return
        raise AssertionError("the stub server never went quiet")

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (in one step), then flush."""
        self.clock.advance(seconds)
        self.flush()

    def connections(self) -> int:
        return len(self._pumps)

    def stop(self) -> None:
        """Close every connection and stop the boot sequence (storage last)."""
        for pump in self._pumps:
            pump.clientIO.loseConnection()
        self.flush()
        outcome = []
        self.boot.stopService().addBoth(outcome.append)
        self.flush()


@attrs.define
class Pending:
    """A request sent; ``result()`` once the server has answered it whole."""

    what: str
    answered: list

    def result(self) -> Response:
        if not self.answered:
            raise AssertionError(f"{self.what}: no complete answer (a stream, or pending?)")
        if isinstance(self.answered[0], Failure):
            self.answered[0].raiseException()
        return self.answered[0]


class StubClient(Verbs):
    """Requests to a ``StubServer`` as one user; each returns once it is answered."""

    def __init__(self, stub: StubServer, user, groups):
        self.stub = stub
        self.user = user
        self.groups = groups
        self.agent = Agent.usingEndpointFactory(
            stub.clock, _Endpoints(stub), HTTPConnectionPool(stub.clock, persistent=False))

    def _headers(self, headers) -> Headers:
        h = Headers()
        if self.user is not None:
            h.addRawHeader(USER_HEADER, self.user.encode())
            for group in self.groups:
                h.addRawHeader(GROUP_HEADER, group.encode())
        for name, value in (headers or {}).items():
            h.addRawHeader(name, value)
        return h

    def _send(self, method: str, path: str, body, content_type, headers) -> Deferred:
        h = self._headers(headers)
        producer = None
        if body is not None:
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            if not h.hasHeader(b"content-type"):
                h.addRawHeader(b"content-type", content_type)
            producer = BytesBody(body)
        return self.agent.request(method.encode(), b"http://stub" + path.encode(), h,
                                  producer)

    def request(self, method: str, path: str, body=None, content_type="application/json",
                headers=None) -> Response:
        """The whole answer to one request (its body read to the end)."""
        return self.start(method, path, body, content_type, headers).result()

    def start(self, method: str, path: str, body=None, content_type="application/json",
              headers=None) -> "Pending":
        """Send one request and flush; its answer may come later (``Pending.result``)."""
        answered: list = []

        def read(response):
            length = response.length if response.length is not UNKNOWN_LENGTH else None
            return readBody(response).addCallback(
                lambda data: Response(response.code, response.headers, data, length))

        self._send(method, path, body, content_type, headers).addCallback(read).addBoth(
            answered.append)
        self.stub.flush()
        return Pending(f"{method} {path}", answered)


    def watch(self, path: str, headers=None) -> "StubWatch":
        """A streamed answer (a watch), read as it arrives; its head is there at once."""
        answered = []
        self._send("GET", path, None, None, headers).addBoth(answered.append)
        self.stub.flush()
        if not answered:
            raise AssertionError(f"GET {path}: no response head")
        if isinstance(answered[0], Failure):
            answered[0].raiseException()
        stream = StubWatch(self.stub, answered[0])
        self.stub.flush()
        return stream


class StubWatch(Protocol):
    """
    A streamed response: ``data`` so far, ``events`` (one JSON document per line) so
    far, ``ended`` once the server has ended it.  ``close()`` hangs up as a client would.
    """

    def __init__(self, stub: StubServer, response):
        self.stub = stub
        self.response = response
        self.code = response.code
        self.headers = response.headers
        self.data = b""
        self.events: list = []
        self.ended = False
        self._buffer = b""
        response.deliverBody(self)

    def header(self, name: str):
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def dataReceived(self, data):
        self.data += data
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        self.events.extend(json.loads(line) for line in lines if line.strip())

    def connectionLost(self, reason):
        self.ended = True

    def types(self) -> list:
        return [e["type"] for e in self.events]

    def close(self) -> None:
        self.transport.stopProducing()
        self.stub.flush()
