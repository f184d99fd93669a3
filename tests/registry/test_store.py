"""
The generic store's update loop (``guaranteed_update``: one retry loop, one bound),
read-your-writes by waiting for the watch cache, not by the backend's ordering, and
writes to a replica whose cache has not yet heard of another replica's write (every
write path, each answered as by a replica up to date).
"""

from __future__ import annotations

import json
import re

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
    create had drawn), nor from what applying over no object made of an apply
    configuration.
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

    def rolebinding(self, **meta) -> dict:
        return self.created_elsewhere(rbac.ROLE_BINDING, {
            "apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb", **meta},
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

    def apply(self, path: str, body: dict, manager: str):
        return self.client.request("PATCH", f"{path}?fieldManager={manager}", body,
                                   content_type=APPLY_PATCH)

    def test_apply_keeps_the_other_managers(self):
        """
        Apply by a second manager: the attempt that found no object (its create lost)
        wrote its managedFields into the apply configuration, and the attempt decided
        again took them for the client's own, dropping alice's entry; so alice's next
        apply left the label she no longer applied (the flaky
        ``ServerSideApplyTestsOverTwoReplicas.test_fields_no_longer_applied_are_removed``).
        """
        alice = {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}
        self.created_elsewhere(core.CONFIG_MAP, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "labels": {"team": "a"},
                         "managedFields": [applied_entry("alice", alice)]},
            "data": {"a": "1", "b": "2"}})
        r = self.apply(f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "cfg"}, "data": {"b": "2"}}, "bob")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(owners(r.json()), {"alice": alice, "bob": {"f:data": {"f:b": {}}}})
        r = self.apply(f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "cfg"}, "data": {"a": "1"}}, "alice")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.json()["metadata"].get("labels"), r.json()["data"],
                          owners(r.json())),
                         (None, {"a": "1", "b": "2"},
                          {"alice": {"f:data": {"f:a": {}}}, "bob": {"f:data": {"f:b": {}}}}))

    def test_apply_after_a_refused_create(self):
        """Likewise when the create tried first is refused (a RoleBinding needs a roleRef)."""
        alice = {"f:roleRef": {}, "f:subjects": {}}
        self.rolebinding(managedFields=[applied_entry("alice", alice, RBAC_V1)])
        r = self.apply(f"{RB}/rb", {"apiVersion": RBAC_V1, "kind": "RoleBinding",
                                    "metadata": {"name": "rb", "labels": {"team": "b"}}}, "bob")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(owners(r.json()), {
            "alice": alice, "bob": {"f:metadata": {"f:labels": {"f:team": {}}}}})


RBAC_V1 = "rbac.authorization.platform.io/v1"


def applied_entry(manager: str, fields: dict, api_version: str = "v1") -> dict:
    """A managedFields entry: ``manager`` applied ``fields``."""
    return {"manager": manager, "operation": "Apply", "apiVersion": api_version,
            "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}


def owners(obj: dict) -> dict:
    """{manager: fieldsV1} of an object's Apply entries."""
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"].get("managedFields", ())
            if e["operation"] == "Apply"}


PODS = "/api/v1/namespaces/default/pods"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_CONFIG_MAP = {"metadata": {"name": "cfg", "labels": {"team": "a"}}, "data": {"a": "1"}}
_DOOMED_CONFIG_MAP = {"metadata": {"name": "cfg", "finalizers": ["example.com/f"]}}
_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"x": "1"}},
        "spec": {"containers": [{"name": "web", "image": "web:1"}]}}
_ROLE_BINDING = {"metadata": {"name": "rb"},
                 "roleRef": {"apiGroup": rbac.ROLE_BINDING.group, "kind": "Role",
                             "name": "viewer"},
                 "subjects": [{"kind": "User", "name": "alice"}]}


def _apply(replica: str, path: str, body: dict, manager: str, query: str = ""):
    return (replica, "PATCH", f"{path}?fieldManager={manager}{query}", body, APPLY_PATCH)


