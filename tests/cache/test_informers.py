"""Informers and listers over the watch cache (``cache/informers.py``), and their fake."""

import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from platformd.cache.informers import (
    EventHandlers, FakeInformer, IInformer, ILister, Informers)
from platformd.cache.watchcache import WatchCache
from platformd.util.labelselectors import compile_selector
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.memory import MemoryStorage


def _cm(namespace, name, labels=None):
    meta = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta}


class Recorder:
    def __init__(self):
        self.seen = []
        self.handlers = EventHandlers(
            on_add=lambda new: self.seen.append(("add", new.name)),
            on_update=lambda old, new: self.seen.append(("update", old.name, new.name)),
            on_delete=lambda old: self.seen.append(("delete", old.name)))


class InformerTests(SynchronousTestCase):
    """The real informer over a cache on memory storage."""

    def setUp(self):
        self.storage = MemoryStorage(Clock())
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), Clock())
        self.informers = Informers(self.cache)
        self.informer = self.informers.for_kind(core.CONFIG_MAP)

    def put(self, namespace, name, labels=None):
        key = core.CONFIG_MAP.storage_key(namespace, name)
        current = self.successResultOf(self.storage.get(key))
        value = orjson.dumps(_cm(namespace, name, labels))
        if current is None:
            return self.successResultOf(self.storage.create(key, value))
        return self.successResultOf(self.storage.update(key, value, current.mod_revision))

    def test_interfaces(self):
        """The informer and its lister provide IInformer and ILister."""
        verifyObject(IInformer, self.informer)
        verifyObject(ILister, self.informer.lister)

    def test_one_informer_per_gvr(self):
        """Asking twice for a GVR gives the same informer."""
        self.assertIs(self.informers.informer(core.CONFIG_MAP.gvr), self.informer)

    def test_initial_state_as_adds_once_loaded(self):
        """A handler added before the cache loads hears the loaded objects as adds."""
        self.put("a", "one")
        recorder = Recorder()
        self.informer.add_handler(recorder.handlers)
        self.assertFalse(self.informer.has_synced())
        self.assertEqual(recorder.seen, [])
        self.successResultOf(self.cache.start())
        self.assertTrue(self.informer.has_synced())
        self.assertEqual(recorder.seen, [("add", "one")])

    def test_changes_followed(self):
        """After the initial adds, creates, updates and deletes reach the handlers."""
        self.put("a", "one")
        self.successResultOf(self.cache.start())
        recorder = Recorder()
        registration = self.informer.add_handler(recorder.handlers)
        self.put("a", "two")
        self.put("a", "one", {"x": "y"})
        self.successResultOf(self.storage.delete(core.CONFIG_MAP.storage_key("a", "two")))
        self.assertEqual(recorder.seen, [("add", "one"), ("add", "two"),
                                         ("update", "one", "one"), ("delete", "two")])
        self.informer.remove_handler(registration)
        self.informer.remove_handler(registration)
        self.put("a", "three")
        self.assertEqual(len(recorder.seen), 4)

    def test_deletion_stamped_with_its_revision(self):
        """on_delete gets the last state at the deletion's revision, as a watch sends it."""
        self.put("a", "one")
        self.successResultOf(self.cache.start())
        deleted = []
        self.informer.add_handler(EventHandlers(on_delete=deleted.append))
        self.successResultOf(self.storage.delete(core.CONFIG_MAP.storage_key("a", "one")))
        [old] = deleted
        self.assertEqual(old.revision, self.cache.revision)
        self.assertEqual(old.obj["metadata"]["resourceVersion"], str(self.cache.revision))
        self.assertEqual(old.obj["metadata"]["name"], "one")

    def test_failing_handler_does_not_stop_others(self):
        """A handler that raises is logged; the next still hears the event."""
        self.successResultOf(self.cache.start())

        def bug(new):
            raise RuntimeError("a bug")
        self.informer.add_handler(EventHandlers(on_add=bug))
        recorder = Recorder()
        self.informer.add_handler(recorder.handlers)
        self.put("a", "one")
        self.assertEqual(recorder.seen, [("add", "one")])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_unhandled_changes_not_converted(self):
        """A handler of deletes alone over a kind served from another's storage
        (events.k8s.io Events over core Events) makes no converted view of a create;
        the delete reaches it converted."""
        from platformd.registry.kinds import eventsv1
        self.successResultOf(self.cache.start())
        deleted = []
        self.informers.for_kind(eventsv1.KIND).add_handler(
            EventHandlers(on_delete=deleted.append))
        key = core.EVENT.storage_key("a", "e1")
        self.successResultOf(self.storage.create(key, orjson.dumps(
            {"metadata": {"name": "e1", "namespace": "a"}, "reason": "Started"})))
        stored = self.cache.for_kind(core.EVENT).get(key)
        self.assertIsNone(stored._views)
        self.successResultOf(self.storage.delete(key))
        [old] = deleted
        self.assertEqual(old.obj["apiVersion"], eventsv1.KIND.api_version)
        self.assertEqual(old.obj["metadata"]["resourceVersion"], str(self.cache.revision))

    def test_handler_types(self):
        """An informer asks its cache for the changes its handlers act on alone."""
        self.assertEqual(EventHandlers(on_delete=print).types, {"DELETED"})
        self.assertEqual(Recorder().handlers.types, {"ADDED", "MODIFIED", "DELETED"})
        self.assertEqual(EventHandlers(on_stop=print).types, set())

    def test_lister(self):
        """get and list by namespace and label selector, in key order."""
        self.put("b", "two", {"tier": "x"})
        self.put("a", "one", {"tier": "x"})
        self.put("a", "three")
        self.successResultOf(self.cache.start())
        lister = self.informer.lister
        self.assertEqual(lister.get("a", "one").obj["metadata"]["name"], "one")
        self.assertIsNone(lister.get("a", "missing"))
        self.assertEqual([e.name for e in lister.list()], ["one", "three", "two"])
        self.assertEqual([e.name for e in lister.list("a")], ["one", "three"])
        selector = compile_selector({"matchLabels": {"tier": "x"}})
        self.assertEqual([e.name for e in lister.list(selector=selector)], ["one", "two"])
        self.assertEqual([e.name for e in lister.list("a", selector)], ["one"])


