"""
The egress selector on real sockets: an authorization webhook whose host name does not
resolve (``webhook.invalid``) is reached only through an HTTP CONNECT proxy started in
the test — over a UNIX socket, plain TCP, and TLS with a client certificate — and each
failure (a refusing proxy, GRPC, no selection) is the webhook call's error.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import yaml
from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web import server

from platformd.auth.interfaces import ALLOW, DENY
from platformd.auth.kubeconfig import load_kubeconfig
from platformd.auth.webhook import WebhookAuthorizer
from platformd.egress import selector
from platformd.egress.config import parse_egress_config
from platformd.files.pki import ADMIN_GROUP, ADMIN_USER, ensure_pki
from platformd.edge.tlscontext import server_tls_options
from tests.authz.helpers import kubeconfig_for, pods
from tests.authz.test_webhook import ReviewService
from tests.egress.konnectivity_server import KonnectivityServer
from tests.egress.proxy import ConnectProxy

HIDDEN = "webhook.invalid"


def egress_document(name: str, protocol: str, **transport) -> bytes:
    connection: dict = {"proxyProtocol": protocol}
    if transport:
        connection["transport"] = transport
    return yaml.safe_dump({"apiVersion": "apiserver.platform.io/v1beta1",
                           "kind": "EgressSelectorConfiguration",
                           "egressSelections": [{"name": name, "connection": connection}]}
                          ).encode()


class TunnelTests(TestCase):
    timeout = 30

    def setUp(self):
        self.data_dir = os.path.abspath(self.mktemp())
        self.paths = ensure_pki(self.data_dir, [HIDDEN], [], "https://127.0.0.1:1/")
        self.tls = server_tls_options(self.paths.serving_cert, self.paths.serving_key,
                                      self.paths.client_ca)
        self.service = ReviewService()
        self.site = server.Site(self.service)
        port = self.listen(reactor.listenSSL(0, self.site, self.tls, interface="127.0.0.1"))
        self.url = f"https://{HIDDEN}:{port.getHost().port}/authorize"
        self.address = f"{HIDDEN}:{port.getHost().port}"
        self.addCleanup(selector.install, None)
        # UNIX socket paths must be short (trial's temporary directories are too long).
        self.sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, self.sockets)

    def listen(self, port):
        self.addCleanup(port.stopListening)
        return port

    def proxy(self, tls=False) -> ConnectProxy:
        return ConnectProxy({HIDDEN: "127.0.0.1"}, tls=tls)

    def install(self, data: bytes) -> None:
        selector.install(selector.EgressSelector(parse_egress_config(data), reactor))

    def unix_proxy(self) -> tuple:
        proxy = self.proxy()
        path = os.path.join(self.sockets, "proxy.sock")
        self.listen(reactor.listenUNIX(path, proxy))
        return proxy, path

    @defer.inlineCallbacks
    def decide(self):
        connection = load_kubeconfig(kubeconfig_for(self, self.paths, self.url))
        webhook = WebhookAuthorizer("w", connection, timeout=5, authorized_ttl=0,
                                    unauthorized_ttl=0, failure_policy="Deny", clock=Clock(),
                                    reactor=reactor)
        self.addCleanup(webhook.close)
        decision = yield defer.maybeDeferred(webhook.authorize, pods())
        return decision

    @defer.inlineCallbacks
    def test_unix_socket_proxy(self):
        proxy, path = self.unix_proxy()
        self.install(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(proxy.heads, [f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"])
        # TLS ran end to end through the tunnel: the webhook saw the client certificate.
        self.assertEqual(self.service.identities, [(ADMIN_USER, (ADMIN_GROUP,))])

    @defer.inlineCallbacks
    def test_master_is_controlplane(self):
        proxy, path = self.unix_proxy()
        self.install(egress_document("master", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(len(proxy.heads), 1)

    @defer.inlineCallbacks
    def test_tls_proxy_with_client_certificate(self):
        proxy = self.proxy(tls=True)
        port = self.listen(reactor.listenSSL(0, proxy, self.tls, interface="127.0.0.1"))
        pki = os.path.join(self.data_dir, "pki")
        self.install(egress_document("controlplane", "HTTPConnect", tcp={
            "url": f"https://127.0.0.1:{port.getHost().port}",
            "tlsConfig": {"caBundle": self.paths.ca_cert,
                          "clientCert": os.path.join(pki, "admin.crt"),
                          "clientKey": os.path.join(pki, "admin.key")}}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(proxy.identities, [(ADMIN_USER, (ADMIN_GROUP,))])
        self.assertEqual(proxy.heads, [f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"])

    @defer.inlineCallbacks
    def test_plain_tcp_proxy(self):
        proxy = self.proxy()
        port = self.listen(reactor.listenTCP(0, proxy, interface="127.0.0.1"))
        self.install(egress_document("controlplane", "HTTPConnect", tcp={
            "url": f"http://127.0.0.1:{port.getHost().port}"}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(len(proxy.heads), 1)

    @defer.inlineCallbacks
    def test_refusing_proxy(self):
        proxy, path = self.unix_proxy()
        proxy.refuse = b"HTTP/1.1 403 Forbidden"
        self.install(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertEqual(decision.error, f'Post "{self.url}": proxy error from {path} while '
                                         f"dialing {self.address}, code 403: 403 Forbidden")

    @defer.inlineCallbacks
    def test_proxy_not_listening(self):
        path = os.path.join(self.sockets, "absent.sock")
        self.install(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertTrue(decision.error.startswith(
            f'Post "{self.url}": dialing proxy "{path}" failed: '), decision.error)

    def konnectivity(self) -> tuple:
        path = os.path.join(self.sockets, "konnectivity.sock")
        server = KonnectivityServer(path, {HIDDEN: "127.0.0.1"})
        self.addCleanup(server.stop)
        self.install(egress_document("controlplane", "GRPC", uds={"udsName": path}))
        return server, path

    @defer.inlineCallbacks
    def test_grpc_konnectivity_tunnel(self):
        """konnectivity's gRPC protocol: DIAL_REQ for the webhook's address, TLS end to
        end through DATA packets (closing the webhook's client then sends CLOSE_REQ, whose
        CLOSE_RSP ends the tunnel: else the webhook's connection would stay open and
        trial would report the reactor unclean)."""
        server, _ = self.konnectivity()
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(server.dials, [("tcp", self.address)])
        self.assertEqual(self.service.identities, [(ADMIN_USER, (ADMIN_GROUP,))])
        self.assertEqual(server.received[0], "DIAL_REQ")
        self.assertIn("DATA", server.received)

    @defer.inlineCallbacks
    def test_grpc_dial_error(self):
        """A DIAL_RSP with an error fails the webhook call with that error."""
        server, _ = self.konnectivity()
        server.refuse = "dial tcp: lookup webhook.invalid: no such host"
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertEqual(decision.error, f'Post "{self.url}": dial tcp: lookup '
                                         "webhook.invalid: no such host")
        self.assertEqual(server.received, ["DIAL_REQ"])

    @defer.inlineCallbacks
    def test_grpc_proxy_not_listening(self):
        path = os.path.join(self.sockets, "absent.sock")
        self.install(egress_document("controlplane", "GRPC", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertTrue(decision.error.startswith(
            f'Post "{self.url}": dialing konnectivity proxy "{path}" failed: '),
            decision.error)

    @defer.inlineCallbacks
    def test_other_networks_do_not_apply(self):
        """A webhook is controlplane's: a cluster selection leaves it dialled directly,
        where its name does not resolve."""
        proxy, path = self.unix_proxy()
        self.install(egress_document("cluster", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertIn(HIDDEN, decision.error)
        self.assertEqual(proxy.heads, [])
