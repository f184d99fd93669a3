"""
Writes end to end (spec 3, 4.7, 4.8): PUT, the four patch kinds, server-side apply, dry
run, two-phase and unsafe delete (field validation: test_fieldvalidation).
"""

import json

from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import ServerTestCase, open_watch

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
RBAC = "/apis/rbac.authorization.platform.io/v1"
APPLY = "application/apply-patch+yaml"


def pod(name, *containers):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": c, "image": f"{c}:1"} for c in containers]}}


def managers(obj):
    return {(e["manager"], e["operation"]): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields", [])}


class WritesTestCase(ServerTestCase):

    def apply(self, path, body, manager, force=False, query=""):
        q = f"?fieldManager={manager}" + ("&force=true" if force else "") + query
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        return self.client.patch(path + q, data, content_type=APPLY)

    @inlineCallbacks
    def expect(self, deferred, code, reason=None):
        r = yield deferred
        self.assertEqual(r.code, code, r.body[:500])
        if reason:
            self.assertEqual(r.json()["reason"], reason)
        return r


class ServerSideApplyTests(WritesTestCase):
    CONFIG = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "cfg", "labels": {"team": "a"}}, "data": {"a": "1", "b": "2"}}

    @inlineCallbacks
    def test_create_and_ownership(self):
        """Apply creates when absent (201) and records an Apply entry owning what it set."""
        r = yield self.expect(self.apply(f"{CM}/cfg", self.CONFIG, "alice"), 201)
        owned = managers(r.json())
        self.assertEqual(owned, {("alice", "Apply"): {
            "f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}})
        entry = r.json()["metadata"]["managedFields"][0]
        self.assertEqual((entry["apiVersion"], entry["fieldsType"]), ("v1", "FieldsV1"))

    @inlineCallbacks
    def test_conflict_and_force(self):
        """Changing another manager's field is 409 naming field and manager; force takes it."""
        yield self.apply(f"{CM}/cfg", self.CONFIG, "alice")
        bob = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
               "data": {"a": "changed", "c": "3"}}
        r = yield self.expect(self.apply(f"{CM}/cfg", bob, "bob"), 409, "Conflict")
        self.assertEqual(r.json()["details"]["causes"], [{
            "reason": "FieldManagerConflict", "message": 'conflict with "alice"',
            "field": ".data.a"}])
        self.assertIn("Apply failed with 1 conflict", r.json()["message"])
        # The same value is no conflict: both own it.
        same = dict(bob, data={"a": "1"})
        r = yield self.expect(self.apply(f"{CM}/cfg", same, "carol"), 200)
        r = yield self.expect(self.apply(f"{CM}/cfg", bob, "bob", force=True), 200)
        self.assertEqual(r.json()["data"], {"a": "changed", "b": "2", "c": "3"})
        owned = managers(r.json())
        self.assertEqual(owned[("alice", "Apply")], {"f:data": {"f:b": {}},
                                                     "f:metadata": {"f:labels": {"f:team": {}}}})
        self.assertEqual(owned[("bob", "Apply")], {"f:data": {"f:a": {}, "f:c": {}}})
        self.assertNotIn(("carol", "Apply"), owned)  # carol owned only data.a, now bob's

    @inlineCallbacks
    def test_fields_no_longer_applied_are_removed(self):
        """A field a manager stops applying goes, unless another manager owns it."""
        yield self.apply(f"{CM}/cfg", self.CONFIG, "alice")
        yield self.apply(f"{CM}/cfg", {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "cfg"}, "data": {"b": "2"}}, "bob")
        smaller = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                   "data": {"a": "1"}}
        r = yield self.expect(self.apply(f"{CM}/cfg", smaller, "alice"), 200)
        self.assertEqual(r.json()["data"], {"a": "1", "b": "2"})  # b kept: bob owns it
        self.assertNotIn("labels", r.json()["metadata"])
        self.assertEqual(managers(r.json())[("alice", "Apply")], {"f:data": {"f:a": {}}})

    @inlineCallbacks
    def test_update_entries_and_transfer(self):
        """PUT and PATCH record Update entries; changed fields move to their writer."""
        r = yield self.apply(f"{CM}/cfg", self.CONFIG, "alice")
        r = yield self.expect(self.client.patch(f"{CM}/cfg?fieldManager=editor",
                                                {"data": {"a": "edited"}}), 200)
        owned = managers(r.json())
        self.assertEqual(owned[("editor", "Update")], {"f:data": {"f:a": {}}})
        self.assertEqual(owned[("alice", "Apply")]["f:data"], {"f:b": {}})
        body = r.json()
        body["data"]["d"] = "4"
        r = yield self.expect(self.client.put(f"{CM}/cfg?fieldManager=putter", body), 200)
        self.assertEqual(managers(r.json())[("putter", "Update")], {"f:data": {"f:d": {}}})
        r = yield self.expect(self.client.post(CM, {"metadata": {"name": "new"}, "data": {"x": "1"}},
                                               headers={"User-Agent": "mytool/1.0 (linux)"}), 201)
        self.assertEqual(managers(r.json()), {("mytool", "Update"): {"f:data": {"f:x": {}}}})

    @inlineCallbacks
    def test_list_map_merge(self):
        """Two managers own different elements of a list merged by key (name)."""
        path = "/api/v1/namespaces/default/serviceaccounts/sa"

        def account(secret):
            return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
                    "secrets": [{"name": secret}]}
        yield self.expect(self.apply(path, account("one"), "a"), 201)
        r = yield self.expect(self.apply(path, account("two"), "b"), 200)
        self.assertEqual([s["name"] for s in r.json()["secrets"]], ["one", "two"])
        fields = managers(r.json())[("b", "Apply")]["f:secrets"]
        self.assertEqual(fields, {'k:{"name":"two"}': {".": {}, "f:name": {}}})
        r = yield self.expect(self.apply(path, dict(account("x"), secrets=[]), "a"), 200)
        self.assertEqual([s["name"] for s in r.json()["secrets"]], ["two"])

    @inlineCallbacks
    def test_pod_containers_by_name(self):
        """A pod's containers are owned element by element, field by field."""
        r = yield self.expect(self.apply(f"{PODS}/p", pod("p", "web", "side"), "a"), 201)
        fields = managers(r.json())[("a", "Apply")]["f:spec"]["f:containers"]
        self.assertEqual(sorted(fields), ['k:{"name":"side"}', 'k:{"name":"web"}'])
        self.assertEqual(fields['k:{"name":"web"}'], {".": {}, "f:image": {}, "f:name": {}})

    @inlineCallbacks
    def test_atomic_subjects(self):
        """RoleBinding subjects and roleRef are atomic: owned whole."""
        binding = {"apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "rb"},
                   "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "Role",
                               "name": "r"},
                   "subjects": [{"kind": "User", "name": "u"}]}
        r = yield self.expect(self.apply(f"{RBAC}/namespaces/default/rolebindings/rb", binding,
                                         "kubectl"), 201)
        self.assertEqual(managers(r.json())[("kubectl", "Apply")],
                         {"f:roleRef": {}, "f:subjects": {}})

    @inlineCallbacks
    def test_apply_errors(self):
        """fieldManager is required; force only for apply; a body without kind is 400."""
        r = yield self.expect(self.client.patch(f"{CM}/cfg", json.dumps(self.CONFIG).encode(),
                                                content_type=APPLY), 422, "Invalid")
        self.assertEqual(r.json()["details"]["kind"], "PatchOptions")
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "fieldManager")
        yield self.apply(f"{CM}/cfg", self.CONFIG, "alice")
        r = yield self.expect(self.client.patch(f"{CM}/cfg?force=true", {"data": {}}), 422,
                              "Invalid")
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "force")
        yield self.expect(self.apply(f"{CM}/cfg", {"metadata": {"name": "cfg"}}, "alice"), 400,
                          "BadRequest")
        yield self.expect(self.apply(f"{CM}/other", self.CONFIG, "alice"), 400, "BadRequest")

    @inlineCallbacks
    def test_apply_yaml(self):
        """The apply body is YAML."""
        body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  k: v\n"
        r = yield self.expect(self.apply(f"{CM}/yml", body, "yaml-user"), 201)
        self.assertEqual(r.json()["data"], {"k": "v"})


