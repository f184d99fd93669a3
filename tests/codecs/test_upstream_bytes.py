"""
Upstream's exact Protobuf bytes.  The expected values are built by hand from upstream's
rules (the gogo ``MarshalToSizedBuffer`` functions of ``generated.pb.go``: a non-pointer
field is written even when zero, a pointer only when set, fields in number order, a zero
``metav1.Time`` as nothing, any other as ``{seconds, nanos: 0}``), field by field, with
the Go statement each comes from in mind — not by the protobuf library.  The list cases
are upstream's own golden bytes (``collections_test.go``).  Also: the ``gopresence``
table covers every message and names real fields, and decoding gives upstream's JSON
shape.
"""

import base64

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import gopresence, protoconvert
from platformd.codecs.protobufcodec import MAGIC, ProtobufCodec
from platformd.errors import StatusError
from platformd.protos.platform.api.admissionregistration.v1 import (
    generated_pb2 as admissionregistration,
)
from platformd.protos.platform.api.apidiscovery.v2 import generated_pb2 as apidiscovery
from platformd.protos.platform.api.authentication.v1 import generated_pb2 as authentication
from platformd.protos.platform.apiextensions_apiserver.pkg.apis.apiextensions.v1 import (
    generated_pb2 as apiextensions,
)
from platformd.protos.platform.api.authorization.v1 import generated_pb2 as authorization
from platformd.protos.platform.api.core.v1 import generated_pb2 as core
from platformd.protos.platform.api.coordination.v1 import generated_pb2 as coordination
from platformd.protos.platform.api.events.v1 import generated_pb2 as eventsv1
from platformd.protos.platform.api.discovery.v1 import generated_pb2 as discovery
from platformd.protos.platform.api.policy.v1 import generated_pb2 as policy
from platformd.protos.platform.api.rbac.v1 import generated_pb2 as rbac
from platformd.protos.platform.apimachinery.pkg.api.resource import generated_pb2 as resource
from platformd.protos.platform.apimachinery.pkg.apis.meta.v1 import generated_pb2 as meta
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from platformd.protos.platform.apimachinery.pkg.util.intstr import generated_pb2 as intstr

RBAC = "rbac.authorization.platform.io/v1"
RBAC_GROUP = "rbac.authorization.platform.io"
CREATED = "2024-05-06T07:08:09Z"
CREATED_SECONDS = 1714979289


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # Go's uint64(int) of a negative number
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def v(number, value):
    """A varint field (int32/int64/bool), as ``encodeVarintGenerated`` + tag."""
    return _varint(number << 3) + _varint(int(value))


def s(number, data):
    """A length-delimited field: a string, bytes."""
    if isinstance(data, str):
        data = data.encode()
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def m(number, *parts):
    """An embedded message field holding ``parts``."""
    return s(number, b"".join(parts))


def time(seconds):
    """A non-zero metav1.Time: ``Timestamp{Seconds, Nanos: 0}``, both always written."""
    return v(1, seconds) + v(2, 0)


def object_meta(name="", namespace="", created=None):
    """ObjectMeta with its eight always-written fields, as ``ObjectMeta.MarshalToSizedBuffer``."""
    return (s(1, name) + s(2, "") + s(3, namespace) + s(4, "") + s(5, "") + s(6, "")
            + v(7, 0) + m(8, time(created) if created is not None else b""))


def envelope(api_version, kind, raw):
    """``runtime.Unknown{TypeMeta, Raw, ContentEncoding: "", ContentType: ""}``."""
    return MAGIC + m(1, s(1, api_version), s(2, kind)) + s(2, raw) + s(3, "") + s(4, "")


