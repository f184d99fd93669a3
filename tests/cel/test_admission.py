"""The environments admission webhooks and ValidatingAdmissionPolicy share with validation."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd import cel
from platformd.cel import admission


class WebhookEnvironmentTests(SynchronousTestCase):
    def test_a_boolean_over_the_three_variables(self):
        program = admission.compile_condition(
            "object.kind == 'Pod' && oldObject == null && request.operation == 'CREATE'")
        self.assertIs(program.evaluate({"object": {"kind": "Pod"}, "oldObject": None,
                                        "request": {"operation": "CREATE"}}), True)
        self.assertIs(program, admission.compile_condition(program.source))

    def test_refused(self):
        for source, message in (
                ("object.x", "must evaluate to bool but got dyn"),
                ("params == null", "compilation failed: ERROR: <input>:1:1: undeclared "
                                   "reference to 'params'"),
                ("authorizer.group('') != null", "compilation failed: ERROR: <input>:1:"),
        ):
            with self.assertRaises(cel.CompileError) as caught:
                admission.compile_condition(source)
            self.assertTrue(str(caught.exception).startswith(message), caught.exception)

    def test_a_misspelled_field_fails_when_evaluated(self):
        program = admission.compile_condition("object.metadata.nmae == 'x'")
        with self.assertRaises(cel.EvaluationError) as caught:
            program.evaluate({"object": {"metadata": {"name": "x"}}, "oldObject": None,
                              "request": {}})
        self.assertEqual(str(caught.exception), "no such key: nmae")


class PolicyEnvironmentTests(SynchronousTestCase):
    def test_the_six_variables(self):
        env = admission.policy_environment()
        self.assertIs(env, admission.policy_environment())
        program = env.compile("[object, oldObject, request, params, namespaceObject, "
                              "variables].size()", cel.INT)
        self.assertEqual(program.evaluate(dict.fromkeys(admission.POLICY_VARIABLES, {})), 6)

    def test_authorizer_is_not_declared(self):
        with self.assertRaises(cel.CompileError) as caught:
            admission.policy_environment().compile("authorizer.path('/').check('get')"
                                                   ".allowed()", cel.BOOL)
        self.assertIn("undeclared reference to 'authorizer", str(caught.exception))
