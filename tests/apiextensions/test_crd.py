"""
CustomResourceDefinitions end to end on the in-memory server: the definition's
validation and status (names accepted, established, conflicts), the kind served within
one flush (discovery, OpenAPI, routes), custom objects (every verb, status
subresource, tables, encodings), and deletion (the cleanup finalizer).
"""

from __future__ import annotations

import copy

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.authorizers import AuthorizerChain, PrivilegedGroups
from platformd.compose import Authorization
from tests.stub import StubServer

CRDS = "/apis/apiextensions.platform.io/v1/customresourcedefinitions"


def definition(plural="widgets", group="example.com", kind="Widget", scope="Namespaced",
               versions=None, short_names=("wd",), categories=("all",), status=True,
               columns=None) -> dict:
    version = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
    }
    if status:
        version["subresources"] = {"status": {}}
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.platform.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                           "shortNames": list(short_names), "categories": list(categories)},
                 "versions": versions if versions is not None else [version]},
    }


class Base(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()

    def create_crd(self, crd=None, **kw):
        crd = crd or definition(**kw)
        r = self.admin.post(CRDS, crd)
        self.assertEqual(r.code, 201, r.body)
        self.stub.flush()
        return self.admin.get(f"{CRDS}/{crd['metadata']['name']}").json()


class DefinitionTests(Base):
    def test_established(self):
        crd = self.create_crd()
        conditions = {c["type"]: c for c in crd["status"]["conditions"]}
        self.assertEqual(conditions["NamesAccepted"]["status"], "True")
        self.assertEqual(conditions["NamesAccepted"]["reason"], "NoConflicts")
        self.assertEqual(conditions["Established"]["status"], "True")
        self.assertEqual(conditions["Established"]["reason"], "InitialNamesAccepted")
        self.assertEqual(crd["status"]["acceptedNames"]["kind"], "Widget")
        self.assertEqual(crd["status"]["acceptedNames"]["listKind"], "WidgetList")
        self.assertEqual(crd["status"]["storedVersions"], ["v1"])
        self.assertEqual(crd["spec"]["conversion"], {"strategy": "None"})
        self.assertEqual(crd["metadata"]["generation"], 1)

    def test_invalid(self):
        crd = definition()
        crd["metadata"]["name"] = "other.example.com"
        crd["spec"]["group"] = "example"
        crd["spec"]["versions"][0]["storage"] = False
        r = self.admin.post(CRDS, crd)
        self.assertEqual(r.code, 422, r.body)
        causes = [(c["field"], c["message"]) for c in r.json()["details"]["causes"]]
        self.assertIn(("metadata.name",
                       'Invalid value: "other.example.com": must be spec.names.plural+"."+spec.group'),
                      causes)
        self.assertIn(("spec.group",
                       'Invalid value: "example": should be a domain with at least one dot'),
                      causes)
        self.assertIn("spec.versions", [f for f, _ in causes])
        self.assertTrue(any("must have exactly one version marked as storage version" in m
                            for _, m in causes))

    def test_names_conflict(self):
        self.create_crd()
        other = definition(plural="gadgets", kind="Gadget", short_names=("wd",))
        crd = self.create_crd(other)
        conditions = {c["type"]: c for c in crd["status"]["conditions"]}
        self.assertEqual(conditions["NamesAccepted"]["status"], "False")
        self.assertEqual(conditions["NamesAccepted"]["reason"], "ShortNamesConflict")
        self.assertEqual(conditions["NamesAccepted"]["message"], '"wd" is already in use')
        self.assertEqual(conditions["Established"]["status"], "False")
        self.assertEqual(conditions["Established"]["reason"], "NotAccepted")

    def test_discovery_and_openapi(self):
        self.create_crd()
        groups = self.admin.get("/apis").json()
        self.assertIn("example.com", [g["name"] for g in groups["groups"]])
        resources = self.admin.get("/apis/example.com/v1").json()["resources"]
        widgets = [r for r in resources if r["name"] == "widgets"][0]
        self.assertEqual(widgets["kind"], "Widget")
        self.assertEqual(widgets["shortNames"], ["wd"])
        self.assertEqual(widgets["categories"], ["all"])
        self.assertTrue(widgets["namespaced"])
        self.assertIn("widgets/status", [r["name"] for r in resources])
        v2 = self.admin.get("/openapi/v2").json()
        self.assertIn("com.example.v1.Widget", v2["definitions"])
        self.assertIn("apis/example.com/v1", self.admin.get("/openapi/v3").json()["paths"])


class ObjectTests(Base):
    def setUp(self):
        super().setUp()
        self.create_crd(columns=[
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}])
        self.path = "/apis/example.com/v1/namespaces/default/widgets"

    def test_crud(self):
        r = self.admin.post(self.path, {"apiVersion": "example.com/v1", "kind": "Widget",
                                        "metadata": {"name": "a"},
                                        "spec": {"size": 3, "color": "red"},
                                        "status": {"ready": True}})
        self.assertEqual(r.code, 201, r.body)
        obj = r.json()
        self.assertEqual(obj["spec"], {"size": 3, "color": "red"})
        self.assertNotIn("status", obj)  # the status subresource's
        self.assertEqual(obj["metadata"]["generation"], 1)
        r = self.admin.get(self.path + "/a")
        self.assertEqual(r.json()["spec"]["size"], 3)
        r = self.admin.patch(self.path + "/a", {"spec": {"size": 4}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["metadata"]["generation"], 2)
        r = self.admin.patch(self.path + "/a/status", {"status": {"ready": True}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"], {"ready": True})
        self.assertEqual(r.json()["metadata"]["generation"], 2)
        r = self.admin.patch(self.path + "/a", {"spec": {"size": 5}},
                             content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 415, r.body)
        r = self.admin.get(self.path)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a"])
        self.assertEqual(r.json()["kind"], "WidgetList")
        r = self.admin.get(self.path, headers={
            "Accept": "application/json;as=Table;g=meta.platform.io;v=v1"})
        table = r.json()
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Size", "Color"])
        self.assertEqual(table["rows"][0]["cells"], ["a", 4, "red"])
        r = self.admin.get(self.path + "/a", headers={
            "Accept": "application/vnd.platform.protobuf"})
        self.assertEqual(r.code, 406, r.body)
        r = self.admin.delete(self.path + "/a")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.admin.get(self.path + "/a").code, 404)


class DeletionTests(Base):
    def test_delete_definition_deletes_objects(self):
        self.create_crd()
        path = "/apis/example.com/v1/namespaces/default/widgets"
        for name in ("a", "b"):
            self.assertEqual(self.admin.post(path, {"metadata": {"name": name}}).code, 201)
        watch = self.stub.client().watch(path + "?watch=1")
        r = self.admin.delete(f"{CRDS}/widgets.example.com")
        self.assertEqual(r.code, 200, r.body)
        self.stub.flush()
        self.assertEqual(self.admin.get(f"{CRDS}/widgets.example.com").code, 404)
        self.assertEqual(self.admin.get(path).code, 404)
        self.assertNotIn("example.com", [g["name"] for g in self.admin.get("/apis").json()["groups"]])
        self.assertTrue(watch.ended)
        self.assertEqual(watch.types(), ["ADDED", "ADDED", "DELETED", "DELETED"])
        # Created again: clean.
        self.create_crd()
        self.assertEqual(self.admin.get(path).json()["items"], [])


class ScaleTests(Base):
    def setUp(self):
        super().setUp()
        crd = definition()
        crd["spec"]["versions"][0]["subresources"]["scale"] = {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}
        self.create_crd(crd)
        self.path = "/apis/example.com/v1/namespaces/default/widgets"
        self.assertEqual(self.admin.post(self.path, {
            "metadata": {"name": "a"}, "spec": {"replicas": 2}}).code, 201)
        self.admin.put(self.path + "/a/status", {
            "metadata": {"name": "a"}, "spec": {"replicas": 2},
            "status": {"replicas": 1, "selector": "app=a"}})

    def test_get_put_patch(self):
        r = self.admin.get(self.path + "/a/scale")
        self.assertEqual(r.code, 200, r.body)
        scale = r.json()
        self.assertEqual((scale["kind"], scale["apiVersion"]), ("Scale", "autoscaling/v1"))
        self.assertEqual(scale["spec"], {"replicas": 2})
        self.assertEqual(scale["status"], {"replicas": 1, "selector": "app=a"})
        scale["spec"]["replicas"] = 5
        r = self.admin.put(self.path + "/a/scale", scale)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"], {"replicas": 5})
        self.assertEqual(self.admin.get(self.path + "/a").json()["spec"]["replicas"], 5)
        r = self.admin.put(self.path + "/a/scale", scale)  # stale resourceVersion
        self.assertEqual(r.code, 409, r.body)
        r = self.admin.patch(self.path + "/a/scale", {"spec": {"replicas": 7}})
        self.assertEqual(r.code, 200, r.body)
        obj = self.admin.get(self.path + "/a").json()
        self.assertEqual(obj["spec"]["replicas"], 7)
        self.assertEqual(obj["metadata"]["generation"], 3)
        resources = self.admin.get("/apis/example.com/v1").json()["resources"]
        entry = [r for r in resources if r["name"] == "widgets/scale"][0]
        self.assertEqual((entry["group"], entry["version"], entry["kind"]),
                         ("autoscaling", "v1", "Scale"))
        r = self.admin.patch(self.path + "/a/scale", {"spec": {"replicas": -1}})
        self.assertEqual(r.code, 422, r.body)


class VersionTests(Base):
    def test_two_versions_conversion_none(self):
        crd = definition()
        v1 = crd["spec"]["versions"][0]
        v2 = copy.deepcopy(v1)
        v2["name"], v2["storage"], v1["storage"] = "v2", False, True
        crd["spec"]["versions"].append(v2)
        self.create_crd(crd)
        group = self.admin.get("/apis/example.com").json()
        self.assertEqual([v["version"] for v in group["versions"]], ["v2", "v1"])
        self.assertEqual(group["preferredVersion"]["version"], "v2")
        v1_path = "/apis/example.com/v1/namespaces/default/widgets"
        v2_path = "/apis/example.com/v2/namespaces/default/widgets"
        watch = self.stub.client().watch(v1_path + "?watch=1")
        r = self.admin.post(v2_path, {"apiVersion": "example.com/v2", "kind": "Widget",
                                      "metadata": {"name": "a"}, "spec": {"size": 1}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["apiVersion"], "example.com/v2")
        stored = self.stub.components.storage
        raw = self.successResultOf(stored.get("/registry/widgets.example.com/default/a"))
        self.assertIn(b'"apiVersion":"example.com/v1"', raw.value)
        self.assertEqual(self.admin.get(v1_path + "/a").json()["apiVersion"], "example.com/v1")
        self.assertEqual(self.admin.get(v2_path + "/a").json()["apiVersion"], "example.com/v2")
        self.assertEqual([i["apiVersion"] for i in self.admin.get(v2_path).json()["items"]],
                         ["example.com/v2"])
        r = self.admin.patch(v2_path + "/a", {"spec": {"size": 2}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.admin.get(v1_path + "/a").json()["spec"], {"size": 2})
        self.stub.flush()
        self.assertEqual(watch.types(), ["ADDED", "MODIFIED"])


class ObjectFeatureTests(Base):
    """Every verb and list feature works on custom objects as on built-in ones."""

    path = "/apis/example.com/v1/namespaces/default/widgets"

    def setUp(self):
        super().setUp()
        self.create_crd()

    def make(self, *names, labels=None):
        for name in names:
            r = self.admin.post(self.path, {"metadata": {"name": name, "labels": labels or {}},
                                            "spec": {"n": name}})
            self.assertEqual(r.code, 201, r.body)

    def test_apply_and_json_patch(self):
        r = self.admin.patch(self.path + "/a?fieldManager=me", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"},
            "spec": {"size": 1, "tags": ["x"]}}, content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["metadata"]["managedFields"][0]["manager"], "me")
        r = self.admin.patch(self.path + "/a", [{"op": "replace", "path": "/spec/size",
                                                 "value": 2}],
                             content_type="application/json-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["spec"], {"size": 2, "tags": ["x"]})
        r = self.admin.patch(self.path + "/a?fieldManager=other", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"},
            "spec": {"tags": ["y"]}}, content_type="application/apply-patch+yaml")
        self.assertEqual(r.code, 409, r.body)

    def test_selectors_paging_deletecollection(self):
        self.make("a", "b", labels={"team": "x"})
        self.make("c", labels={"team": "y"})
        names = lambda r: [i["metadata"]["name"] for i in r.json()["items"]]  # noqa: E731
        self.assertEqual(names(self.admin.get(self.path + "?labelSelector=team%3Dx")), ["a", "b"])
        self.assertEqual(names(self.admin.get(self.path + "?fieldSelector=metadata.name%3Dc")),
                         ["c"])
        self.assertEqual(names(self.admin.get(
            "/apis/example.com/v1/widgets?fieldSelector=metadata.namespace%3Ddefault")),
            ["a", "b", "c"])
        r = self.admin.get(self.path + "?fieldSelector=spec.n%3Dc")
        self.assertEqual(r.code, 400, r.body)
        page = self.admin.get(self.path + "?limit=2").json()
        self.assertEqual(len(page["items"]), 2)
        rest = self.admin.get(self.path + "?limit=2&continue=" + page["metadata"]["continue"])
        self.assertEqual(names(rest), ["c"])
        r = self.admin.delete(self.path + "?labelSelector=team%3Dx")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(names(self.admin.get(self.path)), ["c"])

    def test_encodings_and_views(self):
        self.make("a")
        r = self.admin.get(self.path + "/a", headers={"Accept": "application/yaml"})
        self.assertEqual(r.code, 200, r.body)
        self.assertIn(b"apiVersion: example.com/v1", r.body)
        r = self.admin.get(self.path, headers={
            "Accept": "application/json;as=PartialObjectMetadataList;g=meta.platform.io;v=v1"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["items"][0]["metadata"]["name"], "a")
        self.assertNotIn("spec", r.json()["items"][0])
        r = self.admin.get(self.path + "/a", headers={
            "Accept": "application/vnd.platform.protobuf, application/json"})
        self.assertEqual(r.header("content-type"), "application/json")
        r = self.admin.request("POST", self.path, b"\x6b\x38\x73\x00",
                               content_type="application/vnd.platform.protobuf")
        self.assertEqual(r.code, 415, r.body)
        self.assertEqual(r.json()["message"], "the body of the request was in an unknown "
                         "format - accepted media types include: application/json, "
                         "application/yaml")

    def test_rbac(self):
        stub = StubServer(rbac_policy=True, authorization=lambda internals: Authorization(
            AuthorizerChain([PrivilegedGroups(), internals.rbac])))
        self.addCleanup(stub.stop)
        self.stub, self.admin = stub, stub.client()
        self.create_crd()
        self.make("a")
        user = self.stub.client("jane", groups=())
        self.assertEqual(user.get(self.path).code, 403)
        r = self.admin.post("/apis/rbac.authorization.platform.io/v1/namespaces/default/roles", {
            "metadata": {"name": "widgets"},
            "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"],
                       "verbs": ["get", "list"]}]})
        self.assertEqual(r.code, 201, r.body)
        r = self.admin.post(
            "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings", {
                "metadata": {"name": "jane"},
                "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                            "name": "widgets"},
                "subjects": [{"kind": "User", "name": "jane",
                              "apiGroup": "rbac.authorization.platform.io"}]})
        self.assertEqual(r.code, 201, r.body)
        self.stub.flush()
        self.assertEqual(user.get(self.path).code, 200)
        self.assertEqual(user.delete(self.path + "/a").code, 403)

    def test_namespace_deletion_deletes_custom_objects(self):
        self.assertEqual(self.admin.post("/api/v1/namespaces", {"metadata": {"name": "t"}}).code,
                         201)
        path = "/apis/example.com/v1/namespaces/t/widgets"
        self.assertEqual(self.admin.post(path, {"metadata": {"name": "a"}}).code, 201)
        self.assertEqual(self.admin.delete("/api/v1/namespaces/t").code, 200)
        for _ in range(5):
            self.stub.advance(1)
        self.assertEqual(self.admin.get(path).json()["items"], [])
        self.assertEqual(self.admin.get("/api/v1/namespaces/t").code, 404)

    def test_create_refused_while_terminating(self):
        self.make("a")
        self.assertEqual(self.admin.patch(self.path + "/a", {
            "metadata": {"finalizers": ["example.com/hold"]}}).code, 200)
        self.assertEqual(self.admin.delete(f"{CRDS}/widgets.example.com").code, 200)
        self.stub.flush()
        crd = self.admin.get(f"{CRDS}/widgets.example.com").json()
        terminating = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"][0]
        self.assertEqual((terminating["reason"], terminating["message"]),
                         ("InstanceDeletionInProgress", "CustomResource deletion is in progress"))
        r = self.admin.post(self.path, {"metadata": {"name": "b"}})
        self.assertEqual(r.code, 405, r.body)
        self.assertEqual(r.json()["message"],
                         "create not allowed while custom resource definition is terminating")
        self.assertEqual(self.admin.patch(self.path + "/a", {
            "metadata": {"finalizers": None}}).code, 200)
        self.stub.flush()
        self.assertEqual(self.admin.get(f"{CRDS}/widgets.example.com").code, 404)

    def test_cluster_scoped(self):
        self.create_crd(plural="gizmos", kind="Gizmo", scope="Cluster", short_names=())
        r = self.admin.post("/apis/example.com/v1/gizmos", {"metadata": {"name": "g"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("namespace", r.json()["metadata"])
        self.assertEqual(self.admin.get("/apis/example.com/v1/gizmos/g").code, 200)
        self.assertEqual(self.admin.get("/apis/example.com/v1/namespaces/default/gizmos").code,
                         404)


class CBORTests(SynchronousTestCase):
    def test_cbor(self):
        import cbor2
        stub = StubServer(gates="CBORServingAndStorage=true")
        self.addCleanup(stub.stop)
        admin = stub.client()
        self.assertEqual(admin.post(CRDS, definition()).code, 201)
        stub.flush()
        path = "/apis/example.com/v1/namespaces/default/widgets"
        r = admin.request("POST", path, cbor2.dumps({"metadata": {"name": "a"},
                                                      "spec": {"x": 1}}),
                          content_type="application/cbor")
        self.assertEqual(r.code, 201, r.body)
        r = admin.get(path + "/a", headers={"Accept": "application/cbor"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(cbor2.loads(r.body)["spec"], {"x": 1})


class RestartTests(SynchronousTestCase):
    def test_definitions_served_at_start(self):
        """A server started over a store holding definitions and their objects serves
        them once ready, the objects loaded with every other (``preload``)."""
        first = StubServer()
        admin = first.client()
        self.assertEqual(admin.post(CRDS, definition()).code, 201)
        first.flush()
        path = "/apis/example.com/v1/namespaces/default/widgets"
        self.assertEqual(admin.post(path, {"metadata": {"name": "a"}}).code, 201)
        first.stop()
        second = StubServer(storage=first.storage, clock=first.clock)
        self.addCleanup(second.stop)
        self.assertEqual(second.components.custom_resources._preloaded, {})
        r = second.client().get(path)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a"])
        self.assertIn("example.com", [g["name"] for g in
                                      second.client().get("/apis").json()["groups"]])


class UnstructuredTests(Base):
    def test_errors_name_unstructured(self):
        self.create_crd()
        path = "/apis/example.com/v1/namespaces/default/widgets"
        r = self.admin.get(path, headers={
            "Accept": "application/json;as=PartialObjectMetadata;g=meta.platform.io;v=v1"})
        self.assertEqual(r.code, 406, r.body)
        self.assertIn("(*unstructured.UnstructuredList)", r.json()["message"])


class SelectableFieldTests(Base):
    def test_selectable_fields(self):
        crd = definition()
        crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.color"},
                                                          {"jsonPath": ".spec.ok"}]
        self.create_crd(crd)
        path = "/apis/example.com/v1/namespaces/default/widgets"
        for name, color, ok in (("a", "red", True), ("b", "blue", False)):
            self.assertEqual(self.admin.post(path, {"metadata": {"name": name},
                                                    "spec": {"color": color, "ok": ok}}).code,
                             201)
        names = lambda q: [i["metadata"]["name"]  # noqa: E731
                           for i in self.admin.get(path + "?fieldSelector=" + q).json()["items"]]
        self.assertEqual(names("spec.color%3Dblue"), ["b"])
        self.assertEqual(names("spec.ok%3Dtrue"), ["a"])
        r = self.admin.get(path + "?fieldSelector=spec.size%3D1")
        self.assertEqual((r.code, r.json()["message"]),
                         (400, "field label not supported: spec.size"))


class StructuralSchemaTests(Base):
    """Objects are typed, pruned, defaulted and validated by their version's schema
    (the structural-schema library, through ``apiextensions/schemas.py``)."""

    def test_typed_objects(self):
        crd = definition()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "type": "object", "properties": {
                "size": {"type": "integer", "minimum": 1, "default": 1},
                "color": {"type": "string", "enum": ["red", "blue"]}}}
        self.create_crd(crd)
        path = "/apis/example.com/v1/namespaces/default/widgets"
        r = self.admin.post(path + "?fieldValidation=Warn",
                            {"metadata": {"name": "a"}, "spec": {"color": "red", "x": 1}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"], {"color": "red", "size": 1})
        self.assertEqual(r.header("warning"), '299 - "unknown field \\"spec.x\\""')
        r = self.admin.post(path, {"metadata": {"name": "b"}, "spec": {"size": 0}})
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "spec.size")
        r = self.admin.post(path, {"metadata": {"name": "c"}, "spec": {"size": "x"}})
        self.assertIn(r.code, (400, 422), r.body)

    def test_schema_checked_at_write(self):
        crd = definition()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "properties": {"size": {"type": "integer"}}}
        r = self.admin.post(CRDS, crd)
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(any(c["field"].startswith("spec.validation.openAPIV3Schema")
                            for c in r.json()["details"]["causes"]), r.body)


class ValidationRuleTests(Base):
    """``x-kubernetes-validations`` using Kubernetes' CEL libraries and optionalOldSelf,
    from the definition's write to a refused object's 422."""

    def setUp(self):
        super().setUp()
        crd = definition()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "type": "object",
            "properties": {
                "memory": {"type": "string", "maxLength": 20},
                "endpoint": {"type": "string", "maxLength": 200},
                "network": {"type": "string", "maxLength": 50},
                "ports": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
                "version": {"type": "string", "maxLength": 20}},
            "x-kubernetes-validations": [
                {"rule": "!has(self.memory) || "
                         "quantity(self.memory).isLessThan(quantity('1Gi'))",
                 "message": "memory must be less than 1Gi"},
                {"rule": "!has(self.endpoint) || url(self.endpoint).getScheme() == 'https'",
                 "messageExpression": "url(self.endpoint).getScheme() == 'http' ? "
                                      "'scheme http is not https' : 'not https'"},
                {"rule": "!has(self.network) || cidr(self.network).prefixLength() >= 16",
                 "fieldPath": ".network", "reason": "FieldValueForbidden",
                 "message": "network too large"},
                {"rule": "!has(self.ports) || self.ports.isSorted()",
                 "fieldPath": ".ports", "message": "ports must be sorted"},
                {"rule": "!has(self.version) || !oldSelf.hasValue() || "
                         "!has(oldSelf.value().version) || "
                         "semver(self.version).compareTo(semver(oldSelf.value().version)) >= 0",
                 "optionalOldSelf": True, "message": "no downgrade"}]}
        self.create_crd(crd)
        self.path = "/apis/example.com/v1/namespaces/default/widgets"

    def test_refused_with_the_rules_messages(self):
        r = self.admin.post(self.path, {"metadata": {"name": "a"}, "spec": {
            "memory": "2Gi", "endpoint": "http://example.com/x", "network": "10.0.0.0/8",
            "ports": [443, 80]}})
        self.assertEqual(r.code, 422, r.body)
        body = r.json()
        self.assertEqual(body["reason"], "Invalid")
        self.assertEqual(body["details"]["causes"], [
            {"reason": "FieldValueInvalid", "message": "Invalid value: "
             "memory must be less than 1Gi", "field": "spec"},
            {"reason": "FieldValueInvalid", "message": "Invalid value: "
             "scheme http is not https", "field": "spec"},
            {"reason": "FieldValueForbidden", "message": "Forbidden: network too large",
             "field": "spec.network"},
            {"reason": "FieldValueInvalid", "message": "Invalid value: "
             "ports must be sorted", "field": "spec.ports"}])
        self.assertEqual(body["message"],
                         'Widget.example.com "a" is invalid: [spec: Invalid value: memory must '
                         'be less than 1Gi, spec: Invalid value: scheme http is not https, '
                         'spec.network: Forbidden: network too large, spec.ports: Invalid '
                         'value: ports must be sorted]')

    def test_library_error_in_a_rule(self):
        r = self.admin.post(self.path, {"metadata": {"name": "a"}, "spec": {"memory": "1Mo"}})
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["details"]["causes"], [
            {"reason": "FieldValueInvalid", "field": "spec", "message":
             "Invalid value: \"object\": quantities must match the regular expression "
             "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory must be "
             "less than 1Gi"}])

    def test_optional_old_self_on_create_and_update(self):
        r = self.admin.post(self.path, {"metadata": {"name": "a"},
                                        "spec": {"version": "1.2.0"}})
        self.assertEqual(r.code, 201, r.body)
        current = r.json()
        current["spec"]["version"] = "1.10.0"
        r = self.admin.put(f"{self.path}/a", current)
        self.assertEqual(r.code, 200, r.body)
        current = r.json()
        current["spec"]["version"] = "1.9.9"
        r = self.admin.put(f"{self.path}/a", current)
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["details"]["causes"], [
            {"reason": "FieldValueInvalid", "message": "Invalid value: no downgrade",
             "field": "spec"}])

    def test_definition_refused_for_a_library_type_error(self):
        crd = definition(plural="gadgets", kind="Gadget", short_names=())
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "type": "object", "properties": {"n": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "quantity(self.n).sign() > 0"}]}
        r = self.admin.post(CRDS, crd)
        self.assertEqual(r.code, 422, r.body)
        [cause] = r.json()["details"]["causes"]
        self.assertEqual(cause["field"], "spec.validation.openAPIV3Schema.properties[spec]."
                                         "x-kubernetes-validations[0].rule")
        self.assertIn("compilation failed: ERROR: <input>:1:9: found no matching overload "
                      "for 'quantity' applied to '(int)'", cause["message"])