class HandBuiltTests(SynchronousTestCase):
    def setUp(self):
        self.codec = ProtobufCodec()

    def check(self, obj, raw, decoded=None):
        """``obj`` encodes to exactly ``raw`` in its envelope and decodes back."""
        data = self.codec.encode(obj)
        self.assertEqual(data.hex(" "),
                         envelope(obj.get("apiVersion", ""), obj["kind"], raw).hex(" "))
        self.assertEqual(self.codec.decode(data), obj if decoded is None else decoded)
        # Re-encoding what was decoded gives the same bytes.
        self.assertEqual(self.codec.encode(self.codec.decode(data)), data)

    def test_api_resource_list(self):
        """
        Discovery: APIResource writes name, namespaced, kind, singularName, group,
        version and storageVersionHash even when empty; verbs is a Verbs{items} message.
        """
        obj = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "g.io/v1",
               "resources": [{"name": "widgets", "singularName": "widget", "namespaced": True,
                              "kind": "Widget", "verbs": ["get", "list"],
                              "shortNames": ["wd"], "storageVersionHash": "abc="}]}
        resource = (s(1, "widgets") + v(2, 1) + s(3, "Widget") + m(4, s(1, "get"), s(1, "list"))
                    + s(5, "wd") + s(6, "widget") + s(8, "") + s(9, "") + s(10, "abc="))
        self.check(obj, s(1, "g.io/v1") + m(2, resource))

    def test_aggregated_discovery(self):
        """
        APIGroupDiscoveryList: its ListMeta and each group's ObjectMeta always written
        (structs), the resource's resource/scope/singularResource and the version's
        version/freshness strings always, GroupVersionKind's three strings always (a
        built-in's empty group and version too), verbs one string field each.
        """
        obj = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.platform.io/v2",
               "metadata": {}, "items": [{"metadata": {}, "versions": [{
                   "version": "v1", "resources": [{
                       "resource": "bindings",
                       "responseKind": {"group": "", "version": "", "kind": "Binding"},
                       "scope": "Namespaced", "singularResource": "binding",
                       "verbs": ["create"]}], "freshness": "Current"}]}]}
        resource = (s(1, "bindings") + m(2, s(1, ""), s(2, ""), s(3, "Binding"))
                    + s(3, "Namespaced") + s(4, "binding") + s(5, "create"))
        group = m(1, object_meta()) + m(2, s(1, "v1"), m(2, resource), s(3, "Current"))
        item_type = {"kind": "APIGroupDiscovery", "apiVersion": "apidiscovery.platform.io/v2"}
        self.check(obj, m(1, s(1, ""), s(2, ""), s(3, "")) + m(2, group),
                   decoded={**obj, "items": [{**item_type, **obj["items"][0]}]})

    def test_api_versions_and_groups(self):
        """/api's APIVersions has no apiVersion; APIGroup always writes preferredVersion."""
        versions = {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                    "serverAddress": "10.0.0.1:6443"}]}
        self.check(versions, s(1, "v1") + m(2, s(1, "0.0.0.0/0"), s(2, "10.0.0.1:6443")))
        group = {"kind": "APIGroup", "apiVersion": "v1", "name": "g.io",
                 "versions": [{"groupVersion": "g.io/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": "g.io/v1", "version": "v1"}}
        gv = s(1, "g.io/v1") + s(2, "v1")
        self.check(group, s(1, "g.io") + m(2, gv) + m(3, gv))

    def test_rolebinding(self):
        """Only name, roleRef and one subject: every empty string and 0 is still written."""
        obj = {"kind": "RoleBinding", "apiVersion": RBAC, "metadata": {"name": "rb"},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "User", "name": "alice"}]}
        raw = (m(1, object_meta("rb"))
               + m(2, s(1, "User"), s(2, ""), s(3, "alice"), s(4, ""))
               + m(3, s(1, RBAC_GROUP), s(2, "ClusterRole"), s(3, "view")))
        self.check(obj, raw)
        self.assertTrue(raw.startswith(bytes.fromhex(
            "0a 12 0a 02 72 62 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00")))

    def test_webhook_configuration_embedded_rule(self):
        """
        RuleWithOperations embeds Rule (Go, ``json:",inline"``): operations is field 1,
        the Rule message field 2, always written; in JSON its fields sit beside
        operations.  MutatingWebhook writes name and clientConfig even when empty;
        ServiceReference writes namespace and name; caBundle is bytes.
        """
        group = "admissionregistration.platform.io/v1"
        obj = {"kind": "MutatingWebhookConfiguration", "apiVersion": group,
               "metadata": {"name": "w"},
               "webhooks": [{"name": "a.b.c",
                             "clientConfig": {"service": {"namespace": "ns", "name": "svc",
                                                          "port": 443},
                                              "caBundle": "YWJj"},
                             "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                        "apiVersions": ["v1"], "resources": ["pods"],
                                        "scope": "*"},
                                       {"operations": ["DELETE"]}],
                             "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}
        client = m(2, m(1, s(1, "ns"), s(2, "svc"), v(4, 443)), s(2, b"abc"))
        rules = (m(3, s(1, "CREATE"), m(2, s(1, ""), s(2, "v1"), s(3, "pods"), s(4, "*")))
                 + m(3, s(1, "DELETE"), m(2)))
        webhook = s(1, "a.b.c") + client + rules + s(6, "None") + s(8, "v1")
        self.check(obj, m(1, object_meta("w")) + m(2, webhook))

    def test_named_rule_two_levels_inline(self):
        """NamedRuleWithOperations embeds RuleWithOperations, which embeds Rule."""
        group = "admissionregistration.platform.io/v1"
        obj = {"kind": "ValidatingAdmissionPolicyBinding", "apiVersion": group,
               "metadata": {"name": "b"},
               "spec": {"policyName": "p", "matchResources": {"resourceRules": [
                   {"resourceNames": ["x"], "operations": ["UPDATE"],
                    "resources": ["configmaps"]}]},
                   "validationActions": ["Deny"]}}
        named = s(1, "x") + m(2, s(1, "UPDATE"), m(2, s(3, "configmaps")))
        spec = s(1, "p") + m(3, m(3, named)) + s(4, "Deny")
        self.check(obj, m(1, object_meta("b")) + m(2, spec))

    def test_empty_namespace(self):
        """A Namespace with only a name: metadata, spec and status (phase "") all written."""
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ns"}}
        raw = m(1, object_meta("ns")) + m(2) + m(3, s(1, ""))
        self.check(obj, raw, {**obj, "spec": {}, "status": {}})

    def test_configmap_with_data(self):
        """Map entries sorted by key, key and value both written, an empty value too."""
        obj = {"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": "cm", "namespace": "default", "creationTimestamp": CREATED},
               "data": {"b": "2", "a": ""}}
        raw = (m(1, object_meta("cm", "default", CREATED_SECONDS))
               + m(2, s(1, "a"), s(2, "")) + m(2, s(1, "b"), s(2, "2")))
        self.check(obj, raw)

    def test_secret(self):
        """Secret.type is a non-pointer string (written empty); immutable is a pointer."""
        obj = {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"},
               "data": {"k": "AAE="}}
        raw = m(1, object_meta("s")) + m(2, s(1, "k"), s(2, b"\x00\x01")) + s(3, "")
        self.check(obj, raw)
        with_immutable = dict(obj, immutable=False)
        self.check(with_immutable, raw + v(5, 0))

    def test_pod_with_one_container(self):
        """
        A Pod with one container, byte for byte as upstream: every non-pointer field of
        Container, PodSpec and PodStatus is on the wire, zero or not, in field order —
        including the ones platformd does not act on (stdin/stdinOnce/tty, hostPID/hostIPC,
        the deprecated serviceAccount and resize).
        """
        obj = {"kind": "Pod", "apiVersion": "v1",
               "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "nginx",
                                        "ports": [{"containerPort": 80}]}],
                        "terminationGracePeriodSeconds": 30}}
        container = (s(1, "c") + s(2, "nginx") + s(5, "")
                     + m(6, s(1, ""), v(2, 0), v(3, 80), s(4, ""), s(5, ""))
                     + m(8) + s(13, "") + s(14, "") + v(16, 0) + v(17, 0) + v(18, 0)
                     + s(20, ""))
        spec = (m(2, container) + s(3, "") + v(4, 30) + s(6, "") + s(8, "") + s(9, "")
                + s(10, "") + v(11, 0) + v(12, 0) + v(13, 0) + s(16, "") + s(17, "")
                + s(19, "") + s(24, ""))
        status = (s(1, "") + s(3, "") + s(4, "") + s(5, "") + s(6, "") + s(9, "")
                  + s(11, "") + s(14, "") + v(17, 0))
        raw = m(1, object_meta("p", "default")) + m(2, spec) + m(3, status)
        decoded = {**obj, "status": {}}
        decoded["spec"] = {**obj["spec"], "containers": [
            {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}]}
        self.check(obj, raw, decoded)

    def test_container_status(self):
        """ready/restartCount/image/imageID are written and shown when zero; state is a struct."""
        obj = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"},
               "status": {"phase": "Running", "containerStatuses": [
                   {"name": "c", "ready": False, "restartCount": 0, "image": "i", "imageID": "",
                    "state": {"running": {"startedAt": CREATED}}, "lastState": {}}]}}
        status_entry = (s(1, "c") + m(2, m(2, m(1, time(CREATED_SECONDS)))) + m(3)
                        + v(4, 0) + v(5, 0) + s(6, "i") + s(7, "") + s(8, ""))
        spec = (s(3, "") + s(6, "") + s(8, "") + s(9, "") + s(10, "") + v(11, 0) + v(12, 0)
                + v(13, 0) + s(16, "") + s(17, "") + s(19, "") + s(24, ""))
        status = (s(1, "Running") + s(3, "") + s(4, "") + s(5, "") + s(6, "")
                  + m(8, status_entry) + s(9, "") + s(11, "") + s(14, "") + v(17, 0))
        raw = m(1, object_meta("p")) + m(2, spec) + m(3, status)
        self.check(obj, raw, {**obj, "spec": {}})

    def test_status(self):
        """meta.v1.Status: empty ListMeta, code and every StatusDetails string written."""
        status = StatusError(404, "NotFound", 'pods "x" not found', name="x",
                             kind="pods").to_status()
        raw = (m(1, s(1, ""), s(2, ""), s(3, "")) + s(2, "Failure") + s(3, status["message"])
               + s(4, "NotFound") + m(5, s(1, "x"), s(2, ""), s(3, "pods"), v(5, 0), s(6, ""))
               + v(6, 404))
        self.check(status, raw)

    def test_list(self):
        """A list: ListMeta's three strings, then each item."""
        item = {"kind": "Role", "apiVersion": RBAC, "metadata": {"name": "r"}}
        value = {"kind": "RoleList", "apiVersion": RBAC, "metadata": {"resourceVersion": "7"},
                 "items": [item]}
        raw = m(1, s(1, ""), s(2, "7"), s(3, "")) + m(2, m(1, object_meta("r")))
        self.check(value, raw)
        pieces = self.codec.list_pieces(RBAC, "RoleList", value["metadata"],
                                        [self.codec.item_bytes(item)])
        self.assertEqual(b"".join(pieces), envelope(RBAC, "RoleList", raw))

    def test_times(self):
        """The epoch is written ({0, 0}), nanos are dropped, the zero time is empty."""
        def meta_bytes(**fields):
            return protoconvert.to_message(fields, meta.ObjectMeta, upstream=True) \
                .SerializeToString(deterministic=True)

        base = (s(1, "") + s(2, "") + s(3, "") + s(4, "") + s(5, "") + s(6, "") + v(7, 0))
        self.assertEqual(meta_bytes(creationTimestamp="1970-01-01T00:00:00Z"),
                         base + m(8, v(1, 0), v(2, 0)))
        self.assertEqual(meta_bytes(creationTimestamp="2024-05-06T07:08:09.5Z"),
                         base + m(8, time(CREATED_SECONDS)))
        self.assertEqual(meta_bytes(creationTimestamp="0001-01-01T00:00:00Z"), base + m(8))
        self.assertEqual(meta_bytes(deletionTimestamp=CREATED),
                         base + m(8) + m(9, time(CREATED_SECONDS)))
        decode = protoconvert.from_message
        self.assertEqual(decode(meta.ObjectMeta.FromString(base + m(8)), upstream=True), {})
        self.assertEqual(decode(meta.ObjectMeta.FromString(base + m(8, v(1, 0), v(2, 0))),
                                upstream=True),
                         {"creationTimestamp": "1970-01-01T00:00:00Z"})

    def test_decoding_shows_what_upstream_json_shows(self):
        """
        Bytes from a client: an omitempty field's zero value is left out, a field JSON
        always shows is there even when zero or missing from the bytes.
        """
        raw = (m(1, object_meta("rb", "")) + m(2, s(1, "User"), s(2, ""), s(3, "bob"), s(4, "")))
        value = self.codec.decode(envelope(RBAC, "RoleBinding", raw))
        self.assertEqual(value, {
            "kind": "RoleBinding", "apiVersion": RBAC, "metadata": {"name": "rb"},
            "subjects": [{"kind": "User", "name": "bob"}],
            "roleRef": {"apiGroup": "", "kind": "", "name": ""}})

    def test_explicit_zeros_follow_upstream_json(self):
        """An explicit omitempty zero does not survive a round trip; a shown one does."""
        obj = {"kind": "ServiceAccount", "apiVersion": "v1",
               "metadata": {"name": "sa", "namespace": "", "generation": 0},
               "secrets": [{"name": "t", "kind": ""}], "automountServiceAccountToken": False}
        self.assertEqual(self.codec.decode(self.codec.encode(obj)), {
            "kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "sa"},
            "secrets": [{"name": "t"}], "automountServiceAccountToken": False})

    def test_presence_mode_unchanged(self):
        """The default mode (the node-local pods service) writes only what the dict has."""
        message = protoconvert.to_message({"metadata": {"name": "p"}}, core.Pod)
        self.assertEqual(message.SerializeToString(), m(1, s(1, "p")))


