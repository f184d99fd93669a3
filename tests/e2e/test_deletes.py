"""
Delete semantics as upstream's generic store and delete handler have them (issue 11.2):
garbage-collector finalizers from propagationPolicy/orphanDependents, 200 vs 202, the
success Status or the deleted object, deletecollection's list, namespaces.

Upstream: apiserver ``registry/generic/registry/store.go`` (Delete,
deletionFinalizersForGarbageCollection, markAsDeleting, DeleteCollection,
finalizeDelete), ``endpoints/handlers/delete.go``, kubernetes
``registry/core/namespace/storage/storage.go``.
"""

from twisted.internet.defer import inlineCallbacks

from tests.e2e.test_writes import CM, PODS, RBAC, WritesTestCase

RB = f"{RBAC}/namespaces/default/rolebindings"


def binding(name, finalizers=()):
    meta = {"name": name}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"metadata": meta, "subjects": [{"kind": "User", "name": "jane"}],
            "roleRef": {"apiGroup": "rbac.authorization.platform.io", "kind": "ClusterRole",
                        "name": "view"}}


class DeleteTests(WritesTestCase):
    @inlineCallbacks
    def create(self, name, finalizers=()):
        r = yield self.expect(self.client.post(RB, binding(name, finalizers)), 201)
        return r.json()

    @inlineCallbacks
    def test_removed_at_once_status(self):
        """Without finalizers the object goes at once; the answer is a Success Status
        whose details name the resource (Kind carries the resource, as upstream)."""
        created = yield self.create("plain")
        r = yield self.expect(self.client.delete(f"{RB}/plain"), 200)
        self.assertEqual(r.json(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "plain", "group": "rbac.authorization.platform.io",
                        "kind": "rolebindings", "uid": created["metadata"]["uid"]}})
        yield self.expect(self.client.get(f"{RB}/plain"), 404)

    @inlineCallbacks
    def test_foreground_and_orphan_add_finalizers(self):
        """Foreground adds foregroundDeletion, Orphan and orphanDependents=true add
        orphan: the object stays terminating (200, deletionGracePeriodSeconds 0) until a
        client removes the finalizer, since no garbage collector runs here."""
        for name, query, finalizer in (("fg", "propagationPolicy=Foreground",
                                        "foregroundDeletion"),
                                       ("or", "propagationPolicy=Orphan", "orphan"),
                                       ("od", "orphanDependents=true", "orphan")):
            yield self.create(name)
            r = yield self.expect(self.client.delete(f"{RB}/{name}?{query}"), 200)
            meta = r.json()["metadata"]
            self.assertEqual(meta["finalizers"], [finalizer], query)
            self.assertTrue(meta["deletionTimestamp"])
            self.assertEqual(meta["deletionGracePeriodSeconds"], 0)
            r = yield self.expect(self.client.get(f"{RB}/{name}"), 200)
            self.assertEqual(r.json()["metadata"]["finalizers"], [finalizer])
            yield self.expect(self.client.patch(f"{RB}/{name}",
                                                {"metadata": {"finalizers": None}}), 200)
            yield self.expect(self.client.get(f"{RB}/{name}"), 404)

    @inlineCallbacks
    def test_background_takes_gc_finalizers_off(self):
        """A Background delete of an object waiting on orphan removes that finalizer,
        and with nothing left the object goes."""
        yield self.create("bg")
        yield self.expect(self.client.delete(f"{RB}/bg?propagationPolicy=Orphan"), 200)
        r = yield self.expect(self.client.delete(f"{RB}/bg?propagationPolicy=Background"), 200)
        self.assertEqual(r.json()["status"], "Success")
        yield self.expect(self.client.get(f"{RB}/bg"), 404)

    @inlineCallbacks
    def test_202_only_for_explicit_orphan_dependents_false(self):
        """An object kept by its own finalizer: 202 with orphanDependents=false, 200
        otherwise; with orphanDependents=false and no finalizer it goes (200)."""
        yield self.create("kept", ["example.io/hold"])
        r = yield self.expect(self.client.delete(f"{RB}/kept"), 200)
        self.assertEqual(r.json()["metadata"]["finalizers"], ["example.io/hold"])
        r = yield self.expect(self.client.delete(f"{RB}/kept?orphanDependents=false"), 202)
        self.assertEqual(r.json()["kind"], "RoleBinding")
        yield self.create("free")
        r = yield self.expect(self.client.delete(f"{RB}/free?orphanDependents=false"), 200)
        self.assertEqual(r.json()["status"], "Success")

    @inlineCallbacks
    def test_no_new_finalizers_while_deleting(self):
        """
        Once deletion has started, a finalizer cannot be added by any write (PUT, the
        three patch kinds, apply; any kind): 422 on metadata.finalizers, the new ones
        named sorted (apimachinery ``ValidateNoNewFinalizers``); keeping, reordering and
        removing the old ones is fine.
        """
        yield self.create("fin", ["example.com/hold"])
        marked = (yield self.expect(self.client.delete(f"{RB}/fin"), 200)).json()
        added = ["example.com/hold", "example.com/other"]
        put = dict(marked, metadata=dict(marked["metadata"], finalizers=added))
        writes = (
            self.client.put(f"{RB}/fin", put),
            self.client.patch(f"{RB}/fin", {"metadata": {"finalizers": added}}),
            self.client.patch(f"{RB}/fin", [{"op": "add", "path": "/metadata/finalizers/-",
                                             "value": "example.com/other"}],
                              content_type="application/json-patch+json"),
            self.client.patch(f"{RB}/fin", {"metadata": {"finalizers": ["example.com/other"]}},
                              content_type="application/strategic-merge-patch+json"),
            self.apply(f"{RB}/fin", {"kind": "RoleBinding",
                                     "apiVersion": "rbac.authorization.platform.io/v1",
                                     "metadata": {"name": "fin", "finalizers": added}},
                       "applier", force=True),
        )
        detail = ("Forbidden: no new finalizers can be added if the object is being deleted, "
                  'found new finalizers []string{"example.com/other"}')
        for write in writes:
            r = yield self.expect(write, 422)
            self.assertEqual(r.json(), {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": 'RoleBinding.rbac.authorization.platform.io "fin" is invalid: '
                           f"metadata.finalizers: {detail}",
                "reason": "Invalid",
                "details": {"name": "fin", "group": "rbac.authorization.platform.io",
                            "kind": "RoleBinding", "causes": [{
                                "reason": "FieldValueForbidden", "message": detail,
                                "field": "metadata.finalizers"}]},
                "code": 422})
        r = yield self.expect(self.client.get(f"{RB}/fin"), 200)
        self.assertEqual(r.json()["metadata"]["finalizers"], ["example.com/hold"])

        yield self.expect(self.client.post(CM, {"metadata": {"name": "c", "finalizers": [
            "b.io/x", "a.io/y"]}}), 201)
        yield self.expect(self.client.delete(f"{CM}/c"), 200)
        yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"finalizers": [
            "a.io/y", "b.io/x"]}}), 200)  # reordered: nothing new
        r = yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"finalizers": [
            "z.io/new", "a.io/y", "c.io/new", "c.io/new"]}}), 422, "Invalid")
        self.assertEqual(r.json()["message"], (
            'ConfigMap "c" is invalid: [metadata.finalizers: Forbidden: no new finalizers can '
            'be added if the object is being deleted, found new finalizers []string{"c.io/new", '
            '"z.io/new"}, metadata.finalizers[3]: Duplicate value: "c.io/new"]'))
        yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"finalizers": [
            "a.io/y"]}}), 200)
        yield self.expect(self.client.patch(f"{CM}/c", {"metadata": {"finalizers": None}}), 200)
        yield self.expect(self.client.get(f"{CM}/c"), 404)

    @inlineCallbacks
    def test_dry_run_marks_nothing(self):
        """A dry-run Foreground delete answers with the marked object; nothing changes."""
        created = yield self.create("dry")
        r = yield self.expect(self.client.delete(
            f"{RB}/dry?propagationPolicy=Foreground&dryRun=All"), 200)
        self.assertEqual(r.json()["metadata"]["finalizers"], ["foregroundDeletion"])
        r = yield self.expect(self.client.get(f"{RB}/dry"), 200)
        self.assertEqual(r.json(), created)

    @inlineCallbacks
    def test_pods_and_service_accounts_return_the_object(self):
        """ReturnDeletedObject kinds answer a removal with the object, not a Status."""
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                                                                    "image": "i"}]}}
        yield self.expect(self.client.post(PODS, pod), 201)
        r = yield self.expect(self.client.delete(f"{PODS}/p"), 200)
        self.assertEqual((r.json()["kind"], r.json()["metadata"]["name"]), ("Pod", "p"))
        sa = "/api/v1/namespaces/default/serviceaccounts"
        yield self.expect(self.client.post(sa, {"metadata": {"name": "s"}}), 201)
        r = yield self.expect(self.client.delete(f"{sa}/s"), 200)
        self.assertEqual(r.json()["kind"], "ServiceAccount")
        yield self.expect(self.client.post(CM, {"metadata": {"name": "c"}}), 201)
        r = yield self.expect(self.client.delete(f"{CM}/c"), 200)
        self.assertEqual(r.json()["kind"], "Status")

    @inlineCallbacks
    def test_delete_collection_list_options(self):
        """
        deletecollection lists what to delete as a LIST with its options does: a
        version from before a create leaves that object (Exact), a version not reached
        is 504, options a LIST refuses are 422, and a limit only pages.
        """
        first = yield self.create("a")
        rv = first["metadata"]["resourceVersion"]
        yield self.create("b")
        r = yield self.expect(self.client.delete(
            f"{RB}?resourceVersion={rv}&resourceVersionMatch=Exact&dryRun=All"), 200)
        self.assertEqual(([i["metadata"]["name"] for i in r.json()["items"]],
                          r.json()["metadata"]["resourceVersion"]), (["a"], rv))
        r = yield self.expect(self.client.delete(f"{RB}?resourceVersion={int(rv) + 1000}"), 504)
        self.assertIn("Too large resource version", r.json()["message"])
        r = yield self.expect(self.client.delete(f"{RB}?resourceVersionMatch=NotOlderThan"), 422)
        self.assertIn("resourceVersionMatch is forbidden unless", r.json()["message"])
        r = yield self.expect(self.client.delete(f"{RB}?limit=1"), 200)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a", "b"])
        r = yield self.expect(self.client.get(RB), 200)
        self.assertEqual(r.json()["items"], [])

    @inlineCallbacks
    def test_delete_collection_answers_with_the_list(self):
        """deletecollection answers with the deleted objects as a RoleBindingList (dry
        run too, deleting nothing); its options reach every object."""
        for name in ("a", "b"):
            yield self.create(name)
        r = yield self.expect(self.client.delete(f"{RB}?dryRun=All"), 200)
        body = r.json()
        self.assertEqual((body["kind"], body["apiVersion"]),
                         ("RoleBindingList", "rbac.authorization.platform.io/v1"))
        self.assertEqual([i["metadata"]["name"] for i in body["items"]], ["a", "b"])
        self.assertTrue(body["metadata"]["resourceVersion"])
        r = yield self.expect(self.client.get(RB), 200)
        self.assertEqual(len(r.json()["items"]), 2)
        r = yield self.expect(self.client.delete(f"{RB}?propagationPolicy=Orphan"), 200)
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a", "b"])
        r = yield self.expect(self.client.get(RB), 200)
        self.assertEqual([i["metadata"]["finalizers"] for i in r.json()["items"]],
                         [["orphan"], ["orphan"]])

    @inlineCallbacks
    def test_namespace(self):
        """A namespace's first delete marks it Terminating (no grace period field) with
        the finalizers the options ask for; a second answers with it (200); a UID
        precondition failure has the namespace registry's words."""
        yield self.create_namespace("gone")
        r = yield self.expect(self.client.delete("/api/v1/namespaces/gone",
                                                 {"preconditions": {"uid": "x"}}), 409, "Conflict")
        self.assertTrue(r.json()["message"].startswith(
            'Operation cannot be fulfilled on namespaces "gone": Precondition failed: UID in '
            "precondition: x, UID in object meta: "), r.json()["message"])
        yield self.create_namespace("kept")
        yield self.expect(self.client.post("/api/v1/namespaces/kept/configmaps",
                                           {"metadata": {"name": "c",
                                                         "finalizers": ["example.io/h"]}}), 201)
        yield self.settled_namespace("kept")
        r = yield self.expect(self.client.delete(
            "/api/v1/namespaces/kept?propagationPolicy=Orphan"), 200)
        body = r.json()
        self.assertEqual(body["status"]["phase"], "Terminating")
        self.assertEqual(body["metadata"]["finalizers"], ["orphan"])
        self.assertNotIn("deletionGracePeriodSeconds", body["metadata"])
        r = yield self.expect(self.client.delete("/api/v1/namespaces/kept"), 200)
        self.assertEqual(r.json()["metadata"]["name"], "kept")
        yield self.until_items("/api/v1/namespaces/kept/serviceaccounts", 0)