class PatchTests(WritesTestCase):
    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        yield self.client.post(CM, {"metadata": {"name": "c", "labels": {"a/b": "1"}},
                                    "data": {"x": "1", "list": "[]"}})

    def json_patch(self, ops, path=f"{CM}/c"):
        return self.client.patch(path, ops, content_type="application/json-patch+json")

    @inlineCallbacks
    def test_json_patch_ops(self):
        """Every RFC 6902 op, ~1 escapes and the array '-' index."""
        r = yield self.expect(self.json_patch([
            {"op": "add", "path": "/data/y", "value": "2"},
            {"op": "replace", "path": "/data/x", "value": "10"},
            {"op": "copy", "from": "/data/x", "path": "/data/z"},
            {"op": "move", "from": "/data/z", "path": "/data/w"},
            {"op": "remove", "path": "/data/list"},
            {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
            {"op": "add", "path": "/metadata/finalizers", "value": []},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "x.io/f"},
        ]), 200)
        self.assertEqual(r.json()["data"], {"x": "10", "y": "2", "w": "10"})
        self.assertEqual(r.json()["metadata"]["finalizers"], ["x.io/f"])

    @inlineCallbacks
    def test_json_patch_test_fails(self):
        """A failed test op is 422 and changes nothing.  Every apply error is upstream's
        NewGenericServerResponse(422): one fixed message, empty details (patch.go
        applyJSPatch); over 10,000 operations is 413 (a patch that does not decode:
        test_fieldvalidation)."""
        before = yield self.client.get(f"{CM}/c")
        rejected = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the server rejected our request due to an error in our request",
                    "reason": "Invalid", "details": {}, "code": 422}
        r = yield self.expect(self.json_patch([{"op": "test", "path": "/data/x", "value": "9"},
                                               {"op": "add", "path": "/data/q", "value": "1"}]),
                              422, "Invalid")
        self.assertEqual(r.json(), rejected)
        after = yield self.client.get(f"{CM}/c")
        self.assertEqual(before.json(), after.json())
        for ops in ([{"op": "remove", "path": "/data/nope"}], [{"op": "frobnicate"}],
                    [{"op": "add", "path": "/metadata/finalizers/7", "value": "x"}],
                    [{"op": "add", "path": "/data/q"}]):
            r = yield self.expect(self.json_patch(ops), 422)
            self.assertEqual(r.json(), rejected, ops)
        r = yield self.expect(self.json_patch([{"op": "test", "path": "/data/x",
                                                "value": "1"}] * 10001), 413,
                              "RequestEntityTooLarge")
        self.assertEqual(r.json()["message"], "Request entity too large: The allowed maximum "
                                              "operations in a JSON patch is 10000, got 10001")

    @inlineCallbacks
    def test_json_patch_replacing_the_root(self):
        """A JSON patch replacing the whole object with null patches it as with {}: Go
        decodes null into the empty object (it was a 500); the server's fields stay."""
        before = (yield self.client.get(f"{CM}/c")).json()
        for value in (None, {}):
            r = yield self.expect(self.json_patch([{"op": "replace", "path": "",
                                                    "value": value}]), 200)
            meta = r.json()["metadata"]
            self.assertNotIn("data", r.json())
            self.assertEqual((meta["name"], meta["uid"], meta.get("labels")),
                             ("c", before["metadata"]["uid"], None))

    @inlineCallbacks
    def test_stale_resource_version_in_patch_conflicts(self):
        """A JSON patch, merge patch or strategic merge patch that sets a stale
        metadata.resourceVersion is 409 (store.go Update: the new object's version must
        equal the stored one); the current version, or none, patches."""
        current = (yield self.client.get(f"{CM}/c")).json()["metadata"]["resourceVersion"]
        yield self.expect(self.client.patch(f"{CM}/c", {"data": {"x": "2"}}), 200)
        message = ('Operation cannot be fulfilled on configmaps "c": the object has been '
                   "modified; please apply your changes to the latest version and try again")
        for content_type, body in (
                ("application/json-patch+json",
                 [{"op": "replace", "path": "/metadata/resourceVersion", "value": current},
                  {"op": "add", "path": "/data/y", "value": "1"}]),
                ("application/merge-patch+json",
                 {"metadata": {"resourceVersion": current}, "data": {"y": "1"}}),
                ("application/strategic-merge-patch+json",
                 {"metadata": {"resourceVersion": current}, "data": {"y": "1"}})):
            r = yield self.expect(self.client.patch(f"{CM}/c", body, content_type=content_type),
                                  409, "Conflict")
            self.assertEqual(r.json()["message"], message, content_type)
        latest = (yield self.client.get(f"{CM}/c")).json()["metadata"]["resourceVersion"]
        r = yield self.expect(self.json_patch([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": latest},
            {"op": "add", "path": "/data/y", "value": "1"}]), 200)
        self.assertEqual(r.json()["data"]["y"], "1")
        r = yield self.expect(self.client.patch(f"{CM}/c", {
            "metadata": {"resourceVersion": None}, "data": {"y": "2"}}), 200)
        self.assertEqual(r.json()["data"]["y"], "2")

    @inlineCallbacks
    def test_merge_and_strategic(self):
        """Merge patch deletes with null; strategic merges pod containers by name."""
        r = yield self.expect(self.client.patch(f"{CM}/c", {"data": {"x": None, "n": "1"}}), 200)
        self.assertEqual(r.json()["data"], {"list": "[]", "n": "1"})
        yield self.client.post(PODS, pod("p", "web", "side"))
        r = yield self.expect(self.client.patch(
            f"{PODS}/p", {"spec": {"containers": [{"name": "side", "image": "side:2"}]}},
            content_type="application/strategic-merge-patch+json"), 200)
        self.assertEqual([(c["name"], c["image"]) for c in r.json()["spec"]["containers"]],
                         [("web", "web:1"), ("side", "side:2")])

    @inlineCallbacks
    def test_conditional_patch(self):
        """A resourceVersion in the patch body makes it conditional: stale is 409."""
        current = (yield self.client.get(f"{CM}/c")).json()
        rv = current["metadata"]["resourceVersion"]
        yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"resourceVersion": rv},
                                                        "data": {"k": "1"}}), 200)
        yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"resourceVersion": rv},
                                                        "data": {"k": "2"}}), 409, "Conflict")

    @inlineCallbacks
    def test_unknown_patch_type(self):
        """An unknown patch Content-Type is 415."""
        yield self.expect(self.client.patch(f"{CM}/c", {"data": {}}, content_type="text/plain"),
                          415, "UnsupportedMediaType")


