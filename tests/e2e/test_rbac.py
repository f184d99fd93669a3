"""
RBAC end to end on a real server (default --authorization-mode RBAC): a user allowed
one namespace's Secrets reads and watches only those, with upstream's 403 messages;
system:masters is always allowed; the bootstrap policy lets every authenticated user
discover the API.
"""

from __future__ import annotations

import json

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e.harness import (
    Client, ServerTestCase, open_watch, start_token_server, token_client,
)

RBAC = "/apis/rbac.authorization.platform.io/v1"


class RBACTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        self.server = yield start_token_server(self, "jane-token,jane,u-jane\n")
        self.admin = Client(self, self.server.pki_dir, self.server.port_number)
        self.jane = token_client(self, self.server, "jane-token")
        for namespace in ("a", "b"):
            r = yield self.admin.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
            self.assertEqual(r.code, 201, r.body)
            r = yield self.admin.post(f"/api/v1/namespaces/{namespace}/secrets",
                                      {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
            self.assertEqual(r.code, 201, r.body)
        r = yield self.admin.post(f"{RBAC}/namespaces/a/roles", {
            "metadata": {"name": "secret-reader"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"],
                       "verbs": ["get", "list", "watch"]}]})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.admin.post(f"{RBAC}/namespaces/a/rolebindings", {
            "metadata": {"name": "jane-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                        "name": "secret-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.platform.io", "kind": "User",
                          "name": "jane"}]})
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def test_one_namespace_only(self):
        r = yield self.jane.get("/api/v1/namespaces/a/secrets")
        self.assertEqual((r.code, [i["metadata"]["namespace"] for i in r.json()["items"]]),
                         (200, ["a"]))
        r = yield self.jane.get("/api/v1/namespaces/b/secrets")
        self.assertEqual(r.code, 403)
        self.assertEqual(r.json(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'secrets is forbidden: User "jane" cannot list resource "secrets" in '
                       'API group "" in the namespace "b"',
            "reason": "Forbidden", "details": {"kind": "secrets"}, "code": 403})
        r = yield self.jane.get("/api/v1/secrets")
        self.assertEqual((r.code, r.json()["message"]),
                         (403, 'secrets is forbidden: User "jane" cannot list resource '
                               '"secrets" in API group "" at the cluster scope'))
        r = yield self.jane.get("/api/v1/namespaces/b/secrets/s")
        self.assertEqual((r.code, r.json()["message"], r.json()["details"]),
                         (403, 'secrets "s" is forbidden: User "jane" cannot get resource '
                               '"secrets" in API group "" in the namespace "b"',
                          {"name": "s", "kind": "secrets"}))
        r = yield self.jane.delete("/api/v1/namespaces/a/secrets/s")
        self.assertEqual(r.code, 403)

    @inlineCallbacks
    def test_watch_sees_only_its_namespace(self):
        r = yield self.jane.get("/api/v1/secrets?watch=1")
        self.assertEqual(r.code, 403)
        r = yield self.jane.get("/api/v1/namespaces/b/secrets?watch=1")
        self.assertEqual(r.code, 403)
        response, stream = yield open_watch(self.jane, "/api/v1/namespaces/a/secrets?watch=1")
        self.assertEqual(response.code, 200)
        self.addCleanup(lambda: self.jane.pool.closeCachedConnections())
        for namespace in ("b", "a"):
            r = yield self.admin.post(f"/api/v1/namespaces/{namespace}/secrets",
                                      {"metadata": {"name": "later"}})
            self.assertEqual(r.code, 201, r.body)
        events = yield stream.wait_for(2)
        self.assertEqual([(e["type"], e["object"]["metadata"]["namespace"],
                           e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "a", "s"), ("ADDED", "a", "later")])

    @inlineCallbacks
    def test_masters_and_discovery(self):
        r = yield self.admin.get("/api/v1/namespaces/b/secrets")
        self.assertEqual(r.code, 200)
        # The bootstrap policy: system:discovery and system:basic-user for everyone.
        for path in ("/api", "/apis", "/api/v1", "/version"):
            r = yield self.jane.get(path)
            self.assertEqual(r.code, 200, (path, r.body))
        r = yield self.jane.get("/api/v1/namespaces")
        self.assertEqual(r.code, 403)

    @inlineCallbacks
    def test_binding_change_takes_effect(self):
        r = yield self.admin.delete(f"{RBAC}/namespaces/a/rolebindings/jane-reads")
        self.assertEqual(r.code, 200, r.body)
        r = yield self.jane.get("/api/v1/namespaces/a/secrets")
        self.assertEqual(r.code, 403)
        # A binding whose role does not exist grants nothing; the 403 says why.
        r = yield self.admin.post(f"{RBAC}/namespaces/a/rolebindings", {
            "metadata": {"name": "dangling"},
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                        "name": "nope"},
            "subjects": [{"apiGroup": "rbac.authorization.platform.io", "kind": "User",
                          "name": "jane"}]})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.jane.get("/api/v1/namespaces/a/secrets")
        self.assertEqual(r.code, 403)
        self.assertIn('role.rbac.authorization.platform.io "nope" not found',
                      json.loads(r.body)["message"])


