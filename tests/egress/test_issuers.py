"""
JWT issuers and egress selection (spec 2.5): an issuer's discovery and JWKS fetches go
through the selection its ``egressSelectorType`` names, of the selector it is given
(none: directly), and never through any selection when it names none, whatever the
egress configuration says.  ``authenticators_from_flags(..., egress=)`` gives its issuers,
and those its reloader builds, its selector: two built in one process keep their own.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import defer, reactor

from platformd.auth import jwks
from platformd.auth.authenticators import AuthenticatorChain
from platformd.auth.fromflags import authenticators_from_flags
from platformd.egress import selector
from platformd.egress.config import parse_egress_config
from platformd.options import Options
from tests.authn.helpers import IssuerTestCase, document, jwt_entry
from tests.egress.proxy import ConnectProxy
from tests.egress.test_tunnel import egress_document


class IssuerEgressTests(IssuerTestCase):
    def setUp(self):
        super().setUp()
        self.sockets = tempfile.mkdtemp(prefix="egress-")
        self.addCleanup(shutil.rmtree, self.sockets)
        self.proxy, self.egress = self.proxied("proxy.sock")
        self.address = self.url.removeprefix("https://")
        self.head = f"CONNECT {self.address} HTTP/1.1\r\nHost: 127.0.0.1"

    def proxied(self, name: str) -> tuple:
        """A CONNECT proxy on a UNIX socket and a selector sending ``cluster`` to it."""
        proxy = ConnectProxy()
        path = os.path.join(self.sockets, name)
        listening = reactor.listenUNIX(path, proxy)
        self.addCleanup(listening.stopListening)
        return proxy, selector.EgressSelector(parse_egress_config(
            egress_document("cluster", "HTTPConnect", uds={"udsName": path})), reactor)

    def fetch(self, egress=True, **issuer):
        """The keys of an issuer configured with ``issuer``, fetched through ``egress``
        (default: the proxy's selector)."""
        source = jwks.KeySource(self.config(issuer=issuer).jwt[0].issuer, self.clock, reactor,
                                egress=self.egress if egress is True else egress)
        return self.fetched(source)

    def fetched(self, source):
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

    @defer.inlineCallbacks
    def test_no_selector_is_direct(self):
        """An issuer naming a selection, built with no selector, dials directly."""
        source = yield self.fetch(egress=None, egressSelectorType="cluster")
        self.assertTrue(source.ready)
        self.assertEqual(self.proxy.heads, [])

    def write(self, path: str, audience: str) -> None:
        with open(path, "wb") as f:
            f.write(document(jwt_entry(self.url, ca=self.ca, audiences=(audience,),
                                       issuer={"egressSelectorType": "cluster"})))

    def built(self, path: str, egress) -> tuple:
        """The chain and reloader ``authenticators_from_flags`` makes for ``path``."""
        options = Options()
        options.parseOptions(["--authentication-config", path])
        chain = AuthenticatorChain([])
        reloader = authenticators_from_flags(options, chain, [], [], self.clock, reactor,
                                             egress=egress)
        return chain, reloader

    def keys_of(self, chain):
        """The key source of the chain's one JWT issuer (behind its token cache)."""
        return chain.authenticators[0].inner.keys

    @defer.inlineCallbacks
    def test_two_builders_in_one_process_and_their_reloads(self):
        """Two chains built from the same flags in one process, each given its own
        selector, fetch through their own proxy, and so do the issuers their reloads
        build."""
        second_proxy, second_egress = self.proxied("second.sock")
        path = os.path.abspath(self.mktemp())
        self.write(path, "platform")
        first, first_reloader = self.built(path, self.egress)
        second, second_reloader = self.built(path, second_egress)
        yield self.fetched(self.keys_of(first))
        self.assertEqual((len(self.proxy.heads), second_proxy.heads), (2, []))
        yield self.fetched(self.keys_of(second))
        self.assertEqual((len(self.proxy.heads), len(second_proxy.heads)), (2, 2))

        self.write(path, "other")
        self.assertTrue(first_reloader.check())
        self.assertTrue(second_reloader.check())
        reloaded = self.keys_of(second)
        self.assertEqual(reloaded.issuer.audiences, ("other",))
        yield self.fetched(reloaded)
        self.assertEqual((len(self.proxy.heads), len(second_proxy.heads)), (2, 4))
        yield self.fetched(self.keys_of(first))
        self.assertEqual((len(self.proxy.heads), len(second_proxy.heads)), (4, 4))
        self.assertEqual(set(self.proxy.heads + second_proxy.heads), {self.head})
