"""
``--egress-selector-config-file`` in the daemon: a real platformd whose authorization
webhook (``--authorization-config``) is reachable only through an HTTP CONNECT proxy on a
UNIX socket, or a konnectivity server (gRPC) on one; and a bad file stopping the server at startup with upstream's words.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredList, inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from twisted.web import server

from platformd.egress import selector
from platformd.options import Options
from platformd.files.pki import ensure_pki
from platformd.service import daemon as build_daemon
from platformd.process.startup import StartupError
from platformd.edge.tlscontext import server_tls_options
from tests.authz.helpers import document, kubeconfig_for, webhook_entry, write
from tests.authz.test_webhook import ReviewService
from tests.e2e.harness import start_token_server, token_client
from tests.egress.konnectivity_server import KonnectivityServer
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import HIDDEN, egress_document


class DaemonTests(TestCase):
    timeout = 60

    def setUp(self):
        self.sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, self.sockets)
        paths = ensure_pki(os.path.abspath(self.mktemp()), [HIDDEN], [], "https://x:1/")
        self.service = ReviewService()
        tls = server_tls_options(paths.serving_cert, paths.serving_key, paths.client_ca)
        site = server.Site(self.service)
        self.lost: list = []
        build = site.buildProtocol

        def tracked(addr):
            protocol = build(addr)
            lost: Deferred = Deferred()
            self.lost.append(lost)
            original = protocol.connectionLost

            def connection_lost(reason):
                original(reason)
                lost.callback(None)

            protocol.connectionLost = connection_lost
            return protocol

        site.buildProtocol = tracked
        port = reactor.listenSSL(0, site, tls, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        url = f"https://{HIDDEN}:{port.getHost().port}/authorize"
        self.address = f"{HIDDEN}:{port.getHost().port}"
        self.authorization = write(self, document(webhook_entry(
            "hidden", kubeconfig_for(self, paths, url), authorizedTTL="1s",
            unauthorizedTTL="1s")))

    @inlineCallbacks
    def test_authorization_webhook_through_the_proxy(self):
        proxy = ConnectProxy({HIDDEN: "127.0.0.1"})
        path = os.path.join(self.sockets, "proxy.sock")
        listening = reactor.listenUNIX(path, proxy)
        self.addCleanup(listening.stopListening)
        egress = write(self, egress_document("controlplane", "HTTPConnect",
                                             uds={"udsName": path}))
        daemon = yield start_token_server(
            self, 'secret-1,alice,uid-1,"devs"\n', "--authorization-config",
            self.authorization, "--egress-selector-config-file", egress)
        self.assertIsNotNone(selector.installed())
        alice = token_client(self, daemon, "secret-1")
        r = yield alice.get("/api/v1/namespaces/default/configmaps")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.service.reviews[0]["spec"]["user"], "alice")
        self.assertEqual(proxy.heads, [f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"])
        for authorizer in daemon.api.authorizer.authorizers:
            if hasattr(authorizer, "close"):
                yield authorizer.close()
        yield DeferredList(self.lost)  # the webhook's end of the tunnel closed too
        yield daemon.stopService()
        self.assertIsNone(selector.installed())

    @inlineCallbacks
    def test_authorization_webhook_through_konnectivity(self):
        """The same webhook behind a konnectivity server (proxyProtocol GRPC)."""
        path = os.path.join(self.sockets, "konnectivity.sock")
        konnectivity = KonnectivityServer(path, {HIDDEN: "127.0.0.1"})
        self.addCleanup(konnectivity.stop)
        egress = write(self, egress_document("controlplane", "GRPC", uds={"udsName": path}))
        daemon = yield start_token_server(
            self, 'secret-1,alice,uid-1,"devs"\n', "--authorization-config",
            self.authorization, "--egress-selector-config-file", egress)
        alice = token_client(self, daemon, "secret-1")
        r = yield alice.get("/api/v1/namespaces/default/configmaps")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.service.reviews[0]["spec"]["user"], "alice")
        self.assertEqual(konnectivity.dials, [("tcp", self.address)])
        for authorizer in daemon.api.authorizer.authorizers:
            if hasattr(authorizer, "close"):
                yield authorizer.close()
        # The webhook's connection ends, and so does its tunnel: by the client's CLOSE_REQ,
        # or (when the webhook's TLS close reached the proxy first) by the proxy's
        # CLOSE_RSP after the webhook closed; either way no tunnel is left open.
        yield DeferredList(self.lost)
        for _ in range(500):
            if konnectivity.open_streams == 0:
                break
            yield deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(konnectivity.open_streams, 0)
        self.assertEqual(konnectivity.received[0], "DIAL_REQ")
        yield daemon.stopService()

    def test_bad_file_stops_the_server(self):
        egress = write(self, egress_document("controlplane", "HTTPConnect"))
        options = Options()
        options.parseOptions(["--data-dir", os.path.abspath(self.mktemp()),
                              "--secure-port", "0", "--egress-selector-config-file", egress])
        with self.assertRaises(StartupError) as caught:
            build_daemon(options, reactor)
        self.assertEqual(str(caught.exception),
                         "failed to validate egress selector configuration: "
                         "service.connection.transport: Required value: transport must be "
                         "set for HTTPConnect")
