"""The schema language: type checks, pruning, unknown and duplicate fields."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.jsoncodec import JSONCodec
from platformd.registry import core, rbac
from platformd.registry.schema import DecodeContext, DecodeError


class DecodeTests(SynchronousTestCase):
    def test_wrong_type_names_field(self):
        """A field of the wrong type fails, naming the field and both types."""
        with self.assertRaises(DecodeError) as e:
            rbac.ROLE_BINDING.schema.decode({"subjects": [{"name": 5}]}, "", DecodeContext())
        self.assertEqual(e.exception.path, "subjects[0].name")
        self.assertIn("cannot unmarshal number", str(e.exception))

    def test_unknown_fields_pruned_and_reported(self):
        """Unknown fields at any depth are dropped and listed with their paths."""
        ctx = DecodeContext()
        obj = core.POD.schema.decode({"spec": {"containers": [{"name": "a", "foo": 1}],
                                               "bar": {}}, "top": 1}, "", ctx)
        self.assertEqual(obj, {"spec": {"containers": [{"name": "a"}]}})
        self.assertEqual(sorted(ctx.unknown), ["spec.bar", "spec.containers[0].foo", "top"])

    def test_duplicates_reported(self):
        """Keys repeated in the body are reported with their paths."""
        value = JSONCodec().decode(b'{"metadata": {"name": "a", "name": "b"}, '
                                   b'"data": {"k": "1", "k": "2"}}')
        ctx = DecodeContext()
        obj = core.CONFIG_MAP.schema.decode(value, "", ctx)
        self.assertEqual(obj["metadata"]["name"], "b")
        self.assertEqual(ctx.duplicates, ["metadata.name", "data.k"])

    def test_integers_from_whole_floats(self):
        """A whole float (from YAML or JSON 1.0) is accepted for an integer field."""
        obj = core.POD.schema.decode({"spec": {"terminationGracePeriodSeconds": 5.0}}, "",
                                     DecodeContext())
        self.assertEqual(obj["spec"]["terminationGracePeriodSeconds"], 5)

    def test_boolean_is_not_integer(self):
        """true is not an integer."""
        with self.assertRaises(DecodeError):
            core.POD.schema.decode({"spec": {"terminationGracePeriodSeconds": True}}, "",
                                   DecodeContext())
