"""
The resource API end to end over loopback TLS: every verb and path shape for core and
RBAC kinds, cluster-scoped and namespaced (spec 2.1, 4.1).
"""

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, ServerTestCase, start_token_server, token_client

RBAC = "/apis/rbac.authorization.platform.io/v1"
GROUP = "rbac.authorization.platform.io"


def rolebinding(name, role="viewer", subjects=None):
    return {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role},
            "subjects": subjects if subjects is not None else [{"kind": "User", "name": "alice"}]}


def pod(name, **labels):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}


class NamespacedRBACTests(ServerTestCase):
    @inlineCallbacks
    def test_lifecycle(self):
        """create (201), get, list in a namespace and across all, update, delete."""
        path = f"{RBAC}/namespaces/default/rolebindings"
        r = yield self.client.post(path, rolebinding("rb1"))
        self.assertEqual(r.code, 201, r.body)
        created = r.json()
        meta = created["metadata"]
        self.assertEqual((created["kind"], created["apiVersion"]), ("RoleBinding", f"{GROUP}/v1"))
        self.assertEqual(meta["namespace"], "default")
        for field in ("uid", "creationTimestamp", "resourceVersion"):
            self.assertTrue(meta.get(field), field)
        self.assertEqual(created["subjects"][0]["apiGroup"], GROUP)

        r = yield self.client.get(f"{path}/rb1")
        self.assertEqual((r.code, r.json()), (200, created))

        yield self.create_namespace("other")
        r = yield self.client.post(f"{RBAC}/namespaces/other/rolebindings", rolebinding("rb2"))
        self.assertEqual(r.code, 201, r.body)

        r = yield self.client.get(path)
        listed = r.json()
        self.assertEqual((listed["kind"], listed["apiVersion"]), ("RoleBindingList", f"{GROUP}/v1"))
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["rb1"])
        self.assertEqual(listed["metadata"]["continue"], "")
        self.assertGreaterEqual(int(listed["metadata"]["resourceVersion"]),
                                int(meta["resourceVersion"]))

        r = yield self.client.get(f"{RBAC}/rolebindings")
        self.assertEqual([(i["metadata"]["namespace"], i["metadata"]["name"])
                          for i in r.json()["items"]], [
            ("default", "rb1"), ("other", "rb2"),
            # The bootstrap policy's (issue 32).
            ("platform-system", "system::leader-locking-kube-controller-manager"),
            ("platform-system", "system::leader-locking-kube-scheduler")])

        updated = dict(created, subjects=[{"kind": "Group", "name": "devs"}])
        r = yield self.client.put(f"{path}/rb1", updated)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["subjects"], [{"kind": "Group", "name": "devs",
                                                 "apiGroup": GROUP}])
        self.assertGreater(int(r.json()["metadata"]["resourceVersion"]),
                           int(meta["resourceVersion"]))

        r = yield self.client.delete(f"{path}/rb1")
        self.assertEqual(r.code, 200, r.body)
        status = r.json()
        self.assertEqual((status["kind"], status["status"]), ("Status", "Success"))
        self.assertEqual(status["details"]["name"], "rb1")
        r = yield self.client.get(f"{path}/rb1")
        self.assertEqual(r.code, 404)

    @inlineCallbacks
    def test_stale_put_conflicts(self):
        """PUT with a stale resourceVersion is 409 Conflict; without one it is unconditional."""
        path = f"{RBAC}/namespaces/default/rolebindings"
        first = (yield self.client.post(path, rolebinding("rb"))).json()
        second = (yield self.client.put(f"{path}/rb", dict(first, subjects=[]))).json()
        r = yield self.client.put(f"{path}/rb", first)
        self.assertEqual(r.code, 409)
        body = r.json()
        self.assertEqual((body["reason"], body["code"]), ("Conflict", 409))
        self.assertIn("the object has been modified", body["message"])
        unconditional = dict(first)
        unconditional["metadata"] = {"name": "rb"}
        r = yield self.client.put(f"{path}/rb", unconditional)
        self.assertEqual(r.code, 200, r.body)
        self.assertGreater(int(r.json()["metadata"]["resourceVersion"]),
                           int(second["metadata"]["resourceVersion"]))

    @inlineCallbacks
    def test_put_creates_absent_binding(self):
        """PUT of an absent RoleBinding creates it (201), as upstream's RBAC strategy allows."""
        r = yield self.client.put(f"{RBAC}/namespaces/default/rolebindings/new",
                                  rolebinding("new"))
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def test_put_create_ignores_resource_version(self):
        """A resourceVersion in the body of a creating PUT is dropped, not checked (store.go
        Update creates through BeforeCreate; storage sets the version): 201.  Core kinds do
        not create on update: 404."""
        body = rolebinding("stale")
        body["metadata"]["resourceVersion"] = "12345"
        r = yield self.client.put(f"{RBAC}/namespaces/default/rolebindings/stale", body)
        self.assertEqual(r.code, 201, r.body)
        self.assertNotEqual(r.json()["metadata"]["resourceVersion"], "12345")
        r = yield self.client.put("/api/v1/namespaces/default/configmaps/absent",
                                  {"metadata": {"name": "absent", "resourceVersion": "5"}})
        self.assertEqual((r.code, r.json()["reason"]), (404, "NotFound"))

    @inlineCallbacks
    def test_role_ref_immutable(self):
        """Changing roleRef is 422 Invalid on field roleRef."""
        path = f"{RBAC}/namespaces/default/rolebindings"
        created = (yield self.client.post(path, rolebinding("rb"))).json()
        created["roleRef"]["name"] = "other"
        r = yield self.client.put(f"{path}/rb", created)
        body = r.json()
        self.assertEqual((r.code, body["reason"]), (422, "Invalid"))
        self.assertEqual([c["field"] for c in body["details"]["causes"]], ["roleRef"])
        self.assertEqual(body["details"]["kind"], "RoleBinding")
        self.assertEqual(body["details"]["group"], GROUP)

    @inlineCallbacks
    def test_already_exists(self):
        """Creating a name twice is 409 AlreadyExists."""
        path = f"{RBAC}/namespaces/default/rolebindings"
        yield self.client.post(path, rolebinding("rb"))
        r = yield self.client.post(path, rolebinding("rb"))
        body = r.json()
        self.assertEqual((r.code, body["reason"]), (409, "AlreadyExists"))
        self.assertEqual(body["message"], f'rolebindings.{GROUP} "rb" already exists')

    @inlineCallbacks
    def test_namespace_must_exist(self):
        """A namespaced object needs an existing namespace (404 otherwise)."""
        r = yield self.client.post(f"{RBAC}/namespaces/nope/rolebindings", rolebinding("rb"))
        body = r.json()
        self.assertEqual((r.code, body["reason"]), (404, "NotFound"))
        self.assertEqual(body["message"], 'namespaces "nope" not found')

    @inlineCallbacks
    def test_namespace_mismatch(self):
        """A body naming another namespace than the URL is 400."""
        body = rolebinding("rb")
        body["metadata"]["namespace"] = "other"
        r = yield self.client.post(f"{RBAC}/namespaces/default/rolebindings", body)
        self.assertEqual((r.code, r.json()["reason"]), (400, "BadRequest"))

    @inlineCallbacks
    def test_generate_name(self):
        """generateName yields a unique server-chosen name with that prefix."""
        body = rolebinding("")
        body["metadata"] = {"generateName": "rb-"}
        names = set()
        for _ in range(3):
            r = yield self.client.post(f"{RBAC}/namespaces/default/rolebindings", body)
            self.assertEqual(r.code, 201, r.body)
            names.add(r.json()["metadata"]["name"])
        self.assertEqual(len(names), 3)
        self.assertTrue(all(n.startswith("rb-") and len(n) == 8 for n in names))

    @inlineCallbacks
    def test_delete_collection(self):
        """deletecollection removes what the selector picks and leaves the rest."""
        path = f"{RBAC}/namespaces/default/rolebindings"
        for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
            body = rolebinding(name)
            body["metadata"]["labels"] = {"team": team}
            yield self.client.post(path, body)
        r = yield self.client.delete(f"{path}?labelSelector=team%3Dx")
        self.assertEqual((r.code, r.json()["kind"]), (200, "RoleBindingList"))
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a", "b"])
        r = yield self.client.get(path)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["c"])


