"""matchConditions: any false skips, else an error fails, worded as upstream's."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd import cel
from platformd.cel import matchconditions


class MatchConditionTests(SynchronousTestCase):
    def setUp(self):
        self.env = cel.Environment({"object": cel.DYN})

    def evaluate(self, sources, obj):
        return matchconditions.evaluate([self.env.compile(s) for s in sources], {"object": obj})

    def error(self, sources, obj) -> str:
        with self.assertRaises(matchconditions.ConditionError) as caught:
            self.evaluate(sources, obj)
        return str(caught.exception)

    def test_all_true_matches(self):
        self.assertIs(self.evaluate([], {}), True)
        self.assertIs(self.evaluate(["object.a == 1", "true"], {"a": 1}), True)

    def test_a_false_wins_over_errors(self):
        self.assertIs(self.evaluate(["object.missing == 1", "object.a == 2"], {"a": 1}), False)
        self.assertIs(self.evaluate(["object.a", "false"], {"a": 1}), False)

    def test_an_error_with_none_false(self):
        self.assertEqual(self.error(["object.missing == 1", "true"], {}),
                         "cel evaluation error: expression 'object.missing == 1' resulted in "
                         "error: no such key: missing")

    def test_a_result_not_boolean(self):
        self.assertEqual(self.error(["object.a"], {"a": 1}),
                         "cel evaluation error: expression 'object.a' eval result type "
                         "should be bool but got int")

    def test_errors_aggregated(self):
        self.assertEqual(self.error(["object.a", "1 / object.b == 1"], {"a": "x", "b": 0}),
                         "[cel evaluation error: expression 'object.a' eval result type "
                         "should be bool but got str, cel evaluation error: expression "
                         "'1 / object.b == 1' resulted in error: division by zero]")
