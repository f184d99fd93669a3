"""
Upstream's names as unmodified kubectl sends them: the media type
``application/vnd.kubernetes.protobuf`` (another name of the served Protobuf encoding,
``negotiation.ALIASES``: read and written wherever Protobuf is, its name echoed in the
answer, never listed in the 415/406 messages) and the access reviews' compatibility aliases
at upstream's group names (``authorization.k8s.io``, ``authentication.k8s.io``:
``catalog.builtin``).
"""

from __future__ import annotations

import attrs
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.codecs.negotiation import Negotiator
from platformd.codecs.protobufcodec import KUBERNETES_PROTOBUF, PROTOBUF, ProtobufCodec
from platformd.registry.kinds import configmap
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
        self.codec = ProtobufCodec()

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

    def test_errors_in_the_asked_encoding(self):
        """An error is written as the client asked, under the name it asked with."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {}}
        r = self.post(SSAR, self.codec.encode(body))
        self.assertEqual((r.code, r.header("Content-Type")), (422, KUBERNETES_PROTOBUF))
        self.assertEqual(self.codec.decode(r.body)["message"],
                         'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                         'spec.resourceAttributes: Invalid value: "null": exactly one of '
                         "nonResourceAttributes or resourceAttributes must be specified")
        r = self.post(SSAR, self.codec.encode(body), accept="application/json")
        self.assertEqual((r.code, r.header("Content-Type")), (422, "application/json"))
        # The envelope names the group of the path, as upstream's decoder wants it.
        platform = self.codec.encode({**body, "apiVersion": "authorization.platform.io/v1"})
        r = self.post(SSAR, platform, accept="application/json")
        self.assertEqual((r.code, r.json()["message"]), (400, (
            "the API version in the data (authorization.platform.io/v1) does not match the "
            "expected API version (authorization.k8s.io/v1)")))

    def test_media_type_everywhere_protobuf_is(self):
        """
        Upstream's Protobuf name is the platform's Protobuf: a ConfigMap created, read and
        listed in it, the same bytes under either name, the name asked for echoed.
        """
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
              "data": {"a": "1"}}
        r = self.post(CONFIGMAPS, self.codec.encode(cm))
        self.assertEqual((r.code, r.header("Content-Type")), (201, KUBERNETES_PROTOBUF), r.body)
        self.assertEqual(self.codec.decode(r.body)["data"], {"a": "1"})
        for path in (CONFIGMAPS, CONFIGMAPS + "/c"):
            alias = self.client.get(path, headers={"Accept": KUBECTL_ACCEPT})
            self.assertEqual((alias.code, alias.header("Content-Type")),
                             (200, KUBERNETES_PROTOBUF), path)
            own = self.client.get(path, headers={"Accept": PROTOBUF})
            self.assertEqual(own.header("Content-Type"), PROTOBUF)
            self.assertEqual(alias.body, own.body, path)
        view = KUBERNETES_PROTOBUF + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        r = self.client.get(CONFIGMAPS + "/c", headers={"Accept": view})
        self.assertEqual((r.code, r.header("Content-Type")), (200, view))
        self.assertEqual(self.codec.decode(r.body)["apiVersion"], "meta.k8s.io/v1")
        # DeleteOptions as client-go's typed clients send them, and as upstream's group.
        options = {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
                   "propagationPolicy": "Background"}
        r = self.client.request("DELETE", CONFIGMAPS + "/c", self.codec.encode(options),
                                content_type=KUBERNETES_PROTOBUF,
                                headers={"Accept": KUBECTL_ACCEPT})
        self.assertEqual((r.code, r.header("Content-Type")), (200, KUBERNETES_PROTOBUF))
        self.assertEqual(self.codec.decode(r.body)["status"], "Success")
        # The platform's own review path takes it too.
        r = self.post(PLATFORM_SSAR, self.codec.encode(
            {"apiVersion": "authorization.platform.io/v1", "kind": "SelfSubjectAccessReview",
             "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}))
        self.assertEqual((r.code, r.header("Content-Type")), (201, KUBERNETES_PROTOBUF))
        # Our own Protobuf answers at the aliases' upstream group names as well.
        r = self.post(SSAR, KUBECTL_SSAR, accept=PROTOBUF)
        self.assertEqual((r.code, r.header("Content-Type")), (201, PROTOBUF))

    def test_messages_name_only_platform_types(self):
        """The 415 and 406 messages list the canonical media types, never the alias."""
        r = self.post(CONFIGMAPS, b"<ConfigMap/>", accept="application/json",
                      content_type="application/xml")
        self.assertEqual((r.code, r.json()["reason"], r.json()["message"]),
                         (415, "UnsupportedMediaType", UNSUPPORTED))
        r = self.client.get(CONFIGMAPS, headers={"Accept": "text/csv"})
        self.assertEqual((r.code, r.json()["message"]), (406, (
            "406: Not Acceptable\n\nAvailable representations: application/json, "
            "application/yaml, application/vnd.platform.protobuf, application/json;"
            "stream=watch, application/vnd.platform.protobuf;stream=watch")))
        r = self.client.get(CONFIGMAPS, headers={
            "Accept": KUBERNETES_PROTOBUF + ";as=Table;g=meta.k8s.io;v=v1"})
        self.assertEqual((r.code, r.json()["message"]), (406, (
            "only the following media types are accepted: application/json, "
            "application/yaml, application/vnd.platform.protobuf")))

    def test_not_discovered(self):
        groups = [g["name"] for g in self.client.get("/apis").json()["groups"]]
        self.assertFalse([g for g in groups if g.endswith("k8s.io")], groups)
        self.assertEqual(self.client.get("/apis/authorization.k8s.io/v1").code, 404)


class NegotiatorTests(SynchronousTestCase):
    """``Negotiator`` with ``ALIASES``: another name of a codec it serves."""

    def setUp(self):
        self.negotiator = Negotiator([ProtobufCodec()])

    def test_for_request(self):
        codec = self.negotiator.for_request(KUBERNETES_PROTOBUF + "; charset=x")
        self.assertIs(codec, self.negotiator.codecs[PROTOBUF])

    def test_answers_echo_the_name(self):
        negotiator = self.negotiator
        for accept in (KUBERNETES_PROTOBUF, KUBECTL_ACCEPT):
            choice = negotiator.pick(accept, (), configmap.KIND)
            self.assertEqual((choice.codec.media_type, choice.media_type),
                             (PROTOBUF, KUBERNETES_PROTOBUF))
            self.assertEqual(negotiator.error_choice(accept).media_type, KUBERNETES_PROTOBUF)
            self.assertTrue(negotiator.route_accepts(accept))
        self.assertEqual(negotiator.pick(PROTOBUF).media_type, PROTOBUF)
        self.assertEqual(negotiator.media_types, [PROTOBUF])
        with self.assertRaises(errors.StatusError) as e:
            negotiator.pick(KUBERNETES_PROTOBUF, (), attrs.evolve(configmap.KIND, kind="Other"))
        self.assertEqual(str(e.exception.message), "only the following media types are "
                         "accepted: application/vnd.platform.protobuf")

    def test_only_with_protobuf(self):
        """A server without Protobuf does not take its alias either."""
        negotiator = Negotiator()
        self.assertFalse(negotiator.route_accepts(KUBERNETES_PROTOBUF))
        with self.assertRaises(errors.StatusError) as e:
            negotiator.for_request(KUBERNETES_PROTOBUF)
        self.assertEqual(e.exception.code, 415)