class ClusterRBACTests(ServerTestCase):
    @inlineCallbacks
    def test_lifecycle(self):
        """ClusterRoles and ClusterRoleBindings: create, get, list, update, delete."""
        r = yield self.client.post(f"{RBAC}/clusterroles", {
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        self.assertEqual(r.code, 201, r.body)
        crb = {"metadata": {"name": "readers"},
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}
        r = yield self.client.post(f"{RBAC}/clusterrolebindings", crb)
        self.assertEqual(r.code, 201, r.body)
        created = r.json()
        self.assertNotIn("namespace", created["metadata"])
        r = yield self.client.get(f"{RBAC}/clusterrolebindings/readers")
        self.assertEqual(r.json(), created)
        # Besides the bootstrap policy's (labelled platform.io/bootstrapping).
        r = yield self.client.get(f"{RBAC}/clusterrolebindings?labelSelector="
                                  "!platform.io/bootstrapping")
        self.assertEqual(r.json()["kind"], "ClusterRoleBindingList")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["readers"])
        created["subjects"] = []
        r = yield self.client.put(f"{RBAC}/clusterrolebindings/readers", created)
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.delete(f"{RBAC}/clusterrolebindings/readers")
        self.assertEqual(r.code, 200)
        r = yield self.client.get(f"{RBAC}/clusterrolebindings/readers")
        self.assertEqual(r.code, 404)
        self.assertEqual(r.json()["message"], f'clusterrolebindings.{GROUP} "readers" not found')

    @inlineCallbacks
    def test_cluster_role_binding_to_role_invalid(self):
        """A ClusterRoleBinding to a Role is 422 naming roleRef.kind."""
        r = yield self.client.post(f"{RBAC}/clusterrolebindings", {
            "metadata": {"name": "x"}, "roleRef": {"kind": "Role", "name": "r"}})
        body = r.json()
        self.assertEqual((r.code, body["reason"]), (422, "Invalid"))
        self.assertEqual(body["details"]["causes"], [{
            "reason": "FieldValueNotSupported", "field": "roleRef.kind",
            "message": 'Unsupported value: "Role": supported values: "ClusterRole"'}])
        self.assertEqual(body["message"],
                         f'ClusterRoleBinding.{GROUP} "x" is invalid: roleRef.kind: '
                         'Unsupported value: "Role": supported values: "ClusterRole"')


class ValidationOverHTTPTests(ServerTestCase):
    """Each rule of spec 2.2 and 2.3 with its exact code, reason and field."""

    @inlineCallbacks
    def expect(self, body, code, reason, fields, path=f"{RBAC}/namespaces/default/rolebindings"):
        r = yield self.client.post(path, body)
        status = r.json()
        self.assertEqual((r.code, status["reason"], status["code"]), (code, reason, code), r.body)
        self.assertEqual([c["field"] for c in status.get("details", {}).get("causes", [])], fields)

    def test_missing_role_ref(self):
        """A RoleBinding without roleRef is 422 on its kind and name (its apiGroup is
        defaulted), as upstream's."""
        return self.expect({"metadata": {"name": "x"}}, 422, "Invalid",
                           ["roleRef.kind", "roleRef.name"])

    def test_missing_subject_name_and_bad_kind(self):
        """Every bad subject field is reported."""
        return self.expect(rolebinding("x", subjects=[{"kind": "Robot"}]), 422, "Invalid",
                           ["subjects[0].name", "subjects[0].kind"])

    @inlineCallbacks
    def test_user_with_namespace(self):
        """A namespace on a User subject is stored as given (the authorizer reports it,
        spec 2.2/7.4)."""
        r = yield self.client.post(f"{RBAC}/namespaces/default/rolebindings", rolebinding(
            "x", subjects=[{"kind": "User", "name": "u", "namespace": "default"}]))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["subjects"][0]["namespace"], "default")

    @inlineCallbacks
    def test_wrong_type(self):
        """A field of the wrong type is 400 BadRequest naming the field in its message
        (transformDecodeError: a plain BadRequest, no causes)."""
        yield self.expect(rolebinding("x", subjects="alice"), 400, "BadRequest", [])
        r = yield self.client.post(f"{RBAC}/namespaces/default/rolebindings",
                                   rolebinding("x", subjects="alice"))
        self.assertTrue(r.json()["message"].startswith(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: json: cannot '
            "unmarshal string into field subjects"), r.json()["message"])

    def test_malformed_json(self):
        """A body that is not JSON is 400 BadRequest."""
        return self.expect(b'{"metadata":', 400, "BadRequest", [])

    def test_name_required(self):
        """No name and no generateName is 422 on metadata.name."""
        body = rolebinding("x")
        body["metadata"] = {}
        return self.expect(body, 422, "Invalid", ["metadata.name"])

    def test_wrong_kind(self):
        """A body of another kind is 400."""
        return self.expect(pod("p"), 400, "BadRequest", [])


