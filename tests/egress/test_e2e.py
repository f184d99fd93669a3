"""
``--egress-selector-config-file`` in the daemon: a real platformd whose authorization
webhook (``--authorization-config``) is reachable only through an HTTP CONNECT proxy on a
UNIX socket, or a konnectivity server (gRPC) on one; an admission webhook called by
service reference through the ``cluster`` selection; two daemons in one process each
dialling through their own selection (there is no process-wide selector: stopping one
leaves the other's alone); and a bad file stopping the server at startup with upstream's
words.
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

import base64

from platformd.auth.interfaces import DENY
from platformd.auth.kubeconfig import load_kubeconfig
from platformd.auth.webhook import WebhookAuthorizer
from platformd.options import Options
from platformd.files.pki import ensure_pki
from platformd.service import daemon as build_daemon
from platformd.process.startup import StartupError
from platformd.edge.tlscontext import server_tls_options
from tests.authz.helpers import document, kubeconfig_for, pods, webhook_entry, write
from tests.authz.test_webhook import ReviewService
from tests.e2e.harness import start_token_server, token_client
from tests.egress.konnectivity_server import KonnectivityServer
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import HIDDEN, egress_document
from tests.webhooks.helpers import ReviewServer


def track(site, lost: list) -> None:
    """Each connection ``site`` accepts puts a Deferred in ``lost``, fired once it ends."""
    build = site.buildProtocol

    def tracked(addr):
        protocol = build(addr)
        ended: Deferred = Deferred()
        lost.append(ended)
        original = protocol.connectionLost

        def connection_lost(reason):
            original(reason)
            ended.callback(None)

        protocol.connectionLost = connection_lost
        return protocol

    site.buildProtocol = tracked


class DaemonTests(TestCase):
    timeout = 60

    def setUp(self):
        self.sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, self.sockets)
        paths = self.paths = ensure_pki(os.path.abspath(self.mktemp()), [HIDDEN], [],
                                        "https://x:1/")
        self.service = ReviewService()
        tls = server_tls_options(paths.serving_cert, paths.serving_key, paths.client_ca)
        site = server.Site(self.service)
        self.lost: list = []
        track(site, self.lost)
        port = reactor.listenSSL(0, site, tls, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        url = f"https://{HIDDEN}:{port.getHost().port}/authorize"
        self.url = url
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

    def unix_proxy(self, name: str, hosts: dict) -> tuple:
        """A CONNECT proxy on a UNIX socket and an egress file sending ``name`` to it."""
        proxy = ConnectProxy(hosts)
        path = os.path.join(self.sockets, f"{name}.sock")
        listening = reactor.listenUNIX(path, proxy)
        self.addCleanup(listening.stopListening)
        return proxy, write(self, egress_document(name, "HTTPConnect",
                                                  uds={"udsName": path}))

    @inlineCallbacks
    def closed(self, daemon):
        """Drop ``daemon``'s idle connections to the authorization webhook."""
        for authorizer in daemon.api.authorizer.authorizers:
            if hasattr(authorizer, "close"):
                yield authorizer.close()

    @inlineCallbacks
    def test_two_daemons_each_through_their_own(self):
        """
        Two daemons in one process, each with its own egress file (a proxy each), call
        the same webhook: each call goes through its daemon's proxy only.  Once the
        first daemon stops, the second still dials through its own (a process-wide
        selector was cleared by the first's stop, and the second's next dial went
        direct, where the webhook's name does not resolve: denied); and a client built
        in the process with no selector dials directly.
        """
        hosts = {HIDDEN: "127.0.0.1"}
        first_proxy, first_egress = self.unix_proxy("controlplane", hosts)
        second_proxy, second_egress = self.unix_proxy("master", hosts)
        tokens = 'secret-1,alice,uid-1,"devs"\nsecret-2,bob,uid-2,"devs"\n'
        first = yield start_token_server(self, tokens, "--authorization-config",
                                         self.authorization,
                                         "--egress-selector-config-file", first_egress)
        second = yield start_token_server(self, tokens, "--authorization-config",
                                          self.authorization,
                                          "--egress-selector-config-file", second_egress)
        head = f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"
        r = yield token_client(self, first, "secret-1").get(
            "/api/v1/namespaces/default/configmaps")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], []))
        r = yield token_client(self, second, "secret-1").get(
            "/api/v1/namespaces/default/configmaps")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], [head]))

        yield self.closed(first)
        yield first.stopService()
        yield self.closed(second)  # the next call dials again
        r = yield token_client(self, second, "secret-2").get(
            "/api/v1/namespaces/default/configmaps")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((first_proxy.heads, second_proxy.heads), ([head], [head, head]))
        self.assertEqual([review["spec"]["user"] for review in self.service.reviews],
                         ["alice", "alice", "bob"])

        direct = WebhookAuthorizer(
            "direct", load_kubeconfig(kubeconfig_for(self, self.paths, self.url)), timeout=5,
            authorized_ttl=0, unauthorized_ttl=0, failure_policy="Deny", clock=reactor,
            reactor=reactor)
        self.addCleanup(direct.close)
        decision = yield direct.authorize(pods())
        self.assertEqual(decision.verdict, DENY)
        self.assertIn(HIDDEN, decision.error)
        self.assertEqual(len(first_proxy.heads) + len(second_proxy.heads), 3)
        yield self.closed(second)
        yield DeferredList(self.lost)

    @inlineCallbacks
    def test_admission_webhook_through_the_cluster_selection(self):
        """An admission webhook called by service reference (``hooks.webhooks.svc``,
        reachable only through the proxy) goes through the daemon's ``cluster``
        selection: the selector is handed to the admission plugins when the daemon is
        composed."""
        paths = ensure_pki(os.path.abspath(self.mktemp()), ["hooks.webhooks.svc"], [],
                           "https://127.0.0.1:1")
        with open(paths.ca_cert, "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        hooks = ReviewServer()
        site = server.Site(hooks)
        lost: list = []
        track(site, lost)
        port = reactor.listenSSL(0, site, server_tls_options(paths.serving_cert,
                                                             paths.serving_key),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        number = port.getHost().port
        proxy, egress = self.unix_proxy("cluster", {"hooks.webhooks.svc": "127.0.0.1"})
        daemon = yield start_token_server(self, 'secret-1,alice,uid-1,"system:masters"\n',
                                          "--egress-selector-config-file", egress)
        alice = token_client(self, daemon, "secret-1")
        hook = {"name": "svc.example.com",
                "clientConfig": {"service": {"namespace": "webhooks", "name": "hooks",
                                             "port": number, "path": "/svc"},
                                 "caBundle": ca_bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}
        r = yield alice.post("/apis/admissionregistration.platform.io/v1/"
                             "validatingwebhookconfigurations",
                             {"metadata": {"name": "config"}, "webhooks": [hook]})
        self.assertEqual(r.code, 201, r.body)
        r = yield alice.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(len(hooks.reviews.get("/svc", [])), 1)
        self.assertEqual(proxy.heads,
                         [f"CONNECT hooks.webhooks.svc:{number} HTTP/1.1\r\n"
                          "Host: 127.0.0.1"])
        for plugin in daemon.components.admission.plugins:
            caller = getattr(plugin, "caller", None)
            if caller is not None:
                yield caller.close()
        yield DeferredList(lost)

    def test_bad_file_stops_the_server(self):
        """Read when the daemon is made (its admission webhooks and etcd channel are made
        then, with the selector): a bad file stops it there."""
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
