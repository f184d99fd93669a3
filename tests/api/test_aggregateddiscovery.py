"""
Aggregated discovery (``as=APIGroupDiscoveryList``): the documents field by field
against upstream's ``apidiscovery/v2`` shapes and ``api/discovery/aggregated_v2.json``,
and served over HTTP on the in-memory server: ETag and 304, ``Vary: Accept``, the
encodings, the fallback to the plain documents, custom resources coming and going.
"""

from __future__ import annotations

import hashlib
import json

import yaml
from twisted.trial.unittest import SynchronousTestCase

from platformd.api import aggregateddiscovery, discovery
from platformd.api.documents import Documents
from platformd.codecs import protoconvert
from platformd.codecs.protobufcodec import MAGIC
from platformd.protos.platform.api.apidiscovery.v2 import generated_pb2 as apidiscovery
from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
from platformd.registry.catalog import builtin
from platformd.registry.customresources import kind_for, kinds_for
from tests.apiextensions.test_crd import CRDS, definition
from tests.stub import StubServer

AGGREGATED = "application/json;g=apidiscovery.platform.io;v=v2;as=APIGroupDiscoveryList"
#: What stock kubectl 1.36 (client-go's discovery client) asks ``/api`` and ``/apis`` for.
KUBECTL = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
           "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
           "application/json")
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS = ["get", "patch", "update"]


def _kind(name: str) -> dict:
    """A built-in ``responseKind``: upstream's installer names the kind alone."""
    return {"group": "", "version": "", "kind": name}


def _status(kind: str) -> dict:
    return {"subresource": "status", "responseKind": _kind(kind), "verbs": STATUS}


def _group(document: dict, name: str) -> dict:
    return [g for g in document["items"] if g["metadata"].get("name", "") == name][0]


def _resources(document: dict, name: str = "") -> dict:
    version = _group(document, name)["versions"][0]
    return {r["resource"]: r for r in version["resources"]}


class CoreDocumentTests(SynchronousTestCase):
    """``/api``: the core group alone, named ``""`` (an empty ``metadata``)."""

    def setUp(self):
        self.document = aggregateddiscovery.document(builtin(), "/api")

    def test_envelope(self):
        self.assertEqual(list(self.document), ["kind", "apiVersion", "metadata", "items"])
        self.assertEqual((self.document["kind"], self.document["apiVersion"],
                          self.document["metadata"]),
                         ("APIGroupDiscoveryList", "apidiscovery.platform.io/v2", {}))
        [group] = self.document["items"]
        self.assertEqual(list(group), ["metadata", "versions"])
        self.assertEqual(group["metadata"], {})
        [version] = group["versions"]
        self.assertEqual(list(version), ["version", "resources", "freshness"])
        self.assertEqual((version["version"], version["freshness"]), ("v1", "Current"))

    def test_pods(self):
        """Upstream's field order; subresources sorted by name, each with its kind: an
        Eviction names its own group, a Binding (same group) its kind alone."""
        pods = _resources(self.document)["pods"]
        self.assertEqual(list(pods), ["resource", "responseKind", "scope", "singularResource",
                                      "verbs", "shortNames", "categories", "subresources"])
        self.assertEqual(pods, {
            "resource": "pods", "responseKind": _kind("Pod"), "scope": "Namespaced",
            "singularResource": "pod", "verbs": VERBS, "shortNames": ["po"],
            "categories": ["all"], "subresources": [
                {"subresource": "binding", "responseKind": _kind("Binding"),
                 "verbs": ["create"]},
                {"subresource": "eviction", "responseKind": {
                    "group": "policy.platform.io", "version": "v1", "kind": "Eviction"},
                 "verbs": ["create"]},
                _status("Pod")]})

    def test_cluster_scope_and_token(self):
        resources = _resources(self.document)
        self.assertEqual(resources["namespaces"], {
            "resource": "namespaces", "responseKind": _kind("Namespace"), "scope": "Cluster",
            "singularResource": "namespace", "verbs": VERBS, "shortNames": ["ns"],
            "subresources": [_status("Namespace")]})
        self.assertEqual(resources["serviceaccounts"]["subresources"], [
            {"subresource": "token", "responseKind": {
                "group": "authentication.platform.io", "version": "v1",
                "kind": "TokenRequest"}, "verbs": ["create"]}])
        self.assertEqual(resources["bindings"], {
            "resource": "bindings", "responseKind": _kind("Binding"), "scope": "Namespaced",
            "singularResource": "binding", "verbs": ["create"]})

    def test_same_resources_as_the_plain_list(self):
        """Every resource of ``/api/v1`` is here, sorted, its subresources under it."""
        plain = discovery.api_resource_list(builtin(), "", "v1")["resources"]
        names = [r["resource"] for r in self.document["items"][0]["versions"][0]["resources"]]
        self.assertEqual(names, [r["name"] for r in plain if "/" not in r["name"]])
        subresources = sorted(f"{r['resource']}/{s['subresource']}" for r in
                              self.document["items"][0]["versions"][0]["resources"]
                              for s in r.get("subresources", ()))
        self.assertEqual(subresources, sorted(r["name"] for r in plain if "/" in r["name"]))


