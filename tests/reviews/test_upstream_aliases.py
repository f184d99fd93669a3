"""
The access reviews' compatibility aliases at upstream's group names
(``authorization.k8s.io``, ``authentication.k8s.io``: ``catalog.builtin``), in
``application/vnd.kubernetes.protobuf`` as unmodified kubectl sends and asks for them,
and that media type refused everywhere else with the usual 415/406.
"""

from __future__ import annotations

import attrs
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.codecs.negotiation import Negotiator
from platformd.codecs.protobufcodec import (
    KUBERNETES_PROTOBUF, PROTOBUF, ProtobufCodec, upstream_review_codec,
)
from platformd.registry import core
from platformd.registry.kinds import configmap, selfsubjectaccessreview
from tests.stub import StubServer

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
LSAR = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
PLATFORM_SSAR = "/apis/authorization.platform.io/v1/selfsubjectaccessreviews"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: What kubectl v1.37 sends with its typed clients (captured from ``auth can-i``).
KUBECTL_ACCEPT = "application/vnd.kubernetes.protobuf,application/json"
KUBECTL_SSAR = (
    b'k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12<\n\x10\n'
    b'\x00\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00\x12\x1e\n\x1c\n\x07default\x12\x03get'
    b'\x1a\x00"\x00*\x04pods2\x00:\x00\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00"\x00')
KUBECTL_SSRR = (
    b'k8s\x00\n1\n\x17authorization.k8s.io/v1\x12\x16SelfSubjectRulesReview\x12#\n\x10\n'
    b'\x00\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00\x12\t\n\x07default\x1a\x04\x18\x00"'
    b'\x00\x1a\x00"\x00')
UNSUPPORTED = ("the body of the request was in an unknown format - accepted media types "
               "include: application/json, application/yaml, application/vnd.platform.protobuf")


class AliasTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client(user="jane", groups=("devs",))
        self.codec = upstream_review_codec()

    def post(self, path, body, accept=KUBECTL_ACCEPT, content_type=KUBERNETES_PROTOBUF):
        return self.client.post(path, body, content_type=content_type,
                                headers={"Accept": accept})

    def test_kubectl_self_subject_access_review(self):
        """kubectl's own bytes: 201 in upstream's media type, naming upstream's group."""
        r = self.post(SSAR, KUBECTL_SSAR)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("Content-Type"), KUBERNETES_PROTOBUF)
        self.assertTrue(r.body.startswith(b"k8s\x00"))
        answer = self.codec.decode(r.body)
        self.assertEqual((answer["apiVersion"], answer["kind"]),
                         ("authorization.k8s.io/v1", "SelfSubjectAccessReview"))
        self.assertEqual(answer["spec"], {"resourceAttributes": {
            "namespace": "default", "verb": "get", "resource": "pods"}})
        self.assertEqual(answer["status"], {"allowed": True})  # the stub's AlwaysAllow
        self.assertEqual(self.codec.encode(answer), r.body)  # upstream's bytes

    def test_kubectl_self_subject_rules_review(self):
        r = self.post(SSRR, KUBECTL_SSRR)
        self.assertEqual(r.code, 201, r.body)
        answer = self.codec.decode(r.body)
        self.assertEqual(answer["apiVersion"], "authorization.k8s.io/v1")
        self.assertIn({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                      answer["status"]["resourceRules"])

    def test_self_subject_review(self):
        r = self.post(SSR, self.codec.encode({"apiVersion": "authentication.k8s.io/v1",
                                              "kind": "SelfSubjectReview"}))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("Content-Type"), KUBERNETES_PROTOBUF)
        answer = self.codec.decode(r.body)
        self.assertEqual((answer["apiVersion"], answer["kind"]),
                         ("authentication.k8s.io/v1", "SelfSubjectReview"))
        self.assertEqual(answer["status"]["userInfo"], {
            "username": "jane", "groups": ["devs", "system:authenticated"]})

    def test_subject_access_reviews(self):
        """Every review kind answers at its alias (JSON bodies too)."""
        spec = {"user": "bob", "resourceAttributes": {"namespace": "default", "verb": "get",
                                                      "resource": "pods"}}
        for path, kind in ((SAR, "SubjectAccessReview"), (LSAR, "LocalSubjectAccessReview")):
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
            r = self.post(path, self.codec.encode(body))
            self.assertEqual(r.code, 201, r.body)
            self.assertEqual(self.codec.decode(r.body)["status"], {"allowed": True})
            r = self.post(path, body, accept="application/json", content_type="application/json")
            self.assertEqual(r.code, 201, r.body)
            self.assertEqual((r.json()["apiVersion"], r.json()["kind"]),
                             ("authorization.k8s.io/v1", kind))

    def test_answer_negotiated(self):
        """JSON when it is the better match; upstream's Protobuf alone is a route too."""
        r = self.post(SSAR, KUBECTL_SSAR, accept="application/json")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertEqual(r.json()["apiVersion"], "authorization.k8s.io/v1")
        r = self.post(SSAR, KUBECTL_SSAR, accept=KUBERNETES_PROTOBUF)
        self.assertEqual((r.code, r.header("Content-Type")), (201, KUBERNETES_PROTOBUF))
        r = self.post(SSAR, KUBECTL_SSAR, accept="application/vnd.kubernetes.protobuf;q=0.5,"
                                                 "application/yaml")
        self.assertEqual((r.code, r.header("Content-Type")), (201, "application/yaml"))
        # As a view, upstream's Protobuf is nothing: 406 as for any other unserved type.
        r = self.post(SSAR, KUBECTL_SSAR, accept=KUBERNETES_PROTOBUF
                      + ";as=Table;g=meta.k8s.io;v=v1")
        self.assertEqual(r.code, 406, r.body)

    def test_errors_are_json(self):
        """An error is not the review: JSON, as for every other unknown type."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {}}
        r = self.post(SSAR, self.codec.encode(body))
        self.assertEqual((r.code, r.header("Content-Type")), (422, "application/json"))
        self.assertEqual(r.json()["message"], 'SelfSubjectAccessReview.authorization.k8s.io "" '
                         'is invalid: spec.resourceAttributes: Invalid value: "null": exactly '
                         "one of nonResourceAttributes or resourceAttributes must be specified")
        # The envelope names the group of the path, as upstream's decoder wants it.
        platform = ProtobufCodec().encode({**body, "apiVersion": "authorization.platform.io/v1"})
        r = self.post(SSAR, platform)
        self.assertEqual(r.code, 400, r.body)
        self.assertIn("no Protobuf message for authorization.platform.io/v1", r.json()["message"])

    def test_refused_elsewhere(self):
        """Everywhere but the aliases: the unchanged 415 and 406."""
        for path in (CONFIGMAPS, PLATFORM_SSAR):
            r = self.post(path, KUBECTL_SSAR, accept="application/json")
            self.assertEqual((r.code, r.json()["reason"], r.json()["message"]),
                             (415, "UnsupportedMediaType", UNSUPPORTED), path)
            r = self.post(path, {}, accept=KUBERNETES_PROTOBUF, content_type="application/json")
            self.assertEqual((r.code, r.json()["message"]), (406, "406: Not Acceptable"), path)
        r = self.client.get(CONFIGMAPS, headers={"Accept": KUBERNETES_PROTOBUF})
        self.assertEqual((r.code, r.json()["message"]), (406, "406: Not Acceptable"))
        r = self.client.get(CONFIGMAPS, headers={"Accept": KUBECTL_ACCEPT})
        self.assertEqual((r.code, r.header("Content-Type")), (200, "application/json"))
        # Our own Protobuf does not answer at the aliases' upstream group names.
        r = self.post(SSAR, KUBECTL_SSAR, accept=PROTOBUF + ",application/json")
        self.assertEqual((r.code, r.header("Content-Type")), (201, "application/json"))

    def test_not_discovered(self):
        groups = [g["name"] for g in self.client.get("/apis").json()["groups"]]
        self.assertFalse([g for g in groups if g.endswith("k8s.io")], groups)
        self.assertEqual(self.client.get("/apis/authorization.k8s.io/v1").code, 404)


class NegotiatorTests(SynchronousTestCase):
    """``Negotiator.alias_codecs``: offered only for the kinds they serve."""

    def setUp(self):
        self.negotiator = Negotiator([ProtobufCodec()])
        self.alias = attrs.evolve(selfsubjectaccessreview.KIND, group="authorization.k8s.io")

    def test_for_request(self):
        codec = self.negotiator.for_request(KUBERNETES_PROTOBUF + "; charset=x", self.alias)
        self.assertEqual(codec.media_type, KUBERNETES_PROTOBUF)
        for kind in (None, selfsubjectaccessreview.KIND, configmap.KIND, core.NAMESPACE):
            with self.assertRaises(errors.StatusError) as e:
                self.negotiator.for_request(KUBERNETES_PROTOBUF, kind)
            self.assertEqual(e.exception.code, 415)

    def test_pick_and_errors(self):
        negotiator = self.negotiator
        self.assertEqual(negotiator.pick(KUBERNETES_PROTOBUF, (), self.alias).codec.media_type,
                         KUBERNETES_PROTOBUF)
        for kind in (None, selfsubjectaccessreview.KIND):
            with self.assertRaises(errors.StatusError) as e:
                negotiator.pick(KUBERNETES_PROTOBUF, (), kind)
            self.assertEqual(str(e.exception.message), "only the following media types are "
                             "accepted: application/vnd.platform.protobuf")
        self.assertEqual(negotiator.error_choice(KUBERNETES_PROTOBUF).codec.media_type, PROTOBUF)
        self.assertEqual(negotiator.media_types, [PROTOBUF])
        self.assertTrue(negotiator.route_accepts(KUBERNETES_PROTOBUF, self.alias))
        self.assertFalse(negotiator.route_accepts(KUBERNETES_PROTOBUF))
        self.assertFalse(negotiator.route_accepts(KUBERNETES_PROTOBUF,
                                                  selfsubjectaccessreview.KIND))

    def test_only_with_protobuf(self):
        """A server without Protobuf has no alias either."""
        self.assertEqual(Negotiator().alias_codecs, {})

