"""MutatingWebhookConfiguration and ValidatingWebhookConfiguration served: defaults and
validation messages as upstream's, discovery, tables; the four admissionregistration
kinds over Protobuf."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.protobufcodec import PROTOBUF, ProtobufCodec
from tests.stub import StubServer

GROUP = "admissionregistration.platform.io"
VALIDATING = f"/apis/{GROUP}/v1/validatingwebhookconfigurations"
MUTATING = f"/apis/{GROUP}/v1/mutatingwebhookconfigurations"


def hook(**fields):
    hook = {"name": "hook.example.com", "clientConfig": {"url": "https://example.com/x"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    hook.update(fields)
    return hook


class KindTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.client = self.stub.client()
        self.addCleanup(self.stub.stop)

    def create(self, path, *hooks, name="config"):
        return self.client.post(path, {"metadata": {"name": name}, "webhooks": list(hooks)})

    def test_defaults(self):
        r = self.create(MUTATING, hook(clientConfig={"service": {"namespace": "ns",
                                                                 "name": "svc"}}))
        self.assertEqual(r.code, 201, r.body)
        [stored] = r.json()["webhooks"]
        self.assertEqual(stored["failurePolicy"], "Fail")
        self.assertEqual(stored["matchPolicy"], "Equivalent")
        self.assertEqual(stored["timeoutSeconds"], 10)
        self.assertEqual(stored["reinvocationPolicy"], "Never")
        self.assertEqual((stored["namespaceSelector"], stored["objectSelector"]), ({}, {}))
        self.assertEqual(stored["rules"][0]["scope"], "*")
        self.assertEqual(stored["clientConfig"]["service"]["port"], 443)
        r = self.create(VALIDATING, hook())
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("reinvocationPolicy", r.json()["webhooks"][0])
        self.assertEqual(self.client.get(f"{VALIDATING}/config").code, 200)

    def causes(self, path, *hooks) -> dict:
        r = self.create(path, *hooks)
        self.assertEqual(r.code, 422, r.body)
        return {c["field"]: c["message"] for c in r.json()["details"]["causes"]}

    def test_validation_messages(self):
        causes = self.causes(VALIDATING, hook(
            name="short", sideEffects="Some", timeoutSeconds=31, failurePolicy="Maybe",
            admissionReviewVersions=["v2"], clientConfig={"url": "http://h/x?q=1"},
            rules=[{"operations": ["CREATE", "*"], "apiGroups": [], "apiVersions": ["v1"],
                    "resources": ["*/*", "pods"], "scope": "Everywhere"}],
            matchConditions=[{"name": "c", "expression": "object.x +"}]))
        self.assertEqual(causes["webhooks[0].name"],
                         'Invalid value: "short": should be a domain with at least three '
                         "segments separated by dots")
        self.assertEqual(causes["webhooks[0].sideEffects"],
                         'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"')
        self.assertEqual(causes["webhooks[0].timeoutSeconds"],
                         "Invalid value: 31: the timeout value must be between 1 and 30 seconds")
        self.assertEqual(causes["webhooks[0].failurePolicy"],
                         'Unsupported value: "Maybe": supported values: "Fail", "Ignore"')
        self.assertEqual(causes["webhooks[0].admissionReviewVersions"],
                         'Invalid value: ["v2"]: must include at least one of v1, v1beta1')
        self.assertEqual(causes["webhooks[0].clientConfig.url"],
                         "Invalid value: \"q=1\": query parameters are not permitted in the URL")
        self.assertEqual(causes["webhooks[0].rules[0].operations"],
                         'Invalid value: ["CREATE", "*"]: if \'*\' is present, must not specify '
                         "other operations")
        self.assertEqual(causes["webhooks[0].rules[0].apiGroups"], "Required value")
        self.assertEqual(causes["webhooks[0].rules[0].resources"],
                         'Invalid value: ["*/*", "pods"]: if \'*/*\' is present, must not '
                         "specify other resources")
        self.assertEqual(causes["webhooks[0].rules[0].scope"],
                         'Unsupported value: "Everywhere": supported values: "*", "Cluster", '
                         '"Namespaced"')
        self.assertTrue(causes["webhooks[0].matchConditions[0].expression"].startswith(
            'Invalid value: "object.x +": compilation failed: '))

    def test_client_config_and_required(self):
        causes = self.causes(MUTATING, hook(clientConfig={}, sideEffects=None,
                                            admissionReviewVersions=None,
                                            reinvocationPolicy="Always"))
        self.assertEqual(causes["webhooks[0].clientConfig"],
                         "Required value: exactly one of url or service is required")
        self.assertEqual(causes["webhooks[0].sideEffects"],
                         "Required value: must specify one of None, NoneOnDryRun")
        self.assertEqual(causes["webhooks[0].admissionReviewVersions"],
                         "Required value: must specify one of v1, v1beta1")
        self.assertEqual(causes["webhooks[0].reinvocationPolicy"],
                         'Unsupported value: "Always": supported values: "IfNeeded", "Never"')

    def test_duplicate_names(self):
        r = self.create(VALIDATING, hook(), hook())
        self.assertEqual(r.code, 422, r.body)
        self.assertIn('webhooks[1].name: Duplicate value: "hook.example.com"',
                      r.json()["message"])

    def test_table(self):
        self.assertEqual(self.create(VALIDATING, hook(), hook(name="b.example.com")).code, 201)
        r = self.client.get(VALIDATING, headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.platform.io"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual([c["name"] for c in r.json()["columnDefinitions"]],
                         ["Name", "Webhooks", "Age"])
        self.assertEqual(r.json()["rows"][0]["cells"][:2], ["config", 2])


class ProtobufTests(SynchronousTestCase):
    """The four admissionregistration kinds over application/vnd.platform.protobuf: a
    create sent as Protobuf is stored as its JSON says, and read back as Protobuf (one
    object and a list) gives the same object as JSON, inline rule fields included."""

    def setUp(self):
        self.stub = StubServer()
        self.client = self.stub.client()
        self.addCleanup(self.stub.stop)
        self.codec = ProtobufCodec()

    def round_trip(self, plural, obj):
        api_version = f"{GROUP}/v1"
        body = self.codec.encode({"apiVersion": api_version, **obj})
        path = f"/apis/{GROUP}/v1/{plural}"
        r = self.client.post(path, body, content_type=PROTOBUF,
                             headers={"Accept": PROTOBUF})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("Content-Type"), PROTOBUF)
        created = self.codec.decode(r.body)
        name = obj["metadata"]["name"]
        as_json = self.client.get(f"{path}/{name}").json()
        self.assertEqual(created, as_json)
        r = self.client.get(f"{path}/{name}", headers={"Accept": PROTOBUF})
        self.assertEqual(self.codec.decode(r.body), as_json)
        r = self.client.get(path, headers={"Accept": PROTOBUF})
        self.assertEqual(self.codec.decode(r.body)["items"], [as_json])
        return as_json

    def test_round_trips(self):
        rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"], "scope": "Namespaced"}
        for plural, kind in (("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
                             ("validatingwebhookconfigurations",
                              "ValidatingWebhookConfiguration")):
            stored = self.round_trip(plural, {
                "kind": kind, "metadata": {"name": "w"},
                "webhooks": [hook(rules=[rule], clientConfig={
                    "service": {"namespace": "ns", "name": "svc", "path": "/x"},
                    "caBundle": "YWJj"},
                    matchConditions=[{"name": "c", "expression": "true"}])]})
            self.assertEqual(stored["webhooks"][0]["rules"], [rule])
            self.assertEqual(stored["webhooks"][0]["clientConfig"]["caBundle"], "YWJj")
        named = {"resourceNames": ["a"], **rule}
        stored = self.round_trip("validatingadmissionpolicies", {
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"},
            "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                     "matchConstraints": {"resourceRules": [named],
                                          "excludeResourceRules": [named]},
                     "validations": [{"expression": "true", "message": "m",
                                      "reason": "Forbidden", "messageExpression": "'x'"}],
                     "variables": [{"name": "v", "expression": "1"}],
                     "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}]}})
        self.assertEqual(stored["spec"]["matchConstraints"]["resourceRules"], [named])
        self.assertEqual(stored["status"], {})
        stored = self.round_trip("validatingadmissionpolicybindings", {
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
            "spec": {"policyName": "p", "paramRef": {"name": "cm", "namespace": "default"},
                     "matchResources": {"resourceRules": [named]},
                     "validationActions": ["Deny", "Audit"]}})
        self.assertEqual(stored["spec"]["paramRef"]["parameterNotFoundAction"], "Deny")
