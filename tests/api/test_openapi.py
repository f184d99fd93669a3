"""
The OpenAPI documents: definitions and paths against upstream's conventions, the checks
kubectl itself makes on them, and the real kubectl reading them.
"""

from __future__ import annotations

import hashlib
import json
import re

from twisted.trial import unittest

from platformd.api import openapi
from platformd.api.documents import Documents
from platformd.registry.catalog import builtin
from tests.api.docserver import KubectlTestCase

RBAC = "rbac.authorization.platform.io"
AUTHZ = "authorization.platform.io"
AUTHN = "authentication.platform.io"
ADMISSION = "admissionregistration.platform.io"
APIEXTENSIONS = "apiextensions.platform.io"
POLICY = "policy.platform.io"
RBAC_V1 = f"/apis/{RBAC}/v1"
META = "io.platform.apimachinery.pkg.apis.meta.v1"
RBAC_DEFS = "io.platform.api.rbac.v1"
CORE_DEFS = "io.platform.api.core.v1"
METHODS = ("get", "put", "post", "patch", "delete")
ACTIONS = {"get", "list", "put", "post", "patch", "delete", "deletecollection"}
LIST_PARAMETERS = {"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector",
                   "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
                   "timeoutSeconds", "watch"}


def _refs(node):
    """Every ``$ref`` value anywhere in ``node`` (not a property named ``$ref``, as
    JSONSchemaProps has, whose value is a schema)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _operations(document):
    """``(path, method, operation)`` for every operation of ``document``."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def _names(parameters) -> list:
    return [p["name"] for p in parameters]


def _patch_supports(document, gvk: dict, parameter: str) -> bool:
    """
    kubectl's check (``supportsQueryParam``/``supportsQueryParamV3``): the PATCH operation
    tagged with the kind names the query parameter among its own parameters.  kubectl
    stops at the first matching PATCH it meets, in no set order, so all must have it.
    """
    found = [op for _, method, op in _operations(document)
             if method == "patch" and op.get("x-kubernetes-group-version-kind") == gvk]
    assert found, f"no PATCH operation for {gvk}"
    return all(any(p["name"] == parameter and p["in"] == "query" for p in op["parameters"])
               for op in found)


