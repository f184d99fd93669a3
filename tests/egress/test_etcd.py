"""
The ``etcd`` egress selection in the daemon: an etcd3 backend whose etcd
(``etcd.invalid``, a name that does not resolve) is reached only through an HTTP CONNECT
proxy on loopback TCP; and the selections grpcio cannot follow stopping the server at
startup.
"""

from __future__ import annotations

import os

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.options import Options
from platformd.service import daemon
from platformd.process.startup import StartupError
from tests.authz.helpers import write
from tests.e2e.harness import start_token_server, token_client
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document
from tests.etcd.cluster import Cluster

HIDDEN = "etcd.invalid"


class EtcdSelectionTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def test_backend_through_the_proxy(self):
        cluster = Cluster.start(1)
        self.addCleanup(cluster.stop)
        port = int(cluster.urls[0].rsplit(":", 1)[1])
        proxy = ConnectProxy({HIDDEN: "127.0.0.1"})
        listening = reactor.listenTCP(0, proxy, interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        egress = write(self, egress_document("etcd", "HTTPConnect", tcp={
            "url": f"http://127.0.0.1:{listening.getHost().port}"}))
        daemon = yield start_token_server(
            self, 'secret-1,alice,uid-1,"system:masters"\n', "--storage-backend", "etcd3",
            "--etcd-servers", f"http://{HIDDEN}:{port}",
            "--egress-selector-config-file", egress)
        alice = token_client(self, daemon, "secret-1")
        r = yield alice.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "through"}, "data": {"a": "b"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield alice.get("/api/v1/namespaces/default/configmaps/through")
        self.assertEqual(r.json()["data"], {"a": "b"})
        # grpcio's CONNECT names the unresolved host; its own Host header.
        self.assertTrue(proxy.heads)
        self.assertTrue(all(head.startswith(f"CONNECT {HIDDEN}:{port} HTTP/1.1\r\n")
                            for head in proxy.heads), proxy.heads)

    def refused(self, protocol: str, **transport) -> str:
        egress = write(self, egress_document("etcd", protocol, **transport))
        options = Options()
        options.parseOptions(["--data-dir", os.path.abspath(self.mktemp()),
                              "--secure-port", "0", "--storage-backend", "etcd3",
                              "--etcd-servers", "http://127.0.0.1:1",
                              "--egress-selector-config-file", egress])
        with self.assertRaises(StartupError) as caught:
            daemon(options, reactor)
        return str(caught.exception)

    def test_unix_socket_proxy_is_refused(self):
        self.assertEqual(self.refused("HTTPConnect", uds={"udsName": "/run/p.sock"}),
                         "--storage-backend etcd3: egress selection 'etcd': a gRPC client "
                         "can only be tunnelled through an http:// HTTPConnect proxy")

    def test_grpc_is_refused(self):
        self.assertEqual(self.refused("GRPC", uds={"udsName": "/run/k.sock"}),
                         "--storage-backend etcd3: egress selection 'etcd': a gRPC client "
                         "can only be tunnelled through an http:// HTTPConnect proxy")
