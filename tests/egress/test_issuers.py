"""
JWT issuers and egress selection (spec 2.5): an issuer's discovery and JWKS fetches go
through the selection its ``egressSelectorType`` names, and never through any selection
when it names none, whatever the egress configuration says.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import defer, reactor

from platformd.auth import jwks
from platformd.egress import selector
from platformd.egress.config import parse_egress_config
from tests.authn.helpers import IssuerTestCase
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document


class IssuerEgressTests(IssuerTestCase):
    def setUp(self):
        super().setUp()
        sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, sockets)
        self.proxy = ConnectProxy()
        path = os.path.join(sockets, "proxy.sock")
        listening = reactor.listenUNIX(path, self.proxy)
        self.addCleanup(listening.stopListening)
        selector.install(selector.EgressSelector(parse_egress_config(
            egress_document("cluster", "HTTPConnect", uds={"udsName": path})), reactor))
        self.addCleanup(selector.install, None)
        self.address = self.url.removeprefix("https://")

    def fetch(self, **issuer):
        source = jwks.KeySource(self.config(issuer=issuer).jwt[0].issuer, self.clock, reactor)
        self.addCleanup(source.agent._pool.closeCachedConnections)
        return source.fetch().addCallback(lambda _: source)

    @defer.inlineCallbacks
    def test_egress_selector_type_routes_the_fetches(self):
        source = yield self.fetch(egressSelectorType="cluster")
        self.assertTrue(source.ready)
        self.assertEqual(self.issuer.hits, ["/.well-known/openid-configuration", "/jwks"])
        self.assertTrue(self.proxy.heads)
        self.assertTrue(all(head == f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"
                            for head in self.proxy.heads))

    @defer.inlineCallbacks
    def test_no_egress_selector_type_is_direct(self):
        source = yield self.fetch()
        self.assertTrue(source.ready)
        self.assertEqual(self.proxy.heads, [])
