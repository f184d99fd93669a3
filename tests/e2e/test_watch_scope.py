"""
A watch sends nothing outside its scope (issue 11.1): namespace, label, field and shard
selectors hold on every path a watch can take — live, replay from a resourceVersion,
initial events (with and without a version), a named watch, resumption after a dropped
connection — in JSON, CBOR and Protobuf alike.

The scenario is the reported leak: namespace ``a`` holds RoleBindings whose changes and
deletions (one by one, and by deleting the namespace) happen after a watcher of
namespace ``b`` took its resourceVersion; ``b`` then gets one binding, ``x``, with the
same name and labels as one in ``a``.  Every watcher of ``b`` must see ``b/x`` and
nothing of ``a``; a watcher of every namespace sees both (so the test can tell
filtering from silence).
"""

from __future__ import annotations

import io
import json
import struct

import cbor2
from twisted.internet.defer import Deferred, inlineCallbacks, returnValue
from twisted.internet.protocol import Protocol
from twisted.web.http_headers import Headers

from platformd.codecs.protobufcodec import ProtobufCodec
from platformd.protos.platform.apimachinery.pkg.apis.meta.v1 import generated_pb2 as meta_pb2
from tests.e2e.harness import ServerTestCase
from tests.e2e.test_watch_clients import wait_until

GROUP = "rbac.authorization.platform.io"
ALL = f"/apis/{GROUP}/v1/rolebindings"
JSON, CBOR, PROTOBUF = "application/json", "application/cbor", "application/vnd.platform.protobuf"
EVERY_SHARD = "shardRange(object.metadata.namespace,'0x0000000000000000','0x10000000000000000')"


def rolebindings(namespace: str) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{namespace}/rolebindings"


def binding(name: str, app: str = "web") -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "labels": {"app": app}},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "jane"}]}


