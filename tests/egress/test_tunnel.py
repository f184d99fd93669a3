"""
The egress selector on real sockets: an authorization webhook whose host name does not
resolve (``webhook.invalid``) is reached only through an HTTP CONNECT proxy started in
the test — over a UNIX socket, plain TCP, and TLS with a client certificate — and each
failure (a refusing proxy, GRPC, no selection) is the webhook call's error.  Each webhook
is given its selector where it is built (there is no process-wide one): two chains built
from the flags in one process dial through their own, reloads included.
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

from platformd.auth.authorizers import AuthorizerChain
from platformd.auth.fromflags import authorizers_from_flags
from platformd.auth.interfaces import ALLOW, DENY
from platformd.auth.kubeconfig import load_kubeconfig
from platformd.auth.webhook import WebhookAuthorizer
from platformd.egress import selector
from platformd.egress.config import parse_egress_config
from platformd.files.pki import ADMIN_GROUP, ADMIN_USER, ensure_pki
from platformd.edge.tlscontext import server_tls_options
from platformd.options import Options
from tests.authz.helpers import document, kubeconfig_for, pods, webhook_entry
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
        #: The selector the webhook of ``decide`` dials through (``use``; None: directly).
        self.egress = None
        # UNIX socket paths must be short (trial's temporary directories are too long).
        self.sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, self.sockets)

    def listen(self, port):
        self.addCleanup(port.stopListening)
        return port

    def proxy(self, tls=False) -> ConnectProxy:
        return ConnectProxy({HIDDEN: "127.0.0.1"}, tls=tls)

    def use(self, data: bytes) -> None:
        """The webhook ``decide`` makes dials through the selector of ``data``."""
        self.egress = selector.EgressSelector(parse_egress_config(data), reactor)

    def unix_proxy(self, name: str = "proxy.sock") -> tuple:
        proxy = self.proxy()
        path = os.path.join(self.sockets, name)
        self.listen(reactor.listenUNIX(path, proxy))
        return proxy, path

    @defer.inlineCallbacks
    def decide(self):
        connection = load_kubeconfig(kubeconfig_for(self, self.paths, self.url))
        webhook = WebhookAuthorizer("w", connection, timeout=5, authorized_ttl=0,
                                    unauthorized_ttl=0, failure_policy="Deny", clock=Clock(),
                                    reactor=reactor, egress=self.egress)
        self.addCleanup(webhook.close)
        decision = yield defer.maybeDeferred(webhook.authorize, pods())
        return decision

    @defer.inlineCallbacks
    def test_unix_socket_proxy(self):
        proxy, path = self.unix_proxy()
        self.use(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(proxy.heads, [f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"])
        # TLS ran end to end through the tunnel: the webhook saw the client certificate.
        self.assertEqual(self.service.identities, [(ADMIN_USER, (ADMIN_GROUP,))])

    @defer.inlineCallbacks
    def test_master_is_controlplane(self):
        proxy, path = self.unix_proxy()
        self.use(egress_document("master", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(len(proxy.heads), 1)

    @defer.inlineCallbacks
    def test_tls_proxy_with_client_certificate(self):
        proxy = self.proxy(tls=True)
        port = self.listen(reactor.listenSSL(0, proxy, self.tls, interface="127.0.0.1"))
        pki = os.path.join(self.data_dir, "pki")
        self.use(egress_document("controlplane", "HTTPConnect", tcp={
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
        self.use(egress_document("controlplane", "HTTPConnect", tcp={
            "url": f"http://127.0.0.1:{port.getHost().port}"}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual(len(proxy.heads), 1)

    @defer.inlineCallbacks
    def test_refusing_proxy(self):
        proxy, path = self.unix_proxy()
        proxy.refuse = b"HTTP/1.1 403 Forbidden"
        self.use(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertEqual(decision.error, f'Post "{self.url}": proxy error from {path} while '
                                         f"dialing {self.address}, code 403: 403 Forbidden")

    @defer.inlineCallbacks
    def test_proxy_not_listening(self):
        path = os.path.join(self.sockets, "absent.sock")
        self.use(egress_document("controlplane", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertTrue(decision.error.startswith(
            f'Post "{self.url}": dialing proxy "{path}" failed: '), decision.error)

    def konnectivity(self) -> tuple:
        path = os.path.join(self.sockets, "konnectivity.sock")
        server = KonnectivityServer(path, {HIDDEN: "127.0.0.1"})
        self.addCleanup(server.stop)
        self.use(egress_document("controlplane", "GRPC", uds={"udsName": path}))
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
        self.use(egress_document("controlplane", "GRPC", uds={"udsName": path}))
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
        self.use(egress_document("cluster", "HTTPConnect", uds={"udsName": path}))
        decision = yield self.decide()
        self.assertEqual(decision.verdict, DENY)
        self.assertIn(HIDDEN, decision.error)
        self.assertEqual(proxy.heads, [])

    # ``authorizers_from_flags(..., egress=)``: the webhooks it builds, and those its
    # reloader builds, dial through the selector it was given.

    def write(self, name: str) -> None:
        with open(self.config, "wb") as f:
            f.write(document(webhook_entry(
                name, kubeconfig_for(self, self.paths, self.url), authorizedTTL="1s",
                unauthorizedTTL="1s")))

    def chain(self, egress) -> tuple:
        options = Options()
        options.parseOptions(["--authorization-config", self.config])
        chain = AuthorizerChain([])
        reloader = authorizers_from_flags(options, chain, None, reactor, egress=egress)
        self.addCleanup(lambda: defer.gatherResults(
            [a.close() for a in chain.authorizers if hasattr(a, "close")]))
        return chain, reloader

    def selector_of(self, path: str):
        return selector.EgressSelector(parse_egress_config(egress_document(
            "controlplane", "HTTPConnect", uds={"udsName": path})), reactor)

    @defer.inlineCallbacks
    def test_two_selectors_in_one_process(self):
        """Two chains built from the same flags in one process, each with its own
        selector, dial through their own proxy, and so do the webhooks their reloads
        build; a chain built with none dials directly."""
        self.config = os.path.abspath(self.mktemp())
        self.write("first")
        first_proxy, first_path = self.unix_proxy("first.sock")
        second_proxy, second_path = self.unix_proxy("second.sock")
        first, first_reloader = self.chain(self.selector_of(first_path))
        second, second_reloader = self.chain(self.selector_of(second_path))
        direct, _ = self.chain(None)
        head = f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"
        decision = yield defer.maybeDeferred(first.authorize, pods())
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], []))
        decision = yield defer.maybeDeferred(second.authorize, pods())
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], [head]))
        decision = yield defer.maybeDeferred(direct.authorize, pods())
        self.assertEqual(decision.verdict, DENY)
        self.assertIn(HIDDEN, decision.error)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], [head]))

        # A reload builds new webhooks (new connections): through the same selector.
        self.write("reloaded")
        self.assertTrue(second_reloader.check())
        self.assertTrue(first_reloader.check())
        decision = yield defer.maybeDeferred(second.authorize, pods(user="bob"))
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], [head, head]))
        decision = yield defer.maybeDeferred(first.authorize, pods(user="bob"))
        self.assertEqual(decision.verdict, ALLOW, decision.error)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head, head], [head, head]))
        self.assertEqual([review["spec"]["user"] for review in self.service.reviews],
                         ["alice", "alice", "bob", "bob"])
