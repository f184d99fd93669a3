"""
Encodings and views end to end (spec 4.2): Table, metadata-only, gzip, CBOR, streamed
large lists, strict media-type negotiation.
"""

import gzip
import io
import json
import os
import subprocess

import cbor2
import yaml
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest

from platformd.api import reads
from platformd.api.streaming import PieceWriter
from platformd.codecs.cborcodec import CBORCodec
from platformd.codecs.protobufcodec import PROTOBUF, ProtobufCodec
from platformd.registry import catalog
from tests.e2e.harness import ServerTestCase, open_watch
from tests.codecs.test_limits import YAML_BOMB
from tests.e2e.test_clients import kubectl_binary

RBAC = "/apis/rbac.authorization.platform.io/v1"
RB = f"{RBAC}/namespaces/default/rolebindings"
CM = "/api/v1/namespaces/default/configmaps"
TABLE = "application/json;as=Table;g=meta.platform.io;v=v1"
META = "application/json;as=PartialObjectMetadata;g=meta.platform.io;v=v1"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.platform.io;v=v1"


def binding(name):
    return {"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"}]}


class EncodingTestCase(ServerTestCase):

    def get(self, path, accept, **headers):
        return self.client.get(path, headers=dict(headers, Accept=accept))


class TableTests(EncodingTestCase):
    @inlineCallbacks
    def test_rolebinding_table(self):
        """RoleBinding: Name, Role, Age, then Users, Groups, ServiceAccounts at priority 1."""
        yield self.client.post(RB, binding("rb"))
        r = yield self.get(RB, TABLE)
        self.assertEqual(r.header("Content-Type"), TABLE)
        table = r.json()
        self.assertEqual((table["kind"], table["apiVersion"]), ("Table", "meta.platform.io/v1"))
        self.assertEqual([(c["name"], c["priority"]) for c in table["columnDefinitions"]],
                         [("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1),
                          ("ServiceAccounts", 1)])
        cells = table["rows"][0]["cells"]
        self.assertEqual(cells[0:2] + cells[3:], ["rb", "ClusterRole/view", "alice", "devs",
                                                  "ops/bot"])
        self.assertEqual(table["rows"][0]["object"]["kind"], "PartialObjectMetadata")
        self.assertTrue(table["metadata"]["resourceVersion"])

    @inlineCallbacks
    def test_pod_namespace_and_default_tables(self):
        """Pod, Namespace and the default Name / Created At columns."""
        yield self.client.post("/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "image": "i"}]}})
        r = yield self.get("/api/v1/namespaces/default/pods/p", TABLE)
        table = r.json()
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"])
        self.assertEqual(table["rows"][0]["cells"][:4] + table["rows"][0]["cells"][5:],
                         ["p", "0/1", "Pending", 0, "<none>", "n1"])
        r = yield self.get("/api/v1/namespaces", TABLE)
        self.assertEqual([c["name"] for c in r.json()["columnDefinitions"]],
                         ["Name", "Status", "Age"])
        self.assertEqual(r.json()["rows"][0]["cells"][:2], ["default", "Active"])
        yield self.client.post(f"{RBAC}/clusterroles", {"metadata": {"name": "cr"}})
        r = yield self.get(f"{RBAC}/clusterroles", TABLE)
        self.assertEqual([(c["name"], c["type"]) for c in r.json()["columnDefinitions"]],
                         [("Name", "string"), ("Created At", "date")])

    @inlineCallbacks
    def test_include_object(self):
        """includeObject=None|Metadata|Object; other values 400."""
        yield self.client.post(RB, binding("rb"))
        r = yield self.get(f"{RB}/rb?includeObject=None", TABLE)
        self.assertNotIn("object", r.json()["rows"][0])
        r = yield self.get(f"{RB}/rb?includeObject=Object", TABLE)
        self.assertEqual(r.json()["rows"][0]["object"]["roleRef"]["name"], "view")
        r = yield self.get(f"{RB}/rb?includeObject=Some", TABLE)
        self.assertEqual(r.code, 400)
        self.assertEqual(r.json()["message"],
                         "Unable to convert to Table as requested: includeObject: Invalid "
                         "value: \"Some\": must be 'Metadata', 'Object', 'None', or empty")
        r = yield self.get(f"{RB}/rb?includeObject=Some", "application/json")
        self.assertEqual(r.code, 200, "includeObject is read only for a Table")

    @inlineCallbacks
    def test_not_acceptable_and_fallback(self):
        """Only unservable views: 406; with application/json after them: JSON."""
        yield self.client.post(RB, binding("rb"))
        r = yield self.get(RB, "application/json;as=Table;g=other.io;v=v1")
        self.assertEqual((r.code, r.json()["reason"]), (406, "NotAcceptable"))
        r = yield self.client.post(RB, binding("x"), headers={"Accept": META_LIST})
        self.assertEqual(r.code, 406, "a write's answer is one object, never a list view")
        r = yield self.get(RB, "application/json;as=Table;g=other.io;v=v1, application/json")
        self.assertEqual((r.code, r.json()["kind"]), (200, "RoleBindingList"))

    @inlineCallbacks
    def test_write_answers_in_views(self):
        """
        As upstream's transformResponseObject: create, update, patch and delete answer
        in the Table or PartialObjectMetadata asked for; a delete's Status stays itself.
        """
        r = yield self.client.post(RB, binding("v"), headers={"Accept": TABLE})
        self.assertEqual((r.code, r.header("Content-Type")), (201, TABLE))
        self.assertEqual(r.json()["rows"][0]["cells"][:2], ["v", "ClusterRole/view"])
        r = yield self.client.patch(f"{RB}/v", {"metadata": {"labels": {"a": "b"}}},
                                    headers={"Accept": META})
        self.assertEqual((r.code, r.header("Content-Type")), (200, META))
        self.assertEqual(r.json()["kind"], "PartialObjectMetadata")
        self.assertEqual(r.json()["metadata"]["labels"], {"a": "b"})
        self.assertNotIn("roleRef", r.json())
        r = yield self.client.delete(f"{RB}/v", headers={"Accept": TABLE})
        self.assertEqual((r.code, r.json()["kind"]), (200, "Status"))
        self.assertEqual(r.header("Content-Type"), "application/json")

    @inlineCallbacks
    def test_watch_table(self):
        """
        A watch in Table form carries one-row tables; as upstream, only the first event
        has the column definitions, later ones ``columnDefinitions: null`` — for each
        watcher, whether its first event is from the initial state or live.
        """
        yield self.client.post(RB, binding("before"))
        listed = yield self.client.get(RB)
        rv = listed.json()["metadata"]["resourceVersion"]
        _, fresh = yield open_watch(self.client, f"{RB}?watch=1", accept=TABLE)
        _, first_live = yield open_watch(self.client, f"{RB}?watch=1&resourceVersion={rv}",
                                         accept=TABLE)
        events = yield fresh.wait_for(1)
        self.assertEqual(events[0]["object"]["rows"][0]["cells"][0], "before")
        yield self.client.post(RB, binding("w"))
        yield self.client.post(RB, binding("x"))
        events = yield fresh.wait_for(3)
        tables = [e["object"] for e in events]
        self.assertEqual([t["kind"] for t in tables], ["Table"] * 3)
        self.assertEqual([t["rows"][0]["cells"][0] for t in tables], ["before", "w", "x"])
        self.assertEqual(tables[0]["columnDefinitions"][0]["name"], "Name")
        self.assertEqual([t["columnDefinitions"] for t in tables[1:]], [None, None])
        events = yield first_live.wait_for(2)
        self.assertEqual([e["object"]["rows"][0]["cells"][0] for e in events], ["w", "x"])
        self.assertEqual([e["object"]["columnDefinitions"] is None for e in events],
                         [False, True])
        fresh.transport.stopProducing()
        first_live.transport.stopProducing()

    @inlineCallbacks
    def test_kubectl_wide(self):
        """kubectl get -o wide shows the RoleBinding columns."""
        kubectl = kubectl_binary()
        if kubectl is None:
            raise SkipTest("kubectl not installed")
        yield self.client.post(RB, binding("wide"))
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        r = yield deferToThread(subprocess.run, [
            kubectl, "--kubeconfig", os.path.join(self.server.data_dir, "admin.kubeconfig"),
            "get", "rolebindings", "-o", "wide"], capture_output=True, text=True, env=env,
            timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        header = r.stdout.splitlines()[0].split()
        self.assertEqual(header, ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"])
        self.assertIn("ClusterRole/view", r.stdout)
        self.assertIn("ops/bot", r.stdout)


class MetadataTests(EncodingTestCase):
    @inlineCallbacks
    def test_metadata_views(self):
        """Get, list and watch as PartialObjectMetadata(List); 406 for the wrong one."""
        yield self.client.post(RB, binding("m"))
        r = yield self.get(f"{RB}/m", META)
        self.assertEqual(set(r.json()), {"kind", "apiVersion", "metadata"})
        self.assertEqual((r.json()["kind"], r.json()["metadata"]["name"]),
                         ("PartialObjectMetadata", "m"))
        r = yield self.get(RB, META_LIST)
        body = r.json()
        self.assertEqual(body["kind"], "PartialObjectMetadataList")
        self.assertEqual(set(body["items"][0]), {"kind", "apiVersion", "metadata"})
        self.assertTrue(body["metadata"]["resourceVersion"])
        r = yield self.get(f"{RB}/m", META.replace("application/json", "application/yaml"))
        self.assertIn(b"kind: PartialObjectMetadata", r.body)
        _, reader = yield open_watch(self.client, f"{RB}?watch=1", accept=META)
        events = yield reader.wait_for(1)
        self.assertEqual(events[0]["object"]["kind"], "PartialObjectMetadata")
        reader.transport.stopProducing()

    @inlineCallbacks
    def test_metadata_watch_bookmarks(self):
        """
        A metadata-only watch's bookmarks are PartialObjectMetadata too (a metadata
        informer decodes nothing else), the initial-events-end one included.
        """
        yield self.client.post(RB, binding("m"))
        _, reader = yield open_watch(
            self.client, f"{RB}?watch=1&sendInitialEvents=true&resourceVersionMatch="
                         f"NotOlderThan&allowWatchBookmarks=true", accept=META)
        events = yield reader.wait_for(2)
        self.assertEqual([e["type"] for e in events], ["ADDED", "BOOKMARK"])
        bookmark = events[1]["object"]
        self.assertEqual((bookmark["kind"], bookmark["apiVersion"]),
                         ("PartialObjectMetadata", "meta.platform.io/v1"))
        self.assertEqual(bookmark["metadata"]["annotations"],
                         {"platform.io/initial-events-end": "true",
                          "k8s.io/initial-events-end": "true"})
        self.assertTrue(bookmark["metadata"]["resourceVersion"])
        reader.transport.stopProducing()


class MetadataShapeTests(EncodingTestCase):
    """
    A metadata view of the other shape than what is read is chosen, then refused, with
    the message of upstream's ``asPartialObjectMetadata(List)`` naming the Go type read.
    """

    @staticmethod
    def not_acceptable(message):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": "NotAcceptable", "code": 406}

    @inlineCallbacks
    def test_partial_object_metadata_of_a_list(self):
        """Every kind's list, whatever follows in Accept: 406 naming its Go list type."""
        kinds = [k for k in catalog.builtin().kinds if k.review is None]
        self.assertEqual(len({k.kind for k in kinds}), len(LIST_TYPES))
        for kind in kinds:
            path = (f"/apis/{kind.group}/{kind.version}" if kind.group else "/api/v1") + (
                f"/namespaces/default/{kind.plural}" if kind.namespaced else f"/{kind.plural}")
            for accept in (META, META + ", application/json",
                           META.replace("meta.platform.io", "meta.k8s.io")):
                r = yield self.get(path, accept)
                self.assertEqual((r.code, r.json()), (406, self.not_acceptable(
                    "you requested PartialObjectMetadata, but the requested object is a list "
                    f"({LIST_TYPES[kind.kind]})")), (path, accept))

    @inlineCallbacks
    def test_partial_object_metadata_list_of_an_object(self):
        """One object asked for as a list: 406 naming its Go type, once it is read."""
        yield self.client.post(RB, binding("m"))
        for path, go_type in ((f"{RB}/m", "*rbac.RoleBinding"),
                              ("/api/v1/namespaces/default", "*core.Namespace")):
            r = yield self.get(path, META_LIST + ", application/json")
            self.assertEqual((r.code, r.json()), (406, self.not_acceptable(
                "you requested PartialObjectMetadataList, but the requested object is not a "
                f"list ({go_type})")), path)
        r = yield self.get(f"{RB}/missing", META_LIST)
        self.assertEqual(r.code, 404)


#: The Go type upstream's list handler reads for each kind: its registry's internal list.
LIST_TYPES = {
    "Namespace": "*core.NamespaceList", "Pod": "*core.PodList",
    "ConfigMap": "*core.ConfigMapList", "Secret": "*core.SecretList",
    "ServiceAccount": "*core.ServiceAccountList", "Role": "*rbac.RoleList",
    "ClusterRole": "*rbac.ClusterRoleList", "RoleBinding": "*rbac.RoleBindingList",
    "ClusterRoleBinding": "*rbac.ClusterRoleBindingList",
    "MutatingWebhookConfiguration":
        "*admissionregistration.MutatingWebhookConfigurationList",
    "ValidatingAdmissionPolicy": "*admissionregistration.ValidatingAdmissionPolicyList",
    "ValidatingAdmissionPolicyBinding":
        "*admissionregistration.ValidatingAdmissionPolicyBindingList",
    "ValidatingWebhookConfiguration":
        "*admissionregistration.ValidatingWebhookConfigurationList",
    # Both Event versions read the core registry's list.
    "Event": "*core.EventList", "Lease": "*coordination.LeaseList",
    "Service": "*core.ServiceList", "Endpoints": "*core.EndpointsList",
    "EndpointSlice": "*discovery.EndpointSliceList",
    "CustomResourceDefinition": "*apiextensions.CustomResourceDefinitionList",
    "Node": "*core.NodeList", "PodDisruptionBudget": "*policy.PodDisruptionBudgetList",
}


class GzipTests(EncodingTestCase):
    @inlineCallbacks
    def test_large_list_gzipped(self):
        """A list above 128 KiB is gzipped for a client that accepts it; small ones not."""
        for i in range(40):
            yield self.client.post(CM, {"metadata": {"name": f"c{i}"}, "data": {"d": "x" * 5000}})
        r = yield self.client.get(CM, headers={"Accept-Encoding": "gzip"})
        self.assertEqual(r.header("Content-Encoding"), "gzip")
        self.assertEqual(r.header("Vary"), "Accept-Encoding")
        self.assertEqual(r.length, len(r.body))
        self.assertEqual(len(json.loads(gzip.decompress(r.body))["items"]), 40)
        r = yield self.client.get(f"{CM}/c0", headers={"Accept-Encoding": "gzip"})
        self.assertIsNone(r.header("Content-Encoding"))
        r = yield self.client.get(CM)
        self.assertIsNone(r.header("Content-Encoding"))

    @inlineCallbacks
    def test_only_a_bare_gzip_token(self):
        """Only a bare ``gzip`` coding counts, as upstream: q-values and ``*`` do not."""
        for i in range(40):
            yield self.client.post(CM, {"metadata": {"name": f"c{i}"}, "data": {"d": "x" * 5000}})
        for header, expected in (("deflate, gzip", "gzip"), ("br ,gzip , zstd", "gzip"),
                                 ("gzip;q=0", None), ("gzip;q=1.0", None), ("*", None),
                                 ("deflate", None)):
            r = yield self.client.get(CM, headers={"Accept-Encoding": header})
            self.assertEqual(r.header("Content-Encoding"), expected, header)


class GzipOffTests(EncodingTestCase):
    server_args = ("--feature-gates", "APIResponseCompression=false")

    @inlineCallbacks
    def test_gate_off(self):
        """With APIResponseCompression off nothing is compressed."""
        for i in range(30):
            yield self.client.post(CM, {"metadata": {"name": f"c{i}"}, "data": {"d": "x" * 6000}})
        r = yield self.client.get(CM, headers={"Accept-Encoding": "gzip"})
        self.assertIsNone(r.header("Content-Encoding"))


class StreamingTests(EncodingTestCase):
    @inlineCallbacks
    def test_large_list_streamed(self):
        """A list of several MB is written in pieces (chunked) and is complete."""
        for i in range(60):
            yield self.client.post(CM, {"metadata": {"name": f"s{i:02d}"},
                                        "data": {"d": "y" * 100000}})
        r = yield self.client.get(CM)
        self.assertEqual(r.code, 200)
        self.assertIsNone(r.length, "streamed: chunked, length unknown")
        body = r.json()
        self.assertEqual([i["metadata"]["name"] for i in body["items"]],
                         [f"s{i:02d}" for i in range(60)])
        r = yield self.client.get(f"{CM}/s00")
        self.assertEqual(r.length, len(r.body), "a whole body goes with its length")
        r = yield self.client.get(CM, headers={"Accept-Encoding": "gzip"})
        self.assertEqual(r.header("Content-Encoding"), "gzip")
        self.assertEqual(len(json.loads(gzip.decompress(r.body))["items"]), 60)


class CBOROffTests(EncodingTestCase):
    @inlineCallbacks
    def test_without_gate(self):
        """With the gate off CBOR is 406 and 415, as on a server without it."""
        r = yield self.get(CM, "application/cbor")
        self.assertEqual((r.code, r.json()["reason"]), (406, "NotAcceptable"))
        r = yield self.client.post(CM, cbor2.dumps({"metadata": {"name": "x"}}),
                                   content_type="application/cbor")
        self.assertEqual((r.code, r.json()["reason"]), (415, "UnsupportedMediaType"))


class CBORTests(EncodingTestCase):
    server_args = ("--feature-gates", "CBORServingAndStorage=true")

    @inlineCallbacks
    def test_round_trip(self):
        """CBOR request and response bodies, with the self-described tag."""
        r = yield self.client.post(CM, cbor2.dumps({"metadata": {"name": "cb"}, "data": {"k": "v"}}),
                                   content_type="application/cbor",
                                   headers={"Accept": "application/cbor"})
        self.assertEqual((r.code, r.header("Content-Type")), (201, "application/cbor"))
        self.assertTrue(r.body.startswith(b"\xd9\xd9\xf7"))
        obj = cbor2.loads(r.body)
        self.assertEqual((obj["metadata"]["name"], obj["data"]["k"]), ("cb", "v"))
        r = yield self.get(CM, "application/cbor")
        self.assertEqual(cbor2.loads(r.body)["kind"], "ConfigMapList")
        r = yield self.get(f"{CM}/cb", "application/cbor;as=PartialObjectMetadata;g=meta.platform.io;v=v1")
        self.assertEqual(cbor2.loads(r.body)["kind"], "PartialObjectMetadata")

    @inlineCallbacks
    def test_routes_produce_cbor(self):
        """The 406 of a route lists CBOR too, last, as upstream's serializers order it."""
        r = yield self.get(CM, "text/csv")
        self.assertEqual(r.json()["message"], (
            "406: Not Acceptable\n\nAvailable representations: application/json, "
            "application/yaml, application/vnd.platform.protobuf, application/cbor, "
            "application/json;stream=watch, application/vnd.platform.protobuf;stream=watch, "
            "application/cbor;stream=watch"))

    @inlineCallbacks
    def same_as_json(self, path, **headers):
        """The CBOR answer, and that it is byte for byte cbor2's encoding of the JSON one."""
        r = yield self.get(path, "application/cbor", **headers)
        self.assertEqual((r.code, r.header("Content-Type")), (200, "application/cbor"))
        body = gzip.decompress(r.body) if r.header("Content-Encoding") == "gzip" else r.body
        json_form = (yield self.get(path, "application/json")).json()
        self.assertEqual(CBORCodec().decode(body), json_form)
        self.assertEqual(body, b"\xd9\xd9\xf7" + cbor2.dumps(json_form))
        return r

    @inlineCallbacks
    def test_get_and_list_from_item_bytes(self):
        """GET and LIST in CBOR, assembled from each object's cached data item, equal
        cbor2's encoding of the same value: empty list, one item, many, a paged list."""
        check = self.same_as_json
        yield check(CM)
        yield self.client.post(CM, {"metadata": {"name": "one"}, "data": {"k": "v"}})
        yield check(CM)
        yield check(f"{CM}/one")
        for i in range(30):
            yield self.client.post(CM, {"metadata": {"name": f"m{i:02d}"}})
        r = yield check(CM)
        self.assertEqual(list(cbor2.loads(r.body)), ["kind", "apiVersion", "metadata", "items"])
        self.assertEqual(len(cbor2.loads(r.body)["items"]), 31)
        r = yield self.get(f"{CM}?limit=10", "application/cbor")
        page = cbor2.loads(r.body)
        self.assertEqual((len(page["items"]), page["metadata"]["remainingItemCount"]), (10, 21))
        yield check(f"{CM}?limit=10&continue={page['metadata']['continue']}")

    @inlineCallbacks
    def test_large_list_streamed(self):
        """A CBOR list of several MB is written in pieces (chunked), gzipped or not."""
        for i in range(60):
            yield self.client.post(CM, {"metadata": {"name": f"s{i:02d}"},
                                        "data": {"d": "y" * 100000}})
        streamed = []

        class Recording(PieceWriter):
            def __init__(self, request, pieces, gzip):
                streamed.append(request.responseHeaders.getRawHeaders(b"Content-Type")[0])
                super().__init__(request, pieces, gzip)

        self.patch(reads, "PieceWriter", Recording)
        check = self.same_as_json
        r = yield check(CM)
        self.assertEqual(streamed, [b"application/cbor", b"application/json"])
        self.assertEqual([i["metadata"]["name"] for i in cbor2.loads(r.body)["items"]],
                         [f"s{i:02d}" for i in range(60)])
        r = yield check(CM, **{"Accept-Encoding": "gzip"})
        self.assertEqual(r.header("Content-Encoding"), "gzip")

    @inlineCallbacks
    def test_watch_cbor_seq(self):
        """A CBOR watch is a CBOR sequence, one event per data item."""
        response, reader = yield open_watch(self.client, f"{CM}?watch=1&timeoutSeconds=1",
                                            accept="application/cbor", raw=True)
        self.assertEqual(response.headers.getRawHeaders("Content-Type"), ["application/cbor-seq"])
        yield self.client.post(CM, {"metadata": {"name": "a"}})
        yield self.client.post(CM, {"metadata": {"name": "b"}})
        data = yield reader.finished
        decoder = cbor2.CBORDecoder(io.BytesIO(data))
        events = [decoder.decode(), decoder.decode()]
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "a"), ("ADDED", "b")])

    @inlineCallbacks
    def test_apply_cbor_and_patches(self):
        """apply-patch+cbor works; there is no CBOR merge or JSON patch (415)."""
        body = cbor2.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "ap"}, "data": {"a": "1"}})
        r = yield self.client.patch(f"{CM}/ap?fieldManager=m", body,
                                    content_type="application/apply-patch+cbor")
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.patch(f"{CM}/ap", cbor2.dumps({"data": {}}),
                                    content_type="application/merge-patch+cbor")
        self.assertEqual(r.code, 415)


