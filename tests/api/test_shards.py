"""shardSelector parsing and FNV-1a (spec 4.6)."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.api.shards import fnv1a64, parse
from platformd.errors import StatusError


class ShardTests(SynchronousTestCase):
    def test_fnv1a64(self):
        """FNV-1a 64 matches the reference vectors."""
        self.assertEqual(fnv1a64(b""), 0xCBF29CE484222325)
        self.assertEqual(fnv1a64(b"a"), 0xAF63DC4C8601EC8C)
        self.assertEqual(fnv1a64(b"foobar"), 0x85944171F73967E8)

    def test_parse(self):
        """Ranges joined with || on one field."""
        s = parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
                  " || shardRange(object.metadata.uid,'0xc000000000000000','0x10000000000000000')")
        self.assertEqual(s.field, "uid")
        self.assertEqual(s.ranges, ((0, 1 << 63), (0xC000000000000000, 1 << 64)))

    def test_partition(self):
        """Two halves put every value in exactly one."""
        low = parse("shardRange(object.metadata.namespace,'0x0000000000000000','0x8000000000000000')")
        high = parse("shardRange(object.metadata.namespace,'0x8000000000000000','0x10000000000000000')")
        for i in range(200):
            obj = {"metadata": {"namespace": f"ns-{i}"}}
            self.assertNotEqual(low.matches(obj), high.matches(obj))

    def test_errors(self):
        """Malformed expressions are 400s naming the problem."""
        for text, problem in [
            ("", "empty"),
            ("shardRange(object.metadata.name,'0x0000000000000000','0x1')", "unsupported field"),
            ("shardRange(object.metadata.uid,'0x00','0x1')", "16 lowercase"),
            ("shardRange(object.metadata.uid,'0x0000000000000000','0xG')", "lowercase hex"),
            ("shardRange(object.metadata.uid,'0x0000000000000010','0x1')", "not below"),
            ("shardRange(object.metadata.uid,'0x0000000000000000','0x10000000000000001')", "above"),
            ("range(object.metadata.uid)", "expected shardRange"),
        ]:
            with self.assertRaises(StatusError) as e:
                parse(text)
            self.assertEqual(e.exception.code, 400)
            self.assertIn(problem, e.exception.message, text)
