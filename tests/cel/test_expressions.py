"""The CEL module: compile errors, result types, the program cache, limits, evaluation."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd import cel


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


class CompileErrorTests(SynchronousTestCase):
    """What a refused expression says: cel-go's issue text, without cel-cpp's status code."""

    def setUp(self):
        self.env = cel.Environment({"n": cel.INT})

    def compile_error(self, source: str, *types) -> str:
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile(source, *types)
        return str(caught.exception)

    def test_syntax_error_with_its_caret(self):
        self.assertEqual(self.compile_error("n +"), (
            "compilation failed: ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' "
            "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
            "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | n +\n | ...^"))

    def test_undeclared_variable(self):
        self.assertEqual(self.compile_error("m == 1"), (
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'm' (in "
            "container '')\n | m == 1\n | ^"))

    def test_no_overload(self):
        message = self.compile_error("n + 'x'")
        self.assertTrue(message.startswith("compilation failed: ERROR: <input>:1:3: found no "
                                           "matching overload for '_+_'"), message)


class ResultTypeTests(SynchronousTestCase):
    """The result type is checked at compile time and named as cel-go names it."""

    def setUp(self):
        self.env = cel.Environment({"n": cel.INT, "s": cel.STRING, "d": cel.DYN,
                                    "names": cel.list_of(cel.STRING),
                                    "claims": cel.map_of(cel.STRING, cel.DYN)})

    def reason(self, source: str, *types) -> str:
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile(source, *types)
        return str(caught.exception)

    def test_named_as_cel_go(self):
        self.assertEqual(self.reason("names", cel.BOOL),
                         "must evaluate to bool but got list(string)")
        self.assertEqual(self.reason("claims", cel.STRING),
                         "must evaluate to string but got map(string, dyn)")
        self.assertEqual(self.reason("s", cel.list_of(cel.STRING)),
                         "must evaluate to list(string) but got string")
        self.assertEqual(self.reason("null", cel.BOOL), "must evaluate to bool but got null_type")

    def test_dyn_is_its_own_type(self):
        """A dynamic result is not a bool at compile time (upstream: exact type match)."""
        self.assertEqual(self.reason("d", cel.BOOL), "must evaluate to bool but got dyn")
        self.assertEqual(self.reason("claims.sub", cel.STRING, cel.BOOL),
                         "must evaluate to one of [string bool]")
        self.assertEqual(self.env.compile("d", cel.BOOL, cel.DYN).evaluate({"d": 1}), 1)

    def test_any_type_without_result_types(self):
        self.assertEqual(self.env.compile("names").evaluate({"names": ["a"]}), ["a"])
        self.assertEqual(self.env.compile("claims").evaluate({"claims": {"a": 1}}), {"a": 1})

    def test_cache_is_per_result_types(self):
        """The same source compiled for another result type is checked again."""
        self.assertEqual(self.env.compile("n").source, "n")
        self.assertEqual(self.reason("n", cel.BOOL), "must evaluate to bool but got int")
        self.assertIsNot(self.env.compile("n"), self.env.compile("n", cel.INT))
        self.assertIs(self.env.compile("n", cel.INT), self.env.compile("n", cel.INT))


class MessageTypeTests(SynchronousTestCase):
    """Object-shaped variables declared as protobuf messages: fields checked at compile time."""

    def setUp(self):
        messages = cel.proto_file("test/cel.proto", "test", {
            "Inner": [("name", "string")],
            "Outer": [("inner", "Inner"), ("tags", "repeated string"), ("user", "string"),
                      ("extra", "map:google.protobuf.ListValue")],
        })
        self.env = cel.Environment({"o": cel.message_type("test.Outer")}, messages)
        self.Outer = self.env.message_class("test.Outer")

    def test_unknown_field_is_a_compile_error(self):
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("o.nope == 'x'", cel.BOOL)
        self.assertIn("undefined field 'nope'", str(caught.exception))

    def test_field_types_are_checked(self):
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("o.user", cel.BOOL)
        self.assertEqual(str(caught.exception), "must evaluate to bool but got string")
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("o.tags", cel.BOOL)
        self.assertEqual(str(caught.exception), "must evaluate to bool but got list(string)")

    def test_values(self):
        value = self.Outer(user="", tags=["a", "b"])
        value.inner.name = "in"
        value.extra["k"].values.add(string_value="v")
        checks = {
            "has(o.user)": True,  # proto2: a set empty string is present
            "has(o.inner) && o.inner.name == 'in'": True,
            "o.tags == ['a', 'b']": True,
            "o.extra['k'] == ['v']": True,
            "'missing' in o.extra": False,
        }
        for source, expected in checks.items():
            self.assertEqual(self.env.compile(source, cel.BOOL).evaluate({"o": value}),
                             expected, source)
        self.assertFalse(self.env.compile("has(o.inner)", cel.BOOL).evaluate(
            {"o": self.Outer()}))


class LimitTests(SynchronousTestCase):
    """
    The library's parser limits hold in every environment (no CEL cost is estimated or
    tracked: the library has neither).
    """

    def setUp(self):
        self.env = cel.Environment({"n": cel.INT})

    def test_expression_size(self):
        self.assertEqual(self.env.compile("1" + " " * 99_999, cel.INT).evaluate({}), 1)
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("1" + " " * 100_000, cel.INT)
        self.assertEqual(str(caught.exception), "compilation failed: expression size exceeds "
                                                "codepoint limit. input size: 100001, limit: "
                                                "100000")

    def test_nesting(self):
        with self.assertRaises(cel.CompileError) as caught:
            self.env.compile("(" * 300 + "n" + ")" * 300, cel.INT)
        message = str(caught.exception)
        self.assertTrue(message.startswith("compilation failed: "), message)
        self.assertIn("recursion limit exceeded", message)


class EvaluationErrorTests(SynchronousTestCase):
    """Run-time failures: cel-cpp's text, the commonest as cel-go words them."""

    def setUp(self):
        self.env = cel.Environment({"n": cel.INT, "names": cel.list_of(cel.STRING),
                                    "claims": cel.map_of(cel.STRING, cel.DYN)})

    def error(self, source: str, variables: dict) -> str:
        program = self.env.compile(source)
        with self.assertRaises(cel.EvaluationError) as caught:
            program.evaluate(variables)
        return str(caught.exception)

    def test_worded_as_cel_go(self):
        self.assertEqual(self.error("claims.sub", {"claims": {}}), "no such key: sub")
        self.assertEqual(self.error("claims['a b']", {"claims": {}}), "no such key: a b")
        self.assertEqual(self.error("10 / n", {"n": 0}), "division by zero")
        self.assertEqual(self.error("10 % n", {"n": 0}), "modulus by zero")

    def test_other_errors_are_cel_cpps(self):
        self.assertEqual(self.error("n + 1", {"n": 2**63 - 1}), "integer overflow")
        self.assertEqual(self.error("names[2]", {"names": []}), "Index error: index=2 size=0")
        self.assertEqual(self.error("int(claims.x)", {"claims": {"x": "y"}}),
                         "cannot convert string to int")

    def test_wrong_or_missing_bindings(self):
        """A value of the wrong type, or none, for a declared variable fails the evaluation."""
        self.assertEqual(self.error("n + 1", {"n": "x"}),
                         "Unexpected value type for 'n': str. (Expected INT)")
        self.assertEqual(self.error("n + 1", {}), 'No value with name "n" found in Activation')

    def test_program_evaluates_again_after_an_error(self):
        program = self.env.compile("10 / n", cel.INT)
        with self.assertRaises(cel.EvaluationError):
            program.evaluate({"n": 0})
        self.assertEqual(program.evaluate({"n": 5}), 2)
