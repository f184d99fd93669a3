"""RFC 6902 JSON patch through the server's patch dispatcher: the RFC's appendix A."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.api.writes import JSON_PATCH, apply_patch
from platformd.errors import StatusError
from platformd.registry import core

OK = [  # (document, patch, result) — RFC 6902 appendix A.1–A.10, A.14, A.16
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
     {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ({"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ({"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
     {"foo": ["bar", ["abc", "def"]]}),
    ({"a/b": 1}, [{"op": "replace", "path": "/a~1b", "value": 2}], {"a/b": 2}),
]

FAILING = [  # A.9, A.12, A.15
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}]),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}]),
]


class JSONPatchTests(SynchronousTestCase):
    def test_rfc_examples(self):
        """Each example of RFC 6902 appendix A gives the RFC's result."""
        for document, patch, expected in OK:
            self.assertEqual(apply_patch(JSON_PATCH, document, patch, core.POD.schema),
                             expected, patch)

    def test_rfc_errors(self):
        """The RFC's failing examples are 422 Invalid."""
        for document, patch in FAILING:
            with self.assertRaises(StatusError) as e:
                apply_patch(JSON_PATCH, document, patch, core.POD.schema)
            self.assertEqual((e.exception.code, e.exception.reason), (422, "Invalid"), patch)


class PatchTypeTests(SynchronousTestCase):
    def test_strategic_needs_a_strategic_schema(self):
        """A kind without strategic-merge keys refuses strategic merge patch with 415."""
        import attrs
        from twisted.web.test.requesthelper import DummyRequest

        from platformd.api.writes import STRATEGIC_PATCH, patch_type
        from platformd.featuregates import FeatureGates

        class FakeCall:
            gates = FeatureGates()

            def __init__(self, kind):
                self.kind = kind
                self.request = DummyRequest([b""])
                self.request.requestHeaders.setRawHeaders(b"content-type", [STRATEGIC_PATCH])

        self.assertEqual(patch_type(FakeCall(core.POD)), STRATEGIC_PATCH)
        custom = attrs.evolve(core.CONFIG_MAP, strategic=False)
        with self.assertRaises(StatusError) as e:
            patch_type(FakeCall(custom))
        self.assertEqual(e.exception.code, 415)
