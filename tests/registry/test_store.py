"""
The generic store's update loop (``guaranteed_update``: one retry loop, one bound),
read-your-writes by waiting for the watch cache, not by the backend's ordering, and
writes to a replica whose cache has not yet heard of another replica's write.
"""

from __future__ import annotations

import attrs
import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.context import internal
from platformd.registry import core, rbac
from platformd.registry.outcomes import Write
from platformd.registry.store import RETRIES
from platformd.storage.memory import MemoryStorage

from tests.stub import StubServer

CM = "/api/v1/namespaces/default/configmaps"


def fired(d):
    out = []
    d.addBoth(out.append)
    return out


class UpdateLoopTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()
        self.assertEqual(self.client.post(CM, {"metadata": {"name": "a"},
                                               "data": {"n": "0"}}).code, 201)
        self.store = self.stub.components.store_for(core.CONFIG_MAP)
        self.key = core.CONFIG_MAP.storage_key("default", "a")

    def interfere(self, value):
        """Another writer changes the object behind the loop's back."""
        current = self.store.cache.get(self.key)
        obj = current.mutable()
        obj["data"] = {"n": value}
        del obj["metadata"]["resourceVersion"]
        import orjson
        self.stub.storage.update(self.key, orjson.dumps(obj), current.revision)

    def test_lost_race_is_decided_again(self):
        seen = []

        def try_update(current):
            seen.append(current.obj["data"]["n"])
            if len(seen) == 1:
                self.interfere("other")
            new = current.mutable()
            new["data"]["n"] = seen[-1] + "+mine"
            return Write(new)

        result = fired(self.store.guaranteed_update(internal(), self.key, try_update))
        self.stub.flush()
        self.assertEqual(seen, ["0", "other"])
        self.assertEqual(result[0].obj["data"], {"n": "other+mine"})
        self.assertEqual(self.client.get(f"{CM}/a").json()["data"], {"n": "other+mine"})

    def test_one_bound(self):
        """Losing every race ends in one 409 after RETRIES attempts, not 16 x 16."""
        calls = []

        def try_update(current):
            calls.append(1)
            self.interfere(str(len(calls)))
            new = current.mutable()
            new["data"] = {"n": "mine"}
            return Write(new)

        result = fired(self.store.guaranteed_update(internal(), self.key, try_update))
        self.stub.flush()
        self.assertEqual(len(calls), RETRIES)
        error = result[0].value
        self.assertIsInstance(error, errors.StatusError)
        self.assertEqual((error.code, error.to_status()["message"]),
                         (409, 'Operation cannot be fulfilled on configmaps "a": too many '
                               'concurrent writers; try again'))

    def test_stale_precondition_is_not_retried(self):
        stale = self.client.get(f"{CM}/a").json()["metadata"]["resourceVersion"]
        self.assertEqual(self.client.patch(f"{CM}/a", {"data": {"n": "1"}}).code, 200)
        for patch in ({"metadata": {"resourceVersion": stale}, "data": {"n": "2"}},):
            r = self.client.patch(f"{CM}/a", patch)
            self.assertEqual(r.code, 409, r.body)
        r = self.client.put(f"{CM}/a", {"metadata": {"name": "a", "resourceVersion": stale}})
        self.assertEqual(r.code, 409)


@attrs.define
class LateWatchStorage:
    """A MemoryStorage whose watch events reach their sinks ``delay`` seconds late, as an
    etcd watch may trail the write's response."""

    inner: MemoryStorage
    clock: Clock
    delay: float = 1.0

    def watch(self, prefix, from_revision, sink):
        return self.inner.watch(prefix, from_revision,
                                lambda event: self.clock.callLater(self.delay, sink, event))

    def __getattr__(self, name):
        return getattr(self.inner, name)


