"""
A real platformd on loopback for end-to-end tests: real TLS, real SQLite, the real
reactor; and a small HTTP client that speaks to it with the admin client certificate
or a bearer token.
"""

from __future__ import annotations

import json
import os
import shutil

import attrs
from twisted.internet import reactor, ssl
from twisted.internet.defer import Deferred, inlineCallbacks, returnValue, succeed
from twisted.internet.protocol import Protocol
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from platformd.options import Options
from platformd.service import daemon


@attrs.frozen
class Response:
    code: int
    headers: Headers
    body: bytes
    #: The Content-Length sent (Twisted's client keeps it out of ``headers``), or None.
    length: object = None

    def json(self):
        return json.loads(self.body)

    def header(self, name: str):
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def headers_named(self, name: str):
        return self.headers.getRawHeaders(name) or []


@implementer(IPolicyForHTTPS)
@attrs.define
class _Policy:
    options: object

    def creatorForNetloc(self, hostname, port):
        return self.options


class Verbs:
    """get/post/put/delete/patch over a client's ``request(method, path, body, ...)``."""

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def patch(self, path, body, content_type="application/merge-patch+json", **kw):
        return self.request("PATCH", path, body, content_type=content_type, **kw)


class Client(Verbs):
    """HTTPS client of one server; ``identity`` is 'admin' (client cert) or None."""

    def __init__(self, testcase, pki_dir: str, port: int, identity: str | None = "admin",
                 token: str | None = None):
        self.base = f"https://127.0.0.1:{port}"
        self.token = token
        with open(os.path.join(pki_dir, "ca.crt"), "rb") as f:
            ca = ssl.Certificate.loadPEM(f.read())
        client_cert = None
        if identity:
            with open(os.path.join(pki_dir, f"{identity}.crt"), "rb") as f:
                cert = f.read()
            with open(os.path.join(pki_dir, f"{identity}.key"), "rb") as f:
                key = f.read()
            client_cert = ssl.PrivateCertificate.loadPEM(cert + key)
        options = ssl.optionsForClientTLS("127.0.0.1", trustRoot=ca,
                                          clientCertificate=client_cert)
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.agent = Agent(reactor, contextFactory=_Policy(options), pool=self.pool)
        testcase.addCleanup(self.pool.closeCachedConnections)
        # A server stopping at cleanup ends its watches cleanly, which returns their
        # connections to this pool after the cleanup above: ``start_server`` closes the
        # pools again once the server has stopped.
        testcase.__dict__.setdefault("client_pools", []).append(self.pool)

    @inlineCallbacks
    def request(self, method: str, path: str, body=None, content_type="application/json",
                headers=None):
        from twisted.web.client import FileBodyProducer
        from io import BytesIO
        h = Headers()
        for name, value in (headers or {}).items():
            h.addRawHeader(name, value)
        if self.token:
            h.addRawHeader("Authorization", f"Bearer {self.token}")
        producer = None
        if body is not None:
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            if not h.hasHeader("Content-Type"):
                h.addRawHeader("Content-Type", content_type)
            producer = FileBodyProducer(BytesIO(body))
        response = yield self.agent.request(method.encode(), (self.base + path).encode(), h,
                                            producer)
        data = yield readBody(response)
        length = response.length if isinstance(response.length, int) else None
        returnValue(Response(response.code, response.headers, data, length))



@inlineCallbacks
def _stop(testcase, service):
    """Stop ``service``, then close the connections its ended watches left to the clients."""
    yield service.stopService()
    for pool in testcase.__dict__.get("client_pools", ()):
        yield pool.closeCachedConnections()


@inlineCallbacks
def start_server(testcase, *args, data_dir=None):
    """
    A running PlatformService on a free loopback port; stopped at test cleanup.  The
    test case's ``storage_args`` (if any) come first: the same suites run over another
    backend (``tests/etcd/test_acceptance.py``).
    """
    data_dir = data_dir or os.path.abspath(testcase.mktemp())
    options = Options()
    options.parseOptions(["--data-dir", data_dir, "--secure-port", "0",
                          *getattr(testcase, "storage_args", ()), *args])
    service = daemon(options, reactor)
    service.privilegedStartService()
    service.startService()
    testcase.addCleanup(_stop, testcase, service)
    yield service.booted  # a boot failure fails the test with its cause
    if not service.ready:
        raise AssertionError("platformd did not become ready")
    service.pki_dir = os.path.join(data_dir, "pki")
    service.data_dir = data_dir
    service.port_number = service.port.getHost().port
    returnValue(service)