class ListerVersionTests(SynchronousTestCase):
    """
    A lister keeps its lists per kind version (``KindCache.version``): every change of
    the kind's objects is seen by the next list, never a stale one.
    """

    setUp = InformerTests.setUp
    put = InformerTests.put

    def names(self, namespace=None):
        return [e.name for e in self.informer.lister.list(namespace)]

    def test_write_then_list(self):
        """A create, an update and a delete are seen by the list right after them."""
        self.successResultOf(self.cache.start())
        self.assertEqual(self.names(), [])
        self.assertEqual(self.names("a"), [])
        self.put("a", "one")
        self.assertEqual(self.names(), ["one"])
        self.assertEqual(self.names("a"), ["one"])
        self.put("a", "one", {"x": "y"})
        [entry] = self.informer.lister.list()
        self.assertEqual(entry.obj["metadata"]["labels"], {"x": "y"})
        self.put("b", "two")
        self.assertEqual(self.names(), ["one", "two"])
        self.assertEqual(self.names("a"), ["one"])
        self.successResultOf(self.storage.delete(core.CONFIG_MAP.storage_key("a", "one")))
        self.assertEqual(self.names(), ["two"])
        self.assertEqual(self.names("a"), [])

    def test_unchanged_kind_kept(self):
        """With no change in between, the objects are not gathered again; each caller
        still gets a list of its own."""
        self.put("a", "one")
        self.successResultOf(self.cache.start())
        kind_cache = self.cache.for_kind(core.CONFIG_MAP)
        first = self.informer.lister.list()
        gathered = []
        real = kind_cache.current
        kind_cache.current = lambda prefix: gathered.append(prefix) or real(prefix)
        second = self.informer.lister.list()
        self.assertEqual(gathered, [])
        self.assertEqual(second, first)
        self.assertIsNot(second, first)
        second.clear()
        self.assertEqual(self.names(), ["one"])
        self.put("a", "two")
        self.assertEqual(self.names(), ["one", "two"])
        self.assertEqual(len(gathered), 1)

    def test_version_bumped_by_every_change(self):
        """A load, an event, a relist's changes and the kind's removal each move the
        kind's version on; an event of another kind does not."""
        kind_cache = self.cache.for_kind(core.CONFIG_MAP)
        self.put("a", "one")
        before = kind_cache.version
        self.successResultOf(self.cache.start())
        self.assertGreater(kind_cache.version, before)
        before = kind_cache.version
        self.put("a", "two")
        self.assertGreater(kind_cache.version, before)
        before = kind_cache.version
        self.successResultOf(self.storage.create(
            core.SECRET.storage_key("a", "s"), b'{"metadata":{"name":"s"}}'))
        self.assertEqual(kind_cache.version, before)
        kind_cache.remove()
        self.assertGreater(kind_cache.version, before)

    def test_relist_invalidates(self):
        """A relist after a lost storage watch (writes the watch never delivered) is seen
        by the next list."""
        self.put("a", "one")
        self.successResultOf(self.cache.start())
        self.assertEqual(self.names(), ["one"])
        watch = self.cache._watch
        self.storage._watchers.discard(watch)
        self.put("a", "two")
        self.successResultOf(self.storage.delete(core.CONFIG_MAP.storage_key("a", "one")))
        self.assertEqual(self.names(), ["one"])  # the cache has not heard yet
        watch.fail(RuntimeError("connection lost"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(self.names(), ["two"])

    def test_load_at_start_invalidates(self):
        """A list taken before the cache loads (empty) is not kept past the load."""
        self.put("a", "one")
        self.assertEqual(self.names(), [])
        self.successResultOf(self.cache.start())
        self.assertEqual(self.names(), ["one"])

    def test_another_version_follows(self):
        """A lister of a kind served from another's storage (events.k8s.io Events over
        core Events) follows that kind's changes."""
        from platformd.registry.kinds import eventsv1
        self.successResultOf(self.cache.start())
        lister = self.informers.for_kind(eventsv1.KIND).lister
        self.assertEqual(lister.list(), [])
        key = core.EVENT.storage_key("a", "e1")
        self.successResultOf(self.storage.create(key, orjson.dumps(
            {"metadata": {"name": "e1", "namespace": "a"}, "reason": "Started"})))
        [entry] = lister.list()
        self.assertEqual(entry.obj["metadata"]["name"], "e1")
        self.assertEqual(entry.obj["apiVersion"], eventsv1.KIND.api_version)

    def test_selector_lists_follow_too(self):
        """Lists with a label selector are filtered from the kept list, current too."""
        self.successResultOf(self.cache.start())
        selector = compile_selector({"matchLabels": {"tier": "x"}})
        self.assertEqual(self.informer.lister.list(selector=selector), [])
        self.put("a", "one", {"tier": "x"})
        self.assertEqual([e.name for e in self.informer.lister.list(selector=selector)],
                         ["one"])


class FakeInformerTests(SynchronousTestCase):
    """The fake behaves as the informer does, driven by hand."""

    def test_interfaces(self):
        """The fake and its lister provide IInformer and ILister."""
        fake = FakeInformer()
        verifyObject(IInformer, fake)
        verifyObject(ILister, fake.lister)

    def test_handlers_and_lister(self):
        """put and delete reach the handlers; the lister reads what is held."""
        fake = FakeInformer([_cm("a", "one", {"tier": "x"})], synced=False)
        recorder = Recorder()
        registration = fake.add_handler(recorder.handlers)
        self.assertFalse(fake.has_synced())
        self.assertEqual(recorder.seen, [])
        fake.sync()
        self.assertTrue(fake.has_synced())
        fake.put(_cm("a", "one"))
        fake.put(_cm("b", "two"))
        fake.delete("a", "one")
        self.assertEqual(recorder.seen, [("add", "one"), ("update", "one", "one"),
                                         ("add", "two"), ("delete", "one")])
        self.assertEqual([e.name for e in fake.lister.list()], ["two"])
        self.assertEqual(fake.lister.get("b", "two").namespace, "b")
        self.assertEqual(fake.lister.list("a"), [])
        fake.put(_cm("b", "three", {"tier": "x"}))
        self.assertEqual([e.name for e in fake.lister.list(
            selector=compile_selector({"matchLabels": {"tier": "x"}}))], ["three"])
        fake.remove_handler(registration)
        fake.put(_cm("c", "four"))
        self.assertEqual(len(recorder.seen), 5)
