"""
ValidatingAdmissionPolicy end to end through the in-memory server: the kinds served
(defaults, upstream's validation messages), a policy denying with its message, reason
and code, parameters from a ConfigMap (by name, by selector, not found), Warn and Audit
actions, match conditions and variables, failure policy on a CEL runtime error, dry run,
audit annotations, and policies and bindings followed live.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from platformd.admission.interfaces import AdmissionAttributes
from platformd.admission.policy import build
from platformd.compose import admission_deps
from platformd.context import RequestContext
from platformd.registry import core

from tests.stub import StubServer

GROUP = "/apis/admissionregistration.platform.io/v1"
POLICIES = f"{GROUP}/validatingadmissionpolicies"
BINDINGS = f"{GROUP}/validatingadmissionpolicybindings"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
RULES = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
          "resources": ["configmaps"]}]


def policy(name="p", **spec) -> dict:
    spec.setdefault("matchConstraints", {"resourceRules": RULES})
    spec.setdefault("validations", [{"expression": "!has(object.data) || "
                                                   "!('forbidden' in object.data)",
                                     "message": "no forbidden key"}])
    return {"metadata": {"name": name}, "spec": spec}


def binding(name="b", policy_name="p", **spec) -> dict:
    spec.setdefault("validationActions", ["Deny"])
    return {"metadata": {"name": name}, "spec": {"policyName": policy_name, **spec}}


class PolicyCase(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def create(self, path, obj, code=201):
        r = self.client.post(path, obj)
        self.assertEqual(r.code, code, r.body)
        return r

    def configmap(self, name, data=None, path=CONFIGMAPS, labels=None, **query):
        metadata = {"name": name, **({"labels": labels} if labels else {})}
        suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
        return self.client.post(path + suffix, {"metadata": metadata, "data": data or {}})


class KindTests(PolicyCase):
    def test_defaults_and_generation(self):
        r = self.create(POLICIES, policy())
        spec = r.json()["spec"]
        self.assertEqual(spec["failurePolicy"], "Fail")
        self.assertEqual(spec["matchConstraints"]["matchPolicy"], "Equivalent")
        self.assertEqual(spec["matchConstraints"]["namespaceSelector"], {})
        self.assertEqual(spec["matchConstraints"]["objectSelector"], {})
        self.assertEqual(spec["matchConstraints"]["resourceRules"][0]["scope"], "*")
        self.assertEqual(r.json()["metadata"]["generation"], 1)
        changed = r.json()
        changed["spec"]["validations"][0]["message"] = "other"
        r = self.client.put(f"{POLICIES}/p", changed)
        self.assertEqual(r.json()["metadata"]["generation"], 2, r.body)
        r = self.create(BINDINGS, binding(paramRef={"name": "x"}))
        self.assertEqual(r.json()["spec"]["paramRef"]["parameterNotFoundAction"], "Deny")

    def causes(self, path, obj) -> dict:
        r = self.client.post(path, obj)
        self.assertEqual(r.code, 422, r.body)
        return {c["field"]: c["message"] for c in r.json()["details"]["causes"]}

    def test_policy_validation_messages(self):
        causes = self.causes(POLICIES, policy(
            failurePolicy="Maybe", paramKind={"apiVersion": "v1"},
            matchConstraints={"resourceRules": [], "matchPolicy": "Sometimes"},
            validations=[{"expression": "object.x", "message": "a\nb", "reason": "Nope",
                          "messageExpression": "1"}],
            variables=[{"name": "for", "expression": "true"}]))
        self.assertEqual(causes, {
            "spec.failurePolicy": 'Unsupported value: "Maybe": supported values: "Fail", '
                                  '"Ignore"',
            "spec.paramKind.kind": "Required value",
            "spec.matchConstraints.matchPolicy": 'Unsupported value: "Sometimes": supported '
                                                 'values: "Equivalent", "Exact"',
            "spec.matchConstraints.resourceRules": "Required value",
            "spec.variables[0].name": 'Invalid value: "for": name is not a valid CEL '
                                      'identifier',
            "spec.validations[0].expression": 'Invalid value: "object.x": must evaluate to '
                                              'bool but got dyn',
            "spec.validations[0].messageExpression": 'Invalid value: "1": must evaluate to '
                                                     'string but got int',
            "spec.validations[0].message": 'Invalid value: "a\\nb": message must not '
                                           'contain line breaks',
            "spec.validations[0].reason": 'Unsupported value: "Nope": supported values: '
                                          '"Forbidden", "Invalid", "RequestEntityTooLarge", '
                                          '"Unauthorized"'})
        causes = self.causes(POLICIES, policy(validations=[]))
        self.assertEqual(causes["spec.validations"], "Required value: validations or "
                                                     "auditAnnotations must contain at "
                                                     "least one item")

    def test_binding_validation_messages(self):
        causes = self.causes(BINDINGS, binding(
            policy_name="", paramRef={"name": "a", "selector": {}},
            validationActions=["Deny", "Warn", "Nope"]))
        self.assertEqual(causes, {
            "spec.policyName": "Required value",
            "spec.paramRef.name": "Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector": "Forbidden: name and selector are mutually exclusive",
            "spec.validationActions[2]": 'Unsupported value: "Nope": supported values: '
                                         '"Audit", "Deny", "Warn"',
            "spec.validationActions": 'Invalid value: ["Deny", "Warn", "Nope"]: must not '
                                      'contain both Deny and Warn (repeating the same '
                                      'validation failure information in the API response '
                                      'and headers serves no purpose)'})
        causes = self.causes(BINDINGS, binding(validationActions=[]))
        self.assertEqual(causes["spec.validationActions"],
                         "Required value: at least one validation action is required")

    def test_discovery_and_table(self):
        r = self.client.get(GROUP)
        names = [res["name"] for res in r.json()["resources"]]
        self.assertIn("validatingadmissionpolicies", names)
        self.assertIn("validatingadmissionpolicies/status", names)
        self.assertIn("validatingadmissionpolicybindings", names)
        self.create(POLICIES, policy(paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
        r = self.client.get(POLICIES, headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.platform.io"})
        self.assertEqual([c["name"] for c in r.json()["columnDefinitions"]],
                         ["Name", "Validations", "ParamKind", "Age"])
        self.assertEqual(r.json()["rows"][0]["cells"][:3], ["p", 1, "v1/ConfigMap"])


class DenyTests(PolicyCase):
    def test_denies_with_its_message(self):
        """The issue's case: upstream's words, reason Invalid, 422, one cause."""
        self.create(POLICIES, policy())
        self.create(BINDINGS, binding())
        r = self.configmap("bad", {"forbidden": "1"})
        self.assertEqual(r.code, 422, r.body)
        message = ("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: "
                   "no forbidden key")
        self.assertEqual(r.json()["message"], f'configmaps "bad" is forbidden: {message}')
        self.assertEqual(r.json()["reason"], "Invalid")
        self.assertEqual(r.json()["details"], {"name": "bad", "kind": "configmaps",
                                               "causes": [{"message": message}]})
        self.assertEqual(self.configmap("good", {"a": "1"}).code, 201)
        # Deleting the binding is seen by the next write.
        self.assertEqual(self.client.delete(f"{BINDINGS}/b").code, 200)
        self.assertEqual(self.configmap("bad", {"forbidden": "1"}).code, 201)

    def test_reason_message_expression_and_fallbacks(self):
        self.create(POLICIES, policy(validations=[
            {"expression": "object.metadata.name != 'a'", "reason": "Forbidden",
             "messageExpression": "'name ' + object.metadata.name + ' is taken'"},
            {"expression": "object.metadata.name != 'b'", "reason": "RequestEntityTooLarge",
             "messageExpression": "'  '", "message": "static"},
            {"expression": "object.metadata.name != 'c'"}]))
        self.create(BINDINGS, binding())
        r = self.configmap("a")
        self.assertEqual((r.code, r.json()["reason"]), (403, "Forbidden"))
        self.assertTrue(r.json()["message"].endswith("denied request: name a is taken"))
        r = self.configmap("b")
        self.assertEqual(r.code, 413)
        self.assertTrue(r.json()["message"].endswith("denied request: static"))
        r = self.configmap("c")
        self.assertEqual(r.code, 422)
        self.assertTrue(r.json()["message"].endswith(
            "denied request: failed expression: object.metadata.name != 'c'"))

    def test_dry_run(self):
        """A dry run is validated like any request (policies have no side effects)."""
        self.create(POLICIES, policy())
        self.create(BINDINGS, binding())
        self.assertEqual(self.configmap("bad", {"forbidden": "1"}, dryRun="All").code, 422)
        self.assertEqual(self.configmap("dry", {"a": "1"}, dryRun="All").code, 201)
        self.assertEqual(self.client.get(f"{CONFIGMAPS}/dry").code, 404)

    def test_binding_match_resources_narrow_the_policy(self):
        self.create(POLICIES, policy())
        self.create(BINDINGS, binding(matchResources={
            "objectSelector": {"matchLabels": {"checked": "yes"}},
            "excludeResourceRules": [dict(RULES[0], resourceNames=["exempt"])]}))
        self.assertEqual(self.configmap("x", {"forbidden": "1"}).code, 201)
        self.assertEqual(self.configmap("y", {"forbidden": "1"},
                                        labels={"checked": "yes"}).code, 422)
        self.assertEqual(self.configmap("exempt", {"forbidden": "1"},
                                        labels={"checked": "yes"}).code, 201)


class ParamTests(PolicyCase):
    def setUp(self):
        super().setUp()
        self.create(POLICIES, policy(
            paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
            validations=[{"expression": "size(object.data) <= int(params.data.max)",
                          "messageExpression": "'at most ' + params.data.max + ' keys'"}]))

    def test_param_by_name(self):
        self.assertEqual(self.configmap("limits", {"max": "1"}).code, 201)
        self.create(BINDINGS, binding(paramRef={"name": "limits"}))
        r = self.configmap("two", {"a": "1", "b": "2"})
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.json()["message"].endswith("denied request: at most 1 keys"))
        self.assertEqual(self.configmap("one", {"a": "1"}).code, 201)
        # The parameter changed is seen by the next write.
        r = self.client.patch(f"{CONFIGMAPS}/limits", {"data": {"max": "5"}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(self.configmap("two", {"a": "1", "b": "2"}).code, 201)

    def test_param_not_found_deny_and_allow(self):
        self.create(BINDINGS, binding(paramRef={"name": "absent"}))
        r = self.configmap("x", {"a": "1"})
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["message"], (
            "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' "
            "denied request: failed to configure binding: no params found for policy "
            "binding with `Deny` parameterNotFoundAction"))
        r = self.client.delete(f"{BINDINGS}/b")
        self.create(BINDINGS, binding(paramRef={"name": "absent",
                                                "parameterNotFoundAction": "Allow"}))
        self.assertEqual(self.configmap("x", {"a": "1", "b": "2"}).code, 201)

    def test_params_by_selector_each_evaluated(self):
        self.assertEqual(self.configmap("loose", {"max": "3"}, labels={"limit": "y"}).code, 201)
        self.assertEqual(self.configmap("strict", {"max": "1"}, labels={"limit": "y"}).code,
                         201)
        self.create(BINDINGS, binding(paramRef={"selector": {"matchLabels": {"limit": "y"}}},
                                      matchResources={"objectSelector": {"matchExpressions": [
                                          {"key": "limit", "operator": "DoesNotExist"}]}}))
        r = self.configmap("two", {"a": "1", "b": "2"})
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.json()["message"].endswith("at most 1 keys"))

    def test_param_kind_not_served(self):
        self.create(POLICIES, policy("q", paramKind={"apiVersion": "example.com/v1",
                                                     "kind": "Limits"}))
        self.create(BINDINGS, binding("bq", "q", paramRef={"name": "x"}))
        r = self.configmap("x")
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"], (
            "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'q' denied request: "
            "failed to configure policy: failed to find resource referenced by paramKind: "
            "'example.com/v1, Kind=Limits'"))


class ExpressionTests(PolicyCase):
    def test_runtime_error_follows_failure_policy(self):
        self.create(POLICIES, policy(validations=[
            {"expression": "object.data.needed == 'x'"}]))
        self.create(BINDINGS, binding())
        r = self.configmap("x", {"a": "1"})
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["message"], (
            "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' "
            "denied request: expression 'object.data.needed == 'x'' resulted in error: "
            "no such key: needed"))
        current = self.client.get(f"{POLICIES}/p").json()
        current["spec"]["failurePolicy"] = "Ignore"
        self.assertEqual(self.client.put(f"{POLICIES}/p", current).code, 200)
        self.assertEqual(self.configmap("x", {"a": "1"}).code, 201)

    def test_match_conditions_and_variables(self):
        self.create(POLICIES, policy(
            matchConditions=[{"name": "not-exempt",
                              "expression": "!object.metadata.name.startsWith('exempt-')"}],
            variables=[{"name": "keys", "expression": "has(object.data) ? "
                                                      "size(object.data) : 0"},
                       {"name": "many", "expression": "variables.keys > 1"}],
            validations=[{"expression": "!variables.many",
                          "messageExpression": "string(variables.keys) + ' keys'"}]))
        self.create(BINDINGS, binding())
        r = self.configmap("two", {"a": "1", "b": "2"})
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.json()["message"].endswith("denied request: 2 keys"))
        self.assertEqual(self.configmap("exempt-two", {"a": "1", "b": "2"}).code, 201)
        self.assertEqual(self.configmap("one", {"a": "1"}).code, 201)

    def test_namespace_object_and_request(self):
        self.create(POLICIES, policy(validations=[
            {"expression": "namespaceObject.metadata.name == request.namespace && "
                           "request.userInfo.username == 'admin' && "
                           "request.operation == 'CREATE' && oldObject == null"}]))
        self.create(BINDINGS, binding())
        self.assertEqual(self.configmap("x").code, 201)


class ActionTests(PolicyCase):
    def test_warn(self):
        self.create(POLICIES, policy())
        self.create(BINDINGS, binding(validationActions=["Warn"]))
        r = self.configmap("bad", {"forbidden": "1"})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.headers_named("Warning"), [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': "
            "no forbidden key\""])

    def attributes(self, name, data):
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": data}
        return AdmissionAttributes("CREATE", core.CONFIG_MAP, "default", name, "", obj, None,
                                   RequestContext(None))

    def test_audit_action_and_audit_annotations(self):
        self.create(POLICIES, policy(auditAnnotations=[
            {"key": "keys", "valueExpression": "string(size(object.data))"},
            {"key": "none", "valueExpression": "null"}]))
        self.create(BINDINGS, binding(validationActions=["Audit"]))
        c = self.stub.components
        plugin = build(admission_deps(c.cache, c.informers, c.clock))
        a = self.attributes("bad", {"forbidden": "1"})
        self.assertIsNone(plugin.validate(a))
        annotations = a.context.audit_annotations
        self.assertEqual(annotations["p/keys"], "1")
        self.assertNotIn("p/none", annotations)
        self.assertEqual(json.loads(annotations[
            "validation.policy.admission.platform.io/validation_failure"]), [{
                "message": "no forbidden key", "policy": "p", "binding": "b",
                "expressionIndex": 0, "validationActions": ["Audit"]}])
        self.assertEqual(a.context.warnings, [])
