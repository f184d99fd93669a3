"""
Protobuf end to end (spec 4.2.1, 4.2.4): bodies both ways, lists, watch frames, the
wrong-magic refusal, fallback to JSON, and the metadata-only view.
"""

from twisted.internet.defer import inlineCallbacks

from platformd.codecs.protobufcodec import (
    KUBERNETES_PROTOBUF, PROTOBUF, ProtobufCodec, read_watch_frames,
)
from tests.e2e.harness import ServerTestCase, open_watch
from tests.e2e.test_encodings import RB, binding

RBAC = "rbac.authorization.platform.io/v1"
META = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.platform.io;v=v1"
META_LIST = f"{PROTOBUF};as=PartialObjectMetadataList;g=meta.platform.io;v=v1"
codec = ProtobufCodec()


def protobuf_binding(name):
    return codec.encode(dict(binding(name), kind="RoleBinding", apiVersion=RBAC))


class ProtobufTests(ServerTestCase):

    def get(self, path, accept):
        return self.client.get(path, headers={"Accept": accept})

    def post(self, name):
        return self.client.post(RB, protobuf_binding(name), content_type=PROTOBUF,
                                headers={"Accept": PROTOBUF})

    @inlineCallbacks
    def test_create_and_get(self):
        """A RoleBinding POSTed in Protobuf comes back in Protobuf from create and GET."""
        r = yield self.post("rb")
        self.assertEqual((r.code, r.header("Content-Type")), (201, PROTOBUF))
        created = codec.decode(r.body)
        self.assertEqual((created["kind"], created["metadata"]["name"]), ("RoleBinding", "rb"))
        r = yield self.get(f"{RB}/rb", PROTOBUF)
        got = codec.decode(r.body)
        self.assertEqual(got["roleRef"], {"apiGroup": "rbac.authorization.platform.io",
                                          "kind": "ClusterRole", "name": "view"})
        self.assertEqual(got["metadata"]["uid"], created["metadata"]["uid"])
        json_form = (yield self.get(f"{RB}/rb", "application/json")).json()
        self.assertEqual(got, json_form)

    @inlineCallbacks
    def test_list(self):
        """A LIST in Protobuf is the kind's List with every item, as in JSON."""
        for name in ("a", "b", "c"):
            yield self.post(name)
        r = yield self.get(RB, PROTOBUF)
        value = codec.decode(r.body)
        self.assertEqual(value["kind"], "RoleBindingList")
        self.assertEqual([i["metadata"]["name"] for i in value["items"]], ["a", "b", "c"])
        json_form = (yield self.get(RB, "application/json")).json()
        self.assertEqual(value["items"], json_form["items"])
        self.assertEqual(value["metadata"]["resourceVersion"],
                         json_form["metadata"]["resourceVersion"])

    @inlineCallbacks
    def test_watch_frames(self):
        """A Protobuf watch is length-prefixed WatchEvents, each object in its envelope."""
        yield self.post("first")
        response, reader = yield open_watch(self.client, f"{RB}?watch=1&timeoutSeconds=1",
                                            accept=PROTOBUF, raw=True)
        self.assertEqual(response.headers.getRawHeaders("Content-Type"),
                         [PROTOBUF + ";stream=watch"])
        yield self.post("second")
        data = yield reader.finished
        events = read_watch_frames(data)
        self.assertEqual([(e.type, codec.decode(e.object.raw)["metadata"]["name"])
                          for e in events], [("ADDED", "first"), ("ADDED", "second")])
        self.assertEqual(sum(4 + len(e.SerializeToString()) for e in events), len(data))

    @inlineCallbacks
    def test_upstream_name(self):
        """Upstream's name of the encoding gets the same bytes, under that name: a watch,
        and a discovery document."""
        yield self.post("first")
        watches = []
        for accept in (PROTOBUF, KUBERNETES_PROTOBUF):
            watches.append((yield open_watch(self.client, f"{RB}?watch=1&timeoutSeconds=1",
                                             accept=accept, raw=True)))
        yield self.post("second")
        (own, own_reader), (alias, alias_reader) = watches
        self.assertEqual(alias.headers.getRawHeaders("Content-Type"),
                         [KUBERNETES_PROTOBUF + ";stream=watch"])
        self.assertEqual((yield alias_reader.finished), (yield own_reader.finished))
        r = yield self.get("/api", KUBERNETES_PROTOBUF)
        self.assertEqual((r.code, r.header("Content-Type")), (200, KUBERNETES_PROTOBUF))
        self.assertEqual(r.body, (yield self.get("/api", PROTOBUF)).body)

    @inlineCallbacks
    def test_wrong_magic(self):
        """A body with the wrong magic is 400 BadRequest."""
        body = b"k8s\x01" + protobuf_binding("bad")[4:]
        r = yield self.client.post(RB, body, content_type=PROTOBUF)
        self.assertEqual(r.code, 400)
        self.assertEqual((r.json()["kind"], r.json()["reason"]), ("Status", "BadRequest"))
        r = yield self.client.post(RB, body, content_type=PROTOBUF,
                                   headers={"Accept": PROTOBUF})
        self.assertEqual(codec.decode(r.body)["reason"], "BadRequest")

    @inlineCallbacks
    def test_accept_list_with_json_fallback(self):
        """Accept: Protobuf, then JSON, answers in Protobuf for a built-in kind."""
        yield self.post("rb")
        r = yield self.get(f"{RB}/rb", f"{PROTOBUF}, application/json")
        self.assertEqual(r.header("Content-Type"), PROTOBUF)
        self.assertEqual(codec.decode(r.body)["metadata"]["name"], "rb")

    @inlineCallbacks
    def test_partial_object_metadata(self):
        """The metadata-only views are served in Protobuf, for get and list."""
        yield self.post("rb")
        r = yield self.get(f"{RB}/rb", META)
        self.assertEqual(r.header("Content-Type"), META)
        value = codec.decode(r.body)
        self.assertEqual((value["kind"], value["metadata"]["name"]),
                         ("PartialObjectMetadata", "rb"))
        self.assertNotIn("roleRef", value)
        r = yield self.get(RB, META_LIST)
        value = codec.decode(r.body)
        self.assertEqual(value["kind"], "PartialObjectMetadataList")
        self.assertEqual([i["metadata"]["name"] for i in value["items"]], ["rb"])

    @inlineCallbacks
    def test_table_falls_back(self):
        """Table is never Protobuf: with JSON listed next, the answer is JSON."""
        r = yield self.get(RB, f"{PROTOBUF};as=Table;g=meta.platform.io;v=v1, application/json")
        self.assertEqual(r.header("Content-Type"), "application/json")
