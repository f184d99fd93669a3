"""Value transformers on their own, and a value that does not transform back in the cache."""

from __future__ import annotations

import attrs
import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from platformd.cache.watchcache import CorruptObjectError, WatchCache
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.interface import DELETE, PUT, CorruptValue, Event, KeyValue, TransformError
from platformd.storage.memory import MemoryStorage
from platformd.storage.transformers import (
    IDENTITY,
    ByKeyPrefix,
    IdentityTransformer,
    IValueTransformer,
    Transformed,
)
from tests.storage.conformance import SealingTransformer


@implementer(IValueTransformer)
class Tagging:
    """Prefixes values with its name; reads back only its own."""

    def __init__(self, name: bytes):
        self.name = name

    def to_storage(self, key, value):
        return self.name + b":" + value

    def from_storage(self, key, data):
        name, _, value = data.partition(b":")
        if name != self.name:
            raise TransformError(f"{key}: not {self.name!r}")
        return value


class TransformerTests(SynchronousTestCase):
    def test_identity(self):
        """The identity transformer stores values as they are."""
        self.assertTrue(verifyObject(IValueTransformer, IDENTITY))
        self.assertIsInstance(IDENTITY, IdentityTransformer)
        self.assertEqual(IDENTITY.to_storage("/k", b"v"), b"v")
        self.assertEqual(IDENTITY.from_storage("/k", b"v"), b"v")

    def test_by_key_prefix(self):
        """Each key goes to the transformer of its longest prefix; others to the default."""
        secrets, special = Tagging(b"secrets"), Tagging(b"special")
        chooser = ByKeyPrefix({"/registry/secrets/": secrets,
                               "/registry/secrets/special/": special})
        self.assertTrue(verifyObject(IValueTransformer, chooser))
        for key, stored in (("/registry/secrets/default/s", b"secrets:v"),
                            ("/registry/secrets/special/s", b"special:v"),
                            ("/registry/configmaps/default/c", b"v")):
            self.assertEqual(chooser.to_storage(key, b"v"), stored)
            self.assertEqual(chooser.from_storage(key, stored), b"v")
        self.assertIs(chooser.choose("/registry/pods/default/p"), IDENTITY)
        self.assertIs(ByKeyPrefix({}, default=secrets).choose("/x"), secrets)

    def test_sealing_binds_key(self):
        """The test transformer of the conformance suite checks its key as authenticated data."""
        sealing = SealingTransformer()
        data = sealing.to_storage("/a", b"value")
        self.assertEqual(sealing.from_storage("/a", data), b"value")
        self.assertRaises(TransformError, sealing.from_storage, "/b", data)
        self.assertRaises(TransformError, sealing.from_storage, "/a", b"value")


class TransformedTests(SynchronousTestCase):
    values = Transformed(Tagging(b"t"))

    def test_corrupt_value(self):
        """Data that does not transform back reads as a CorruptValue: not JSON, with the error."""
        value = self.values.value("/k", b"other:{}")
        self.assertIsInstance(value, CorruptValue)
        self.assertIsInstance(value.error, TransformError)
        self.assertIn(b"not b't'", value)
        self.assertRaises(orjson.JSONDecodeError, orjson.loads, value)

    def test_other_errors_propagate(self):
        """A transformer failing otherwise than with TransformError has a bug: it is raised."""
        broken = Transformed(Tagging(None))
        self.assertRaises(TypeError, broken.stored, "/k", b"v")

    def test_event(self):
        """An event's versions read back; a deletion's value is read once, from its prev."""
        prev = KeyValue("/k", b"t:old", 1, 1)
        put = self.values.event(Event(PUT, KeyValue("/k", b"t:new", 1, 2), prev))
        self.assertEqual(put, Event(PUT, KeyValue("/k", b"new", 1, 2),
                                    KeyValue("/k", b"old", 1, 1)))
        deleted = self.values.event(Event(DELETE, KeyValue("/k", b"t:old", 1, 3), prev))
        self.assertEqual(deleted, Event(DELETE, KeyValue("/k", b"old", 1, 3),
                                        KeyValue("/k", b"old", 1, 1)))
        self.assertIsNone(self.values.kv(None))


class CacheTests(SynchronousTestCase):
    def test_untransformable_is_corrupt_object(self):
        """
        In the watch cache a value that does not transform back is one corrupt object: the
        cache starts, the other objects read, and that one raises CorruptObjectError.
        """
        storage = MemoryStorage(Clock(), ByKeyPrefix({"/registry/": SealingTransformer()}))
        good = core.CONFIG_MAP.storage_key("default", "good")
        moved = core.CONFIG_MAP.storage_key("default", "moved")
        for key in (good, moved):
            name = key.rsplit("/", 1)[1]
            self.successResultOf(storage.create(key, b'{"metadata":{"name":"%s"}}'
                                                % name.encode()))
        # As if the disk held another key's value under ``moved``.
        storage._current[moved] = attrs.evolve(storage._current[moved],
                                               value=storage._current[good].value)
        cache = WatchCache(storage, builtin(), Clock())
        kind = cache.for_kind(core.CONFIG_MAP)
        self.successResultOf(cache.start())
        self.assertEqual(kind.get(good).obj["metadata"]["name"], "good")
        self.assertRaises(CorruptObjectError, lambda: kind.get(moved).obj)