#: Each write path as a sequence of requests to replica "a" or "b" (method, path, body,
#: content type); "RV" and "UID" in a body stand for those of a's last answer.
WRITE_PATHS = {
    "apply by a second manager": [
        _apply("a", f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap", **_CONFIG_MAP},
               "alice"),
        _apply("b", f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "cfg"}, "data": {"b": "2"}}, "bob"),
        _apply("a", f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "cfg"}, "data": {"b": "2"}}, "alice")],
    "apply that cannot create": [
        _apply("a", f"{PODS}/p", _POD, "alice"),
        _apply("b", f"{PODS}/p", {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "p", "labels": {"y": "2"}}}, "bob")],
    "apply over a changed object": [
        _apply("b", f"{PODS}/p", _POD, "alice"),
        ("a", "PATCH", f"{PODS}/p", {"metadata": {"labels": {"z": "3"}}}, MERGE_PATCH),
        _apply("b", f"{PODS}/p", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                  "spec": {"containers": [{"name": "web", "image": "web:2"}]}},
               "bob", "&force=true")],
    "apply to status": [
        _apply("a", f"{PODS}/p", _POD, "alice"),
        _apply("b", f"{PODS}/p/status", {"apiVersion": "v1", "kind": "Pod",
                                         "metadata": {"name": "p"},
                                         "status": {"phase": "Running"}}, "kubelet"),
        ("a", "PATCH", f"{PODS}/p/status", {"status": {"phase": "Failed"}}, MERGE_PATCH),
        _apply("b", f"{PODS}/p/status", {"apiVersion": "v1", "kind": "Pod",
                                         "metadata": {"name": "p"},
                                         "status": {"phase": "Succeeded"}}, "kubelet",
               "&force=true")],
    "json patch": [
        ("a", "POST", CM, _CONFIG_MAP, None),
        ("b", "PATCH", f"{CM}/cfg", [{"op": "add", "path": "/data/b", "value": "2"}],
         JSON_PATCH),
        ("a", "PATCH", f"{CM}/cfg", [{"op": "remove", "path": "/metadata/labels"}],
         JSON_PATCH),
        ("b", "PATCH", f"{CM}/cfg", [{"op": "add", "path": "/metadata/labels",
                                      "value": {"l": "1"}}], JSON_PATCH)],
    "merge patch": [
        ("a", "POST", CM, _CONFIG_MAP, None),
        ("b", "PATCH", f"{CM}/cfg", {"data": {"b": "2"}, "metadata": {"labels": None}},
         MERGE_PATCH),
        ("a", "PATCH", f"{CM}/cfg", {"data": {"c": "3"}}, MERGE_PATCH),
        ("b", "PATCH", f"{CM}/cfg", {"data": {"a": None}}, MERGE_PATCH)],
    "strategic merge patch": [
        _apply("a", f"{PODS}/p", _POD, "alice"),
        ("b", "PATCH", f"{PODS}/p",
         {"spec": {"containers": [{"name": "web", "image": "web:2"}]},
          "metadata": {"labels": {"x": None, "z": "3"}}}, STRATEGIC_PATCH),
        ("a", "PATCH", f"{PODS}/p", {"metadata": {"labels": {"q": "1"}}}, STRATEGIC_PATCH),
        ("b", "PATCH", f"{PODS}/p", {"metadata": {"$patch": "replace", "name": "p"}},
         STRATEGIC_PATCH)],
    "patches of a kind whose update creates": [
        ("a", "POST", RB, _ROLE_BINDING, None),
        ("b", "PATCH", f"{RB}/rb", [{"op": "add", "path": "/subjects/-",
                                     "value": {"kind": "User", "name": "bob"}}], JSON_PATCH),
        ("a", "PATCH", f"{RB}/rb", {"metadata": {"labels": {"m": "1"}}}, MERGE_PATCH),
        ("b", "PATCH", f"{RB}/rb", {"metadata": {"labels": {"s": "1"}}}, STRATEGIC_PATCH)],
    "update without resourceVersion": [
        ("a", "POST", CM, _CONFIG_MAP, None),
        ("b", "PUT", f"{CM}/cfg?fieldManager=putter",
         {"metadata": {"name": "cfg"}, "data": {"b": "2"}}, None),
        ("a", "POST", RB, _ROLE_BINDING, None),
        ("b", "PUT", f"{RB}/rb", {**_ROLE_BINDING, "subjects": []}, None)],
    "update with resourceVersion": [
        ("b", "POST", CM, _CONFIG_MAP, None),
        ("a", "PATCH", f"{CM}/cfg", {"data": {"c": "3"}}, MERGE_PATCH),
        ("b", "PUT", f"{CM}/cfg", {"metadata": {"name": "cfg", "resourceVersion": "RV"},
                                   "data": {"b": "2"}}, None)],
    "status updates": [
        _apply("a", f"{PODS}/p", _POD, "alice"),
        ("b", "PUT", f"{PODS}/p/status", {**_POD, "status": {"phase": "Running"}}, None),
        ("a", "PATCH", f"{PODS}/p", {"metadata": {"labels": {"q": "1"}}}, MERGE_PATCH),
        ("b", "PATCH", f"{PODS}/p/status", {"status": {"phase": "Failed"}}, MERGE_PATCH)],
    "delete with preconditions": [
        ("b", "POST", CM, _DOOMED_CONFIG_MAP, None),
        ("a", "PATCH", f"{CM}/cfg", {"data": {"c": "3"}}, MERGE_PATCH),
        ("b", "DELETE", f"{CM}/cfg", {"preconditions": {"resourceVersion": "RV"},
                                      "propagationPolicy": "Orphan"}, None),
        ("a", "PATCH", f"{CM}/cfg", {"metadata": {"finalizers": None}}, MERGE_PATCH),
        ("a", "POST", CM, {"metadata": {"name": "cfg"}}, None),
        ("b", "DELETE", f"{CM}/cfg", {"preconditions": {"uid": "UID"}}, None)],
}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@attrs.define
class _CountingLag(LaggingWatchStorage):
    """A LaggingWatchStorage that counts the held events each ``sync`` brings."""

    brought: list = attrs.field(factory=list)

    def sync(self):
        self.brought.append(len(self._held))
        return super().sync()


