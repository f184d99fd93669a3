"""History and continue-token expiry, driven by Clock (spec 4.4, 4.5, 8)."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.cache import continuetokens
from platformd.cache.continuetokens import Snapshots, Token
from platformd.cache.expiry import Expiry
from platformd.cache.watchcache import WatchCache
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.interface import CompactedError
from platformd.storage.memory import MemoryStorage


def key(name):
    return core.CONFIG_MAP.storage_key("default", name)


class HistoryExpiryTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.storage = MemoryStorage(self.clock)
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), self.clock, history_ttl=300)
        self.successResultOf(self.cache.start())
        self.kind = self.cache.for_kind(core.CONFIG_MAP)

    def write(self, name):
        return self.successResultOf(self.storage.create(key(name), b'{"metadata":{}}'))

    def test_history_kept_for_ttl(self):
        """Events are kept for the TTL, then dropped and compacted in the store."""
        first = self.write("a")
        self.clock.advance(200)
        second = self.write("b")
        self.clock.advance(99)
        self.assertIsNone(self.cache.expire())
        self.assertEqual(len(self.kind.history), 2)
        self.clock.advance(2)  # "a" is now 301 s old
        self.assertEqual(self.cache.expire(), first.mod_revision)
        self.assertEqual([e.revision for e in self.kind.history], [second.mod_revision])
        self.assertEqual(self.cache.horizon, first.mod_revision)
        self.assertEqual(self.storage.compacted_revision, first.mod_revision)
        self.assertRaises(CompactedError, self.storage.watch, "/registry/", 0, lambda e: None)
        self.clock.advance(200)
        self.assertEqual(self.cache.expire(), second.mod_revision)
        self.assertEqual(len(self.kind.history), 0)

    def test_looping_call(self):
        """The Expiry LoopingCall runs on the injected clock."""
        expiry = Expiry(self.clock, self.cache, Snapshots(self.clock, 300), interval=5)
        expiry.start()
        self.write("a")
        for _ in range(60):  # t = 300: the loop has run 60 times; "a" is not older than 300 s
            self.clock.advance(5)
        self.assertEqual(len(self.kind.history), 1)
        self.clock.advance(5)
        self.assertEqual(len(self.kind.history), 0)
        expiry.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_state_at(self):
        """The state at an older revision undoes later creations, updates and deletions."""
        a = self.write("a")
        b = self.write("b")
        at = b.mod_revision
        self.write("c")
        self.successResultOf(self.storage.update(key("a"), b'{"metadata":{"labels":{"x":"y"}}}'))
        self.successResultOf(self.storage.delete(key("b")))
        prefix = core.CONFIG_MAP.namespace_prefix("default")
        state = self.kind.state_at(prefix, at)
        self.assertEqual([(e.key, e.revision) for e in state],
                         [(key("a"), a.mod_revision), (key("b"), b.mod_revision)])
        self.assertEqual([e.key for e in self.kind.current(prefix)], [key("a"), key("c")])


class ContinueTokenTests(SynchronousTestCase):
    def test_token_ttl(self):
        """A token works until its TTL passes, then is refused as expired."""
        clock = Clock()
        snapshots = Snapshots(clock, ttl=300)
        prefix = "/registry/configmaps/default/"
        token = continuetokens.decode(continuetokens.encode(
            Token(7, prefix + "k\x00", clock.seconds()), prefix), prefix)
        self.assertEqual((token.revision, token.start), (7, prefix + "k\x00"))
        clock.advance(299)
        self.assertFalse(snapshots.expired(token))
        clock.advance(2)
        self.assertTrue(snapshots.expired(token))

    def test_snapshots_expire_and_are_bounded(self):
        """Snapshots go after the TTL, and the least recently used beyond capacity."""
        clock = Clock()
        snapshots = Snapshots(clock, ttl=300, capacity=2)
        snapshots.put("p", 1, ["one"])
        clock.advance(100)
        snapshots.put("p", 2, ["two"])
        snapshots.put("p", 3, ["three"])
        self.assertIsNone(snapshots.get("p", 1))
        self.assertEqual(snapshots.get("p", 2), ["two"])
        clock.advance(250)
        snapshots.expire()
        self.assertEqual((snapshots.get("p", 2), snapshots.get("p", 3)), (["two"], ["three"]))
        clock.advance(60)
        snapshots.expire()
        self.assertEqual(len(snapshots), 0)

    def test_malformed(self):
        """A malformed token is a 400 in upstream's words (storage/continue.go, and
        "invalid continue token: " from its callers); a number of any length in it is
        read as Go's decoder reads it."""
        from platformd.errors import StatusError
        prefix = "/registry/configmaps/default/"

        def raw(text: str) -> str:
            import base64
            return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

        def token(**payload):
            import json
            return raw(json.dumps(payload))
        v = continuetokens.TOKEN_VERSION
        for text, detail in (
                ("ab!!", "illegal base64 data at input byte 2"),
                (token(v="meta.platform.io/v2", rv=1, start="a"),
                 "server does not recognize this encoded version meta.platform.io/v2"),
                (token(v=v, rv=0, start="a"),
                 f"incorrect encoded start resourceVersion (version {v})"),
                (token(v=v, rv=1, start=""), f"encoded start key empty (version {v})"),
                (token(v=v, rv=1, start="../kube-system/x"), "../kube-system/x"),
                (token(v=v, rv=1, start="a/../../b"), "a/../../b"),
                (raw(f'{{"v": "{v}", "rv": {"9" * 5000}, "start": "a"}}'),
                 f"json: cannot unmarshal number {'9' * 5000} into Go struct field "
                 "continueToken.rv of type int64"),
                (raw(f'{{"v": "{v}", "rv": 1.5, "t": {"9" * 5000}, "start": "a"}}'),
                 "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of "
                 "type int64")):
            with self.assertRaises(StatusError) as e:
                continuetokens.decode(text, prefix)
            self.assertEqual((e.exception.code, e.exception.reason, e.exception.message),
                             (400, "BadRequest",
                              f"invalid continue token: continue key is not valid: {detail}"))

    def test_bound_to_its_collection(self):
        """A token's start key is relative to the collection it is used on: the same
        token on another namespace starts in that namespace, never outside it."""
        issued = continuetokens.encode(Token(7, "/registry/configmaps/a/x\x00", 0),
                                       "/registry/configmaps/a/")
        token = continuetokens.decode(issued, "/registry/configmaps/b/")
        self.assertEqual(token.start, "/registry/configmaps/b/x\x00")
