"""The CEL wrapper: compile errors, result types, the program cache, evaluation."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth import cel


class CELTests(SynchronousTestCase):
    def setUp(self):
        self.env = cel.Environment({"claims": cel.map_of(cel.STRING, cel.DYN),
                                    "n": cel.INT, "names": cel.list_of(cel.STRING)})

    def test_compile_and_evaluate(self):
        program = self.env.compile("claims.sub + '@' + string(n)", cel.STRING)
        self.assertEqual(program.evaluate({"claims": {"sub": "me"}, "n": 3}), "me@3")
        self.assertEqual(self.env.compile("names.exists(x, x == 'a')", cel.BOOL).evaluate(
            {"names": ["b", "a"]}), True)

    def test_programs_are_cached(self):
        self.assertIs(self.env.compile("n > 1", cel.BOOL), self.env.compile("n > 1", cel.BOOL))

    def test_errors_name_the_problem(self):
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("n +", cel.INT)
        self.assertTrue(str(caught.exception).startswith(
            "compilation failed: ERROR: <input>:1:4: Syntax error"), caught.exception)
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("missing == 1")
        self.assertIn("undeclared reference to 'missing'", str(caught.exception))
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("n", cel.BOOL)
        self.assertEqual(str(caught.exception), "must evaluate to bool but got int")
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("n", cel.BOOL, cel.STRING)
        self.assertEqual(str(caught.exception), "must evaluate to one of [bool string]")

    def test_evaluation_errors(self):
        program = self.env.compile("claims.nope == 'x'", cel.BOOL)
        with self.assertRaises(cel.EvaluationError):
            program.evaluate({"claims": {}})
        with self.assertRaises(cel.EvaluationError):
            self.env.compile("10 / n", cel.INT).evaluate({"n": 0})
