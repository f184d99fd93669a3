"""
The Protobuf codec: envelope bytes, round trips of every built-in kind and its List,
watch frames, and the negotiation fallback for kinds without a message.
"""

import copy

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import gopresence
from platformd.codecs.interface import CodecError
from platformd.codecs.jsoncodec import JSONCodec
from platformd.codecs.negotiation import Negotiator
from platformd.codecs.protobufcodec import (
    MAGIC, PROTOBUF, ProtobufCodec, read_watch_frames, watch_frame,
)
from platformd.codecs.yamlcodec import YAMLCodec
from platformd.errors import StatusError
from platformd.protos.platform.api.core.v1 import generated_pb2 as core
from platformd.protos.platform.api.rbac.v1 import generated_pb2 as rbac
from platformd.protos.platform.apimachinery.pkg.apis.meta.v1 import generated_pb2 as meta
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from platformd.registry.catalog import builtin

RBAC = "rbac.authorization.platform.io/v1"
CREATED = "2024-05-06T07:08:09Z"
CREATED_SECONDS = 1714979289


def _meta(name, namespace=None):
    value = {"name": name, "uid": "0b9c", "resourceVersion": "42",
             "creationTimestamp": CREATED, "labels": {"z": "1", "a": "2"},
             "annotations": {"note": "x"}, "finalizers": ["f"]}
    if namespace:
        value["namespace"] = namespace
    return value