class V2DefinitionTests(unittest.TestCase):
    def setUp(self):
        self.document = openapi.openapi_v2(builtin(), "v1.2.3")
        self.definitions = self.document["definitions"]

    def test_header(self):
        self.assertEqual(self.document["swagger"], "2.0")
        self.assertEqual(self.document["info"], {"title": "Platform", "version": "v1.2.3"})

    def test_every_ref_resolves(self):
        refs = set(_refs(self.document))
        self.assertIn(f"#/definitions/{RBAC_DEFS}.RoleRef", refs)
        for ref in refs:
            self.assertTrue(ref.startswith("#/definitions/"), ref)
            self.assertIn(ref[len("#/definitions/"):], self.definitions)

    def test_every_kind_and_list_has_its_gvk(self):
        for kind in builtin().kinds:
            for name, kind_name in ((kind.schema.name, kind.kind),
                                    (kind.list_schema.name, kind.list_kind)):
                if not kind.stored and kind_name == kind.list_kind:
                    # A review is never listed: upstream defines no List for it.
                    self.assertNotIn(name, self.definitions)
                    continue
                self.assertEqual(self.definitions[name]["x-kubernetes-group-version-kind"],
                                 [{"group": kind.group, "kind": kind_name, "version": "v1"}])

    def test_role_binding(self):
        binding = self.definitions[f"{RBAC_DEFS}.RoleBinding"]
        self.assertEqual(binding["type"], "object")
        self.assertEqual(binding["required"], ["roleRef"])
        self.assertIn("RoleBinding references a role", binding["description"])
        self.assertEqual(binding["x-kubernetes-group-version-kind"],
                         [{"group": RBAC, "kind": "RoleBinding", "version": "v1"}])
        self.assertEqual(set(binding["properties"]),
                         {"apiVersion", "kind", "metadata", "roleRef", "subjects"})
        role_ref = binding["properties"]["roleRef"]
        self.assertEqual(role_ref["$ref"], f"#/definitions/{RBAC_DEFS}.RoleRef")
        self.assertTrue(role_ref["description"].startswith("RoleRef can reference a Role"))
        self.assertEqual(binding["properties"]["subjects"]["items"],
                         {"$ref": f"#/definitions/{RBAC_DEFS}.Subject"})
        self.assertEqual(binding["properties"]["subjects"]["x-kubernetes-list-type"], "atomic")

    def test_role_ref(self):
        role_ref = self.definitions[f"{RBAC_DEFS}.RoleRef"]
        self.assertEqual(role_ref["required"], ["apiGroup", "kind", "name"])
        self.assertEqual(role_ref["properties"]["apiGroup"], {
            "type": "string",
            "description": "APIGroup is the group for the resource being referenced."})
        self.assertNotIn("x-kubernetes-group-version-kind", role_ref)

    def test_list_kind(self):
        bindings = self.definitions[f"{RBAC_DEFS}.RoleBindingList"]
        self.assertEqual(bindings["required"], ["items"])
        self.assertEqual(bindings["properties"]["items"]["items"],
                         {"$ref": f"#/definitions/{RBAC_DEFS}.RoleBinding"})
        self.assertEqual(bindings["properties"]["metadata"]["$ref"],
                         f"#/definitions/{META}.ListMeta")

    def test_map_list_extensions(self):
        containers = self.definitions[f"{CORE_DEFS}.PodSpec"]["properties"]["containers"]
        self.assertEqual(containers, {
            "type": "array",
            "items": {"$ref": f"#/definitions/{CORE_DEFS}.Container"},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": "name",
            "description": "Containers of the pod; at least one.",
        })
        ports = self.definitions[f"{CORE_DEFS}.Container"]["properties"]["ports"]
        self.assertEqual(ports["x-kubernetes-list-map-keys"], ["containerPort", "protocol"])
        self.assertEqual(ports["x-kubernetes-patch-merge-key"], "containerPort")

    def test_set_list_extensions(self):
        finalizers = self.definitions[f"{META}.ObjectMeta"]["properties"]["finalizers"]
        self.assertEqual(finalizers["x-kubernetes-list-type"], "set")
        self.assertEqual(finalizers["x-kubernetes-patch-strategy"], "merge")
        self.assertNotIn("x-kubernetes-patch-merge-key", finalizers)
        self.assertEqual(finalizers["items"], {"type": "string"})

    def test_maps_and_scalars(self):
        props = self.definitions[f"{META}.ObjectMeta"]["properties"]
        self.assertEqual(props["labels"]["type"], "object")
        self.assertEqual(props["labels"]["additionalProperties"], {"type": "string"})
        self.assertEqual(props["generation"]["type"], "integer")
        self.assertEqual(props["generation"]["format"], "int64")
        binary = self.definitions[f"{CORE_DEFS}.ConfigMap"]["properties"]["binaryData"]
        self.assertEqual(binary["additionalProperties"], {"type": "string", "format": "byte"})

    def test_timestamps_refer_to_time(self):
        props = self.definitions[f"{META}.ObjectMeta"]["properties"]
        self.assertEqual(props["creationTimestamp"]["$ref"], f"#/definitions/{META}.Time")
        time = self.definitions[f"{META}.Time"]
        self.assertEqual((time["type"], time["format"]), ("string", "date-time"))

    def test_preserve_unknown_fields(self):
        self.assertIs(self.definitions[f"{META}.FieldsV1"]
                      ["x-kubernetes-preserve-unknown-fields"], True)
        self.assertIs(self.definitions[f"{CORE_DEFS}.ContainerState"]
                      ["x-kubernetes-preserve-unknown-fields"], True)
        self.assertNotIn("x-kubernetes-preserve-unknown-fields",
                         self.definitions[f"{CORE_DEFS}.Pod"])

    def test_json_schema_props(self):
        """JSONSchemaProps is typed, recursively, as upstream's: its unions and ``JSON``
        are definitions with a description and no type; its rules a list-map by rule."""
        defs = "io.platform.apiextensions.v1"
        props = self.definitions[f"{defs}.JSONSchemaProps"]["properties"]
        self.assertEqual(props["properties"], {
            "type": "object",
            "additionalProperties": {"$ref": f"#/definitions/{defs}.JSONSchemaProps"}})
        self.assertEqual(props["not"], {"$ref": f"#/definitions/{defs}.JSONSchemaProps"})
        self.assertEqual(props["items"],
                         {"$ref": f"#/definitions/{defs}.JSONSchemaPropsOrArray"})
        self.assertEqual(props["maximum"], {"type": "number", "format": "double"})
        rules = props["x-kubernetes-validations"]
        self.assertEqual((rules["x-kubernetes-list-type"], rules["x-kubernetes-list-map-keys"],
                          rules["x-kubernetes-patch-merge-key"]), ("map", ["rule"], "rule"))
        for name in ("JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool",
                     "JSONSchemaPropsOrStringArray"):
            self.assertEqual(list(self.definitions[f"{defs}.{name}"]), ["description"])

    def test_meta_definitions(self):
        for name in ("Status", "StatusDetails", "StatusCause", "DeleteOptions",
                     "Preconditions", "Patch", "WatchEvent", "Time", "ObjectMeta",
                     "ListMeta", "ManagedFieldsEntry", "OwnerReference"):
            self.assertIn(f"{META}.{name}", self.definitions)
        status = self.definitions[f"{META}.Status"]
        self.assertEqual(status["x-kubernetes-group-version-kind"],
                         [{"group": "", "kind": "Status", "version": "v1"}])
        self.assertEqual(status["properties"]["details"]["$ref"],
                         f"#/definitions/{META}.StatusDetails")
        self.assertEqual(status["properties"]["code"]["format"], "int32")
        causes = self.definitions[f"{META}.StatusDetails"]["properties"]["causes"]
        self.assertEqual(causes["items"], {"$ref": f"#/definitions/{META}.StatusCause"})

    def test_delete_options_and_watch_event_in_every_group_version(self):
        for kind in ("DeleteOptions", "WatchEvent"):
            self.assertEqual(self.definitions[f"{META}.{kind}"]
                             ["x-kubernetes-group-version-kind"], [
                                 {"group": group, "kind": kind, "version": "v1"}
                                 for group in ("", ADMISSION, APIEXTENSIONS, AUTHN, AUTHZ,
                                               "coordination.platform.io",
                                               "discovery.platform.io",
                                               "events.platform.io", POLICY, RBAC)])
        event = self.definitions[f"{META}.WatchEvent"]
        self.assertEqual(event["required"], ["type", "object"])
        self.assertEqual(event["properties"]["object"]["$ref"],
                         "#/definitions/io.platform.apimachinery.pkg.runtime.RawExtension")


