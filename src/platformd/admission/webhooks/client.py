"""
The HTTPS call to a webhook: ``twisted.web.client.Agent`` with the webhook's
``caBundle`` as the only trust roots (the system's when empty), one connection pool for
every webhook, ``httpclient.post``: ``timeoutSeconds`` is kept by cancelling the
request on the injected clock, as the Webhook authorizer does; the reactor never
blocks.  The URL carries ``?timeout=Ns`` as upstream's client adds it.

A ``clientConfig.service`` webhook is called at ``https://<name>.<namespace>.svc:<port>``
(``source.service_url``), as upstream's default service resolver does: the host is
looked up through the reactor's resolver (the system's, in a thread) and the TLS
server name is that host.  ``Caller.hosts`` maps host names to addresses before any
lookup: a seam for tests, which have no cluster DNS (the daemon leaves it empty).

Connections go through the egress selection upstream uses (``docs/egress.md``) of the
selector the ``Caller`` is given (``egress``, the server's ``EgressSelector``; None:
directly): a webhook called by URL through ``controlplane``, one called by service
reference through ``cluster``.

Each call carries the credentials ``Caller.authinfo`` (an ``authinfo.AuthInfoResolver``:
the plugin's ``WebhookAdmissionConfiguration`` kubeconfig; none by default) gives the
webhook's host: its ``Authorization`` header and its client certificate, which is part
of the TLS settings an agent is made for.  Credentials that cannot be made fail the call
as upstream's ``could not get REST client: <why>``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import attrs
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.internet import defer, ssl
from twisted.internet.endpoints import wrapClientTLS
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, IPolicyForHTTPS
from zope.interface import implementer

from platformd.admission.webhooks.authinfo import AuthInfoResolver
from platformd.admission.webhooks.credentials import CredentialsError
from platformd.admission.webhooks.errors import CallError
from platformd.util import httpclient
from platformd.egress import selector
from platformd.egress.config import CLUSTER, CONTROLPLANE
from platformd.tracing import spans

_HEADERS = {b"Content-Type": [b"application/json"], b"Accept": [b"application/json"],
            b"User-Agent": [b"platformd"]}
MAX_IDLE_PER_HOST = 32


@implementer(IPolicyForHTTPS)
class BundleTLSPolicy:
    """TLS for a webhook: its caBundle's certificates, else the platform's trust; the
    client certificate of its credentials (``client_pem``, b"": none)."""

    def __init__(self, ca_bundle: bytes, client_pem: bytes = b""):
        if ca_bundle:
            roots = [ssl.Certificate.loadPEM(c.public_bytes(Encoding.PEM))
                     for c in x509.load_pem_x509_certificates(ca_bundle)]
            self._trust = ssl.trustRootFromCertificates(roots)
        else:
            self._trust = ssl.platformTrust()
        self._client = ssl.PrivateCertificate.loadPEM(client_pem) if client_pem else None

    def creatorForNetloc(self, hostname: bytes, port: int):
        return ssl.optionsForClientTLS(hostname.decode("ascii"), trustRoot=self._trust,
                                       clientCertificate=self._client)


@implementer(IAgentEndpointFactory)
class _Endpoints:
    """Agent's standard endpoints (TLS over a stream ``network``'s selection of
    ``egress`` dials), with ``hosts`` consulted first: the TLS server name stays the
    URL's host whatever address is dialled."""

    def __init__(self, reactor, policy, hosts: dict, network: str, egress):
        self.reactor = reactor
        self.policy = policy
        self.hosts = hosts
        self.network = network
        self.egress = egress

    def endpointForURI(self, uri):
        host = uri.host.decode("ascii")
        endpoint: Any = selector.stream(self.network, self.reactor,
                                        self.hosts.get(host, host), uri.port, self.egress)
        if uri.scheme == b"https":
            endpoint = wrapClientTLS(self.policy.creatorForNetloc(uri.host, uri.port),
                                     endpoint)
        return endpoint


def call_url(hook) -> str:
    seconds = int(hook.timeout) if hook.timeout == int(hook.timeout) else hook.timeout
    return f"{hook.url}?timeout={seconds}s"


