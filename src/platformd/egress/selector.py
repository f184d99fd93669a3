"""
The egress selector: how a connection to one network is made (upstream's
``egressselector.EgressSelector``), and the Twisted seams the HTTP clients use.

``EgressSelector(config, reactor)`` makes one route per configured selection (reading
the proxy's TLS files at once, so a bad file stops the server at startup):

- ``Direct``: a plain connection (as with no selection at all);
- ``HTTPConnect``: an HTTP CONNECT tunnel (``tunnel.ConnectTunnel``) through the proxy,
  reached over TCP (``http://``, or ``https://`` with the client certificate, the CA
  bundle — else the system's roots — and ``tlsServerName``) or a UNIX socket;
- ``GRPC``: konnectivity's gRPC tunnel over a UNIX socket (``konnectivity.GRPCTunnel``),
  one tunnel per connection as upstream's.

A network without a selection dials directly, as upstream's ``Lookup`` answers no dialer
for it.  Which network a connection belongs to is the caller's choice, as upstream's:
webhooks called by URL (authorization, admission) are ``controlplane``, admission
webhooks called by service reference ``cluster``, a JWT issuer whatever its
``egressSelectorType`` says (nothing: no selector), the storage backend ``etcd``.

There is no process-wide selector: the daemon builds one from
``--egress-selector-config-file`` and hands it, through constructors, to every client
that connects (the authorization webhooks, the JWT issuers' key fetches, the admission
webhooks, the tracing collector's and the etcd client's gRPC channels).  So two servers
in one process each dial through their own selection, a test builds a client with the
selector it means without touching shared state, and what a client dials through is
visible where it is built.  ``agent(network, ..., selector=...)`` is the ``Agent`` the
HTTP clients use; ``stream(network, reactor, host, port, selector)`` the plain stream a
client with its own endpoints (admission webhooks) dials; a selector of None dials
directly, as without a configuration.  ``EgressEndpoints`` (a twisted.web
``IAgentEndpointFactory``) looks the route up per connection.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

import attrs
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.internet import ssl
from twisted.internet.endpoints import HostnameEndpoint, UNIXClientEndpoint, wrapClientTLS
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.web.client import Agent
from twisted.web.iweb import IAgentEndpointFactory
from zope.interface import implementer

from platformd.egress.config import (
    GRPC, HTTP_CONNECT, EgressConfigError, EgressSelectorConfiguration, Selection,
)
from platformd.egress.tunnel import ConnectTunnel


class EgressUnsupported(Exception):
    """A selection a gRPC client (grpcio) cannot dial through."""


def host_port(host: str, port: int) -> str:
    """``host:port`` as Go's ``net.JoinHostPort`` writes it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@attrs.frozen
class _Tunnel:
    """An HTTP CONNECT proxy: ``proxy()`` makes the endpoint of the proxy itself."""

    proxy: object
    name: str
    #: The proxy's ``http://`` URL when it is reached over plain TCP (what grpcio can
    #: tunnel through), else "".
    http_url: str = ""

    def endpoint(self, host: str, port: int) -> IStreamClientEndpoint:
        return ConnectTunnel(self.proxy(), host_port(host, port), self.name)  # type: ignore


@attrs.frozen
class _Konnectivity:
    """konnectivity's gRPC tunnel on a UNIX socket: one tunnel per connection."""

    reactor: object
    uds_name: str
    #: ``konnectivity.GRPCTunnel``, imported only for a GRPC selection (grpcio's import
    #: is ~20 ms of startup, for a transport few configurations use).
    tunnel: type

    def endpoint(self, host: str, port: int) -> IStreamClientEndpoint:
        return self.tunnel(self.reactor, self.uds_name, host_port(host, port))