# Upstream's golden bytes: k8s.io/apimachinery/pkg/runtime/serializer/protobuf/
# collections_test.go (TestCollectionsEncoding; testapigroup/v1 CarpList, base64).
_GOLDEN_ITEMS_NIL = "azhzAAoECgASABIICgYKABIAGgAaACIA"
_GOLDEN_NO_ELEMENTS = "azhzAAoKCgJ2MRIETGlzdBIMCgoKABIEMjM0NRoAGgAiAA=="
_GOLDEN_ONE_WITH_CONTINUE = (
    "azhzAAoKCgJ2MRIETGlzdBJUCg8KABIEMjM0NRoDYWJjIAESQQoaCgNwb2QSABoHZGVmYXVsdCIAKgAyADgAQg"
    "ASFxoAQgBKAFIAWABgAGgAggEAigEAmgEAGgoKABoAIgAqADIAGgAiAA==")
_GOLDEN_TWO = (
    "azhzAAoKCgJ2MRIETGlzdBKUAQoKCgASBDIzNDUaABJBChoKA3BvZBIAGgdkZWZhdWx0IgAqADIAOABCABIXGg"
    "BCAEoAUgBYAGAAaACCAQCKAQCaAQAaCgoAGgAiACoAMgASQwocCgRwb2QyEgAaCGRlZmF1bHQyIgAqADIAOABC"
    "ABIXGgBCAEoAUgBYAGAAaACCAQCKAQCaAQAaCgoAGgAiACoAMgAaACIA")
