"""WatchScope: the one judge of what a watch may send (issue 11.1)."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from platformd.api.listoptions import ListOptions
from platformd.api.shards import parse as parse_shard
from platformd.api.watchscope import WatchScope
from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, CacheEvent, CachedObject
from platformd.registry import rbac
from tests.api.test_selectors import parse_field_selector, parse_label_selector

KIND = rbac.ROLE_BINDING


def options(labels=None, fields=None, shard=None) -> ListOptions:
    return ListOptions(watch=True, resource_version=None, resource_version_text="", match="",
                       limit=None, continue_token="", send_initial_events=None,
                       allow_bookmarks=False, timeout=None, labels=labels, fields=fields,
                       shard=shard)


def entry(namespace, name, revision=2, **labels):
    obj = {"metadata": {"name": name, "namespace": namespace, "labels": labels}}
    return CachedObject(KIND.storage_key(namespace, name), orjson.dumps(obj), revision, 1)


def scope(namespace="b", **selectors):
    prefix = KIND.namespace_prefix(namespace) if namespace else KIND.storage_prefix
    return WatchScope(prefix, options(**selectors))


class WatchScopeTests(SynchronousTestCase):
    def test_namespace_boundary_without_selectors(self):
        """Another namespace's object, or one whose namespace merely starts with the
        watched one's name, is out of scope; a watch of every namespace admits both."""
        self.assertTrue(scope().admits(entry("b", "x")))
        self.assertFalse(scope().admits(entry("a", "x")))
        self.assertFalse(scope().admits(entry("bb", "x")))
        self.assertTrue(scope(None).admits(entry("a", "x")))

    def test_namespace_boundary_with_every_selector(self):
        """Selectors that the other namespace's object matches do not widen the scope."""
        for selectors in ({"labels": parse_label_selector("app=web")},
                          {"fields": parse_field_selector("metadata.name=x", KIND)},
                          {"shard": parse_shard("shardRange(object.metadata.namespace,"
                                                "'0x0000000000000000','0x10000000000000000')")}):
            self.assertFalse(scope(**selectors).admits(entry("a", "x", app="web")), selectors)
            self.assertTrue(scope(**selectors).admits(entry("b", "x", app="web")), selectors)

    def test_event_types(self):
        """Events of another namespace have no type for the watcher, whatever their own
        type; a selector turns updates into ADDED/DELETED transitions."""
        old, new = entry("a", "x", 2, app="web"), entry("a", "x", 3, app="db")
        for event in (CacheEvent(ADDED, new, None, 3, 0), CacheEvent(MODIFIED, new, old, 3, 0),
                      CacheEvent(DELETED, None, old, 3, 0)):
            self.assertIsNone(scope().event_type(event))
            self.assertIsNone(scope(labels=parse_label_selector("app=web")).event_type(event))
        web = scope("a", labels=parse_label_selector("app=web"))
        self.assertEqual(web.event_type(CacheEvent(MODIFIED, new, old, 3, 0)), DELETED)
        self.assertEqual(web.event_type(CacheEvent(MODIFIED, old, new, 3, 0)), ADDED)
        self.assertEqual(web.event_type(CacheEvent(MODIFIED, old, old, 3, 0)), MODIFIED)
        self.assertIsNone(web.event_type(CacheEvent(MODIFIED, new, new, 3, 0)))
        self.assertEqual(scope("a").event_type(CacheEvent(MODIFIED, new, old, 3, 0)), MODIFIED)

    def test_undecodable_object(self):
        """An undecodable object matches no selector, but an unfiltered watch of its
        namespace still hears of it."""
        broken = CachedObject(KIND.storage_key("b", "x"), b"{", 2, 1)
        self.assertTrue(scope().admits(broken))
        self.assertFalse(scope(labels=parse_label_selector("app=web")).admits(broken))
