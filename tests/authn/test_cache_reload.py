"""The token cache (hits, expiry on a Clock, failures, shared waits) and the reloader
(its log lines and metrics)."""

from __future__ import annotations

import os

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from platformd.auth import authnconfig
from platformd.auth.authenticators import AuthenticatorChain
from platformd.auth.authnreload import AuthenticationReloader
from platformd.auth.interfaces import AuthenticationError, IAuthenticator, UserInfo
from platformd.auth.jwt import JWTAuthenticator
from platformd.auth.tokencache import CachedTokenAuthenticator
from platformd.metrics.configreloads import ConfigReloads, config_hash
from platformd.metrics.core import Registry
from tests.authn.helpers import document, jwt_entry, request_with


@implementer(IAuthenticator)
class Counting:
    def __init__(self):
        self.calls = 0
        self.later: list = []
        self.answer = lambda token: UserInfo(token)

    def authenticate(self, request):
        self.calls += 1
        token = request.getHeader(b"authorization").decode().split()[1]
        if self.later is not None and token.startswith("slow"):
            d = defer.Deferred()
            self.later.append((d, token))
            return d
        return self.answer(token)


class Cache(TestCase):
    def setUp(self):
        self.clock = Clock()
        self.inner = Counting()
        self.cache = CachedTokenAuthenticator(self.inner, self.clock)

    def test_hit_and_expiry(self):
        self.assertEqual(self.cache.authenticate(request_with("t")).name, "t")
        self.clock.advance(9.9)
        self.assertEqual(self.cache.authenticate(request_with("t")).name, "t")
        self.assertEqual(self.inner.calls, 1)
        self.clock.advance(0.1)
        self.cache.authenticate(request_with("t"))
        self.assertEqual(self.inner.calls, 2)
        self.assertEqual((self.cache.hits, self.cache.misses), (1, 2))

    def test_failures_and_none_not_cached(self):
        def refuse(token):
            raise AuthenticationError("bad")
        self.inner.answer = refuse
        for _ in range(2):
            self.assertRaises(AuthenticationError, self.cache.authenticate, request_with("t"))
        self.inner.answer = lambda token: None
        self.assertIsNone(self.cache.authenticate(request_with("u")))
        self.assertIsNone(self.cache.authenticate(request_with("u")))
        self.assertEqual(self.inner.calls, 4)

    def test_failure_ttl(self):
        cache = CachedTokenAuthenticator(self.inner, self.clock, failure_ttl=5)
        self.inner.answer = lambda token: None
        cache.authenticate(request_with("u"))
        cache.authenticate(request_with("u"))
        self.assertEqual(self.inner.calls, 1)

    def test_bounded(self):
        cache = CachedTokenAuthenticator(self.inner, self.clock, max_size=2)
        for token in ("a", "b", "c", "a"):
            cache.authenticate(request_with(token))
        self.assertEqual(self.inner.calls, 4)
        self.assertEqual(len(cache._entries), 2)

    def test_concurrent_waits_share_one_answer(self):
        first = self.cache.authenticate(request_with("slow"))
        second = self.cache.authenticate(request_with("slow"))
        self.assertEqual(self.inner.calls, 1)
        d, token = self.inner.later[0]
        d.callback(UserInfo(token))
        self.assertEqual(self.successResultOf(first).name, "slow")
        self.assertEqual(self.successResultOf(second).name, "slow")
        self.assertEqual(self.cache.authenticate(request_with("slow")).name, "slow")