class Caller:
    """Posts reviews (``post(hook, body) -> Deferred[bytes]``, failing with
    ``CallError``), dialling through ``egress`` (the server's ``EgressSelector``; None:
    directly); ``close()`` drops idle connections."""

    def __init__(self, clock, reactor, authinfo=None, egress=None):
        self.clock = clock
        self.reactor = reactor
        self.egress = egress
        #: The credentials of each webhook's host (default: none, every call anonymous).
        self.authinfo = authinfo if authinfo is not None else AuthInfoResolver.load("", clock)
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        # Concurrent writes each hold a connection: keep them rather than a new TLS
        # handshake per call (twisted's default keeps two per host).
        self._pool.maxPersistentPerHost = MAX_IDLE_PER_HOST
        self._agents: dict = {}
        #: Host name → address, looked up before the resolver (tests; see module doc).
        self.hosts: dict = {}
        #: Calls made (tests and the benchmark read it).
        self.calls = 0

    def _agent(self, ca_bundle: bytes, network: str, client_pem: bytes) -> Agent:
        key = (ca_bundle, network, client_pem)
        agent = self._agents.get(key)
        if agent is None:
            if len(self._agents) > 64:
                self._agents.clear()
            policy = BundleTLSPolicy(ca_bundle, client_pem)
            agent = self._agents[key] = Agent.usingEndpointFactory(
                self.reactor,
                _Endpoints(self.reactor, policy, self.hosts, network, self.egress),
                pool=_PoolFor(self._pool, key))
        return agent

    def post(self, hook, body: bytes, span=None):
        """``span``: the call's ``tracing.spans.Trace`` (None: not traced), parent of the
        HTTP client span whose ``traceparent`` the webhook receives."""
        answer = self.exchange(hook, body, span)
        answer.addCallback(lambda reply: _check_code(reply.body, reply.code))
        answer.addErrback(_as_call_error, hook.name)
        return answer

    def exchange(self, hook, body: bytes, span=None, limit: Optional[int] = None):
        """
        Deferred[``Reply``]: ``body`` POSTed to ``hook`` (anything with ``name``,
        ``url``, ``service``, ``ca_bundle`` and ``timeout``), whatever status code it is
        answered with; a body above ``limit`` bytes (None: any) is not read.  Fails
        with ``CallError`` (credentials, caBundle) or ``TransportError`` (Go's words for a
        call that got no answer: ``Post "<url>": ...``).
        """
        try:
            credentials = self.authinfo.credentials(hook)
        except CredentialsError as error:
            return defer.fail(CallError(hook.name, f"could not get REST client: {error}"))
        try:
            agent = self._agent(hook.ca_bundle, CLUSTER if hook.service else CONTROLPLANE,
                                credentials.client_pem)
        except (ValueError, ssl.SSL.Error) as error:
            return defer.fail(CallError(hook.name, f"invalid caBundle: {error}"))
        self.calls += 1
        url = call_url(hook)
        headers = Headers({**_HEADERS, **credentials.headers()})
        client_span = spans.outgoing(span, "POST", url, headers)
        answer: Any = httpclient.post(agent, url, headers, body, hook.timeout, self.clock)
        if client_span is not None:
            answer.addBoth(spans.answered, client_span)
        answer.addCallback(_read, limit)
        answer.addErrback(_as_transport_error, url)
        return answer

    def close(self):
        return self._pool.closeCachedConnections()


@attrs.frozen
class _PoolFor:
    """
    The shared pool as one agent sees it: its connections keyed by the agent's trust
    (caBundle, network, client certificate) as well as by scheme, host and port, which is
    all twisted's ``Agent`` keys them by.  Without it a connection made and verified for
    one webhook was reused by another at the same host and port whose caBundle was never
    checked.
    """

    pool: HTTPConnectionPool
    trust: tuple

    def getConnection(self, key, endpoint):
        return self.pool.getConnection((self.trust, key), endpoint)

    @property
    def persistent(self) -> bool:
        # The two parts of a pool Agent uses (twisted.web.client, bounded in setup.cfg).
        return self.pool.persistent


@attrs.frozen
class Reply:
    """A webhook's answer: its status code, ``Content-Type`` and body."""

    code: int
    content_type: str
    body: bytes


class TransportError(Exception):
    """The call got no answer (or one cut short): Go's client's words."""


def _read(response, limit: Optional[int]):
    reading = httpclient.read_body(response, limit)
    content_type = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
    return reading.addCallback(
        lambda body: Reply(response.code, content_type.decode("latin-1"), body))


class _StatusCode(Exception):
    pass


def _check_code(body: bytes, code: int) -> bytes:
    if 200 <= code < 300:
        return body
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        raise _StatusCode(document["message"])
    raise _StatusCode(f"the server responded with the status code {code} but did not return "
                      "more information")


def _as_transport_error(failure, url: str):
    if failure.check(CallError):
        return failure
    raise TransportError(httpclient.failure_text(failure, url))


def _as_call_error(failure, name: str):
    if failure.check(CallError):
        return failure
    if failure.check(_StatusCode, TransportError):
        raise CallError(name, f"failed to call webhook: {failure.value}")
    return failure