class HostileBodyTests(EncodingTestCase):
    server_args = ("--feature-gates", "CBORServingAndStorage=true")

    @inlineCallbacks
    def test_bombs_are_400s(self):
        """
        A YAML nested 100,000 deep (which crashed libyaml's composer), a YAML billion
        laughs and a CBOR shared-value bomb are 400s, and the server goes on serving.
        """
        laughs = ["lol"] * 9
        for _ in range(7):
            laughs = [laughs] * 9
        bodies = [(b"[" * 100_000, "application/yaml"),
                  (YAML_BOMB, "application/yaml"),
                  (cbor2.dumps({"metadata": {"name": "b"}, "data": {"a": laughs}},
                               value_sharing=True), "application/cbor")]
        for body, media in bodies:
            r = yield self.client.post(CM, body, content_type=media)
            self.assertEqual((r.code, r.json()["reason"]), (400, "BadRequest"), media)
        r = yield self.client.get(CM)
        self.assertEqual(r.code, 200)


class DiscoveryEncodingTests(EncodingTestCase):
    """Discovery documents are negotiated like objects; OpenAPI and /version stay JSON."""

    server_args = ("--feature-gates", "CBORServingAndStorage=true")
    PATHS = ("/api", "/api/v1", "/apis", "/apis/rbac.authorization.platform.io", RBAC)

    @inlineCallbacks
    def test_every_encoding(self):
        """Protobuf, YAML and CBOR carry the same document as JSON."""
        decoders = {PROTOBUF: ProtobufCodec().decode, "application/yaml": yaml.safe_load,
                    "application/cbor": CBORCodec().decode}
        for path in self.PATHS:
            plain = yield self.get(path, "application/json")
            for media, decode in decoders.items():
                r = yield self.get(path, media)
                self.assertEqual((r.code, r.header("Content-Type")), (200, media), path)
                self.assertEqual(decode(r.body), plain.json(), (path, media))

    @inlineCallbacks
    def test_negotiation(self):
        """406 when nothing is acceptable; aggregated discovery falls back to JSON."""
        r = yield self.get("/apis", "text/html")
        self.assertEqual((r.code, r.json()["reason"]), (406, "NotAcceptable"))
        r = yield self.get("/apis", "application/json;g=apidiscovery.k8s.io;v=v2;"
                                    "as=APIGroupDiscoveryList,application/json")
        self.assertEqual((r.code, r.json()["kind"]), (200, "APIGroupList"))
        for path in ("/version", "/openapi/v2"):
            r = yield self.get(path, "application/yaml")
            self.assertEqual((r.code, r.header("Content-Type")), (200, "application/json"))


    @inlineCallbacks
    def test_aggregated_discovery(self):
        """Over TLS: the aggregated documents in every encoding, one ETag for all, a 304
        for it; stock kubectl's Accept gets the plain document."""
        aggregated = ";g=apidiscovery.platform.io;v=v2;as=APIGroupDiscoveryList"
        decoders = {"application/yaml": yaml.safe_load, "application/cbor": CBORCodec().decode}
        for path in ("/api", "/apis"):
            plain = yield self.get(path, "application/json" + aggregated)
            self.assertEqual((plain.code, plain.json()["kind"]), (200, "APIGroupDiscoveryList"))
            etag = plain.header("ETag")
            for media, decode in decoders.items():
                r = yield self.get(path, media + aggregated)
                self.assertEqual((r.code, r.header("Content-Type"), r.header("ETag")),
                                 (200, media + aggregated, etag), (path, media))
                self.assertEqual(decode(r.body), plain.json(), (path, media))
            r = yield self.get(path, "application/json" + aggregated, **{"If-None-Match": etag})
            self.assertEqual((r.code, r.body, r.header("Vary")), (304, b"", "Accept"))
            r = yield self.get(path, "application/json;g=apidiscovery.k8s.io;v=v2;"
                                     "as=APIGroupDiscoveryList,application/json")
            self.assertIn(r.json()["kind"], ("APIVersions", "APIGroupList"))


