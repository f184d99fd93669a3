"""gojson: a token's JSON as Go's encoding/json reads it."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.goformat import gojson, gonumbers
class LoadsTests(SynchronousTestCase):
    def test_constants_refused_in_go_words(self):
        """Python takes NaN, Infinity and -Infinity; Go's scanner stops at them."""
        for text, error in ((b"NaN", "invalid character 'N' looking for beginning of value"),
                            (b'{"exp": Infinity}',
                             "invalid character 'I' looking for beginning of value"),
                            (b"[1, -Infinity]", "invalid character 'I' in numeric literal")):
            with self.assertRaises(gojson.GoSyntaxError) as e:
                gojson.loads(text)
            self.assertEqual(str(e.exception), error)

    def test_depth(self):
        """
        Nesting Python's parser can follow is read as it is; deeper is Go's "exceeded
        max depth", naming the bracket that opens level MAX_DEPTH + 1 (brackets in
        strings do not count).
        """
        depth = gojson.MAX_DEPTH + 100
        value = gojson.loads(b"[" * depth + b"]" * depth)
        for _ in range(depth - 1):
            value = value[0]
        self.assertEqual(value, [])
        # Levels: the object 1, "a"'s array 2, then MAX_DEPTH - 2 arrays, then the "{".
        inner = gojson.MAX_DEPTH - 2
        deep = (b'{"s": "[[[[", "a": [' + b"[]," * 1000 + b"[" * inner + b'{"x":'
                + b"[" * 5000 + b"]" * 5000 + b"}" + b"]" * (inner + 1) + b"}")
        with self.assertRaises(gojson.GoSyntaxError) as e:
            gojson.loads(deep)
        self.assertEqual(str(e.exception), "invalid character '{' exceeded max depth")

    def test_numbers(self):
        """Numbers of any length through gonumbers' hooks."""
        value = gojson.loads(b'{"a": 1, "b": 1e999, "c": ' + b"9" * 30 + b"}")
        self.assertEqual(value["a"], 1)
        self.assertEqual(value["b"], gonumbers.BigNumber("1e999"))
        self.assertEqual(value["c"], gonumbers.BigNumber("9" * 30))