class Reload(TestCase):
    def write(self, data: bytes):
        with open(self.path, "wb") as f:
            f.write(data)

    def setUp(self):
        self.path = self.mktemp()
        self.write(document(jwt_entry("https://a.example")))
        self.initial = authnconfig.load_authentication_config(self.path)
        self.static = Counting()
        self.chain = AuthenticatorChain([self.static])
        self.clock = Clock()
        self.reloader = AuthenticationReloader(self.path, self.chain, self.initial,
                                               clock=self.clock, reactor=None,
                                               prefix=[self.static])

    def test_swaps_and_keeps_old_on_bad_file(self):
        self.assertFalse(self.reloader.check())  # unchanged
        self.write(document(jwt_entry("https://b.example"), jwt_entry("https://c.example")))
        self.assertTrue(self.reloader.check())
        self.assertIs(self.chain.authenticators[0], self.static)
        self.assertEqual([a.url for a in self.chain.authenticators[1:]],
                         ["https://b.example", "https://c.example"])
        before = list(self.chain.authenticators)
        for bad in (b"kind: Nope\napiVersion: v1\n", document(jwt_entry("http://x")),
                    document(anonymous={"enabled": True})):
            self.write(bad)
            self.assertFalse(self.reloader.check())
            self.assertEqual(self.chain.authenticators, before)
        self.flushLoggedErrors()

    def test_wrap_and_loop(self):
        self.reloader.wrap = lambda a: CachedTokenAuthenticator(a, self.clock)
        self.reloader.start()
        self.addCleanup(self.reloader.stop)
        self.write(document(jwt_entry("https://b.example")))
        self.clock.advance(60)
        wrapped = self.chain.authenticators[1]
        self.assertIsInstance(wrapped, CachedTokenAuthenticator)
        self.assertIsInstance(wrapped.inner, JWTAuthenticator)


class ReloadCounted(TestCase):
    """
    A reload that fails keeps the authenticators, says why in upstream's words and
    counts in apiserver_authentication_config_controller_* (kube-apiserver's ApplyTo
    watch callback); one that takes effect counts a success and names the file in use.
    """

    def setUp(self):
        self.path = self.mktemp()
        self.good = document(jwt_entry("https://a.example"))
        with open(self.path, "wb") as f:
            f.write(self.good)
        self.clock = Clock()
        self.registry = Registry(process=False)
        self.reloads = ConfigReloads(self.registry, "testAPIServerID", self.clock,
                                     "authentication")
        self.chain = AuthenticatorChain([])
        self.reloader = AuthenticationReloader(
            self.path, self.chain, authnconfig.load_authentication_config(self.path),
            clock=self.clock, reactor=None, reloads=self.reloads)
        self.events: list = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def write(self, data: bytes):
        with open(self.path, "wb") as f:
            f.write(data)

    def counts(self) -> dict:
        return {status: self.reloads.total.get((status, self.reloads.server))
                for status in ("success", "failure")}

    def messages(self) -> list:
        return [formatEvent(e) for e in self.events]

    def test_refused_file(self):
        """Refused: chain kept, one log line, one failure, not tried again until it
        changes; unreadable: a failure each time; a good file: a success."""
        self.assertEqual(self.reloads.info.values,
                         {(self.reloads.server, config_hash(self.good)): [1]})
        before = list(self.chain.authenticators)
        self.clock.advance(100)
        self.write(document(jwt_entry("http://b.example")))
        self.assertFalse(self.reloader.check())
        self.assertFalse(self.reloader.check())
        self.assertEqual(self.chain.authenticators, before)
        self.assertEqual(self.messages(), [
            'failed to validate authentication config: jwt[0].issuer.url: Invalid value: '
            '"http://b.example": URL scheme must be https'])
        self.assertEqual(self.counts(), {"success": 0, "failure": 1})
        self.assertEqual(self.reloads.timestamp.get(("failure", self.reloads.server)), 100)
        os.remove(self.path)
        self.assertFalse(self.reloader.check())
        self.assertFalse(self.reloader.check())
        self.assertEqual(self.counts(), {"success": 0, "failure": 3})
        self.assertEqual(self.messages()[-1], "failed to read authentication config file: "
                                              f"open {self.path}: No such file or directory")
        replacement = document(jwt_entry("https://b.example"))
        self.write(replacement)
        self.clock.advance(1)
        self.assertTrue(self.reloader.check())
        self.assertEqual(self.counts(), {"success": 1, "failure": 3})
        self.assertEqual(self.reloads.timestamp.get(("success", self.reloads.server)), 101)
        self.assertEqual(self.reloads.info.values,
                         {(self.reloads.server, config_hash(replacement)): [1]})
        self.assertEqual(self.messages()[-1], "reloaded authentication config")
