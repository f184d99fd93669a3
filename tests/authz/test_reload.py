"""build_authorizers, AlwaysDeny, and reloading the file into a running chain (counted)."""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.authorizers import AlwaysAllow, AlwaysDeny, AuthorizerChain
from platformd.auth.authzconfig import AuthorizationConfigError, load_authorization_config
from platformd.auth.interfaces import ALLOW, NO_OPINION, Decision
from platformd.auth.modes import build_authorizers
from platformd.auth.reloading import AuthorizationReloader
from platformd.auth.webhook import WebhookAuthorizer
from platformd.metrics.configreloads import ConfigReloads, config_hash
from platformd.metrics.core import Registry
from tests.authz.helpers import document, kubeconfig_for, pki, pods, webhook_entry, write


class FakeRBAC:
    def authorize(self, attributes):
        return Decision(ALLOW, "rbac")


ALLOW_ALL = {"type": "AlwaysAllow", "name": "alwaysallow"}
DENY_ALL = {"type": "AlwaysDeny", "name": "alwaysdeny"}
RBAC = {"type": "RBAC", "name": "rbac"}


class BuildTests(SynchronousTestCase):
    def test_order_and_kinds(self):
        kubeconfig = kubeconfig_for(self, pki(self), "https://127.0.0.1:1/")
        rbac = FakeRBAC()
        config = load_authorization_config(write(self, document(
            DENY_ALL, RBAC, webhook_entry("w", kubeconfig, cacheAuthorizedRequests=False),
            ALLOW_ALL)))
        built = build_authorizers(config, rbac, Clock(), reactor)
        self.assertEqual([type(a) for a in built],
                         [AlwaysDeny, FakeRBAC, WebhookAuthorizer, AlwaysAllow])
        self.assertIs(built[1], rbac)
        self.assertEqual(built[2]._authorized_ttl, 0)
        self.assertEqual(built[2]._unauthorized_ttl, 30.0)

    def test_always_deny_is_upstreams(self):
        self.assertEqual(AlwaysDeny().authorize(pods()),
                         Decision(NO_OPINION, "Everything is forbidden."))

    def test_rbac_needs_an_instance(self):
        config = load_authorization_config(write(self, document(RBAC)))
        with self.assertRaises(AuthorizationConfigError) as caught:
            build_authorizers(config, None, Clock(), reactor)
        self.assertEqual(str(caught.exception), "authorizer type RBAC is not allowed if it was "
                                                "not enabled at initial server startup")


class ReloadTests(SynchronousTestCase):
    def setUp(self):
        self.path = write(self, document(RBAC, DENY_ALL))
        self.clock = Clock()
        self.rbac = FakeRBAC()
        self.privileged = AlwaysAllow()
        initial = load_authorization_config(self.path)
        self.chain = AuthorizerChain([self.privileged,
                                      *build_authorizers(initial, self.rbac, self.clock, reactor)])
        self.reloader = AuthorizationReloader(self.path, self.chain, initial, rbac=self.rbac,
                                              clock=self.clock, reactor=reactor,
                                              prefix=[self.privileged], interval=60)
        self.events: list = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)
        self.reloader.start()
        self.addCleanup(self.reloader.stop)

    def rewrite(self, data: bytes) -> None:
        with open(self.path, "wb") as f:
            f.write(data)

    def messages(self) -> list:
        from twisted.logger import formatEvent
        return [formatEvent(e) for e in self.events]

    def test_good_file_replaces_the_chain(self):
        before = self.chain.authorizers
        self.rewrite(document(ALLOW_ALL, RBAC, DENY_ALL))
        self.clock.advance(59)
        self.assertIs(self.chain.authorizers, before)
        self.clock.advance(1)
        self.assertEqual([type(a) for a in self.chain.authorizers],
                         [AlwaysAllow, AlwaysAllow, FakeRBAC, AlwaysDeny])
        self.assertIs(self.chain.authorizers[0], self.privileged)
        self.assertIn("reloaded authz config", self.messages())

    def test_unchanged_file_is_left_alone(self):
        before = self.chain.authorizers
        self.clock.advance(60)
        self.assertIs(self.chain.authorizers, before)
        self.assertEqual(self.messages(), [])

    def test_bad_file_keeps_the_chain_and_logs_why(self):
        before = self.chain.authorizers
        self.rewrite(document({"type": "RBAC", "name": "Bad"}))
        self.clock.advance(60)
        self.assertIs(self.chain.authorizers, before)
        self.assertTrue(any(m.startswith("reloading authorization config: authorizers[0].name: "
                                         'Invalid value: "Bad"') for m in self.messages()),
                        self.messages())
        # Dropping a non-webhook type configured at startup is refused too.
        self.rewrite(document(DENY_ALL))
        self.clock.advance(60)
        self.assertIs(self.chain.authorizers, before)
        self.assertIn("reloading authorization config: missing required types: [RBAC]",
                      self.messages())
        self.flushLoggedErrors()

    def test_missing_file_keeps_the_chain(self):
        import os
        before = self.chain.authorizers
        os.remove(self.path)
        self.clock.advance(60)
        self.assertIs(self.chain.authorizers, before)
        self.assertTrue(any("no such file" in m.lower() for m in self.messages()))
        self.flushLoggedErrors()


class ReloadCountedTests(SynchronousTestCase):
    """
    apiserver_authorization_config_controller_* as upstream's checkFile counts: a file
    that cannot be read, loaded or built is a failure (the chain kept), one that takes
    effect a success naming it; an unchanged configuration counts nothing.
    """

    def test_counts(self):
        path = write(self, document(RBAC, DENY_ALL))
        clock = Clock()
        reloads = ConfigReloads(Registry(process=False), "testAPIServerID", clock,
                                "authorization")
        initial = load_authorization_config(path)
        chain = AuthorizerChain([])
        reloader = AuthorizationReloader(path, chain, initial, rbac=FakeRBAC(), clock=clock,
                                         reactor=reactor, reloads=reloads)
        events: list = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)

        def counts():
            return [reloads.total.get((status, reloads.server))
                    for status in ("success", "failure")]

        self.assertEqual(counts(), [0, 0])
        with open(path, "rb") as f:
            self.assertEqual(reloads.info.values, {(reloads.server, config_hash(f.read())): [1]})
        with open(path, "wb") as f:
            f.write(document(DENY_ALL))
        self.assertFalse(reloader.check())
        self.assertEqual(chain.authorizers, [])
        self.assertEqual(counts(), [0, 1])
        self.assertEqual(formatEvent(events[-1]),
                         "reloading authorization config: missing required types: [RBAC]")
        with open(path, "wb") as f:
            f.write(document(RBAC, DENY_ALL) + b"\n")  # new bytes, the same configuration
        self.assertFalse(reloader.check())
        self.assertEqual(counts(), [0, 1])
        changed = document(ALLOW_ALL, RBAC, DENY_ALL)
        with open(path, "wb") as f:
            f.write(changed)
        self.assertTrue(reloader.check(), [formatEvent(e) for e in events])
        self.assertEqual(counts(), [1, 1])
        self.assertEqual(reloads.info.values, {(reloads.server, config_hash(changed)): [1]})
        self.flushLoggedErrors()