class V2PathTests(unittest.TestCase):
    def setUp(self):
        self.document = openapi.openapi_v2(builtin(), "v1.2.3")
        self.paths = self.document["paths"]

    def _op(self, path, method):
        return self.paths[path][method]

    def test_operation_ids(self):
        """Upstream's naming: verb, group and version words, scope, kind, suffix."""
        binding = f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings"
        expected = {
            (binding, "get"): ("listRbacAuthorizationV1NamespacedRoleBinding", "list"),
            (binding, "post"): ("createRbacAuthorizationV1NamespacedRoleBinding", "post"),
            (binding, "delete"): ("deleteRbacAuthorizationV1CollectionNamespacedRoleBinding",
                                  "deletecollection"),
            (binding + "/{name}", "get"): ("readRbacAuthorizationV1NamespacedRoleBinding",
                                           "get"),
            (binding + "/{name}", "put"): ("replaceRbacAuthorizationV1NamespacedRoleBinding",
                                           "put"),
            (binding + "/{name}", "patch"): ("patchRbacAuthorizationV1NamespacedRoleBinding",
                                             "patch"),
            (binding + "/{name}", "delete"): ("deleteRbacAuthorizationV1NamespacedRoleBinding",
                                              "delete"),
            (f"{RBAC_V1}/rolebindings", "get"): (
                "listRbacAuthorizationV1RoleBindingForAllNamespaces", "list"),
            (f"{RBAC_V1}/clusterroles/{{name}}", "get"): (
                "readRbacAuthorizationV1ClusterRole", "get"),
            (f"{RBAC_V1}/clusterroles", "delete"): (
                "deleteRbacAuthorizationV1CollectionClusterRole", "deletecollection"),
            ("/api/v1/namespaces/{namespace}/pods/{name}/status", "get"): (
                "readCoreV1NamespacedPodStatus", "get"),
            ("/api/v1/namespaces/{namespace}/pods/{name}/status", "patch"): (
                "patchCoreV1NamespacedPodStatus", "patch"),
            ("/api/v1/namespaces/{name}/status", "put"): (
                "replaceCoreV1NamespaceStatus", "put"),
            ("/api/v1/pods", "get"): ("listCoreV1PodForAllNamespaces", "list"),
        }
        for (path, method), (operation_id, action) in expected.items():
            op = self._op(path, method)
            self.assertEqual((op["operationId"], op["x-kubernetes-action"]),
                             (operation_id, action), (path, method))

    def test_paths_of_a_cluster_scoped_kind(self):
        paths = {p for p in self.paths if "/clusterroles" in p}
        self.assertEqual(paths, {f"{RBAC_V1}/clusterroles", f"{RBAC_V1}/clusterroles/{{name}}"})

    def test_paths_of_a_namespaced_kind(self):
        paths = {p for p in self.paths if p.endswith("/pods") or "/pods/" in p}
        self.assertEqual(paths, {
            "/api/v1/namespaces/{namespace}/pods", "/api/v1/namespaces/{namespace}/pods/{name}",
            "/api/v1/namespaces/{namespace}/pods/{name}/status", "/api/v1/pods",
            "/api/v1/namespaces/{namespace}/pods/{name}/binding",
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction"})

    def test_no_deprecated_watch_paths(self):
        """The router does not serve /watch/...; watching is list with watch=true."""
        self.assertFalse([p for p in self.paths if "/watch/" in p])

    def test_status_paths_only_for_kinds_with_status(self):
        pod_status = "/api/v1/namespaces/{namespace}/pods/{name}/status"
        status = {p for p in self.paths if p.endswith("/status")}
        self.assertEqual(status, {
            "/api/v1/namespaces/{name}/status", pod_status, "/api/v1/nodes/{name}/status",
            "/api/v1/namespaces/{namespace}/services/{name}/status",
            "/apis/admissionregistration.platform.io/v1/validatingadmissionpolicies/{name}/status",
            "/apis/apiextensions.platform.io/v1/customresourcedefinitions/{name}/status",
            "/apis/policy.platform.io/v1/namespaces/{namespace}/poddisruptionbudgets/{name}/status"})
        self.assertEqual(set(self.paths[pod_status]), {"get", "put", "patch", "parameters"})

    def test_operation_ids_are_unique(self):
        ids = [op["operationId"] for _, _, op in _operations(self.document)]
        self.assertEqual(len(ids), len(set(ids)))

    def test_every_kind_operation_is_tagged(self):
        for path, method, op in _operations(self.document):
            if path.endswith("/"):  # discovery
                self.assertNotIn("x-kubernetes-action", op)
                continue
            self.assertIn(op["x-kubernetes-action"], ACTIONS, (path, method))
            gvk = op["x-kubernetes-group-version-kind"]
            self.assertEqual(set(gvk), {"group", "kind", "version"})
            self.assertEqual(op["schemes"], ["https"])

    def test_object_path_parameters(self):
        item = self.paths[f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings/{{name}}"]
        self.assertEqual(_names(item["parameters"]), ["name", "namespace", "pretty"])
        name, namespace = item["parameters"][:2]
        self.assertEqual((name["in"], name["required"], name["type"]), ("path", True, "string"))
        self.assertEqual(name["description"], "name of the RoleBinding")
        self.assertEqual(namespace["in"], "path")
        self.assertNotIn("parameters", item["get"])

    def test_patch(self):
        op = self._op(f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings/{{name}}", "patch")
        self.assertEqual(op["consumes"], [
            "application/json-patch+json", "application/merge-patch+json",
            "application/strategic-merge-patch+json", "application/apply-patch+yaml"])
        self.assertEqual(op["produces"], ["application/json", "application/yaml",
                                          "application/vnd.platform.protobuf"])
        self.assertEqual(_names(op["parameters"]),
                         ["body", "dryRun", "fieldManager", "fieldValidation", "force"])
        body = op["parameters"][0]
        self.assertEqual(body, {"name": "body", "in": "body", "required": True,
                                "schema": {"$ref": f"#/definitions/{META}.Patch"}})
        validation = op["parameters"][3]
        self.assertEqual((validation["in"], validation["type"]), ("query", "string"))
        self.assertIn("Strict", validation["description"])
        self.assertEqual(op["x-kubernetes-group-version-kind"],
                         {"group": RBAC, "kind": "RoleBinding", "version": "v1"})
        self.assertEqual(op["responses"]["200"]["schema"],
                         {"$ref": f"#/definitions/{RBAC_DEFS}.RoleBinding"})
        self.assertEqual(set(op["responses"]), {"200", "201", "401"})

    def test_writes(self):
        collection = f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings"
        create = self._op(collection, "post")
        self.assertEqual(_names(create["parameters"]),
                         ["body", "dryRun", "fieldManager", "fieldValidation"])
        self.assertEqual(create["consumes"], ["*/*"])
        self.assertEqual(set(create["responses"]), {"200", "201", "202", "401"})
        replace = self._op(collection + "/{name}", "put")
        self.assertEqual(_names(replace["parameters"]),
                         ["body", "dryRun", "fieldManager", "fieldValidation"])
        self.assertEqual(replace["parameters"][0]["schema"],
                         {"$ref": f"#/definitions/{RBAC_DEFS}.RoleBinding"})

    def test_deletes(self):
        collection = f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings"
        delete = self._op(collection + "/{name}", "delete")
        self.assertEqual(_names(delete["parameters"]), [
            "body", "dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"])
        self.assertEqual(delete["parameters"][0],
                         {"name": "body", "in": "body",
                          "schema": {"$ref": f"#/definitions/{META}.DeleteOptions"}})
        self.assertEqual(delete["responses"]["202"]["schema"],
                         {"$ref": f"#/definitions/{META}.Status"})
        collection_delete = self._op(collection, "delete")
        self.assertEqual(set(_names(collection_delete["parameters"])), {
            "body", "continue", "dryRun", "fieldSelector", "gracePeriodSeconds",
            "labelSelector", "limit", "orphanDependents", "propagationPolicy",
            "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
            "timeoutSeconds"})

    def test_list(self):
        collection = self.paths[f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings"]
        self.assertEqual(_names(collection["parameters"]), ["namespace", "pretty"])
        op = collection["get"]
        self.assertEqual(set(_names(op["parameters"])), LIST_PARAMETERS)
        self.assertEqual(op["produces"], [
            "application/json", "application/yaml", "application/vnd.platform.protobuf",
            "application/json;stream=watch", "application/vnd.platform.protobuf;stream=watch"])
        self.assertEqual(op["responses"]["200"]["schema"],
                         {"$ref": f"#/definitions/{RBAC_DEFS}.RoleBindingList"})
        types = {p["name"]: p["type"] for p in op["parameters"]}
        self.assertEqual((types["limit"], types["watch"], types["labelSelector"]),
                         ("integer", "boolean", "string"))

    def test_single_operation_paths_hoist_their_parameters(self):
        everywhere = self.paths[f"{RBAC_V1}/rolebindings"]
        self.assertEqual(set(_names(everywhere["parameters"])), LIST_PARAMETERS | {"pretty"})
        self.assertNotIn("parameters", everywhere["get"])
        self.assertEqual(everywhere["get"]["x-kubernetes-group-version-kind"],
                         {"group": RBAC, "kind": "RoleBinding", "version": "v1"})

    def test_discovery_paths(self):
        self.assertEqual(self.paths["/api/"]["get"]["operationId"], "getCoreAPIVersions")
        self.assertEqual(self.paths["/apis/"]["get"]["operationId"], "getAPIVersions")
        self.assertEqual(self.paths[f"/apis/{RBAC}/"]["get"]["operationId"],
                         "getRbacAuthorizationAPIGroup")
        self.assertEqual(self.paths[f"{RBAC_V1}/"]["get"]["operationId"],
                         "getRbacAuthorizationV1APIResources")
        self.assertEqual(self.paths["/api/v1/"]["get"]["tags"], ["core_v1"])
        self.assertNotIn("parameters", self.paths["/api/"])
        self.assertNotIn("parameters", self.paths["/api/"]["get"])

    def test_kubectl_finds_field_validation_for_every_kind(self):
        for kind in builtin().kinds:
            if not kind.stored:
                continue  # a review is only created (no PATCH; see test_review_paths)
            gvk = {"group": kind.group, "kind": kind.kind, "version": kind.version}
            self.assertTrue(_patch_supports(self.document, gvk, "fieldValidation"), gvk)

    def test_review_paths(self):
        """A review's collection takes POST only, as upstream's; it has no object path."""
        sar = self.paths[f"/apis/{AUTHZ}/v1/subjectaccessreviews"]
        self.assertEqual(sorted(k for k in sar if k != "parameters"), ["post"])
        self.assertEqual(sar["post"]["operationId"], "createAuthorizationV1SubjectAccessReview")
        self.assertEqual(sar["post"]["x-kubernetes-action"], "post")
        self.assertEqual(sar["post"]["x-kubernetes-group-version-kind"],
                         {"group": AUTHZ, "kind": "SubjectAccessReview", "version": "v1"})
        local = self.paths[f"/apis/{AUTHZ}/v1/namespaces/{{namespace}}/localsubjectaccessreviews"]
        self.assertEqual(local["post"]["operationId"],
                         "createAuthorizationV1NamespacedLocalSubjectAccessReview")
        self.assertEqual(
            self.paths[f"/apis/{AUTHN}/v1/selfsubjectreviews"]["post"]["operationId"],
            "createAuthenticationV1SelfSubjectReview")
        self.assertFalse([p for p in self.paths if "subjectaccessreviews/" in p
                          or p.endswith(f"{AUTHZ}/v1/localsubjectaccessreviews")])


class V3Tests(unittest.TestCase):
    def setUp(self):
        self.document = openapi.openapi_v3(builtin(), RBAC, "v1")
        self.schemas = self.document["components"]["schemas"]

    def test_header(self):
        self.assertEqual(self.document["openapi"], "3.0.0")
        self.assertEqual(self.document["info"]["title"], "Platform")

    def test_only_this_group_version(self):
        for path in self.document["paths"]:
            self.assertTrue(path.startswith(RBAC_V1 + "/"), path)
        self.assertNotIn(f"{CORE_DEFS}.Pod", self.schemas)
        core = openapi.openapi_v3(builtin(), "", "v1")
        self.assertTrue(all(p.startswith("/api/v1/") for p in core["paths"]))
        self.assertNotIn(f"{RBAC_DEFS}.RoleBinding", core["components"]["schemas"])

    def test_every_ref_resolves(self):
        for document in (self.document, openapi.openapi_v3(builtin(), "", "v1")):
            schemas = document["components"]["schemas"]
            for ref in set(_refs(document)):
                self.assertTrue(ref.startswith("#/components/schemas/"), ref)
                self.assertIn(ref[len("#/components/schemas/"):], schemas)

    def test_role_binding_schema(self):
        binding = self.schemas[f"{RBAC_DEFS}.RoleBinding"]
        self.assertEqual(binding["x-kubernetes-group-version-kind"],
                         [{"group": RBAC, "kind": "RoleBinding", "version": "v1"}])
        role_ref = binding["properties"]["roleRef"]
        self.assertEqual(role_ref["allOf"],
                         [{"$ref": f"#/components/schemas/{RBAC_DEFS}.RoleRef"}])
        self.assertNotIn("$ref", role_ref)
        self.assertTrue(role_ref["description"].startswith("RoleRef can reference"))
        self.assertEqual(self.schemas[f"{RBAC_DEFS}.RoleRef"]["properties"]["kind"]
                         ["description"], "Kind is the type of resource being referenced.")

    def test_patch_operation(self):
        item = self.document["paths"][f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings/{{name}}"]
        op = item["patch"]
        self.assertEqual(op["operationId"], "patchRbacAuthorizationV1NamespacedRoleBinding")
        self.assertEqual(op["tags"], ["rbacAuthorization_v1"])
        self.assertEqual(_names(op["parameters"]),
                         ["dryRun", "fieldManager", "fieldValidation", "force"])
        self.assertEqual(op["parameters"][2], {
            "name": "fieldValidation", "in": "query",
            "description": op["parameters"][2]["description"],
            "schema": {"type": "string", "uniqueItems": True}})
        body = op["requestBody"]
        self.assertIs(body["required"], True)
        self.assertEqual(list(body["content"]), list(openapi.PATCH_TYPES))
        for media in body["content"].values():
            self.assertEqual(media["schema"], {"$ref": f"#/components/schemas/{META}.Patch"})
        self.assertEqual(set(op["responses"]["200"]["content"]), {
            "application/json", "application/yaml", "application/vnd.platform.protobuf"})
        self.assertEqual(_names(item["parameters"]), ["name", "namespace", "pretty"])
        self.assertIs(item["parameters"][0]["required"], True)

    def test_create_and_delete_bodies(self):
        collection = self.document["paths"][f"{RBAC_V1}/namespaces/{{namespace}}/rolebindings"]
        self.assertEqual(collection["post"]["requestBody"]["content"], {
            "*/*": {"schema": {"$ref": f"#/components/schemas/{RBAC_DEFS}.RoleBinding"}}})
        delete = collection["delete"]
        self.assertNotIn("required", delete["requestBody"])
        self.assertEqual(delete["requestBody"]["content"]["*/*"]["schema"],
                         {"$ref": f"#/components/schemas/{META}.DeleteOptions"})
        list_types = set(collection["get"]["responses"]["200"]["content"])
        self.assertIn("application/json;stream=watch", list_types)

    def test_kubectl_finds_field_validation_for_every_kind(self):
        for group, version in (("", "v1"), (RBAC, "v1")):
            document = openapi.openapi_v3(builtin(), group, version)
            for kind in builtin().kinds_in(group, version):
                if not kind.stored:  # bindings: create only
                    continue
                gvk = {"group": group, "kind": kind.kind, "version": version}
                self.assertTrue(_patch_supports(document, gvk, "fieldValidation"), gvk)

    def test_unknown_group_version(self):
        self.assertIsNone(openapi.openapi_v3(builtin(), RBAC, "v2"))


class V3IndexTests(unittest.TestCase):
    def test_paths(self):
        index = openapi.openapi_v3_index(builtin())
        self.assertEqual(set(index["paths"]), {
            "api", "api/v1", "apis", f"apis/{RBAC}", f"apis/{RBAC}/v1", f"apis/{AUTHZ}",
            f"apis/{AUTHZ}/v1", f"apis/{AUTHN}", f"apis/{AUTHN}/v1", f"apis/{ADMISSION}",
            f"apis/{ADMISSION}/v1", "apis/events.platform.io", "apis/events.platform.io/v1",
            "apis/coordination.platform.io", "apis/coordination.platform.io/v1",
            "apis/discovery.platform.io", "apis/discovery.platform.io/v1",
            f"apis/{APIEXTENSIONS}", f"apis/{APIEXTENSIONS}/v1",
            f"apis/{POLICY}", f"apis/{POLICY}/v1"})

    def test_urls_carry_the_hash_of_the_served_bytes(self):
        catalog = builtin()
        documents = openapi.openapi_v3_documents(catalog)
        for path, entry in openapi.openapi_v3_index(catalog)["paths"].items():
            url = entry["serverRelativeURL"]
            match = re.fullmatch(r"/openapi/v3/(.+)\?hash=([0-9A-F]{128})", url)
            self.assertIsNotNone(match, url)
            self.assertEqual(match.group(1), path)
            self.assertEqual(match.group(2),
                             openapi.openapi_hash(openapi.encode_document(documents[path])))

    def test_group_version_documents(self):
        documents = openapi.openapi_v3_documents(builtin())
        self.assertEqual(documents[f"apis/{RBAC}/v1"], openapi.openapi_v3(builtin(), RBAC, "v1"))
        self.assertEqual(documents["api/v1"], openapi.openapi_v3(builtin(), "", "v1"))
        self.assertEqual(list(documents["api"]["paths"]), ["/api/"])
        self.assertEqual(list(documents[f"apis/{RBAC}"]["paths"]), [f"/apis/{RBAC}/"])

    def test_hashes_follow_the_servers_encoder(self):
        def encode(document):
            return json.dumps(document, indent=1).encode()
        documents = openapi.openapi_v3_documents(builtin())
        url = openapi.openapi_v3_index(builtin(), encode)["paths"]["api/v1"]["serverRelativeURL"]
        self.assertTrue(url.endswith("?hash=" + openapi.openapi_hash(encode(documents["api/v1"]))))

    def test_hash_is_upper_case_sha512(self):
        self.assertEqual(openapi.openapi_hash(b"{}"),
                         hashlib.sha512(b"{}").hexdigest().upper())
        self.assertTrue(openapi.openapi_hash(b"").startswith("CF83E1357EEFB8BD"))

    def test_served_documents_are_the_hashed_bytes(self):
        """The server's index hashes the bytes it serves for each document, and keeps
        the v3 documents as those bytes only, not as dicts beside them."""
        documents = Documents(builtin(), "127.0.0.1:6443")
        index = json.loads(documents.lookup("/openapi/v3").json)
        built = openapi.openapi_v3_documents(builtin())
        self.assertEqual(set(index["paths"]), set(built))
        for path, entry in index["paths"].items():
            served = documents.lookup(f"/openapi/v3/{path}/").json
            self.assertTrue(entry["serverRelativeURL"].endswith(
                "?hash=" + openapi.openapi_hash(served)), path)
            self.assertEqual(json.loads(served), built[path])
        self.assertEqual({type(body) for body in documents._v3.values()}, {bytes})

    def test_encoding_is_stable(self):
        first = openapi.encode_document(openapi.openapi_v3(builtin(), RBAC, "v1"))
        second = openapi.encode_document(openapi.openapi_v3(builtin(), RBAC, "v1"))
        self.assertEqual(first, second)


ROLE_BINDING = f"""\
apiVersion: {RBAC}/v1
kind: RoleBinding
metadata:
  name: readers
  namespace: default
roleRef:
  apiGroup: {RBAC}
  kind: Role
  name: reader
"""


class KubectlOpenAPITests(KubectlTestCase):
    """kubectl finds the kind through discovery, then reads the group-version's v3 doc."""

    def test_explain_role_ref(self):
        d = self.kubectl("explain", "rolebindings.roleRef")

        def check(result):
            out = self.assertSucceeded(result)
            self.assertIn(f"GROUP:      {RBAC}", out)
            self.assertIn("KIND:       RoleBinding", out)
            self.assertIn("FIELD: roleRef <RoleRef>", out)
            self.assertIn("RoleRef can reference a Role in the current namespace", out)
            for field, doc in (
                    ("apiGroup", "APIGroup is the group for the resource being referenced."),
                    ("kind", "Kind is the type of resource being referenced."),
                    ("name", "Name is the name of resource being referenced.")):
                self.assertRegex(out, rf"\n  {field}\t<string> -required-\n    {re.escape(doc)}\n")
        return d.addCallback(check)

    def test_explain_containers(self):
        d = self.kubectl("explain", "pods.spec.containers")

        def check(result):
            out = self.assertSucceeded(result)
            self.assertIn("KIND:       Pod", out)
            self.assertIn("FIELD: containers <[]Container>", out)
            self.assertRegex(out, r"\n  name\t<string> -required-\n    Name of the container")
            self.assertRegex(out, r"\n  env\t<\[\]EnvVar>\n")
            self.assertRegex(out, r"\n  resources\t<ResourceRequirements>\n")
        return d.addCallback(check)

    def test_explain_timestamp_resolves_time(self):
        d = self.kubectl("explain", "po.metadata.creationTimestamp")

        def check(result):
            out = self.assertSucceeded(result)
            self.assertIn("FIELD: creationTimestamp <string>", out)
        return d.addCallback(check)

    def test_strict_validation_is_left_to_the_server(self):
        """
        With --validate=strict kubectl sends fieldValidation=Strict only when the v3 doc
        shows the parameter on the kind's PATCH; otherwise it validates client-side.
        """
        d = self.kubectl("create", "--validate=strict", "-f", "binding.yaml",
                         files={"binding.yaml": ROLE_BINDING})

        def check(result):
            self.assertIn("NotFound", result.stderr)  # the docserver serves no writes
            posts = [uri for method, uri in self.listening.server.unserved if method == "POST"]
            self.assertEqual(len(posts), 1, self.listening.server.unserved)
            self.assertTrue(posts[0].startswith(
                f"{RBAC_V1}/namespaces/default/rolebindings?"), posts[0])
            self.assertIn("fieldValidation=Strict", posts[0])
        return d.addCallback(check)