#: A zero CarpSpec and CarpStatus as upstream writes them (fields 2 and 3 of a Carp):
#: not our types, carried over verbatim so the lists can be rebuilt around them.
_CARP_SPEC_STATUS = bytes.fromhex(
    "12 17 1a 00 42 00 4a 00 52 00 58 00 60 00 68 00 82 01 00 8a 01 00 9a 01 00"
    " 1a 0a 0a 00 1a 00 22 00 2a 00 32 00")


class UpstreamGoldenTests(SynchronousTestCase):
    """Envelope, ListMeta and ObjectMeta against bytes upstream's serializer wrote."""

    def setUp(self):
        self.codec = ProtobufCodec({("v1", "List"): meta.PartialObjectMetadataList,
                                    ("", ""): meta.PartialObjectMetadataList})

    def carp(self, name, namespace):
        object_meta_bytes = protoconvert.to_message(
            {"name": name, "namespace": namespace}, meta.ObjectMeta, upstream=True
        ).SerializeToString(deterministic=True)
        return s(1, object_meta_bytes) + _CARP_SPEC_STATUS

    def test_empty_lists(self):
        """A list without items: TypeMeta (even empty) and ListMeta's strings."""
        self.assertEqual(b"".join(self.codec.list_pieces("", "", {}, [])),
                         base64.b64decode(_GOLDEN_ITEMS_NIL))
        golden = base64.b64decode(_GOLDEN_NO_ELEMENTS)
        self.assertEqual(
            b"".join(self.codec.list_pieces("v1", "List", {"resourceVersion": "2345"}, [])),
            golden)
        self.assertEqual(self.codec.decode(golden), {
            "kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "2345"}})

    def test_lists_with_items(self):
        """Items' ObjectMeta and the list around them, as upstream's golden bytes (items
        are given as ``item_bytes``: each the list's field 2)."""
        pieces = self.codec.list_pieces(
            "v1", "List", {"resourceVersion": "2345", "continue": "abc",
                           "remainingItemCount": 1}, [s(2, self.carp("pod", "default"))])
        self.assertEqual(b"".join(pieces), base64.b64decode(_GOLDEN_ONE_WITH_CONTINUE))
        pieces = self.codec.list_pieces("v1", "List", {"resourceVersion": "2345"},
                                        [s(2, self.carp("pod", "default")),
                                         s(2, self.carp("pod2", "default2"))])
        self.assertEqual(b"".join(pieces), base64.b64decode(_GOLDEN_TWO))


def _modules():
    return (core, rbac, meta, runtime, resource, authorization, authentication,
            admissionregistration, coordination, eventsv1, discovery, policy, intstr,
            apidiscovery, apiextensions)


def _messages():
    """Every message of our generated modules (map entries aside), by full name."""
    found = {}

    def walk(descriptor):
        if descriptor.GetOptions().map_entry:
            return
        found[descriptor.full_name] = descriptor
        for nested in descriptor.nested_types:
            walk(nested)

    for module in _modules():
        for descriptor in module.DESCRIPTOR.message_types_by_name.values():
            walk(descriptor)
    return found


class IntOrStringTests(SynchronousTestCase):
    """``ServicePort`` as core/v1 generated.pb.go writes it: name, protocol, port and
    nodePort always (non-pointer), targetPort an ``IntOrString`` whose marshaller writes
    type, intVal and strVal always; read back as upstream's JSON shows it."""

    def test_number(self):
        port = {"protocol": "TCP", "port": 80, "targetPort": 8080}
        data = protoconvert.to_message(port, core.ServicePort, upstream=True) \
            .SerializeToString(deterministic=True)
        self.assertEqual(data, bytes.fromhex(
            "0a00 1203 544350 1850 2207 0800 10903f 1a00 2800".replace(" ", "")))
        back = protoconvert.from_message(core.ServicePort.FromString(data), upstream=True)
        self.assertEqual(back, port)

    def test_name(self):
        port = {"name": "web", "protocol": "TCP", "port": 80, "targetPort": "http"}
        data = protoconvert.to_message(port, core.ServicePort, upstream=True) \
            .SerializeToString(deterministic=True)
        self.assertEqual(data, bytes.fromhex(
            "0a03 776562 1203 544350 1850 220a 0801 1000 1a04 68747470 2800".replace(" ", "")))
        back = protoconvert.from_message(core.ServicePort.FromString(data), upstream=True)
        self.assertEqual(back, port)


class TableTests(SynchronousTestCase):
    def test_every_message_has_an_entry(self):
        """The table covers exactly the messages of proto/ (a new one must be read in Go)."""
        self.assertEqual(sorted(gopresence.ALWAYS), sorted(_messages()))

    def test_entries_name_singular_fields(self):
        """Listed fields exist and are singular; "?" on a message field only for Time."""
        messages = _messages()
        for full_name, descriptor in messages.items():
            for name, omitted in gopresence.fields(full_name):
                field = descriptor.fields_by_name.get(name)
                self.assertIsNotNone(field, f"{full_name}.{name}")
                self.assertFalse(field.is_repeated, f"{full_name}.{name}")
                if field.message_type is not None:
                    is_time = field.message_type.full_name in (protoconvert.TIME,
                                                               protoconvert.MICRO_TIME)
                    self.assertEqual(omitted, is_time, f"{full_name}.{name}")
        for full_name in gopresence.CUSTOM:
            self.assertEqual(gopresence.ALWAYS[full_name], "", full_name)