class GroupsDocumentTests(SynchronousTestCase):
    """``/apis``: every named group, in the plain ``/apis`` order."""

    def setUp(self):
        self.catalog = builtin()
        self.document = aggregateddiscovery.document(self.catalog, "/apis")

    def test_group_order_is_the_plain_documents(self):
        plain = discovery.api_group_list(self.catalog)["groups"]
        self.assertEqual(
            [(g["metadata"]["name"], [v["version"] for v in g["versions"]])
             for g in self.document["items"]],
            [(g["name"], [v["version"] for v in g["versions"]]) for g in plain])
        self.assertNotIn({}, [g["metadata"] for g in self.document["items"]])

    def test_rbac(self):
        """As upstream's aggregated_v2.json shows rbac.authorization.k8s.io."""
        def entry(plural, kind, scope):
            return {"resource": plural, "responseKind": _kind(kind), "scope": scope,
                    "singularResource": plural[:-1], "verbs": VERBS}
        self.assertEqual(_group(self.document, "rbac.authorization.platform.io"), {
            "metadata": {"name": "rbac.authorization.platform.io"},
            "versions": [{"version": "v1", "resources": [
                entry("clusterrolebindings", "ClusterRoleBinding", "Cluster"),
                entry("clusterroles", "ClusterRole", "Cluster"),
                entry("rolebindings", "RoleBinding", "Namespaced"),
                entry("roles", "Role", "Namespaced")], "freshness": "Current"}]})

    def test_apiextensions(self):
        """As upstream's aggregated_v2.json shows apiextensions.k8s.io."""
        self.assertEqual(_group(self.document, "apiextensions.platform.io"), {
            "metadata": {"name": "apiextensions.platform.io"},
            "versions": [{"version": "v1", "resources": [{
                "resource": "customresourcedefinitions",
                "responseKind": _kind("CustomResourceDefinition"), "scope": "Cluster",
                "singularResource": "customresourcedefinition", "verbs": VERBS,
                "shortNames": ["crd", "crds"], "categories": ["api-extensions"],
                "subresources": [_status("CustomResourceDefinition")]}],
                "freshness": "Current"}]})

    def test_reviews_are_create_only(self):
        self.assertEqual(_resources(self.document, "authorization.platform.io")[
            "selfsubjectaccessreviews"], {
            "resource": "selfsubjectaccessreviews",
            "responseKind": _kind("SelfSubjectAccessReview"), "scope": "Cluster",
            "singularResource": "selfsubjectaccessreview", "verbs": ["create"]})

    def test_etag_is_upstreams_hash(self):
        """SHA-512, upper-case hex, of the list's JSON without kind and apiVersion."""
        without_type = {"metadata": {}, "items": self.document["items"]}
        body = json.dumps(without_type, separators=(",", ":")).encode()
        self.assertEqual(aggregateddiscovery.etag(self.document),
                         hashlib.sha512(body).hexdigest().upper())