class CoreTests(ServerTestCase):
    @inlineCallbacks
    def test_builtin_namespaces(self):
        """default and the platform-* namespaces exist from the start."""
        r = yield self.client.get("/api/v1/namespaces")
        names = [i["metadata"]["name"] for i in r.json()["items"]]
        self.assertEqual(names, ["default", "platform-node-lease", "platform-public",
                                 "platform-system"])
        self.assertEqual(r.json()["items"][0]["status"], {"phase": "Active"})

    @inlineCallbacks
    def test_kinds(self):
        """ConfigMap, Secret, ServiceAccount and Pod: create, get, list, delete."""
        bodies = {
            "configmaps": {"metadata": {"name": "c"}, "data": {"k": "v"}},
            "secrets": {"metadata": {"name": "s"}, "stringData": {"k": "v"}},
            "serviceaccounts": {"metadata": {"name": "sa"}},
            "pods": pod("p"),
        }
        for plural, body in bodies.items():
            path = f"/api/v1/namespaces/default/{plural}"
            r = yield self.client.post(path, body)
            self.assertEqual(r.code, 201, r.body)
            r = yield self.client.get(f"{path}/{body['metadata']['name']}")
            self.assertEqual(r.code, 200)
            r = yield self.client.get(f"/api/v1/{plural}")
            # Every namespace also has the service-account controller's "default".
            items = [i for i in r.json()["items"]
                     if plural != "serviceaccounts" or i["metadata"]["name"] != "default"]
            self.assertEqual(len(items), 1, plural)
            r = yield self.client.delete(f"{path}/{body['metadata']['name']}")
            self.assertEqual(r.code, 200, r.body)
        secret = yield self.client.post("/api/v1/namespaces/default/secrets",
                                        {"metadata": {"name": "s2"}, "stringData": {"a": "b"}})
        self.assertEqual(secret.json()["data"], {"a": "Yg=="})

    @inlineCallbacks
    def test_pod_status_subresource(self):
        """Writes to status change only status; writes to the pod leave status alone."""
        path = "/api/v1/namespaces/default/pods/p"
        created = (yield self.client.post("/api/v1/namespaces/default/pods", pod("p"))).json()
        self.assertEqual(created["status"]["phase"], "Pending")
        changed = dict(created, status={"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]})
        changed["metadata"] = dict(created["metadata"], labels={"sneaky": "yes"})
        r = yield self.client.put(f"{path}/status", changed)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["phase"], "Running")
        self.assertEqual(r.json()["metadata"].get("labels"), {})
        r = yield self.client.get(f"{path}/status")
        self.assertEqual(r.json()["status"]["podIPs"], [{"ip": "10.0.0.1"}])
        current = r.json()
        current["status"] = {"phase": "Failed"}
        current["metadata"]["labels"] = {"app": "x"}
        r = yield self.client.put(path, current)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["phase"], "Running")
        self.assertEqual(r.json()["metadata"]["labels"], {"app": "x"})
        r = yield self.client.patch(f"{path}/status", {"status": {"phase": "Succeeded"}})
        self.assertEqual((r.code, r.json()["status"]["phase"]), (200, "Succeeded"))

    @inlineCallbacks
    def test_put_absent_pod_not_found(self):
        """PUT of an absent pod is 404, as upstream's pod strategy does not create on update."""
        r = yield self.client.put("/api/v1/namespaces/default/pods/p", pod("p"))
        self.assertEqual(r.code, 404)

    @inlineCallbacks
    def test_selectors(self):
        """labelSelector and fieldSelector filter lists."""
        for name, app in (("a", "web"), ("b", "db"), ("c", "web")):
            yield self.client.post("/api/v1/namespaces/default/pods", pod(name, app=app))
        r = yield self.client.get("/api/v1/pods?labelSelector=app%3Dweb")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a", "c"])
        r = yield self.client.get("/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Db")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["b"])
        r = yield self.client.get("/api/v1/pods?labelSelector=app+in+(web,db),app!%3Ddb")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a", "c"])
        r = yield self.client.get("/api/v1/pods?fieldSelector=spec.foo%3Dx")
        self.assertEqual((r.code, r.json()["reason"]), (400, "BadRequest"))

    @inlineCallbacks
    def test_namespace_deletion_cascades(self):
        """Deleting a namespace deletes its contents, then the namespace."""
        yield self.create_namespace("doomed")
        yield self.client.post("/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "c"}})
        yield self.client.post(f"{RBAC}/namespaces/doomed/rolebindings", rolebinding("rb"))
        r = yield self.client.delete("/api/v1/namespaces/doomed")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["phase"], "Terminating")
        for _ in range(100):
            r = yield self.client.get("/api/v1/namespaces/doomed")
            if r.code == 404:
                break
            yield deferLater(0.05)
        self.assertEqual(r.code, 404)
        r = yield self.client.get(f"{RBAC}/rolebindings")
        # The bootstrap policy's leader-locking bindings live in platform-system.
        self.assertEqual([i for i in r.json()["items"]
                          if i["metadata"]["namespace"] != "platform-system"], [])

    @inlineCallbacks
    def test_terminating_namespace_refuses_content(self):
        """A terminating namespace takes no new objects (403 Forbidden)."""
        yield self.create_namespace("held")
        yield self.client.post("/api/v1/namespaces/held/configmaps",
                               {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
        yield self.settled_namespace("held")
        yield self.client.delete("/api/v1/namespaces/held")
        # The namespace controller has removed the service account.
        yield self.until_items("/api/v1/namespaces/held/serviceaccounts", 0)
        r = yield self.client.post("/api/v1/namespaces/held/configmaps", {"metadata": {"name": "d"}})
        self.assertEqual((r.code, r.json()["reason"]), (403, "Forbidden"))

    @inlineCallbacks
    def test_finalizers_two_phase(self):
        """An object with finalizers is kept terminating until the last one is removed."""
        path = "/api/v1/namespaces/default/configmaps"
        yield self.client.post(path, {"metadata": {"name": "c", "finalizers": ["a.io/x", "b.io/y"]}})
        r = yield self.client.delete(f"{path}/c")
        self.assertEqual(r.code, 200)
        self.assertTrue(r.json()["metadata"]["deletionTimestamp"])
        current = (yield self.client.get(f"{path}/c")).json()
        current["metadata"]["finalizers"] = ["b.io/y"]
        r = yield self.client.put(f"{path}/c", current)
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.patch(f"{path}/c", {"metadata": {"finalizers": None}})
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.get(f"{path}/c")
        self.assertEqual(r.code, 404)


class ProtocolTests(ServerTestCase):
    @inlineCallbacks
    def test_unauthenticated(self):
        """No credentials is 401 with a Status on every endpoint but health."""
        anonymous = Client(self, self.server.pki_dir, self.server.port_number, identity=None)
        for path in ("/api/v1/namespaces", f"{RBAC}/rolebindings", "/apis", "/version",
                     "/openapi/v3"):
            r = yield anonymous.get(path)
            self.assertEqual((r.code, r.json()["reason"]), (401, "Unauthorized"), path)
        for path in ("/healthz", "/livez", "/readyz"):
            r = yield anonymous.get(path)
            self.assertEqual((r.code, r.body), (200, b"ok"))

    @inlineCallbacks
    def test_yaml(self):
        """YAML request and response bodies."""
        body = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  k: v\n")
        r = yield self.client.post("/api/v1/namespaces/default/configmaps", body,
                                   content_type="application/yaml",
                                   headers={"Accept": "application/yaml"})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("Content-Type"), "application/yaml")
        self.assertIn(b"name: yml", r.body)

    @inlineCallbacks
    def test_negotiation_errors(self):
        """406 for an unacceptable Accept, 415 for an unknown Content-Type."""
        r = yield self.client.get("/api/v1/namespaces", headers={"Accept": "text/html"})
        self.assertEqual((r.code, r.json()["reason"]), (406, "NotAcceptable"))
        r = yield self.client.post("/api/v1/namespaces/default/configmaps", b"x",
                                   content_type="text/plain")
        self.assertEqual((r.code, r.json()["reason"]), (415, "UnsupportedMediaType"))

    @inlineCallbacks
    def test_not_found_paths(self):
        """Unknown resources and groups are 404 NotFound Status."""
        for path in ("/api/v1/widgets", "/apis/nope.io/v1/things", "/api/v1/namespaces/x/pods/p/log",
                     "/nothing"):
            r = yield self.client.get(path)
            self.assertEqual((r.code, r.json()["reason"]), (404, "NotFound"), path)

    @inlineCallbacks
    def test_method_not_allowed(self):
        """POST to an object path is 405."""
        r = yield self.client.post("/api/v1/namespaces/default/configmaps/x",
                                   {"metadata": {"name": "x"}})
        self.assertEqual((r.code, r.json()["reason"]), (405, "MethodNotAllowed"))

    @inlineCallbacks
    def test_version_and_health(self):
        """/version answers version information."""
        r = yield self.client.get("/version")
        self.assertEqual(r.code, 200)
        self.assertIn("gitVersion", r.json())

    @inlineCallbacks
    def test_pretty(self):
        """
        As upstream: a non-empty ``pretty`` decides (Go's ParseBool spellings); without
        one, curl, Wget and browsers get indented JSON, other clients compact JSON; an
        Accept range with ``pretty=1`` is indented too.
        """
        path = "/api/v1/namespaces/default"
        curl = {"User-Agent": "curl/8.5.0"}
        for query, headers, indented in (("?pretty=true", {}, True), ("?pretty=T", {}, True),
                                         ("?pretty=yes", {}, False), ("", {}, False),
                                         ("", curl, True), ("?pretty=", curl, True),
                                         ("?pretty=0", curl, False),
                                         ("", {"User-Agent": "kubectl/v1.31"}, False),
                                         ("", {"Accept": "application/json;pretty=1"}, True),
                                         ("", {"Accept": "application/json;pretty=0"}, False)):
            r = yield self.client.get(path + query, headers=headers)
            self.assertEqual(r.body.startswith(b'{\n  "'), indented, (query, headers))
            self.assertEqual(r.json()["metadata"]["name"], "default")
        for headers in (curl, {"Accept": "application/json;pretty=1"}):
            r = yield self.client.get(f"{path}/nope", headers=headers)
            self.assertEqual(r.code, 404)
            self.assertTrue(r.body.startswith(b'{\n  "'), f"errors are indented too: {headers}")

    @inlineCallbacks
    def test_field_validation(self):
        """Warn (default) warns per unknown field; Strict fails naming them; Ignore drops."""
        body = {"metadata": {"name": "w", "bogus": 1}, "data": {"k": "v"}, "extra": True}
        path = "/api/v1/namespaces/default/configmaps"
        r = yield self.client.post(path, body)
        self.assertEqual(r.code, 201)
        self.assertEqual(sorted(r.headers_named("Warning")),
                         ['299 - "unknown field \\"extra\\""',
                          '299 - "unknown field \\"metadata.bogus\\""'])
        body["metadata"]["name"] = "s"
        r = yield self.client.post(f"{path}?fieldValidation=Strict", body)
        self.assertEqual((r.code, r.json()["reason"]), (400, "BadRequest"))
        # handlers/create.go -> transformDecodeError: the "cannot be handled" prefix.
        self.assertEqual(r.json()["message"], 'ConfigMap in version "v1" cannot be handled as '
                         'a ConfigMap: strict decoding error: unknown field "metadata.bogus", '
                         'unknown field "extra"')
        self.assertNotIn("details", r.json())
        r = yield self.client.post(f"{path}?fieldValidation=Ignore", body)
        self.assertEqual((r.code, r.headers_named("Warning")), (201, []))
        r = yield self.client.post(f"{path}?fieldValidation=Loud", body)
        self.assertEqual((r.code, r.json()["reason"]), (422, "Invalid"))
        self.assertEqual(r.json()["details"]["kind"], "CreateOptions")
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "fieldValidation")