#: One object of every built-in kind, in the server's plain (JSON) shape.
OBJECTS = [
    {"kind": "Namespace", "apiVersion": "v1", "metadata": _meta("ns"),
     "spec": {"finalizers": ["kubernetes"]},
     "status": {"phase": "Active", "conditions": [
         {"type": "T", "status": "True", "lastTransitionTime": CREATED}]}},
    {"kind": "Pod", "apiVersion": "v1", "metadata": _meta("p", "default"),
     "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30, "containers": [
         {"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}],
          "resources": {"limits": {"cpu": "100m"}}}]},
     "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "startTime": CREATED}},
    {"kind": "ConfigMap", "apiVersion": "v1", "metadata": _meta("cm", "default"),
     "data": {"k": "v", "a": "b"}, "binaryData": {"bin": "AAEC"}, "immutable": False},
    {"kind": "Secret", "apiVersion": "v1", "metadata": _meta("s", "default"),
     "data": {"password": "aHVudGVyMg=="}, "type": "Opaque"},
    {"kind": "ServiceAccount", "apiVersion": "v1", "metadata": _meta("sa", "default"),
     "secrets": [{"name": "tok", "kind": "Secret"}], "imagePullSecrets": [{"name": "pull"}],
     "automountServiceAccountToken": True},
    {"kind": "Role", "apiVersion": RBAC, "metadata": _meta("r", "default"),
     "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]},
    {"kind": "ClusterRole", "apiVersion": RBAC, "metadata": _meta("cr"),
     "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
     "aggregationRule": {"clusterRoleSelectors": [
         {"matchLabels": {"agg": "true"},
          "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}},
    {"kind": "RoleBinding", "apiVersion": RBAC, "metadata": _meta("rb", "default"),
     "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                 "name": "view"},
     "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.platform.io",
                   "name": "alice"},
                  {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"}]},
    {"kind": "ClusterRoleBinding", "apiVersion": RBAC, "metadata": _meta("crb"),
     "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                 "name": "admin"},
     "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.platform.io",
                   "name": "devs"}]},
]

_MODULES = {"v1": core, RBAC: rbac}


def _proto_json(value, top=True):
    """
    ``value`` in the protobuf library's JSON mapping: times and quantities as messages,
    no TypeMeta on the object or its list items (the envelope carries it).
    """
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if top and key in ("kind", "apiVersion"):
                continue
            if key in ("creationTimestamp", "lastTransitionTime", "startTime"):
                out[key] = {"seconds": CREATED_SECONDS}
            elif key in ("limits", "requests"):
                out[key] = {name: {"string": q} for name, q in item.items()}
            elif key == "items" and top:
                out[key] = [_proto_json(element) for element in item]
            else:
                out[key] = _proto_json(item, False)
        return out
    if isinstance(value, list):
        return [_proto_json(item, False) for item in value]
    return value


_ZEROS = {FieldDescriptor.CPPTYPE_STRING: "", FieldDescriptor.CPPTYPE_BOOL: False}


def _upstream_zeros(message):
    """
    Upstream's Go marshallers also write every field ``gopresence.ALWAYS`` lists when it
    is zero, and a time's nanos (always 0): add them to a message the library built, by
    walking the finished message (independently of ``protoconvert``).
    """
    name = message.DESCRIPTOR.full_name
    if name == "platform.apimachinery.pkg.apis.meta.v1.Time":
        if message.ListFields():
            message.nanos = 0
        return
    for field_name, _omitted in gopresence.fields(name):
        if not message.HasField(field_name):
            field = message.DESCRIPTOR.fields_by_name[field_name]
            if field.message_type is None:
                setattr(message, field_name, _ZEROS.get(field.cpp_type, 0))
            else:
                getattr(message, field_name).SetInParent()
    for field, item in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for element in item.values():
                    _upstream_zeros(element)
        elif field.is_repeated:
            for element in item:
                _upstream_zeros(element)
        else:
            _upstream_zeros(item)


def _library_envelope(value, message_class):
    """
    The envelope built by the protobuf library from the same .proto, plus the zero
    fields upstream writes (``_upstream_zeros``).
    """
    message = json_format.ParseDict(_proto_json(value), message_class())
    _upstream_zeros(message)
    unknown = runtime.Unknown(
        typeMeta=runtime.TypeMeta(apiVersion=value["apiVersion"], kind=value["kind"]),
        raw=message.SerializeToString(deterministic=True), contentEncoding="", contentType="")
    return MAGIC + unknown.SerializeToString(deterministic=True)


def _list_of(obj):
    return {"kind": obj["kind"] + "List", "apiVersion": obj["apiVersion"],
            "metadata": {"resourceVersion": "42"},
            "items": [obj, copy.deepcopy(obj)]}


class EnvelopeTests(SynchronousTestCase):
    def setUp(self):
        self.codec = ProtobufCodec()

    def test_every_kind_round_trips(self):
        """Every built-in kind and its List decodes back to the same plain object."""
        for obj in OBJECTS:
            for value in (obj, _list_of(obj)):
                self.assertEqual(self.codec.decode(self.codec.encode(value)), value)

    def test_bytes_equal_the_protobuf_library(self):
        """
        The codec's bytes equal those the protobuf library makes from the same .proto
        once upstream's always-written zero fields are added to its message.
        """
        for obj in OBJECTS:
            module = _MODULES[obj["apiVersion"]]
            for value in (obj, _list_of(obj)):
                expected = _library_envelope(value, getattr(module, value["kind"]))
                self.assertEqual(self.codec.encode(value), expected, value["kind"])

    def test_envelope_layout(self):
        """Magic, then Unknown{typeMeta{apiVersion, kind}, raw, "", ""} in field order."""
        obj = OBJECTS[7]
        data = self.codec.encode(obj)
        type_meta = b"\x0a\x21" + RBAC.encode() + b"\x12\x0bRoleBinding"
        self.assertTrue(data.startswith(b"k8s\x00\x0a" + bytes((len(type_meta),)) + type_meta
                                        + b"\x12"))
        self.assertTrue(data.endswith(b"\x1a\x00\x22\x00"))

    def test_every_catalog_kind_is_served(self):
        """Each kind the server serves has a message, and so does its List (a review has
        none)."""
        for kind in builtin().kinds:
            self.assertTrue(self.codec.serves(kind.api_version, kind.kind), kind.kind)
            self.assertEqual(self.codec.serves(kind.api_version, kind.list_kind), kind.stored,
                             kind.kind)

    def test_list_pieces_equal_whole_list(self):
        """A list written item by item from cached item bytes equals the whole list's encoding."""
        obj = OBJECTS[1]
        value = _list_of(obj)
        items = [self.codec.item_bytes(o) for o in value["items"]]
        pieces = list(self.codec.list_pieces("v1", "PodList", value["metadata"], items))
        self.assertEqual(b"".join(pieces), self.codec.encode(value))
        self.assertEqual(len(pieces), 4)

    def test_wrong_or_missing_magic_refused(self):
        """A hand-built envelope with a wrong magic, or none, is refused."""
        good = self.codec.encode(OBJECTS[7])
        for data in (b"k8s\x01" + good[4:], good[4:], b"", b"k8s"):
            self.assertRaises(CodecError, self.codec.decode, data)

    def test_malformed_or_unknown_kind_refused(self):
        """Garbage after the magic, or a kind without a message, is a CodecError."""
        self.assertRaises(CodecError, self.codec.decode, MAGIC + b"\xff\xff\xff")
        unknown = runtime.Unknown(typeMeta=runtime.TypeMeta(apiVersion="example.io/v1",
                                                            kind="Widget"), raw=b"")
        self.assertRaises(CodecError, self.codec.decode, MAGIC + unknown.SerializeToString())
        self.assertRaises(CodecError, self.codec.encode,
                          {"kind": "Widget", "apiVersion": "example.io/v1"})

    def test_status(self):
        """A Status (any group version) encodes as meta.v1.Status with its causes."""
        status = StatusError(422, "Invalid", "bad", name="rb", kind="RoleBinding",
                             causes=()).to_status()
        status["details"]["causes"] = [{"reason": "FieldValueRequired", "message": "m",
                                        "field": "roleRef"}]
        data = self.codec.encode(status)
        self.assertEqual(self.codec.decode(data), status)
        self.assertEqual(data, _library_envelope(status, meta.Status))

    def test_partial_object_metadata(self):
        """The metadata-only views have messages in both view groups."""
        for group in ("meta.platform.io/v1", "meta.k8s.io/v1"):
            value = {"kind": "PartialObjectMetadataList", "apiVersion": group,
                     "metadata": {"resourceVersion": "3"},
                     "items": [{"kind": "PartialObjectMetadata", "apiVersion": group,
                                "metadata": _meta("rb", "default")}]}
            self.assertEqual(self.codec.decode(self.codec.encode(value)), value)

    def test_watch_frame(self):
        """A watch frame is a 4-byte big-endian length and a bare WatchEvent."""
        envelope = self.codec.encode(OBJECTS[7])
        frame = watch_frame("ADDED", envelope)
        self.assertEqual(int.from_bytes(frame[:4], "big"), len(frame) - 4)
        expected = meta.WatchEvent(type="ADDED", object=runtime.RawExtension(raw=envelope))
        self.assertEqual(frame[4:], expected.SerializeToString())
        (event,) = read_watch_frames(frame)
        self.assertEqual(self.codec.decode(event.object.raw), OBJECTS[7])


class _Kind:
    """The part of a ResourceType negotiation looks at."""

    def __init__(self, api_version, kind):
        self.api_version, self.kind = api_version, kind


class FallbackTests(SynchronousTestCase):
    def setUp(self):
        self.negotiator = Negotiator([JSONCodec(), YAMLCodec(), ProtobufCodec()])
        self.binding = _Kind(RBAC, "RoleBinding")
        self.widget = _Kind("example.io/v1", "Widget")

    def test_kind_without_message_falls_back(self):
        """Protobuf first and JSON second: Protobuf for built-ins, JSON for a kind without a message."""
        accept = f"{PROTOBUF}, application/json"
        self.assertEqual(self.negotiator.pick(accept, kind=self.binding).codec.media_type,
                         PROTOBUF)
        self.assertEqual(self.negotiator.pick(accept, kind=self.widget).codec.media_type,
                         "application/json")

    def test_only_protobuf_for_kind_without_message(self):
        """Protobuf alone for a kind without a message is 406."""
        error = self.assertRaises(StatusError, self.negotiator.pick, PROTOBUF,
                                  kind=self.widget)
        self.assertEqual(error.code, 406)

    def test_table_never_in_protobuf(self):
        """As upstream, Table is not served in Protobuf; PartialObjectMetadata is."""
        table = f"{PROTOBUF};as=Table;g=meta.platform.io;v=v1, application/json"
        choice = self.negotiator.pick(table, frozenset({"Table"}), self.binding)
        self.assertEqual((choice.codec.media_type, choice.view), ("application/json", None))
        partial = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.platform.io;v=v1"
        choice = self.negotiator.pick(partial, frozenset({"PartialObjectMetadata"}),
                                      self.widget)
        self.assertEqual((choice.codec.media_type, choice.view),
                         (PROTOBUF, "PartialObjectMetadata"))