class LaggingReplicaWritePathsTests(SynchronousTestCase):
    """
    Every write path through a replica B whose watch has not brought replica A's
    writes (two stub servers over one storage, B's watch held while A writes): B's
    answers must be those it gives when up to date, each write decided on the current
    object, nothing kept from an attempt made on the cache's stale guess.
    """

    def answers(self, steps: list, lagging: bool) -> list:
        clock = Clock()
        inner = MemoryStorage(clock)
        a_storage, b_storage = LaggingWatchStorage(inner), _CountingLag(inner)
        clients = {}
        for name, storage in (("a", a_storage), ("b", b_storage)):
            stub = StubServer(clock=clock, storage=storage)
            self.addCleanup(stub.stop)
            clients[name] = stub.client()
        out, last = [], {}
        for replica, method, path, body, content_type in steps:
            if last and body is not None:
                body = json.loads(json.dumps(body).replace('"RV"', json.dumps(
                    last["resourceVersion"])).replace('"UID"', json.dumps(last["uid"])))
            b_storage.lagging = lagging and replica == "a"
            r = clients[replica].request(method, path, body,
                                         content_type or "application/json")
            b_storage.lagging = False
            if replica == "a" and "uid" in r.json().get("metadata", {}):
                last = r.json()["metadata"]
            out.append((replica, method, path, r.code, r.body.decode()))
        if lagging:
            self.assertTrue(any(b_storage.brought), "B was never behind")
        uids: dict = {}  # the random uids, named by their order of appearance
        return [(*answer[:4], _UUID.sub(lambda m: uids.setdefault(m[0], f"uid{len(uids)}"),
                                        answer[4])) for answer in out]

    def check(self, steps: list) -> None:
        expected = self.answers(steps, lagging=False)
        self.assertTrue(all(a[3] < 400 for a in expected), expected)
        for answer, wanted in zip(self.answers(steps, lagging=True), expected):
            self.assertEqual(answer, wanted)


def _write_path_test(steps: list):
    return lambda self: self.check(steps)


for _name, _steps in WRITE_PATHS.items():
    setattr(LaggingReplicaWritePathsTests, "test_" + re.sub(r"\W+", "_", _name),
            _write_path_test(_steps))
