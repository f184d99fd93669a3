"""
The access reviews and SelfSubjectReview through the in-memory server: answers from the
authorizer chain (at once or later), upstream's validation messages, routing, nothing
stored, and the encodings.
"""

from __future__ import annotations

import json

import yaml
from twisted.internet.defer import succeed
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from platformd.auth.interfaces import (
    ALLOW, DENY, NO_OPINION, Decision, IAuthorizer, IRuleResolver, RulesForUser,
)
from platformd.codecs.protobufcodec import PROTOBUF, ProtobufCodec
from platformd.registry.kinds import accessreviews
from tests.stub import StubServer

AUTHZ = "/apis/authorization.platform.io/v1"
SAR = f"{AUTHZ}/subjectaccessreviews"
SSAR = f"{AUTHZ}/selfsubjectaccessreviews"
SSRR = f"{AUTHZ}/selfsubjectrulesreviews"
LSAR = f"{AUTHZ}/namespaces/default/localsubjectaccessreviews"
SSR = "/apis/authentication.platform.io/v1/selfsubjectreviews"
REVIEW_GROUPS = ("authorization.platform.io", "authentication.platform.io")
GET_PODS = {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}


@implementer(IAuthorizer)
class Fake:
    """Answers ``decision`` (later, with ``deferred``), recording what it was asked."""

    def __init__(self, decision, deferred=False):
        self.decision, self.deferred, self.asked = decision, deferred, []

    def authorize(self, attributes):
        if attributes.info.group.startswith(REVIEW_GROUPS):
            return Decision(ALLOW)  # the review request itself
        self.asked.append(attributes)
        return succeed(self.decision) if self.deferred else self.decision


@implementer(IAuthorizer, IRuleResolver)
class Resolver(Fake):
    def __init__(self, rules, deferred=False):
        super().__init__(Decision(NO_OPINION), deferred)
        self.rules = rules

    def rules_for(self, user, namespace):
        self.asked.append((user, namespace))
        return succeed(self.rules) if self.deferred else self.rules


class ReviewTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.chain = self.stub.components.api.authorizer
        self.client = self.stub.client(user="jane", groups=("devs",))

    def use(self, *authorizers):
        self.chain.authorizers = list(authorizers)

    def post(self, path, body, **kw):
        return self.client.post(path, body, **kw)

    def test_subject_access_review_asks_about_the_spec_user(self):
        fake = Fake(Decision(ALLOW, "bound"))
        self.use(fake)
        r = self.post(SAR, {"spec": {"user": "bob", "groups": ["g"], "uid": "7",
                                     "extra": {"k": ["v"]}, **GET_PODS}})
        self.assertEqual(r.code, 201, r.body)
        body = r.json()
        self.assertEqual(body["status"], {"allowed": True, "reason": "bound"})
        self.assertEqual(list(body), ["kind", "apiVersion", "metadata", "spec", "status"])
        asked = fake.asked[-1]
        self.assertEqual((asked.user.name, asked.user.groups, asked.user.uid, asked.user.extra),
                         ("bob", ("g",), "7", (("k", ("v",)),)))
        self.assertEqual((asked.info.verb, asked.info.resource, asked.info.namespace,
                          asked.info.version, asked.info.is_resource),
                         ("get", "pods", "default", "*", True))

    def test_denied_and_evaluation_error_later(self):
        self.use(Fake(Decision(DENY, "no", "role missing"), deferred=True))
        r = self.post(SSAR, {"spec": {"nonResourceAttributes": {"path": "/x", "verb": "get"}}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["status"], {"allowed": False, "denied": True, "reason": "no",
                                              "evaluationError": "role missing"})

    def test_self_review_asks_about_the_requester(self):
        fake = Fake(Decision(NO_OPINION))
        self.use(Fake(Decision(NO_OPINION), deferred=True), fake)
        r = self.post(SSAR, {"spec": GET_PODS})
        self.assertEqual(r.json()["status"], {"allowed": False})
        self.assertEqual(fake.asked[-1].user.name, "jane")
        self.assertIn("devs", fake.asked[-1].user.groups)

    def test_validation_messages(self):
        r = self.post(SAR, {"spec": {}})
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"],
                         'SubjectAccessReview.authorization.platform.io "" is invalid: ['
                         'spec.resourceAttributes: Invalid value: "null": exactly one of '
                         "nonResourceAttributes or resourceAttributes must be specified, "
                         'spec.user: Invalid value: "": at least one of user or group must '
                         "be specified]")
        r = self.post(SSAR, {"spec": {**GET_PODS, "nonResourceAttributes": {"path": "/a"}}})
        self.assertEqual(r.json()["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "spec.nonResourceAttributes",
            "message": 'Invalid value: authorization.NonResourceAttributes{Path:"/a", '
                       'Verb:""}: cannot be specified in combination with resourceAttributes'}])
        r = self.post(SSAR, {"metadata": {"name": "x"}, "spec": GET_PODS})
        self.assertEqual(r.code, 422)
        self.assertIn('metadata: Invalid value: v1.ObjectMeta{Name:"x", ', r.json()["message"])
        self.assertTrue(r.json()["message"].endswith(": must be empty"))

    def test_local_review_namespace(self):
        r = self.post(LSAR, {"spec": {"user": "bob", "resourceAttributes": {
            "namespace": "other", "verb": "get"}}})
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"],
                         'LocalSubjectAccessReview.authorization.platform.io "" is invalid: '
                         'spec.resourceAttributes.namespace: Invalid value: "other": must '
                         "match metadata.namespace")
        r = self.post(LSAR, {"metadata": {"namespace": "other"}, "spec": {"user": "bob"}})
        self.assertEqual(r.code, 400)
        self.assertEqual(r.json()["message"], "the namespace of the provided object does not "
                                              "match the namespace sent on the request")
        r = self.post(LSAR, {"spec": {"user": "bob", "nonResourceAttributes": {"path": "/"}}})
        self.assertIn("spec.nonResourceAttributes: Invalid value: authorization."
                      'NonResourceAttributes{Path:"/", Verb:""}: disallowed on this kind of '
                      "request", r.json()["message"])
        r = self.post(LSAR, {"spec": {"user": "bob", **GET_PODS}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["metadata"], {"namespace": "default"})
        self.assertEqual(r.json()["status"], {"allowed": True})

    def test_rules_review(self):
        self.use(Resolver(RulesForUser(({"verbs": ["get"], "apiGroups": [""],
                                         "resources": ["pods"]},), error="one"), deferred=True),
                 Fake(Decision(NO_OPINION)),
                 Resolver(RulesForUser((), ({"verbs": ["get"], "nonResourceURLs": ["/x"]},),
                                       error="two")))
        r = self.post(SSRR, {"spec": {"namespace": "default"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json(), {
            "kind": "SelfSubjectRulesReview", "apiVersion": "authorization.platform.io/v1",
            "metadata": {}, "spec": {}, "status": {
                "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}],
                "incomplete": True, "evaluationError": "[one, two]"}})
        r = self.post(SSRR, {"spec": {}})
        self.assertEqual((r.code, r.json()["message"]), (400, "no namespace on request"))

    def test_rules_of_always_allow(self):
        rules = accessreviews.rules_for(self.chain, None, "default")
        self.assertEqual(accessreviews.rules_status(rules), {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False})

    def test_self_subject_review(self):
        r = self.post(SSR, {"apiVersion": "authentication.platform.io/v1",
                            "kind": "SelfSubjectReview"})
        self.assertEqual(r.code, 201, r.body)
        body = r.json()
        self.assertEqual(body["status"], {"userInfo": {
            "username": "jane", "groups": ["devs", "system:authenticated"]}})
        self.assertIn("creationTimestamp", body["metadata"])

    def test_routes(self):
        """Only POST to the collection: other methods 405, other paths 404."""
        self.assertEqual(self.client.get(SAR).code, 405)
        self.assertEqual(self.client.get(SAR + "?watch=1").code, 405)
        self.assertEqual(self.client.delete(SAR).code, 405)
        self.assertEqual(self.client.get(SAR + "/x").code, 404)
        self.assertEqual(self.post(SAR + "/x", {}).code, 404)  # no such route
        self.assertEqual(self.post(SAR + "/x/status", {}).code, 404)
        self.assertEqual(self.post(f"{AUTHZ}/localsubjectaccessreviews", {}).code, 404)
        self.assertEqual(self.post(f"{AUTHZ}/namespaces/default/subjectaccessreviews",
                                   {}).code, 404)

    def test_nothing_stored_and_dry_run(self):
        components = self.stub.components
        before = components.storage.revision if hasattr(components.storage, "revision") else None
        for path in (SAR, SAR + "?dryRun=All"):
            r = self.post(path, {"spec": {"user": "bob", **GET_PODS}})
            self.assertEqual(r.code, 201, r.body)
        self.assertEqual(self.post(SAR + "?dryRun=Bogus", {"spec": {}}).code, 422)
        for kind in components.catalog.kinds:
            if not kind.stored:
                self.assertNotIn(kind.gvr, components.stores)
                self.assertNotIn(kind, components.cache.served())
        if before is not None:
            self.assertEqual(components.storage.revision, before)

    def test_discovery_lists_only_create(self):
        resources = self.client.get(AUTHZ).json()["resources"]
        self.assertEqual({r["name"]: r["verbs"] for r in resources}, {
            "localsubjectaccessreviews": ["create"], "selfsubjectaccessreviews": ["create"],
            "selfsubjectrulesreviews": ["create"], "subjectaccessreviews": ["create"]})
        self.assertFalse(any("storageVersionHash" in r for r in resources))
        groups = [g["name"] for g in self.client.get("/apis").json()["groups"]]
        self.assertEqual(groups[:5], ["events.platform.io", "authentication.platform.io",
                                      "authorization.platform.io", "policy.platform.io",
                                      "rbac.authorization.platform.io"])

    def test_yaml_and_protobuf(self):
        body = {"apiVersion": "authorization.platform.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "bob", "extra": {"k": ["a", "b"]}, **GET_PODS}}
        r = self.post(SAR, yaml.safe_dump(body).encode(), content_type="application/yaml",
                      headers={"Accept": "application/yaml"})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(yaml.safe_load(r.body)["status"], {"allowed": True})
        codec = ProtobufCodec()
        r = self.post(SAR, codec.encode(body), content_type=PROTOBUF,
                      headers={"Accept": PROTOBUF})
        self.assertEqual(r.code, 201, r.body)
        answer = codec.decode(r.body)
        self.assertEqual(answer["spec"], body["spec"])
        self.assertEqual(answer["status"], {"allowed": True})
        self.assertEqual(codec.encode(answer), r.body)
        r = self.post(SSR, codec.encode({"apiVersion": "authentication.platform.io/v1",
                                         "kind": "SelfSubjectReview"}),
                      content_type=PROTOBUF, headers={"Accept": PROTOBUF})
        self.assertEqual(codec.decode(r.body)["status"]["userInfo"]["username"], "jane")
        self.assertEqual(json.loads(self.post(SSR, {}).body)["kind"], "SelfSubjectReview")