class ReadYourWritesTests(SynchronousTestCase):
    def test_write_answers_once_the_cache_has_it(self):
        clock = Clock()
        storage = LateWatchStorage(MemoryStorage(clock), clock, delay=0)
        stub = StubServer(clock=clock, storage=storage)
        self.addCleanup(stub.stop)
        storage.delay = 1.0
        client = stub.client()
        pending = client.start("POST", CM, {"metadata": {"name": "a"}})
        self.assertEqual(pending.answered, [])  # committed, but not yet in the cache
        stub.advance(1.0)
        created = pending.result()
        self.assertEqual(created.code, 201)
        # What the write answered is what a read now sees.
        r = client.get(f"{CM}/a")
        self.assertEqual(r.json()["metadata"]["resourceVersion"],
                         created.json()["metadata"]["resourceVersion"])
        pending = client.start("PUT", f"{CM}/a", {"metadata": {"name": "a"}, "data": {"k": "v"}})
        self.assertEqual(pending.answered, [])
        stub.advance(1.0)
        self.assertEqual(pending.result().code, 200)
        self.assertEqual(client.get(f"{CM}/a").json()["data"], {"k": "v"})
        pending = client.start("DELETE", f"{CM}/a")
        self.assertEqual(pending.answered, [])
        stub.advance(1.0)
        self.assertEqual(pending.result().code, 200)
        self.assertEqual(client.get(f"{CM}/a").code, 404)


@attrs.define
class LaggingWatchStorage:
    """
    A MemoryStorage whose watch events of writes made while ``lagging`` (and every
    later one, in order) wait until ``sync`` is asked, as a replica's etcd watch brings
    another replica's write only later, and its ``sync`` (a quorum read, then a wait
    for the watch to reach it) brings it for sure.
    """

    inner: MemoryStorage
    lagging: bool = False
    _held: list = attrs.field(factory=list)

    def watch(self, prefix, from_revision, sink):
        def deliver(event):
            if self.lagging or self._held:
                self._held.append((sink, event))
            else:
                sink(event)
        return self.inner.watch(prefix, from_revision, deliver)

    def sync(self):
        held, self._held = self._held, []
        for sink, event in held:
            sink(event)

    def __getattr__(self, name):
        return getattr(self.inner, name)


RB = "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings"


class LaggingReplicaTests(SynchronousTestCase):
    """
    Another replica has just created an object this one's cache has not heard of, and
    a write to it comes here: the update loop's first attempt, on the cache's guess,
    sees no object; an update that creates (RBAC kinds, apply) tries a create, which
    fails, and decides again on the object read after ``sync``.  That second attempt
    must start from the request's object, not from what the failed create made of it
    (issue 26: a PUT changing roleRef was refused for ``metadata.uid`` too, the uid the
    create had drawn).
    """

    def setUp(self):
        clock = Clock()
        self.storage = LaggingWatchStorage(MemoryStorage(clock))
        self.stub = StubServer(clock=clock, storage=self.storage)
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def created_elsewhere(self, kind, obj: dict) -> dict:
        """
        ``obj``, of ``kind`` in namespace default, as another replica created it, with
        its resourceVersion: this replica's cache has not heard of it yet.
        """
        meta = obj["metadata"]
        meta.update(namespace="default", uid="uid-of-the-other-replica",
                    creationTimestamp="2024-01-01T00:00:00Z")
        key = kind.storage_key("default", meta["name"])
        self.storage.lagging = True
        kv = fired(self.storage.create(key, orjson.dumps(obj)))[0]
        self.storage.lagging = False
        self.assertIsNone(self.stub.components.store_for(kind).cache.get(key))
        meta["resourceVersion"] = str(kv.mod_revision)
        return obj

    def rolebinding(self) -> dict:
        return self.created_elsewhere(rbac.ROLE_BINDING, {
            "apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                        "name": "viewer"},
            "subjects": [{"kind": "User", "name": "alice"}]})

    def test_put_changing_role_ref(self):
        """422 on roleRef alone: the uid is the object's own."""
        body = self.rolebinding()
        body["roleRef"]["name"] = "other"
        r = self.client.put(f"{RB}/rb", body)
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual([c["field"] for c in r.json()["details"]["causes"]], ["roleRef"])

    def test_put(self):
        """A PUT of the object as read from the other replica succeeds."""
        body = self.rolebinding()
        body["subjects"].append({"kind": "User", "name": "bob"})
        r = self.client.put(f"{RB}/rb", body)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["metadata"]["uid"], "uid-of-the-other-replica")

    def test_apply(self):
        """Server-side apply (which creates on update for every kind) likewise."""
        self.created_elsewhere(core.CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "a"}, "data": {"k": "v"}})
        r = self.client.request(
            "PATCH", f"{CM}/a?fieldManager=test&force=true",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
             "data": {"k": "w"}}, content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.json()["metadata"]["uid"], r.json()["data"]),
                         ("uid-of-the-other-replica", {"k": "w"}))
