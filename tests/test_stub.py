"""
The in-memory API server (``tests/stub.py``): the daemon's composition over
MemoryStorage and a Clock, driven without sockets.  A few end-to-end behaviours, ported
from tests/e2e, run here in milliseconds.
"""

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.iweb import UNKNOWN_LENGTH

from tests.stub import StubServer

CM = "/api/v1/namespaces/default/configmaps"
RBAC = "/apis/rbac.authorization.platform.io/v1"


class StubTestCase(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()


class RoundTripTests(StubTestCase):
    def test_builtin_namespaces(self):
        """Booted as the daemon boots: ready, with the built-in namespaces."""
        r = self.client.get("/readyz")
        self.assertEqual((r.code, r.body), (200, b"ok"))
        r = self.client.get("/api/v1/namespaces")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]],
                         ["default", "platform-node-lease", "platform-public",
                          "platform-system"])

    def test_create_get_list_delete(self):
        """create (201), get, list, delete (200), then get is 404."""
        r = self.client.post(CM, {"metadata": {"name": "a", "labels": {"x": "1"}},
                                  "data": {"k": "v"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("content-type"), "application/json")
        created = r.json()
        self.assertEqual(created["metadata"]["creationTimestamp"], "1970-01-01T00:00:00Z")
        r = self.client.get(f"{CM}/a")
        self.assertEqual((r.code, r.json()), (200, created))
        self.assertEqual(r.length, len(r.body))
        self.client.post(CM, {"metadata": {"name": "b"}})
        r = self.client.get(f"{CM}?labelSelector=x%3D1")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a"])
        r = self.client.delete(f"{CM}/a")
        self.assertEqual(r.code, 200, r.body)
        r = self.client.get(f"{CM}/a")
        self.assertEqual(r.code, 404)

    def test_not_found_status(self):
        """A missing object is 404 with a Status naming it."""
        r = self.client.get(f"{CM}/nope")
        self.assertEqual(r.code, 404)
        self.assertEqual(r.json(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'configmaps "nope" not found', "reason": "NotFound",
            "details": {"name": "nope", "kind": "configmaps"}, "code": 404})

    def test_users(self):
        """The user is a header: without one a request is 401."""
        r = self.stub.client(user=None).get(CM)
        self.assertEqual((r.code, r.json()["reason"]), (401, "Unauthorized"))
        r = self.stub.client("alice", groups=()).get(CM)
        self.assertEqual(r.code, 200)

    def test_yaml_body(self):
        """Request bodies go through real parsing: a YAML create."""
        body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  k: v\n"
        r = self.client.post(CM, body, content_type="application/yaml",
                             headers={"Accept": "application/yaml"})
        self.assertEqual(r.code, 201, r.body)
        self.assertIn(b"name: yml", r.body)

    def test_namespace_deletion_cascades(self):
        """The namespace controller runs on the clock: contents go, then the namespace."""
        self.client.post("/api/v1/namespaces", {"metadata": {"name": "doomed"}})
        self.client.post("/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "c"}})
        r = self.client.delete("/api/v1/namespaces/doomed")
        self.assertEqual(r.json()["status"]["phase"], "Terminating")
        self.stub.advance(1)
        self.assertEqual(self.client.get("/api/v1/namespaces/doomed").code, 404)


class WatchTests(StubTestCase):
    def test_watch_events_as_they_arrive(self):
        """A watch streams chunked JSON lines; each write's event is there after it."""
        rv = self.client.get(CM).json()["metadata"]["resourceVersion"]
        watch = self.client.watch(f"{CM}?watch=1&resourceVersion={rv}")
        self.assertEqual(watch.code, 200)
        self.assertEqual(watch.response.length, UNKNOWN_LENGTH)  # chunked, not sized
        self.assertEqual(watch.header("content-type"), "application/json")
        self.assertEqual(watch.events, [])
        self.client.post(CM, {"metadata": {"name": "w"}})
        self.assertEqual(watch.types(), ["ADDED"])
        self.client.patch(f"{CM}/w", {"data": {"k": "v"}})
        self.client.delete(f"{CM}/w")
        self.assertEqual(watch.types(), ["ADDED", "MODIFIED", "DELETED"])
        self.assertEqual(watch.events[1]["object"]["data"], {"k": "v"})
        watch.close()
        self.assertFalse(self.stub.api.watcher.streams)

    def test_watch_timeout_on_the_clock(self):
        """timeoutSeconds ends the stream when the clock says so, not before."""
        watch = self.client.watch(f"{CM}?watch=1&timeoutSeconds=30")
        self.stub.advance(29)
        self.assertFalse(watch.ended)
        self.stub.advance(2)
        self.assertTrue(watch.ended)

    def test_bookmarks_on_the_clock(self):
        """With allowWatchBookmarks, a periodic BOOKMARK arrives as the clock advances."""
        self.stub.api.watcher.bookmark_interval = 10
        watch = self.client.watch(f"{CM}?watch=1&allowWatchBookmarks=true")
        self.assertEqual(watch.events, [])
        self.stub.advance(11)
        self.assertEqual(watch.types(), ["BOOKMARK"])