class DryRunTests(WritesTestCase):
    @inlineCallbacks
    def revision_and_watch(self):
        r = yield self.client.get(CM)
        rv = r.json()["metadata"]["resourceVersion"]
        _, reader = yield open_watch(self.client, f"{CM}?watch=1&resourceVersion={rv}")
        return rv, reader

    @inlineCallbacks
    def test_every_verb(self):
        """dryRun on POST, PUT, PATCH, DELETE, deletecollection: normal answers, no change."""
        yield self.client.post(CM, {"metadata": {"name": "keep"}, "data": {"a": "1"}})
        rv, reader = yield self.revision_and_watch()
        for query in ("?dryRun=All", "?dryRun"):
            r = yield self.expect(self.client.post(CM + query, {"metadata": {"name": "new"}}), 201)
            self.assertEqual(r.json()["metadata"]["name"], "new")
            current = (yield self.client.get(f"{CM}/keep")).json()
            current["data"] = {"a": "2"}
            r = yield self.expect(self.client.put(f"{CM}/keep{query}", current), 200)
            self.assertEqual(r.json()["data"], {"a": "2"})
            r = yield self.expect(self.client.patch(f"{CM}/keep{query}", {"data": {"a": "3"}}), 200)
            self.assertEqual(r.json()["data"], {"a": "3"})
            yield self.expect(self.client.delete(f"{CM}/keep{query}"), 200)
            yield self.expect(self.client.delete(CM + query), 200)
            yield self.expect(self.apply(f"{CM}/applied", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}},
                "m", query="&dryRun=All"), 201)
        after = yield self.client.get(CM)
        self.assertEqual(after.json()["metadata"]["resourceVersion"], rv)
        self.assertEqual([i["metadata"]["name"] for i in after.json()["items"]], ["keep"])
        self.assertEqual(after.json()["items"][0]["data"], {"a": "1"})
        self.assertEqual(reader.events, [])

    @inlineCallbacks
    def test_invalid_value(self):
        """Another dryRun value is refused as an invalid option naming it."""
        r = yield self.expect(self.client.post(f"{CM}?dryRun=Some", {"metadata": {"name": "x"}}),
                              422, "Invalid")
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "dryRun")
        yield self.expect(self.client.delete(f"{CM}/x?dryRun=Some"), 422, "Invalid")

    @inlineCallbacks
    def test_validation_still_runs(self):
        """A dry run still validates: an invalid object is 422."""
        yield self.expect(self.client.post(f"{PODS}?dryRun=All", pod("bad")), 422, "Invalid")


