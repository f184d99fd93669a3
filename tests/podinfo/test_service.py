"""
The pods socket end to end at the service level: a real PodsService on a real UNIX
socket, a real grpcio client, and a Pod cache fed by hand — no store behind it, so every
answer here comes from the cache alone (spec 4.10.4).
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time

import grpc
from twisted.internet import defer, reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from platformd.codecs.protoconvert import from_message, to_message
from platformd.podinfo import service as podservice
from platformd.podinfo.nodepods import REMOVED_ANNOTATION
from platformd.podinfo.service import PodsService
from platformd.protos.platform.api.core.v1.generated_pb2 import Pod
from platformd.process.startup import StartupError

from tests.podinfo.support import Client, PodFeed, code_of, pod, socket_dir


@defer.inlineCallbacks
def eventually(predicate, timeout: float = 5.0):
    """Poll ``predicate`` on the reactor until true (for effects that cross threads)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        yield deferLater(reactor, 0.01, lambda: None)


def _watch_threads() -> int:
    """Threads currently inside a WatchPods handler."""
    return sum(1 for frame in sys._current_frames().values()
               if any(f.f_code.co_name == "WatchPods" for f in _stack(frame)))


def _stack(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


class PodsServiceTests(TestCase):
    def setUp(self):
        self.feed = PodFeed()
        self.dir = os.path.join(socket_dir(self), "pods")
        self.path = os.path.join(self.dir, "nodeagent.sock")
        self.synced = defer.Deferred()

    def start(self, **kw) -> PodsService:
        service = PodsService(reactor, self.feed.informer, self.path, "node-a", self.synced, **kw)
        service.privilegedStartService()
        service.startService()
        self.addCleanup(lambda: service.running and service.stopService())
        return service

    def started(self, **kw):
        service = self.start(**kw)
        self.synced.callback(None)
        return service, Client(self, self.path)

    @defer.inlineCallbacks
    def test_failed_precondition_until_synced(self):
        """Every method is FAILED_PRECONDITION until the cache has synced; then it answers."""
        self.feed.put(pod("a"))
        self.start()
        client = Client(self, self.path)
        for call in (client.list(), client.get("uid-a"), client.watch().next()):
            code = yield call.addErrback(code_of)
            self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION)
        self.synced.callback(None)
        response = yield client.list()
        self.assertEqual([p.metadata.name for p in response.pods], ["a"])

    @defer.inlineCallbacks
    def test_list_pods(self):
        """ListPods returns every pod bound to this node, converted from the cache."""
        for name, node in (("a", "node-a"), ("b", "node-b"), ("c", "node-a"), ("d", "")):
            self.feed.put(pod(name, node))
        _service, client = self.started()
        response = yield client.list()
        self.assertEqual(sorted(p.metadata.name for p in response.pods), ["a", "c"])
        entry = self.feed.informer.lister.get("default", "a")
        [a] = [p for p in response.pods if p.metadata.name == "a"]
        self.assertEqual(a, to_message(entry.obj, Pod))
        self.assertEqual(from_message(a)["metadata"]["resourceVersion"], "1")

    @defer.inlineCallbacks
    def test_get_pod(self):
        """GetPod finds a pod of this node by UID; absent or elsewhere is NOT_FOUND."""
        self.feed.put(pod("a"))
        self.feed.put(pod("b", "node-b"))
        _service, client = self.started()
        response = yield client.get("uid-a")
        self.assertEqual(response.pod.metadata.name, "a")
        self.assertEqual(response.pod.spec.containers[0].image, "nginx:1.27")
        for uid in ("uid-b", "nope", ""):
            code = yield client.get(uid).addErrback(code_of)
            self.assertEqual(code, grpc.StatusCode.NOT_FOUND)

    @defer.inlineCallbacks
    def test_field_mask(self):
        """A mask in x-platform-field-mask restricts every returned pod to its paths."""
        self.feed.put(pod("a", phase="Running", podIPs=[{"ip": "10.0.0.1"}], hostIP="1.2.3.4"))
        _service, client = self.started()
        mask = "status.phase, status.podIPs,metadata.uid"
        expected = {"metadata": {"uid": "uid-a"},
                    "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]}}
        listed = yield client.list(mask)
        self.assertEqual([from_message(p) for p in listed.pods], [expected])
        got = yield client.get("uid-a", mask)
        self.assertEqual(from_message(got.pod), expected)
        watch = client.watch(mask)
        self.addCleanup(watch.cancel)
        first = yield watch.next()
        self.assertEqual(from_message(first.pod), expected)
        full = yield client.get("uid-a")
        self.assertEqual(full.pod.status.hostIP, "1.2.3.4")

    @defer.inlineCallbacks
    def test_invalid_field_mask(self):
        """An unknown path, a path into a list or an empty path is INVALID_ARGUMENT."""
        self.feed.put(pod("a"))
        _service, client = self.started()
        for mask in ("status.nope", "status.podIPs.ip", "status.phase,", "spec.node_name"):
            for call in (client.list(mask), client.get("uid-a", mask), client.watch(mask).next()):
                code = yield call.addErrback(code_of)
                self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, mask)

    @defer.inlineCallbacks
    def test_watch_pods(self):
        """WatchPods sends the current pods, then each change of this node's pods only."""
        self.feed.put(pod("a"))
        _service, client = self.started()
        watch = client.watch()
        self.addCleanup(watch.cancel)
        [first] = yield watch.take(1)
        self.assertEqual((first.pod.metadata.name, first.pod.status.phase), ("a", "Pending"))
        self.feed.put(pod("elsewhere", "node-b"))
        self.feed.put(pod("a", phase="Running"))
        self.feed.put(pod("b"))
        changes = yield watch.take(2)
        self.assertEqual([(r.pod.metadata.name, r.pod.status.phase) for r in changes],
                         [("a", "Running"), ("b", "Pending")])
        self.assertEqual(changes[0].pod.metadata.resourceVersion, "3")

    @defer.inlineCallbacks
    def test_watch_removals(self):
        """A pod deleted, or moved off this node, is sent once more marked as removed."""
        self.feed.put(pod("a"))
        self.feed.put(pod("b"))
        _service, client = self.started()
        watch = client.watch()
        self.addCleanup(watch.cancel)
        yield watch.take(2)
        self.feed.delete("a")
        self.feed.put(pod("b", "node-b"))
        deleted, moved = yield watch.take(2)
        self.assertEqual(deleted.pod.metadata.annotations[REMOVED_ANNOTATION], "Deleted")
        self.assertTrue(deleted.pod.metadata.HasField("deletionTimestamp"))
        self.assertEqual(deleted.pod.metadata.resourceVersion, "3")
        self.assertEqual(deleted.pod.metadata.labels["app"], "a")
        self.assertEqual(moved.pod.metadata.annotations[REMOVED_ANNOTATION], "NodeChanged")
        self.assertEqual(moved.pod.spec.nodeName, "node-a")  # the last state on this node
        listed = yield client.list()
        self.assertEqual(list(listed.pods), [])
        code = yield client.get("uid-a").addErrback(code_of)
        self.assertEqual(code, grpc.StatusCode.NOT_FOUND)

    def test_socket_and_directory_modes(self):
        """The socket is 0600 and the directory it made 0750 (spec 5.1)."""
        self.start()
        self.assertEqual(stat.S_IMODE(os.stat(self.dir).st_mode), 0o750)
        mode = os.lstat(self.path).st_mode
        self.assertTrue(stat.S_ISSOCK(mode))
        self.assertEqual(stat.S_IMODE(mode), 0o600)

    @defer.inlineCallbacks
    def test_stale_socket_replaced(self):
        """A socket file nobody answers on (a crash's leftover) is replaced."""
        os.makedirs(self.dir)
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(self.path)
        stale.close()
        self.feed.put(pod("a"))
        _service, client = self.started()
        response = yield client.list()
        self.assertEqual(len(response.pods), 1)

    def test_live_socket_refused(self):
        """A socket another live process serves is a one-line startup error."""
        os.makedirs(self.dir)
        live = socket.socket(socket.AF_UNIX)
        self.addCleanup(live.close)
        live.bind(self.path)
        live.listen(1)
        e = self.assertRaises(StartupError, self.start)
        self.assertIn("served by another running process", str(e))
        self.assertTrue(os.path.exists(self.path))

    def test_not_a_socket_refused(self):
        """A regular file at the socket path is not removed: startup fails instead."""
        os.makedirs(self.dir)
        with open(self.path, "w") as f:
            f.write("precious")
        e = self.assertRaises(StartupError, self.start)
        self.assertIn("is not a socket", str(e))

    def test_windows_refused(self):
        """On Windows the pods socket is refused with a clear error."""
        self.patch(sys, "platform", "win32")
        e = self.assertRaises(StartupError, self.start)
        self.assertIn("not supported on Windows", str(e))

    @defer.inlineCallbacks
    def test_hundred_watchers_cancelled(self):
        """100 concurrent watchers all hear a change; cancelled, none leaves anything behind."""
        self.feed.put(pod("a"))
        service, client = self.started()
        baseline = threading.active_count()
        watches = [client.watch() for _ in range(100)]
        yield defer.gatherResults([w.next() for w in watches])
        self.assertEqual(len(service.pods.watchers), 100)
        self.feed.put(pod("a", phase="Running"))
        changes = yield defer.gatherResults([w.next() for w in watches])
        self.assertEqual({c.pod.status.phase for c in changes}, {"Running"})
        self.assertLessEqual(threading.active_count(), baseline + podservice.WORKERS)
        for w in watches:
            w.cancel()
        yield eventually(lambda: not service.pods.watchers and _watch_threads() == 0)
        # Changes after the cancellations go nowhere.
        self.feed.put(pod("a", phase="Succeeded"))
        self.assertEqual(service.pods.watchers, {})

    @defer.inlineCallbacks
    def test_stop_with_watchers(self):
        """Stopping with watchers attached ends them and finishes within seconds."""
        self.feed.put(pod("a"))
        service, client = self.started()
        before = {t.name for t in threading.enumerate()}
        watches = [client.watch() for _ in range(10)]
        yield defer.gatherResults([w.next() for w in watches])
        started = time.monotonic()
        yield service.stopService()
        self.assertLess(time.monotonic() - started, podservice.STOP_TIMEOUT)
        codes = yield defer.gatherResults([w.next().addErrback(code_of) for w in watches])
        self.assertEqual(set(codes), {grpc.StatusCode.UNAVAILABLE})
        self.assertFalse(os.path.exists(self.path))
        yield eventually(lambda: not any(t.name.startswith("pods-grpc") and t.name not in before
                                         for t in threading.enumerate()))