def _json_events(data: bytes) -> tuple:
    lines = data.split(b"\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()], \
        len(data) - len(lines[-1])


def _cbor_events(data: bytes) -> tuple:
    events, used = [], 0
    stream = io.BytesIO(data)
    while used < len(data):
        try:
            events.append(cbor2.CBORDecoder(stream).decode())
        except (cbor2.CBORDecodeEOF, EOFError):
            break
        used = stream.tell()
    return events, used


_codec = ProtobufCodec()


def _protobuf_events(data: bytes) -> tuple:
    events, used = [], 0
    while len(data) - used >= 4:
        (size,) = struct.unpack(">I", data[used:used + 4])
        if len(data) - used - 4 < size:
            break
        message = meta_pb2.WatchEvent()
        message.ParseFromString(data[used + 4:used + 4 + size])
        events.append({"type": message.type, "object": _codec.decode(message.object.raw)})
        used += 4 + size
    return events, used


DECODERS = {JSON: _json_events, CBOR: _cbor_events, PROTOBUF: _protobuf_events}


class EventReader(Protocol):
    """A watch body decoded event by event, in any of the three watch encodings."""

    def __init__(self, media: str):
        self.decode = DECODERS[media]
        self.events: list = []
        self._data = b""
        self.finished = Deferred()

    def dataReceived(self, data: bytes) -> None:
        self._data += data
        events, used = self.decode(self._data)
        self.events += events
        self._data = self._data[used:]

    def connectionLost(self, reason) -> None:
        self.finished.callback(self.events)

    def seen(self) -> list:
        """(type, namespace, name) of every event but bookmarks."""
        out = []
        for event in self.events:
            meta = event["object"].get("metadata") or {}
            if event["type"] != "BOOKMARK":
                out.append((event["type"], meta.get("namespace"), meta.get("name")))
        return out

    def drop(self) -> None:
        """Close the connection, as a client whose network failed."""
        self.transport.stopProducing()


class WatchScopeTests(ServerTestCase):
    server_args = ("--feature-gates", "CBORServingAndStorage=true,ShardedListAndWatch=true")

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        for namespace in ("a", "b"):
            yield self.create_namespace(namespace)
        for name in ("x", "y", "z"):
            yield self.create("a", binding(name))

    @inlineCallbacks
    def create(self, namespace: str, body: dict):
        r = yield self.client.post(rolebindings(namespace), body)
        self.assertEqual(r.code, 201, r.body)
        returnValue(r.json())

    @inlineCallbacks
    def list_rv(self, path: str) -> str:
        r = yield self.client.get(path)
        self.assertEqual(r.code, 200, r.body)
        returnValue(r.json()["metadata"]["resourceVersion"])

    @inlineCallbacks
    def watch(self, path: str, media: str = JSON):
        headers = Headers({"Accept": [media]})
        response = yield self.client.agent.request(
            b"GET", (self.client.base + path).encode(), headers, None)
        self.assertEqual(response.code, 200)
        reader = EventReader(media)
        response.deliverBody(reader)
        self.addCleanup(lambda: reader.transport and reader.transport.stopProducing())
        returnValue(reader)

    @inlineCallbacks
    def change_namespace_a(self):
        """Modify, delete and add in ``a``, then delete ``a`` with what is left in it."""
        r = yield self.client.patch(f"{rolebindings('a')}/x", {"metadata": {"labels": {
            "app": "web", "tier": "1"}}})
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.delete(f"{rolebindings('a')}/y")
        self.assertEqual(r.code, 200, r.body)
        yield self.create("a", binding("w"))
        r = yield self.client.delete("/api/v1/namespaces/a")
        self.assertEqual(r.code, 200, r.body)
        cache = self.server.cache.for_gvr(("", "v1", "namespaces"))
        yield wait_until(lambda: cache.get("/registry/namespaces/a") is None, 10,
                         "namespace a to be removed")

    @inlineCallbacks
    def assert_only_b(self, reader, expected=(("ADDED", "b", "x"),)):
        """``reader`` sees exactly ``expected`` once ``b/x`` (the sentinel) has come."""
        yield wait_until(lambda: ("ADDED", "b", "x") in reader.seen(), 10, "b/x on the watch")
        self.assertEqual(reader.seen(), list(expected))

    @inlineCallbacks
    def replay_case(self, query: str, path: str = None):
        """Watchers of ``b`` from a version before ``a``'s changes, in each encoding."""
        rv = yield self.list_rv(rolebindings("b"))
        yield self.change_namespace_a()
        yield self.create("b", binding("x"))
        base = path or rolebindings("b")
        for media in (JSON, CBOR, PROTOBUF):
            reader = yield self.watch(f"{base}?watch=1&resourceVersion={rv}{query}", media)
            yield self.assert_only_b(reader)

    def test_replay(self):
        """A watch of b from an older version replays only b's history."""
        return self.replay_case("")

    def test_replay_label_selector(self):
        """With a labelSelector that a's objects match too, still only b's."""
        return self.replay_case("&labelSelector=app%3Dweb")

    def test_replay_field_selector(self):
        """fieldSelector=metadata.name=x does not bring a/x."""
        return self.replay_case("&fieldSelector=metadata.name%3Dx")

    def test_replay_named_watch(self):
        """A watch on b/x's own path does not bring a/x."""
        return self.replay_case("", f"{rolebindings('b')}/x")

    def test_replay_shard_selector(self):
        """A shard selector covering every namespace keeps the namespace boundary."""
        return self.replay_case(f"&shardSelector={EVERY_SHARD}")

    @inlineCallbacks
    def test_replay_every_namespace(self):
        """The control: a watch of every namespace does replay a's events."""
        rv = yield self.list_rv(ALL)
        yield self.change_namespace_a()
        yield self.create("b", binding("x"))
        reader = yield self.watch(f"{ALL}?watch=1&resourceVersion={rv}")
        yield wait_until(lambda: ("ADDED", "b", "x") in reader.seen(), 10, "b/x")
        seen = reader.seen()
        self.assertIn(("DELETED", "a", "y"), seen)
        self.assertIn(("MODIFIED", "a", "x"), seen)
        self.assertEqual({s[1] for s in seen}, {"a", "b"})

    @inlineCallbacks
    def test_live(self):
        """Watchers of b opened before a's changes hear only b, with and without
        selectors, in every encoding."""
        rv = yield self.list_rv(rolebindings("b"))
        readers = []
        for media in (JSON, CBOR, PROTOBUF):
            for query in ("", "&labelSelector=app%3Dweb", "&fieldSelector=metadata.name%3Dx",
                          f"&shardSelector={EVERY_SHARD}"):
                readers.append((yield self.watch(
                    f"{rolebindings('b')}?watch=1&resourceVersion={rv}{query}", media)))
        yield self.change_namespace_a()
        yield self.create("b", binding("x"))
        for reader in readers:
            yield self.assert_only_b(reader)

    @inlineCallbacks
    def test_initial_events(self):
        """sendInitialEvents (from a version and without one) and a watch without a
        version start with b's state only, then go on with b's changes only."""
        rv = yield self.list_rv(rolebindings("b"))
        yield self.create("b", binding("x"))
        initial = "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" \
                  "&allowWatchBookmarks=true"
        readers = []
        for media in (JSON, CBOR, PROTOBUF):
            for query in (f"{initial}&resourceVersion={rv}", initial, "",
                          "&labelSelector=app%3Dweb", "&fieldSelector=metadata.name%3Dx"):
                readers.append((yield self.watch(f"{rolebindings('b')}?watch=1{query}", media)))
        for reader in readers:
            yield self.assert_only_b(reader)
        yield self.change_namespace_a()
        r = yield self.client.patch(f"{rolebindings('b')}/x", {"metadata": {"labels": {
            "app": "web", "tier": "2"}}})
        self.assertEqual(r.code, 200, r.body)
        for reader in readers:
            yield wait_until(lambda: len(reader.seen()) == 2, 10, "b/x's change")
            self.assertEqual(reader.seen(), [("ADDED", "b", "x"), ("MODIFIED", "b", "x")])

    @inlineCallbacks
    def test_resumed_after_dropped_connection(self):
        """A client whose connection dropped resumes from the last version it saw and
        gets b's later events only."""
        rv = yield self.list_rv(rolebindings("b"))
        first = yield self.watch(f"{rolebindings('b')}?watch=1&resourceVersion={rv}")
        yield self.create("b", binding("first"))
        yield wait_until(lambda: first.seen(), 10, "b/first")
        last = first.events[-1]["object"]["metadata"]["resourceVersion"]
        first.drop()
        yield first.finished
        yield self.change_namespace_a()
        yield self.create("b", binding("x"))
        for media in (JSON, CBOR, PROTOBUF):
            resumed = yield self.watch(
                f"{rolebindings('b')}?watch=1&resourceVersion={last}&allowWatchBookmarks=true",
                media)
            yield self.assert_only_b(resumed)