class DeleteStateTests(WritesTestCase):
    """Spec 3's state table, row by row, with the watch events each transition makes."""

    @inlineCallbacks
    def test_state_table(self):
        """live→terminating→terminating→removed; live without finalizers→removed."""
        r = yield self.client.get(CM)
        _, reader = yield open_watch(
            self.client, f"{CM}?watch=1&resourceVersion={r.json()['metadata']['resourceVersion']}")
        yield self.client.post(CM, {"metadata": {"name": "f", "finalizers": ["a.io/x", "b.io/y"]}})
        r = yield self.expect(self.client.delete(f"{CM}/f"), 200)
        self.assertTrue(r.json()["metadata"]["deletionTimestamp"])  # Live -> Terminating
        r = yield self.expect(self.client.delete(f"{CM}/f"), 200)  # again: still terminating
        self.assertTrue(r.json()["metadata"]["deletionTimestamp"])
        yield self.expect(self.client.patch(
            f"{CM}/f", [{"op": "remove", "path": "/metadata/finalizers/0"}],
            content_type="application/json-patch+json"), 200)  # others remain: Terminating
        r = yield self.expect(self.client.get(f"{CM}/f"), 200)
        self.assertEqual(r.json()["metadata"]["finalizers"], ["b.io/y"])
        yield self.expect(self.client.patch(f"{CM}/f", {"metadata": {"finalizers": None}}), 200)
        yield self.expect(self.client.get(f"{CM}/f"), 404)  # Removed
        yield self.client.post(CM, {"metadata": {"name": "plain"}})
        yield self.expect(self.client.delete(f"{CM}/plain"), 200)
        events = yield reader.wait_for(6)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "f"), ("MODIFIED", "f"), ("MODIFIED", "f"),
                          ("DELETED", "f"), ("ADDED", "plain"), ("DELETED", "plain")])

    @inlineCallbacks
    def test_finalizers_reorder(self):
        """Any authorised update may reorder finalizers of a terminating object."""
        yield self.client.post(CM, {"metadata": {"name": "r", "finalizers": ["a.io/x", "b.io/y"]}})
        yield self.client.delete(f"{CM}/r")
        r = yield self.expect(self.client.patch(
            f"{CM}/r", {"metadata": {"finalizers": ["b.io/y", "a.io/x"]}}), 200)
        self.assertEqual(r.json()["metadata"]["finalizers"], ["b.io/y", "a.io/x"])

    @inlineCallbacks
    def test_options(self):
        """Preconditions, propagationPolicy and the options body are honoured."""
        created = (yield self.client.post(CM, {"metadata": {"name": "o"}})).json()
        r = yield self.expect(self.client.delete(f"{CM}/o", {"preconditions": {"uid": "nope"}}),
                              409, "Conflict")
        uid = created["metadata"]["uid"]
        # rest/delete.go BeforeDelete: a Conflict on the kind, not the resource.
        self.assertEqual(r.json()["message"], (
            f'Operation cannot be fulfilled on ConfigMap "o": the UID in the precondition '
            f'(nope) does not match the UID in record ({uid}). The object might have been '
            "deleted and then recreated"))
        self.assertEqual(r.json()["details"], {"name": "o", "kind": "ConfigMap"})
        rv = created["metadata"]["resourceVersion"]
        r = yield self.expect(self.client.delete(
            f"{CM}/o", {"preconditions": {"resourceVersion": "1"}}), 409, "Conflict")
        self.assertEqual(r.json()["message"], (
            f'Operation cannot be fulfilled on ConfigMap "o": the ResourceVersion in the '
            f"precondition (1) does not match the ResourceVersion in record ({rv}). The object "
            "might have been modified"))
        r = yield self.expect(self.client.delete(f"{CM}/o?propagationPolicy=Sideways"), 422,
                              "Invalid")
        # apimachinery meta/v1/validation ValidateDeleteOptions.
        self.assertEqual(r.json()["message"], (
            'DeleteOptions.meta.platform.io "" is invalid: propagationPolicy: Unsupported value: '
            '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"'))
        r = yield self.expect(self.client.delete(
            f"{CM}/o?propagationPolicy=Orphan&orphanDependents=true"), 422, "Invalid")
        self.assertEqual(r.json()["message"], (
            'DeleteOptions.meta.platform.io "" is invalid: propagationPolicy: Invalid value: '
            '"Orphan": orphanDependents and deletionPropagation cannot be both set'))
        yield self.expect(self.client.delete(f"{CM}/o", {
            "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": created["metadata"]["uid"],
                              "resourceVersion": created["metadata"]["resourceVersion"]}}), 200)