@inlineCallbacks
def start_beside(testcase, first, *args):
    """
    Another server started with a copy of ``first``'s PKI (its CA, serving and client
    certificates, service-account key), as servers behind one balancer share theirs.
    """
    data_dir = os.path.abspath(testcase.mktemp())
    shutil.copytree(first.pki_dir, os.path.join(data_dir, "pki"))
    server = yield start_server(testcase, *args, data_dir=data_dir)
    returnValue(server)


@inlineCallbacks
def start_token_server(testcase, tokens_csv: str, *args):
    """A server whose ``--token-auth-file`` holds ``tokens_csv`` (and more ``args``)."""
    data_dir = os.path.abspath(testcase.mktemp())
    os.makedirs(data_dir)
    tokens = os.path.join(data_dir, "tokens.csv")
    with open(tokens, "w") as f:
        f.write(tokens_csv)
    server = yield start_server(testcase, "--token-auth-file", tokens, *args, data_dir=data_dir)
    returnValue(server)


def token_client(testcase, server, token: str) -> Client:
    """A client of ``server`` with no certificate, sending ``token``."""
    return Client(testcase, server.pki_dir, server.port_number, identity=None, token=token)


class ServerTestCase(TestCase):
    """A test case with its own platformd (started with ``server_args``) and an admin client."""

    timeout = 60
    server_args = ()
    #: The server's --data-dir (None: a new one).
    server_data_dir = None

    @inlineCallbacks
    def setUp(self):
        self.server = yield start_server(self, *self.server_args,
                                         data_dir=self.server_data_dir)
        self.client = Client(self, self.server.pki_dir, self.server.port_number)

    @inlineCallbacks
    def create_namespace(self, name):
        r = yield self.client.post("/api/v1/namespaces", {"metadata": {"name": name}})
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def until_items(self, path: str, count: int, timeout: float = 10.0):
        """Wait until the list at ``path`` has ``count`` items (the server's controllers
        work after the request that triggered them has been answered)."""
        from twisted.internet.task import deferLater
        deadline = reactor.seconds() + timeout
        while len((yield self.client.get(path)).json()["items"]) != count:
            self.assertLess(reactor.seconds(), deadline, f"{path}: never {count} items")
            yield deferLater(reactor, 0.02, lambda: None)

    @inlineCallbacks
    def settled_namespace(self, name):
        """Wait until ``name`` has its ``default`` ServiceAccount (the service-account
        controller's), so a later namespace deletion does not race its creation."""
        yield self.until_items(f"/api/v1/namespaces/{name}/serviceaccounts", 1)


class WatchReader(Protocol):
    """Collects a watch stream's events (one JSON document per line) as they arrive."""

    def __init__(self):
        self.events = []
        self.finished = Deferred()
        self._buffer = b""
        self._waiting = []  # (count, Deferred)

    def dataReceived(self, data):
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self.events.append(json.loads(line))
        for entry in list(self._waiting):
            if len(self.events) >= entry[0]:
                self._waiting.remove(entry)
                entry[1].callback(self.events[:entry[0]])

    def connectionLost(self, reason):
        for _count, d in self._waiting:
            d.errback(AssertionError(f"stream ended after {len(self.events)} events"))
        self._waiting = []
        self.finished.callback(self.events)

    def wait_for(self, count: int, timeout: float = 10.0):
        """Deferred firing with the first ``count`` events once they have arrived."""
        if len(self.events) >= count:
            return succeed(self.events[:count])
        d = Deferred()
        self._waiting.append((count, d))
        d.addTimeout(timeout, reactor)
        return d

    def types(self):
        return [e["type"] for e in self.events]


class RawReader(Protocol):
    """Collects a response body's bytes (for binary streams)."""

    def __init__(self):
        self.data = b""
        self.finished = Deferred()

    def dataReceived(self, data):
        self.data += data

    def connectionLost(self, reason):
        self.finished.callback(self.data)


@inlineCallbacks
def open_watch(client, path: str, accept: str = None, raw: bool = False):
    """(response, reader) for a watch request; the stream is read as it comes."""
    h = Headers()
    if client.token:
        h.addRawHeader("Authorization", f"Bearer {client.token}")
    if accept:
        h.addRawHeader("Accept", accept)
    response = yield client.agent.request(b"GET", (client.base + path).encode(), h, None)
    reader = RawReader() if raw else WatchReader()
    response.deliverBody(reader)
    returnValue((response, reader))
