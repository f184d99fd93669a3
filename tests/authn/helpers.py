"""A real OIDC issuer over HTTPS on loopback, tokens minted with joserfc, configs."""

from __future__ import annotations

import json
import time

import yaml
from joserfc import jwt as josejwt
from joserfc.jwk import ECKey, RSAKey
from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web import resource, server
from twisted.web.test.requesthelper import DummyRequest

from platformd.auth import authnconfig
from platformd.files.pki import ensure_pki
from platformd.edge.tlscontext import server_tls_options

_KEYS: dict = {}


def key(name: str, kind: str = "RSA"):
    """A signing key (made once per test run: RSA generation is slow)."""
    if name not in _KEYS:
        made = RSAKey.generate_key(2048) if kind == "RSA" else ECKey.generate_key(kind)
        data = made.as_dict(private=True)
        data["kid"] = name
        _KEYS[name] = (RSAKey if kind == "RSA" else ECKey).import_key(data)
    return _KEYS[name]


class Issuer(resource.Resource):
    isLeaf = True

    def __init__(self):
        super().__init__()
        self.url = ""
        self.discovered_issuer = None
        self.keys: list = []
        self.failing = False
        self.hold = False
        self.held: list = []
        self.hits: list = []

    def render_GET(self, request):
        self.hits.append(request.path.decode())
        if self.failing:
            request.setResponseCode(500)
            return b"down"
        if self.hold:
            self.held.append(request)
            return server.NOT_DONE_YET
        return self.body(request.path.decode())

    def body(self, path: str) -> bytes:
        if path.endswith("/.well-known/openid-configuration") or path == "/discovery":
            issuer = self.url if self.discovered_issuer is None else self.discovered_issuer
            return json.dumps({"issuer": issuer, "jwks_uri": self.url + "/jwks"}).encode()
        if path.endswith("/jwks"):
            return json.dumps({"keys": [k.as_dict(private=False) | {"kid": k.kid, "use": "sig"}
                                        for k in self.keys]}).encode()
        return b"{}"

    def release(self):
        held, self.held = self.held, []
        for request in held:
            request.write(self.body(request.path.decode()))
            request.finish()


class IssuerTestCase(TestCase):
    def setUp(self):
        self.paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:1")
        with open(self.paths.ca_cert) as f:
            self.ca = f.read()
        self.issuer = Issuer()
        self.issuer.keys = [key("k1")]
        site = server.Site(self.issuer)
        self.connections: list = []
        build = site.buildProtocol

        def tracked(addr):
            protocol = build(addr)
            protocol.lost = defer.Deferred()
            lost = protocol.connectionLost

            def connection_lost(reason):
                lost(reason)
                protocol.lost.callback(None)

            protocol.connectionLost = connection_lost
            self.connections.append(protocol)
            return protocol

        site.buildProtocol = tracked
        tls = server_tls_options(self.paths.serving_cert, self.paths.serving_key)
        self.port = reactor.listenSSL(0, site, tls, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.addCleanup(lambda: defer.gatherResults([c.lost for c in self.connections]))
        self.url = f"https://127.0.0.1:{self.port.getHost().port}"
        self.issuer.url = self.url
        self.clock = Clock()
        self.clock.advance(time.time())

    def config(self, **overrides) -> authnconfig.AuthenticationConfiguration:
        return authnconfig.parse_authentication_config(document(jwt_entry(
            self.url, ca=self.ca, **overrides)))

    def token(self, claims=None, signing="k1", alg=None, **extra) -> str:
        now = int(self.clock.seconds())
        body = {"iss": self.url, "aud": ["platform"], "sub": "alice", "exp": now + 600,
                "iat": now}
        body.update(claims or {})
        body.update(extra)
        body = {k: v for k, v in body.items() if v is not None}
        signer = key(signing) if isinstance(signing, str) else signing
        alg = alg or ("RS256" if isinstance(signer, RSAKey) else "ES256")
        return josejwt.encode({"alg": alg, "kid": signer.kid}, body, signer,
                              algorithms=[alg])


def jwt_entry(url: str, ca: str = "", audiences=("platform",), username=None, **rest) -> dict:
    issuer = {"url": url, "audiences": list(audiences)}
    if ca:
        issuer["certificateAuthority"] = ca
    issuer.update(rest.pop("issuer", {}))
    entry = {"issuer": issuer,
             "claimMappings": {"username": username or {"claim": "sub", "prefix": ""}}}
    for name in ("groups", "uid", "extra"):
        if name in rest:
            entry["claimMappings"][name] = rest.pop(name)
    entry.update(rest)
    return entry


def document(*entries, api_version="apiserver.config.platform.io/v1", **top) -> bytes:
    doc = {"apiVersion": api_version, "kind": "AuthenticationConfiguration",
           "jwt": list(entries)}
    doc.update(top)
    return yaml.safe_dump(doc).encode()


def request_with(token: str | None) -> DummyRequest:
    request = DummyRequest([b""])
    if token is not None:
        request.requestHeaders.setRawHeaders(b"authorization", [f"Bearer {token}".encode()])
    return request