class UnsafeDeleteTests(WritesTestCase):
    server_args = ("--feature-gates", "AllowUnsafeMalformedObjectDeletion=true")
    OPTION = "ignoreStoreReadErrorWithClusterBreakingPotential"

    @inlineCallbacks
    def corrupt(self, name):
        """Write bytes that do not decode straight into the store."""
        key = "/registry/configmaps/default/" + name
        yield self.server.storage.create(key, b"\x00\xffnot json")

    @inlineCallbacks
    def test_unsafe_delete(self):
        """A corrupt object cannot be read or deleted normally; the option removes it."""
        yield self.client.post(CM, {"metadata": {"name": "fine", "finalizers": ["a.io/x"]}})
        yield self.corrupt("broken")
        r = yield self.expect(self.client.get(f"{CM}/broken"), 500, "StorageReadError")
        self.assertIn(self.OPTION, r.json()["message"])
        yield self.expect(self.client.get(CM), 500, "StorageReadError")
        yield self.expect(self.client.delete(f"{CM}/broken"), 500, "StorageReadError")
        r = yield self.expect(self.client.delete(f"{CM}/broken?{self.OPTION}=true&dryRun=All"),
                              422, "Invalid")
        self.assertEqual(r.json()["details"]["causes"][0]["field"], "dryRun")
        yield self.expect(self.client.delete(f"{CM}/broken", {
            self.OPTION: True, "preconditions": {"uid": "x"}}), 422, "Invalid")
        r = yield self.expect(self.client.delete(f"{CM}/broken?{self.OPTION}=true"), 200)
        self.assertEqual(r.json()["status"], "Success")
        yield self.expect(self.client.get(f"{CM}/broken"), 404)
        yield self.expect(self.client.delete(f"{CM}/fine?{self.OPTION}=true"), 400, "BadRequest")
        yield self.expect(self.client.get(CM), 200)


class UnsafeDeleteGateOffTests(WritesTestCase):
    @inlineCallbacks
    def test_refused(self):
        """With the gate off the option is refused."""
        yield self.client.post(CM, {"metadata": {"name": "x"}})
        r = yield self.expect(self.client.delete(
            f"{CM}/x?ignoreStoreReadErrorWithClusterBreakingPotential=true"), 422, "Invalid")
        self.assertIn("AllowUnsafeMalformedObjectDeletion", r.json()["message"])
