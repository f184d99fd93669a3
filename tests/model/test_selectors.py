"""``model.selectors.field_requirements``: upstream's ``fields.ParseSelector`` requirements."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.util import slices
from platformd.model.selectors import FieldSelectorError, field_requirements


def parse(text: str):
    return slices.run(field_requirements(text))


class FieldRequirementsTests(SynchronousTestCase):
    def test_terms(self):
        """Sorted, split at the first operator (``!=``, ``==`` before ``=``), nothing
        trimmed, escapes undone; empty terms skipped."""
        self.assertEqual(parse("b!=2,a==1, c = 3,,d=x\\,y\\=z\\\\,"), [
            (" c ", "=", " 3"), ("a", "=", "1"), ("b", "!=", "2"),
            ("d", "=", "x,y=z\\")])
        self.assertEqual(parse(""), [])

    def test_errors_in_upstreams_words(self):
        for text, message in [
            ("a", "invalid selector: 'a'; can't understand 'a'"),
            ("a=b=c", "invalid field selector: unescaped character in value: 61"),
            ("a=\\x", "invalid field selector: invalid escape sequence: \\x"),
            ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ]:
            with self.assertRaises(FieldSelectorError) as caught:
                parse(text)
            self.assertEqual(str(caught.exception), message)

    def test_long_selector_in_slices(self):
        """A pause every ``slices.STEP`` terms; a short selector in one slice."""
        self.assertRaises(StopIteration, next, field_requirements("a=1,b=2"))
        work = field_requirements(",".join(f"f{i}=v" for i in range(2000)))
        pauses = 0
        while True:
            try:
                next(work)
            except StopIteration as done:
                self.assertEqual(len(done.value), 2000)
                break
            pauses += 1
        self.assertEqual(pauses, 2000 // slices.STEP)