def deferLater(seconds):
    from twisted.internet import reactor, task
    return task.deferLater(reactor, seconds, lambda: None)


class TokenAuthTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        # Authentication alone is under test: every authenticated user is allowed.
        self.server = yield start_token_server(
            self, 'secret-1,alice,uid-1,"devs,ops"\nsecret-2,bob,uid-2\n',
            "--authorization-mode", "AlwaysAllow")

    def client(self, token):
        return token_client(self, self.server, token)

    @inlineCallbacks
    def test_valid_token(self):
        """A bearer token from the file authenticates."""
        r = yield self.client("secret-1").get("/api/v1/namespaces/default")
        self.assertEqual(r.code, 200)
        r = yield self.client("secret-2").get("/api/v1/namespaces/default")
        self.assertEqual(r.code, 200)

    @inlineCallbacks
    def test_invalid_token(self):
        """An unknown bearer token is 401 with a Status body."""
        r = yield self.client("wrong").get("/api/v1/namespaces/default")
        self.assertEqual((r.code, r.json()["reason"], r.json()["code"]), (401, "Unauthorized", 401))

    @inlineCallbacks
    def test_form_body_is_not_a_form(self):
        """A form-encoded POST body is not parsed as a form: it is an unsupported type."""
        r = yield self.client("secret-1").post(
            "/api/v1/namespaces/default/configmaps?x=1", b"metadata=1",
            content_type="application/x-www-form-urlencoded")
        self.assertEqual((r.code, r.json()["reason"]), (415, "UnsupportedMediaType"))


