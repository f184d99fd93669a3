"""
The CustomResourceDefinition kind in Protobuf on a real server (issue 31): created with
a Protobuf body, read back with GET, LIST and a watch in Protobuf and decoded with the
generated classes, equal to the JSON answers; the custom resources it defines still have
no Protobuf (406, or JSON when the client accepts it).
"""

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

from platformd.codecs.protobufcodec import MAGIC, PROTOBUF, ProtobufCodec, read_watch_frames
from platformd.protos.platform.apiextensions_apiserver.pkg.apis.apiextensions.v1 import (
    generated_pb2 as apiextensions,
)
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from tests.apiextensions.test_crd import CRDS, definition
from tests.e2e.harness import ServerTestCase, open_watch

codec = ProtobufCodec()
#: A schema using every form the Protobuf message spells differently from JSON.
SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object",
             "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "big",
                                           "fieldPath": ".size"}],
             "properties": {
                 "size": {"type": "integer", "default": 3, "minimum": 0, "maximum": 10},
                 "ratio": {"type": "number", "default": 0.5, "nullable": True},
                 "port": {"x-kubernetes-int-or-string": True,
                          "anyOf": [{"type": "integer"}, {"type": "string"}]},
                 "labels": {"type": "object", "additionalProperties": {"type": "string"},
                            "default": {"team": "a"}},
                 "opaque": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                 "tags": {"type": "array", "items": {"type": "string",
                                                     "enum": ["a", "b"]},
                          "x-kubernetes-list-type": "set"}}},
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def rich(plural="widgets"):
    crd = definition(plural=plural, kind=plural.capitalize()[:-1], short_names=(plural[:3],))
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = SCHEMA
    return crd


def message_of(body):
    """The CustomResourceDefinition message in a Protobuf body, by the generated classes."""
    unknown = runtime.Unknown.FromString(body[len(MAGIC):])
    return unknown, apiextensions.CustomResourceDefinition.FromString(unknown.raw)


class DefinitionProtobufTests(ServerTestCase):

    def get(self, path, accept=PROTOBUF):
        return self.client.get(path, headers={"Accept": accept})

    def create(self, crd):
        return self.client.post(CRDS, codec.encode(crd), content_type=PROTOBUF,
                                headers={"Accept": PROTOBUF})

    @inlineCallbacks
    def established(self, name, timeout=10.0):
        """The definition once the controller has established it (JSON)."""
        deadline = reactor.seconds() + timeout
        while True:
            crd = (yield self.get(f"{CRDS}/{name}", "application/json")).json()
            conditions = {c["type"]: c["status"] for c in
                          crd.get("status", {}).get("conditions", ())}
            if conditions.get("Established") == "True":
                return crd
            self.assertLess(reactor.seconds(), deadline, f"{name} never established")
            yield deferLater(reactor, 0.02, lambda: None)

    @inlineCallbacks
    def test_create_and_get(self):
        """A definition POSTed in Protobuf is created from it; GET in Protobuf is the
        JSON answer, schema included, and the generated class reads its fields."""
        r = yield self.create(rich())
        self.assertEqual((r.code, r.header("Content-Type")), (201, PROTOBUF), r.body)
        unknown, created = message_of(r.body)
        self.assertEqual((unknown.typeMeta.apiVersion, unknown.typeMeta.kind),
                         ("apiextensions.platform.io/v1", "CustomResourceDefinition"))
        self.assertEqual(created.metadata.name, "widgets.example.com")
        self.assertEqual(list(created.status.storedVersions), ["v1"])
        as_json = yield self.established("widgets.example.com")
        self.assertEqual(as_json["spec"]["versions"][0]["schema"]["openAPIV3Schema"], SCHEMA)
        r = yield self.get(f"{CRDS}/widgets.example.com")
        self.assertEqual((r.code, r.header("Content-Type")), (200, PROTOBUF))
        self.assertEqual(codec.decode(r.body), as_json)
        _, got = message_of(r.body)
        spec = got.spec.versions[0].schema.openAPIV3Schema.properties["spec"]
        self.assertEqual(spec.properties["size"].default.raw, b"3")
        self.assertEqual(spec.properties["labels"].default.raw, b'{"team":"a"}')
        self.assertTrue(spec.properties["ratio"].nullable)
        self.assertTrue(spec.properties["port"].xKubernetesIntOrString)
        self.assertTrue(spec.properties["opaque"].xKubernetesPreserveUnknownFields)
        self.assertEqual(spec.properties["labels"].additionalProperties.schema.type, "string")
        self.assertEqual(spec.properties["tags"].items.schema.type, "string")
        self.assertEqual(spec.xKubernetesValidations[0].rule, "self.size <= 10")
        self.assertEqual({c.type: c.status for c in got.status.conditions},
                         {"NamesAccepted": "True", "Established": "True"})
        self.assertEqual(got.status.acceptedNames.kind, "Widget")

    @inlineCallbacks
    def test_list(self):
        """A LIST in Protobuf is the CustomResourceDefinitionList of the JSON answer."""
        for plural in ("widgets", "gadgets"):
            r = yield self.create(rich(plural))
            self.assertEqual(r.code, 201, r.body)
        yield self.established("widgets.example.com")
        yield self.established("gadgets.example.com")
        r = yield self.get(CRDS)
        value = codec.decode(r.body)
        self.assertEqual(value["kind"], "CustomResourceDefinitionList")
        as_json = (yield self.get(CRDS, "application/json")).json()
        self.assertEqual(value["items"], as_json["items"])
        self.assertEqual([i["metadata"]["name"] for i in value["items"]],
                         ["gadgets.example.com", "widgets.example.com"])

    @inlineCallbacks
    def test_watch(self):
        """A Protobuf watch of the definitions frames each event's object in its
        envelope: the ADDED one is the created definition."""
        response, reader = yield open_watch(self.client, f"{CRDS}?watch=1&timeoutSeconds=2",
                                            accept=PROTOBUF, raw=True)
        self.assertEqual(response.headers.getRawHeaders("Content-Type"),
                         [PROTOBUF + ";stream=watch"])
        r = yield self.create(rich())
        created = codec.decode(r.body)
        events = read_watch_frames((yield reader.finished))
        self.assertEqual(events[0].type, "ADDED")
        self.assertEqual(codec.decode(events[0].object.raw), created)
        for event in events:
            _, message = message_of(event.object.raw)
            self.assertEqual(message.metadata.name, "widgets.example.com")

    @inlineCallbacks
    def test_custom_resources_have_none(self):
        """The objects a definition defines are not served in Protobuf: 406 when it alone
        is accepted, JSON when JSON is accepted too, 415 for a Protobuf body."""
        yield self.create(rich())
        yield self.established("widgets.example.com")
        path = "/apis/example.com/v1/namespaces/default/widgets"
        r = yield self.client.post(path, {"metadata": {"name": "a"}, "spec": {"size": 1}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"]["size"], 1)
        self.assertEqual((yield self.get(f"{path}/a")).code, 406)
        r = yield self.get(f"{path}/a", f"{PROTOBUF}, application/json")
        self.assertEqual(r.header("Content-Type"), "application/json")
        r = yield self.client.post(path, MAGIC, content_type=PROTOBUF)
        self.assertEqual(r.code, 415, r.body)