OBJECT_ROUTE = "application/json, application/yaml, application/vnd.platform.protobuf"
LIST_ROUTE = (OBJECT_ROUTE + ", application/json;stream=watch, "
              "application/vnd.platform.protobuf;stream=watch")


class RouteAcceptTests(EncodingTestCase):
    @staticmethod
    def no_route(produced):
        """go-restful's 406 as upstream's serviceErrorHandler writes it."""
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "406: Not Acceptable\n\nAvailable representations: " + produced,
                "reason": "NotAcceptable", "details": {}, "code": 406}

    @inlineCallbacks
    def test_wildcard_forms(self):
        """go-restful's Route.matchesAccept decides first: only */* or a produced type
        selects a route, so application/*, text/* and a lone * are upstream's service
        error 406 listing what the route produces, with empty details; a list naming a
        produced type anywhere is served."""
        for accept in ("application/*", "text/*", "*", "text/html, application/*;q=0.9",
                       "text/csv"):
            r = yield self.client.get(CM, headers={"Accept": accept})
            self.assertEqual((r.code, r.json()), (406, self.no_route(LIST_ROUTE)), accept)
        for accept in ("*/*", "application/*, application/json", "text/html, */*;q=0.1",
                       "application/json;as=Table;g=meta.platform.io;v=v1"):
            r = yield self.client.get(CM, headers={"Accept": accept})
            self.assertEqual(r.code, 200, accept)

    @inlineCallbacks
    def test_what_each_route_produces(self):
        """An object's routes produce the served media types; a list or watch route their
        watch forms too (upstream's installer: ``mediaTypes`` / ``allMediaTypes``)."""
        yield self.client.post(CM, {"metadata": {"name": "c"}})
        for method, path, produced in (
                ("GET", f"{CM}/c", OBJECT_ROUTE), ("GET", f"{CM}?watch=1", LIST_ROUTE),
                ("GET", "/api/v1/configmaps", LIST_ROUTE), ("POST", CM, OBJECT_ROUTE),
                ("DELETE", f"{CM}/c", OBJECT_ROUTE), ("DELETE", CM, OBJECT_ROUTE),
                ("POST", "/apis/authorization.platform.io/v1/selfsubjectaccessreviews",
                 OBJECT_ROUTE)):
            r = yield self.client.request(method, path, {"metadata": {"name": "x"}}
                                          if method == "POST" else None,
                                          headers={"Accept": "text/csv"})
            self.assertEqual((r.code, r.json()), (406, self.no_route(produced)), (method, path))

    @inlineCallbacks
    def test_q_zero_still_served(self):
        """goautoneg keeps q=0 ranges and upstream's NegotiateMediaTypeOptions never reads
        q (``handlers/negotiation/negotiate.go``): ``*/*;q=0`` and ``…json;q=0`` are JSON;
        goautoneg's sort puts a concrete type before a wildcard of higher q."""
        for accept in ("*/*;q=0", "application/json;q=0"):
            r = yield self.client.get(CM, headers={"Accept": accept})
            self.assertEqual((r.code, r.header("Content-Type")), (200, "application/json"),
                             accept)
        r = yield self.client.get(CM, headers={"Accept": "*/*;q=1, application/yaml;q=0.5"})
        self.assertEqual((r.code, r.header("Content-Type")), (200, "application/yaml"))

    @inlineCallbacks
    def test_write_refused_before_it_is_made(self):
        """A create whose answer cannot be encoded as asked is 406 and creates nothing
        (upstream negotiates the output media type before the write)."""
        for accept in ("application/*", "text/html"):
            r = yield self.client.post(CM, {"metadata": {"name": "never"}},
                                       headers={"Accept": accept})
            self.assertEqual(r.code, 406, accept)
        r = yield self.client.get(f"{CM}/never")
        self.assertEqual(r.code, 404)
