"""RFC 7386 merge patch: the RFC's own examples (appendix A)."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.patch.merge import merge_patch

RFC_7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


class MergePatchTests(SynchronousTestCase):
    def test_rfc_examples(self):
        """Every example of RFC 7386 appendix A gives the RFC's result."""
        for target, patch, expected in RFC_7386_EXAMPLES:
            self.assertEqual(merge_patch(target, patch), expected, (target, patch))

    def test_target_untouched(self):
        """The target is not modified."""
        target = {"a": {"b": 1}}
        merge_patch(target, {"a": {"b": 2}})
        self.assertEqual(target, {"a": {"b": 1}})