class EgressSelector:
    def __init__(self, config: EgressSelectorConfiguration, reactor):
        self.reactor = reactor
        self._routes: dict = {}
        for selection in config.selections:
            try:
                route = self._route(selection)
            except (OSError, ValueError, ssl.SSL.Error) as error:
                raise EgressConfigError(
                    f"failed to create dialer for egressSelection {selection.name!r}: "
                    f"{error}") from None
            if route is not None:
                self._routes[selection.name] = route

    def _route(self, selection: Selection):
        transport = selection.transport
        if selection.protocol == GRPC:
            assert transport is not None and transport.uds is not None  # validated
            from platformd.egress.konnectivity import GRPCTunnel
            return _Konnectivity(self.reactor, transport.uds, GRPCTunnel)
        if selection.protocol != HTTP_CONNECT or transport is None:
            return None  # Direct
        if transport.uds is not None:
            path = transport.uds
            return _Tunnel(lambda: UNIXClientEndpoint(self.reactor, path), path)
        assert transport.tcp is not None
        url = urlsplit(transport.tcp.url)
        host = url.hostname or ""
        port = url.port or (443 if url.scheme == "https" else 80)

        def tcp():
            return HostnameEndpoint(self.reactor, host.encode("idna"), port)

        name = url.netloc
        if url.scheme == "http":
            return _Tunnel(tcp, name, f"http://{name}")
        creator = _proxy_tls(transport.tcp.tls, host)
        return _Tunnel(lambda: wrapClientTLS(creator, tcp()), name)

    def route(self, network: str):
        """The route of ``network`` (None: dial directly)."""
        return self._routes.get(network)

    def grpc_channel_options(self, network: str) -> tuple:
        """
        grpcio's channel options for a gRPC client of ``network``: none to dial
        directly, ``grpc.http_proxy`` for an ``http://`` CONNECT proxy (grpcio's own
        CONNECT support); ``EgressUnsupported`` for a proxy grpcio cannot reach (a UNIX
        socket, TLS to the proxy, GRPC), whose route lives in Twisted endpoints.
        """
        route = self.route(network)
        if route is None:
            return ()
        if isinstance(route, _Tunnel) and route.http_url:
            return (("grpc.http_proxy", route.http_url),)
        raise EgressUnsupported(f"egress selection {network!r}: a gRPC client can only be "
                                "tunnelled through an http:// HTTPConnect proxy")

    def endpoint(self, network: str, host: str, port: int) -> IStreamClientEndpoint:
        """A stream to ``host:port`` as ``network`` connects (no TLS of its own)."""
        route = self.route(network)
        if route is None:
            return HostnameEndpoint(self.reactor, host.encode("idna"), port)
        return route.endpoint(host, port)


def _proxy_tls(tls, host: str):
    """Upstream's ``getTLSConfig``: the client key pair (required), the CA bundle or the
    system's roots; ``tlsServerName`` names the proxy when set."""
    assert tls is not None  # validated: https requires tlsConfig
    try:
        with open(tls.client_cert, "rb") as f:
            cert = f.read()
        with open(tls.client_key, "rb") as f:
            key = f.read()
        client = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)
    except (OSError, ValueError, ssl.SSL.Error) as error:
        raise ValueError(f"failed to read key pair {tls.client_cert} & {tls.client_key}, "
                         f"got {error}") from None
    if tls.ca_bundle:
        try:
            with open(tls.ca_bundle, "rb") as f:
                roots = [ssl.Certificate.loadPEM(c.public_bytes(Encoding.PEM))
                         for c in x509.load_pem_x509_certificates(f.read())]
        except OSError as error:
            raise ValueError(f"failed to read cert file {tls.ca_bundle}, got {error}") \
                from None
        except ValueError:
            raise ValueError("failed to append CA cert to the cert pool") from None
        trust = ssl.trustRootFromCertificates(roots)
    else:
        trust = ssl.platformTrust()
    return ssl.optionsForClientTLS(tls.tls_server_name or host, trustRoot=trust,
                                   clientCertificate=client)


def stream(network: str, reactor, host: str, port: int,
           selector: Optional[EgressSelector]) -> IStreamClientEndpoint:
    """A stream to ``host:port`` as ``network`` connects with ``selector`` (None:
    directly).  No TLS of its own."""
    if selector is None:
        return HostnameEndpoint(reactor, host.encode("idna"), port)
    return selector.endpoint(network, host, port)


@implementer(IAgentEndpointFactory)
class EgressEndpoints:
    """
    twisted.web's endpoint factory for ``network``: the route of ``selector`` (None:
    directly), TLS with ``tls_policy`` for ``https``.
    """

    def __init__(self, network: str, reactor, tls_policy,
                 selector: Optional[EgressSelector]):
        self.network = network
        self.reactor = reactor
        self.tls_policy = tls_policy
        self.selector = selector

    def endpointForURI(self, uri):
        endpoint = stream(self.network, self.reactor, uri.host.decode("ascii"), uri.port,
                          self.selector)
        if uri.scheme == b"https":
            endpoint = wrapClientTLS(self.tls_policy.creatorForNetloc(uri.host, uri.port),
                                     endpoint)
        return endpoint


def agent(network: Optional[str], reactor, tls_policy, pool=None, *,
          selector: Optional[EgressSelector]) -> Agent:
    """An ``Agent`` whose connections go as ``network`` says in ``selector`` (a network
    or a selector of None: always directly).  ``selector`` has no default: every client
    says which one it dials through."""
    if network is None:
        return Agent(reactor, contextFactory=tls_policy, pool=pool)
    return Agent.usingEndpointFactory(
        reactor, EgressEndpoints(network, reactor, tls_policy, selector), pool=pool)