def invalid(kind: str, name: str, causes: list) -> dict:
    """The 422 Status upstream answers for ``causes`` (reason, field, message) of a binding."""
    rendered = [f"{field}: {message}" for _, field, message in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{kind}.rbac.authorization.platform.io "{name}" is invalid: {summary}',
            "reason": "Invalid",
            "details": {"name": name, "group": "rbac.authorization.platform.io", "kind": kind,
                        "causes": [{"reason": reason, "message": message, "field": field}
                                   for reason, field, message in causes]},
            "code": 422}


class BindingValidationTests(ServerTestCase):
    """A binding's roleRef refused with upstream's causes (pkg/apis/rbac/validation)."""

    @inlineCallbacks
    def test_role_ref_missing(self):
        """Without a roleRef (absent or empty) a RoleBinding or ClusterRoleBinding is
        refused for its kind and name, not "roleRef: Required value"; its apiGroup is
        defaulted, so not reported."""
        kinds = ((f"{RBAC}/namespaces/default/rolebindings", "RoleBinding",
                  '"Role", "ClusterRole"'),
                 (f"{RBAC}/clusterrolebindings", "ClusterRoleBinding", '"ClusterRole"'))
        for body in ({}, {"roleRef": {}}):
            for path, kind, supported in kinds:
                r = yield self.client.post(path, dict(body, metadata={"name": "noref"}))
                self.assertEqual((r.code, r.json()), (422, invalid(kind, "noref", [
                    ("FieldValueNotSupported", "roleRef.kind",
                     f'Unsupported value: "": supported values: {supported}'),
                    ("FieldValueRequired", "roleRef.name", "Required value")])))

    @inlineCallbacks
    def test_role_ref_api_group_and_subjects(self):
        """Another apiGroup is not supported; an empty User name is required; causes in
        upstream's order."""
        r = yield self.client.post(f"{RBAC}/namespaces/default/rolebindings", {
            "metadata": {"name": "grp"},
            "roleRef": {"apiGroup": "example.com", "kind": "Role", "name": "x"},
            "subjects": [{"kind": "User", "name": ""}]})
        self.assertEqual((r.code, r.json()), (422, invalid("RoleBinding", "grp", [
            ("FieldValueNotSupported", "roleRef.apiGroup",
             'Unsupported value: "example.com": supported values: '
             '"rbac.authorization.platform.io"'),
            ("FieldValueRequired", "subjects[0].name", "Required value")])))

    @inlineCallbacks
    def test_role_ref_immutable(self):
        """A changed roleRef (PUT, or a patch dropping it) is refused showing the new one
        as upstream's json.Marshal of its internal RoleRef."""
        path = f"{RBAC}/namespaces/default/rolebindings/fixed"
        r = yield self.client.put(path, {"metadata": {"name": "fixed"},
                                         "roleRef": {"kind": "ClusterRole", "name": "view"}})
        self.assertEqual(r.code, 201, r.body)
        obj = r.json()
        obj["roleRef"]["name"] = "edit"
        r = yield self.client.put(path, obj)
        self.assertEqual((r.code, r.json()), (422, invalid("RoleBinding", "fixed", [
            ("FieldValueInvalid", "roleRef",
             'Invalid value: {"APIGroup":"rbac.authorization.platform.io",'
             '"Kind":"ClusterRole","Name":"edit"}: cannot change roleRef')])))
        r = yield self.client.patch(path, {"roleRef": None})
        self.assertEqual((r.code, r.json()), (422, invalid("RoleBinding", "fixed", [
            ("FieldValueNotSupported", "roleRef.kind",
             'Unsupported value: "": supported values: "Role", "ClusterRole"'),
            ("FieldValueRequired", "roleRef.name", "Required value"),
            ("FieldValueInvalid", "roleRef",
             'Invalid value: {"APIGroup":"rbac.authorization.platform.io","Kind":"",'
             '"Name":""}: cannot change roleRef')])))