class VerbClassificationTests(ServerTestCase):
    """A PUT that creates is authorized as create too (spec 2.1.10)."""

    @inlineCallbacks
    def test_put_create_needs_create(self):
        """With create denied, PUT of an absent binding is 403; PUT of an existing one works."""
        from platformd.auth.interfaces import ALLOW, DENY, Decision
        seen = []

        class NoCreate:
            def authorize(self, attributes):
                seen.append(attributes.info.verb)
                if attributes.info.verb == "create":
                    return Decision(DENY, "creating is not allowed here")
                return Decision(ALLOW)

        path = f"{RBAC}/namespaces/default/rolebindings"
        yield self.client.post(path, rolebinding("exists"))
        self.server.api.authorizer.authorizers = [NoCreate()]
        r = yield self.client.put(f"{path}/absent", rolebinding("absent"))
        self.assertEqual((r.code, r.json()["reason"]), (403, "Forbidden"))
        self.assertEqual(seen, ["update", "create"])
        r = yield self.client.put(f"{path}/exists", rolebinding("exists"))
        self.assertEqual(r.code, 200, r.body)

    @inlineCallbacks
    def test_namespace_status(self):
        """A namespace's status is written only through /status; spec.finalizers stays."""
        r = yield self.client.get("/api/v1/namespaces/default/status")
        ns = r.json()
        ns["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        ns["spec"] = {"finalizers": []}
        r = yield self.client.put("/api/v1/namespaces/default/status", ns)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.json()["status"]["conditions"], [{"type": "Ready", "status": "True"}])
        self.assertEqual(r.json()["spec"], {"finalizers": ["platform"]})