class CustomResourceTests(SynchronousTestCase):
    """A custom resource as the CRD handler's discovery controller publishes it."""

    def test_widget(self):
        crd = definition()
        crd["spec"]["versions"][0]["subresources"]["scale"] = {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        crd["status"] = {"acceptedNames": crd["spec"]["names"]}
        catalog = builtin()
        catalog.add(kind_for(crd, crd["spec"]["versions"][0]))
        document = aggregateddiscovery.document(catalog, "/apis")
        self.assertEqual(document["items"][-1], {
            "metadata": {"name": "example.com"},
            "versions": [{"version": "v1", "resources": [{
                "resource": "widgets",
                "responseKind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                "scope": "Namespaced", "singularResource": "widget",
                "verbs": ["delete", "deletecollection", "get", "list", "patch", "create",
                          "update", "watch"],
                "shortNames": ["wd"], "categories": ["all"],
                "subresources": [
                    {"subresource": "status", "responseKind": {
                        "group": "example.com", "version": "v1", "kind": "Widget"},
                     "verbs": STATUS},
                    {"subresource": "scale", "responseKind": {
                        "group": "autoscaling", "version": "v1", "kind": "Scale"},
                     "verbs": STATUS}]}], "freshness": "Current"}]})


    def test_versions_in_priority_order(self):
        """Two served versions: v2 first (the plain documents' preferred version), each
        naming its own version in ``responseKind``."""
        crd = definition(status=False)
        v1 = crd["spec"]["versions"][0]
        crd["spec"]["versions"].append({**v1, "name": "v2", "storage": False})
        crd["status"] = {"acceptedNames": crd["spec"]["names"]}
        catalog = builtin()
        for kind in kinds_for(crd):
            catalog.add(kind)
        group = aggregateddiscovery.document(catalog, "/apis")["items"][-1]
        self.assertEqual([(v["version"], v["resources"][0]["responseKind"]["version"])
                          for v in group["versions"]], [("v2", "v2"), ("v1", "v1")])
        self.assertEqual(discovery.api_group(catalog, "example.com")["preferredVersion"],
                         {"groupVersion": "example.com/v2", "version": "v2"})
        self.assertNotIn("subresources", group["versions"][0]["resources"][0])


class DocumentsTests(SynchronousTestCase):
    """Built once per catalog change, not per request."""

    def test_kept_until_the_catalog_changes(self):
        catalog = builtin()
        documents = Documents(catalog, "h:1")
        first = documents.aggregated("/apis")
        self.assertIs(documents.aggregated("/apis/"), first)
        self.assertIsNot(documents.aggregated("/api"), first)
        crd = definition()
        crd["status"] = {"acceptedNames": crd["spec"]["names"]}
        kind = kind_for(crd, crd["spec"]["versions"][0])
        catalog.add(kind)
        second = documents.aggregated("/apis")
        self.assertNotEqual(second.etag, first.etag)
        self.assertIs(documents.aggregated("/apis"), second)
        catalog.remove(kind)
        self.assertEqual(documents.aggregated("/apis").etag, first.etag)


class ServedTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()

    def get(self, path, accept, **headers):
        return self.admin.get(path, headers=dict(headers, Accept=accept))

    def test_headers_and_304(self):
        """Upstream's ServeHTTPWithETag: a quoted ETag, Vary, public caching; the same
        ETag in If-None-Match is a 304 without a body or Content-Type."""
        for path in ("/api", "/apis", "/apis/"):
            r = self.get(path, AGGREGATED)
            self.assertEqual(r.code, 200, r.body)
            self.assertEqual(r.header("Content-Type"), AGGREGATED)
            self.assertEqual(r.header("Vary"), "Accept")
            self.assertEqual(r.header("Cache-Control"), "public")
            document = self.stub.api.documents.aggregated(path)
            self.assertEqual(r.header("ETag"), f'"{document.etag}"')
            self.assertEqual(r.body, document.json)
            self.assertEqual(r.json(), aggregateddiscovery.document(
                self.stub.components.catalog, path))
            cached = self.get(path, AGGREGATED, **{"If-None-Match": r.header("ETag")})
            self.assertEqual((cached.code, cached.body), (304, b""))
            self.assertEqual((cached.header("ETag"), cached.header("Vary"),
                              cached.header("Cache-Control"), cached.header("Content-Type")),
                             (r.header("ETag"), "Accept", "public", None))
            stale = self.get(path, AGGREGATED, **{"If-None-Match": '"0"'})
            self.assertEqual((stale.code, stale.body), (200, r.body))

    def test_kubectl_gets_the_plain_documents(self):
        """Stock kubectl asks for apidiscovery.k8s.io (v2, then the removed v2beta1):
        it gets today's documents, byte for byte, without ETag or Vary."""
        for path in ("/api", "/apis"):
            plain = self.get(path, "application/json")
            for accept in (KUBECTL, "application/vnd.kubernetes.protobuf;g=apidiscovery."
                           "k8s.io;v=v2;as=APIGroupDiscoveryList," + KUBECTL):
                r = self.get(path, accept)
                self.assertEqual((r.code, r.header("Content-Type"), r.body),
                                 (200, "application/json", plain.body))
                self.assertEqual((r.header("ETag"), r.header("Vary")), (None, None))

    def test_other_accepts(self):
        """v2beta1 is not served (upstream's AggregatedDiscoveryRemoveBetaType, locked
        on since 1.35): alone it is a 406, with a plain type after it the plain
        document; a Table is not a discovery view; profile=nopeer is the same document;
        the group-version documents have no aggregated form."""
        beta = "application/json;g=apidiscovery.platform.io;v=v2beta1;as=APIGroupDiscoveryList"
        r = self.get("/apis", beta)
        self.assertEqual((r.code, r.json()["reason"]), (406, "NotAcceptable"))
        r = self.get("/apis", beta + ",application/json")
        self.assertEqual((r.code, r.json()["kind"]), (200, "APIGroupList"))
        r = self.get("/apis", "application/json;as=Table;g=meta.platform.io;v=v1,"
                              "application/json")
        self.assertEqual(r.json()["kind"], "APIGroupList")
        r = self.get("/apis", AGGREGATED + ";profile=nopeer")
        self.assertEqual((r.code, r.json()["kind"]), (200, "APIGroupDiscoveryList"))
        for path in ("/api/v1", "/apis/rbac.authorization.platform.io",
                     "/apis/rbac.authorization.platform.io/v1"):
            r = self.get(path, AGGREGATED)
            self.assertEqual(r.code, 406, path)
            r = self.get(path, AGGREGATED + ",application/json")
            self.assertEqual((r.code, r.header("Content-Type")), (200, "application/json"))

    def test_encodings(self):
        """YAML and Protobuf (upstream's apidiscovery/v2 messages, under either name)
        carry the same document, with the same ETag."""
        plain = self.get("/apis", AGGREGATED)
        r = self.get("/apis", AGGREGATED.replace("json", "yaml"))
        self.assertEqual(r.header("Content-Type"), AGGREGATED.replace("json", "yaml"))
        self.assertEqual(yaml.safe_load(r.body), plain.json())
        self.assertEqual(r.header("ETag"), plain.header("ETag"))
        for media in ("application/vnd.platform.protobuf",
                      "application/vnd.kubernetes.protobuf"):
            accept = AGGREGATED.replace("application/json", media)
            r = self.get("/apis", accept + ",application/json")
            self.assertEqual((r.code, r.header("Content-Type")), (200, accept))
            self.assertTrue(r.body.startswith(MAGIC))
            unknown = runtime.Unknown.FromString(r.body[len(MAGIC):])
            self.assertEqual((unknown.typeMeta.apiVersion, unknown.typeMeta.kind),
                             ("apidiscovery.platform.io/v2", "APIGroupDiscoveryList"))
            message = apidiscovery.APIGroupDiscoveryList.FromString(unknown.raw)
            expected = plain.json()
            del expected["kind"], expected["apiVersion"]
            self.assertEqual(protoconvert.from_message(message, upstream=True), expected)

    def test_pretty(self):
        r = self.get("/api", AGGREGATED + ";pretty=1")
        self.assertTrue(r.body.startswith(b'{\n  "kind": "APIGroupDiscoveryList"'), r.body[:40])

    def test_custom_resource_comes_and_goes(self):
        """A definition created changes the document and its ETag within one flush;
        deleted, the document (and ETag) is the one from before."""
        before = self.get("/apis", AGGREGATED)
        crd = definition()
        crd["spec"]["versions"][0]["subresources"]["scale"] = {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        self.assertEqual(self.admin.post(CRDS, crd).code, 201)
        self.stub.flush()
        during = self.get("/apis", AGGREGATED, **{"If-None-Match": before.header("ETag")})
        self.assertEqual(during.code, 200)
        self.assertNotEqual(during.header("ETag"), before.header("ETag"))
        widgets = _resources(during.json(), "example.com")["widgets"]
        self.assertEqual((widgets["shortNames"], widgets["categories"]), (["wd"], ["all"]))
        self.assertEqual([s["subresource"] for s in widgets["subresources"]],
                         ["status", "scale"])
        self.assertEqual(self.admin.delete(f"{CRDS}/widgets.example.com").code, 200)
        self.stub.flush()
        after = self.get("/apis", AGGREGATED)
        self.assertEqual((after.header("ETag"), after.body),
                         (before.header("ETag"), before.body))
        self.assertNotIn("example.com", after.body.decode())
