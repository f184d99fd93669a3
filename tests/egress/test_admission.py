"""
Admission webhooks and egress selection, as upstream chooses: a webhook called by
``clientConfig.service`` goes through the ``cluster`` selection (here an HTTP CONNECT
proxy on a UNIX socket, which alone can reach ``hooks.webhooks.svc``), one called by
``clientConfig.url`` through ``controlplane`` (none configured here: directly).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import defer, reactor

from platformd.egress import selector
from platformd.egress.config import parse_egress_config
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document
from tests.webhooks.helpers import WebhookCase


class ServiceWebhookEgressTests(WebhookCase):
    def setUp(self):
        super().setUp()
        sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, sockets)
        self.proxy = ConnectProxy({"hooks.webhooks.svc": "127.0.0.1"})
        path = os.path.join(sockets, "proxy.sock")
        listening = reactor.listenUNIX(path, self.proxy)
        self.addCleanup(listening.stopListening)
        selector.install(selector.EgressSelector(parse_egress_config(
            egress_document("cluster", "HTTPConnect", uds={"udsName": path})), reactor))
        self.addCleanup(selector.install, None)

    @defer.inlineCallbacks
    def test_service_reference_through_cluster(self):
        port = self.port.getHost().port
        service = {"namespace": "webhooks", "name": "hooks", "port": port, "path": "/svc"}
        self.configure("validating", self.hook(clientConfig={"service": service,
                                                             "caBundle": self.ca_bundle}))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/svc")), 1)
        self.assertEqual(self.proxy.heads,
                         [f"CONNECT hooks.webhooks.svc:{port} HTTP/1.1\r\nHost: 127.0.0.1"])

    @defer.inlineCallbacks
    def test_url_is_not_cluster(self):
        self.configure("validating", self.hook())
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews()), 1)
        self.assertEqual(self.proxy.heads, [])
