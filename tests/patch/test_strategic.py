"""Strategic merge patch by the built-in schemas."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.errors import StatusError
from platformd.patch.strategic import strategic_merge
from platformd.registry import core, rbac

POD = {"metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x.io/a"]},
       "spec": {"containers": [{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
                               {"name": "side", "image": "busybox"}]}}


class StrategicMergeTests(SynchronousTestCase):
    def patch(self, original, patch, kind=core.POD):
        return strategic_merge(original, patch, kind.schema)

    def test_containers_merge_by_name(self):
        """Pod containers merge by name; unnamed fields are kept.  Order as upstream's
        strategicpatch mergeSlice: the patch's items in patch order, a live-only item
        placed by its live position, an item new to the live list before it."""
        out = self.patch(POD, {"spec": {"containers": [{"name": "web", "image": "nginx:2"},
                                                       {"name": "new", "image": "x"}]}})
        self.assertEqual([(c["name"], c["image"]) for c in out["spec"]["containers"]],
                         [("web", "nginx:2"), ("new", "x"), ("side", "busybox")])
        self.assertEqual(out["spec"]["containers"][0]["env"], [{"name": "A", "value": "1"}])

    def test_delete_element(self):
        """$patch: delete removes the element with that merge key."""
        out = self.patch(POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["web"])

    def test_replace_list(self):
        """$patch: replace in a list replaces the list."""
        out = self.patch(POD, {"spec": {"containers": [{"$patch": "replace"},
                                                       {"name": "only", "image": "i"}]}})
        self.assertEqual(out["spec"]["containers"], [{"name": "only", "image": "i"}])

    def test_replace_map(self):
        """$patch: replace in an object replaces the object."""
        out = self.patch(POD, {"metadata": {"$patch": "replace", "name": "p"}})
        self.assertEqual(out["metadata"], {"name": "p"})

    def test_delete_map(self):
        """$patch: delete in an object removes it."""
        out = self.patch(POD, {"spec": {"$patch": "delete"}})
        self.assertNotIn("spec", out)

    def test_null_deletes(self):
        """null removes a field, as in merge patch."""
        out = self.patch(POD, {"metadata": {"labels": {"a": None, "b": "2"}}})
        self.assertEqual(out["metadata"]["labels"], {"b": "2"})

    def test_primitive_merge_list_union(self):
        """finalizers (a merging list of scalars) take the union, the patch's items
        first in the patch's order (upstream's normalizeElementOrder)."""
        out = self.patch(POD, {"metadata": {"finalizers": ["x.io/b", "x.io/a"]}})
        self.assertEqual(out["metadata"]["finalizers"], ["x.io/b", "x.io/a"])
        out = self.patch(POD, {"metadata": {"finalizers": ["x.io/c"]}})
        self.assertEqual(out["metadata"]["finalizers"], ["x.io/c", "x.io/a"])

    def test_merged_order_interleaves_by_live_position(self):
        """A patch naming a live item keeps live-only items before it in front:
        [a, b, c] patched with [b, d] is [a, b, d, c] (upstream's mergeSortedSlice)."""
        original = {"metadata": {"name": "p", "finalizers": ["a", "b", "c"]}}
        out = strategic_merge(original, {"metadata": {"finalizers": ["b", "d"]}},
                              core.POD.schema)
        self.assertEqual(out["metadata"]["finalizers"], ["a", "b", "d", "c"])

    def test_delete_from_primitive_list(self):
        """$deleteFromPrimitiveList removes values."""
        out = self.patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/a"]}})
        self.assertEqual(out["metadata"]["finalizers"], [])

    def test_set_element_order(self):
        """$setElementOrder sets the order of a merged list."""
        out = self.patch(POD, {"spec": {"$setElementOrder/containers": [{"name": "side"},
                                                                       {"name": "web"}]}})
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["side", "web"])

    def test_retain_keys(self):
        """$retainKeys drops fields it does not list."""
        out = self.patch({"spec": {"nodeName": "n", "restartPolicy": "Never"}},
                         {"spec": {"$retainKeys": ["nodeName"], "nodeName": "m"}})
        self.assertEqual(out["spec"], {"nodeName": "m"})

    def test_subjects_atomic(self):
        """RoleBinding subjects are replaced whole (spec 2.2)."""
        original = {"subjects": [{"kind": "User", "name": "a"}, {"kind": "User", "name": "b"}]}
        out = self.patch(original, {"subjects": [{"kind": "Group", "name": "g"}]},
                         rbac.ROLE_BINDING)
        self.assertEqual(out["subjects"], [{"kind": "Group", "name": "g"}])

    def test_rules_atomic(self):
        """Role rules are replaced whole."""
        out = self.patch({"rules": [{"verbs": ["get"]}]}, {"rules": [{"verbs": ["list"]}]},
                         rbac.ROLE)
        self.assertEqual(out["rules"], [{"verbs": ["list"]}])

    def test_errors(self):
        """A missing merge key or an unknown directive is a 400."""
        for patch in ({"spec": {"containers": [{"image": "x"}]}},
                      {"spec": {"$patch": "explode"}}):
            with self.assertRaises(StatusError) as e:
                self.patch(POD, patch)
            self.assertEqual(e.exception.code, 400)

    def test_original_untouched(self):
        """The original object is not modified."""
        import copy
        before = copy.deepcopy(POD)
        self.patch(POD, {"spec": {"containers": [{"name": "web", "image": "z"}]}})
        self.assertEqual(POD, before)
