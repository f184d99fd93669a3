"""
Both webhook plugins against a real HTTPS webhook on loopback: the review sent, denial
messages, failure policies, timeouts on the clock, dry run and side effects, JSON
patches seen by validating webhooks, reinvocation, warnings and audit annotations.
"""

from __future__ import annotations

import base64

from twisted.internet import defer

from platformd import errors
from tests.webhooks.helpers import WebhookCase, allow, deny, patch


class ReviewTests(WebhookCase):
    @defer.inlineCallbacks
    def test_the_review_sent(self):
        self.configure("validating", self.hook())
        a = self.attributes()
        a.context.user = None
        yield self.admit(a)
        [review] = self.reviews()
        self.assertEqual(review["apiVersion"], "admission.platform.io/v1")
        self.assertEqual(review["kind"], "AdmissionReview")
        request = review["request"]
        self.assertEqual(request["kind"], {"group": "", "version": "v1", "kind": "ConfigMap"})
        self.assertEqual(request["resource"],
                         {"group": "", "version": "v1", "resource": "configmaps"})
        self.assertEqual((request["name"], request["namespace"], request["operation"]),
                         ("cm", "default", "CREATE"))
        self.assertEqual(request["object"]["data"], {"a": "1"})
        self.assertIsNone(request["oldObject"])
        self.assertIs(request["dryRun"], False)
        self.assertEqual(request["options"]["kind"], "CreateOptions")

    @defer.inlineCallbacks
    def test_v1beta1_when_only_listed(self):
        self.configure("validating", self.hook(admissionReviewVersions=["v1beta1"]))
        yield self.admit(self.attributes())
        self.assertEqual(self.reviews()[0]["apiVersion"], "admission.platform.io/v1beta1")

    @defer.inlineCallbacks
    def test_no_configuration_no_call(self):
        a = self.attributes()
        self.assertIsNone(self.validating.validate(a))
        self.assertIsNone(self.mutating.admit(a))
        self.assertEqual(self.caller.calls, 0)
        yield None


class DenialTests(WebhookCase):
    @defer.inlineCallbacks
    def check_denied(self, status, code, message, reason=""):
        self.service.handlers["/check"] = lambda review: deny(review, **status)
        self.configure("validating", self.hook())
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertEqual((error.code, error.message, error.reason), (code, message, reason))
        return error

    def test_message(self):
        return self.check_denied({"message": "no configmaps today", "code": 403,
                                  "reason": "Forbidden"}, 403,
                                 'admission webhook "hook.example.com" denied the request: '
                                 "no configmaps today", "Forbidden")

    def test_reason_when_no_message(self):
        return self.check_denied({"reason": "Because"}, 400,
                                 'admission webhook "hook.example.com" denied the request: '
                                 "Because", "Because")

    def test_without_explanation_and_code_below_400(self):
        return self.check_denied({"code": 200}, 400,
                                 'admission webhook "hook.example.com" denied the request '
                                 "without explanation")

    @defer.inlineCallbacks
    def test_mutating_denial(self):
        self.service.handlers["/check"] = lambda review: deny(review, message="nope")
        self.configure("mutating", self.hook())
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertEqual(error.message,
                         'admission webhook "hook.example.com" denied the request: nope')

    @defer.inlineCallbacks
    def test_first_refusal_in_order_and_parallel_calls(self):
        """Validating webhooks are all called (at once); the first refusal is reported."""
        self.service.handlers["/a"] = lambda review: deny(review, message="a says no")
        self.service.handlers["/b"] = lambda review: deny(review, message="b says no")
        self.configure("validating", self.hook("a.example.com", "/a"),
                       self.hook("b.example.com", "/b"))
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertIn('"a.example.com"', error.message)
        self.assertEqual((len(self.reviews("/a")), len(self.reviews("/b"))), (1, 1))


class FailurePolicyTests(WebhookCase):
    @defer.inlineCallbacks
    def check(self, hook_fields, message_part):
        self.configure("validating", self.hook(failurePolicy="Ignore", **hook_fields))
        yield self.admit(self.attributes())
        self.clear(self.validating_configs)
        self.configure("validating", self.hook(failurePolicy="Fail", **hook_fields))
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertEqual((error.code, error.reason), (500, "InternalError"))
        self.assertTrue(error.message.startswith(
            'Internal error occurred: failed calling webhook "hook.example.com": '), error.message)
        self.assertIn(message_part, error.message)

    def test_connection_refused(self):
        return self.check({"clientConfig": {"url": "https://127.0.0.1:1/x"}},
                          'failed to call webhook: Post "https://127.0.0.1:1/x?timeout=10s": ')

    def test_untrusted_certificate(self):
        return self.check({"clientConfig": {"url": self.base + "/check"}},
                          "failed to call webhook: Post")

    def test_server_error(self):
        self.service.code = 500
        self.service.handlers["/check"] = lambda review: {"message": "boom"}
        return self.check({}, "failed to call webhook: boom")

    def test_wrong_uid(self):
        self.service.handlers["/check"] = lambda review: {
            "apiVersion": "admission.platform.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "other", "allowed": True}}
        return self.check({}, 'expected response.uid="')

    def test_wrong_version(self):
        self.service.handlers["/check"] = lambda review: {
            "apiVersion": "admission.platform.io/v1beta1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True}}
        return self.check({}, "expected webhook response of admission.platform.io/v1, "
                              "Kind=AdmissionReview, got admission.platform.io/v1beta1")

    def test_not_json(self):
        self.service.handlers["/check"] = lambda review: b"not json"
        return self.check({}, "failed to decode the webhook's response")

    def service_config(self, name, path=None) -> dict:
        service = {"namespace": "webhooks", "name": name, "port": self.port.getHost().port}
        if path is not None:
            service["path"] = path
        return {"clientConfig": {"service": service, "caBundle": self.ca_bundle}}

    @defer.inlineCallbacks
    def test_service_reference_called(self):
        """https://<name>.<namespace>.svc:<port><path>, the host found through the
        resolver seam, the TLS server name being that host (the certificate's SAN)."""
        self.caller.hosts["hooks.webhooks.svc"] = "127.0.0.1"
        self.configure("validating", self.hook(**self.service_config("hooks", "/svc")))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/svc")), 1)
        self.clear(self.validating_configs)
        self.configure("validating", self.hook(**self.service_config("hooks")))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/")), 1)

    def test_service_name_not_in_certificate(self):
        """The server name checked is the service's host name, whatever address it has."""
        self.caller.hosts["other.webhooks.svc"] = "127.0.0.1"
        port = self.port.getHost().port
        return self.check(self.service_config("other"), 'failed to call webhook: Post '
                          f'"https://other.webhooks.svc:{port}/?timeout=10s": ')

    @defer.inlineCallbacks
    def test_timeout_on_the_clock(self):
        self.service.handlers["/check"] = lambda review: None  # never answers
        self.configure("validating", self.hook(timeoutSeconds=2))
        admitted = self.admit(self.attributes())
        while not self.reviews():
            yield deferLater(0.01)
        self.clock.advance(1.9)
        self.assertNoResult(admitted)
        self.clock.advance(0.2)
        error = yield self.assertFailure(admitted, errors.StatusError)
        self.assertEqual(error.message,
                         'Internal error occurred: failed calling webhook "hook.example.com": '
                         f'failed to call webhook: Post "{self.base}/check?timeout=2s": '
                         "context deadline exceeded")

    @defer.inlineCallbacks
    def test_timeout_ignored(self):
        self.service.handlers["/check"] = lambda review: None
        self.configure("validating", self.hook(timeoutSeconds=1, failurePolicy="Ignore"))
        admitted = self.admit(self.attributes())
        while not self.reviews():
            yield deferLater(0.01)
        self.clock.advance(1)
        a = yield admitted
        self.assertEqual(a.obj["data"], {"a": "1"})


def deferLater(seconds):
    from twisted.internet import reactor, task
    return task.deferLater(reactor, seconds, lambda: None)


class DryRunTests(WebhookCase):
    @defer.inlineCallbacks
    def test_no_side_effects_sees_dry_run(self):
        self.configure("validating", self.hook(sideEffects="NoneOnDryRun"))
        yield self.admit(self.attributes(dry_run=True))
        request = self.reviews()[0]["request"]
        self.assertIs(request["dryRun"], True)
        self.assertEqual(request["options"]["dryRun"], ["All"])

    @defer.inlineCallbacks
    def test_side_effects_on_dry_run_refused(self):
        """Validation admits only None/NoneOnDryRun; a stored webhook with other side
        effects (written before, or by another server) is refused for dry runs, whatever
        its failure policy, and not called."""
        self.configure("validating", self.hook(failurePolicy="Ignore"))
        [entry] = self.validating_configs.lister.list()
        obj = entry.mutable()
        obj["webhooks"][0]["sideEffects"] = "Some"
        self.validating_configs.put(obj)
        error = yield self.assertFailure(self.admit(self.attributes(dry_run=True)),
                                         errors.StatusError)
        self.assertEqual((error.code, error.reason, error.message),
                         (400, "BadRequest",
                          'admission webhook "hook.example.com" does not support dry run'))
        self.assertEqual(self.reviews(), [])
        yield self.admit(self.attributes(dry_run=False))
        self.assertEqual(len(self.reviews()), 1)


class MutationTests(WebhookCase):
    @defer.inlineCallbacks
    def test_patch_applied_and_seen_by_validating(self):
        self.service.handlers["/mutate"] = lambda review: patch(review, [
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
        self.configure("mutating", self.hook("m.example.com", "/mutate"))
        self.configure("validating", self.hook("v.example.com", "/validate"))
        a = yield self.admit(self.attributes())
        self.assertEqual(a.obj["metadata"]["labels"], {"mutated": "yes"})
        seen = self.reviews("/validate")[0]["request"]["object"]
        self.assertEqual(seen["metadata"]["labels"], {"mutated": "yes"})
        self.assertEqual(
            a.context.audit_annotations[
                "mutation.webhook.admission.platform.io/round_0_index_0"],
            '{"configuration":"config","webhook":"m.example.com","mutated":true}')

    @defer.inlineCallbacks
    def test_chain_of_mutations_in_order(self):
        self.service.handlers["/one"] = lambda review: patch(review, [
            {"op": "add", "path": "/data/one", "value": "1"}])
        self.service.handlers["/two"] = lambda review: patch(review, [
            {"op": "add", "path": "/data/two", "value": review["request"]["object"]["data"]
             .get("one", "missing")}])
        self.configure("mutating", self.hook("one.example.com", "/one"),
                       self.hook("two.example.com", "/two"))
        a = yield self.admit(self.attributes())
        self.assertEqual(a.obj["data"], {"a": "1", "one": "1", "two": "1"})

    @defer.inlineCallbacks
    def test_bad_patch_is_an_internal_error(self):
        self.service.handlers["/check"] = lambda review: patch(review, [
            {"op": "remove", "path": "/nope"}])
        self.configure("mutating", self.hook())
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertEqual(error.code, 500)
        self.assertIn("JSON Patch", error.message)

    @defer.inlineCallbacks
    def test_patch_type_without_patch_follows_policy(self):
        self.service.handlers["/check"] = lambda review: allow(review, patchType="JSONPatch")
        self.configure("mutating", self.hook())
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertIn("webhook returned response.patchType but not response.patch",
                      error.message)

    @defer.inlineCallbacks
    def test_reinvocation_if_needed(self):
        """The first webhook (IfNeeded) is called again once the second changed the object;
        a Never webhook is not."""
        self.service.handlers["/second"] = lambda review: patch(review, [
            {"op": "add", "path": "/data/second", "value": "x"}]) \
            if "second" not in review["request"]["object"]["data"] else allow(review)
        self.configure("mutating",
                       self.hook("first.example.com", "/first", reinvocationPolicy="IfNeeded"),
                       self.hook("never.example.com", "/never"),
                       self.hook("second.example.com", "/second"))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/first")), 2)
        self.assertEqual(len(self.reviews("/never")), 1)
        self.assertEqual(len(self.reviews("/second")), 1)
        self.assertEqual(self.reviews("/first")[1]["request"]["object"]["data"]["second"], "x")

    @defer.inlineCallbacks
    def test_no_reinvocation_without_change(self):
        self.configure("mutating",
                       self.hook("first.example.com", "/first", reinvocationPolicy="IfNeeded"),
                       self.hook("second.example.com", "/second"))
        yield self.admit(self.attributes())
        self.assertEqual(len(self.reviews("/first")), 1)


class RecordTests(WebhookCase):
    @defer.inlineCallbacks
    def test_warnings_and_audit_annotations(self):
        self.service.handlers["/check"] = lambda review: allow(
            review, warnings=["careful"], auditAnnotations={"checked": "yes"})
        self.configure("validating", self.hook())
        a = yield self.admit(self.attributes())
        self.assertEqual(a.context.warnings, ["careful"])
        self.assertEqual(a.context.audit_annotations, {"hook.example.com/checked": "yes"})


class ConnectionReuseTests(WebhookCase):
    @defer.inlineCallbacks
    def test_no_connection_reused_across_trust(self):
        """
        A connection made for one webhook is not reused by another at the same host and
        port with another caBundle: the second's trust is checked on a connection of its
        own (and fails here: no caBundle, the server's CA unknown to the system store).
        """
        trusted = self.hook(name="trusted.example.com", failurePolicy="Fail")
        untrusted = self.hook(name="untrusted.example.com", failurePolicy="Fail",
                              clientConfig={"url": self.base + "/check"})
        self.configure("validating", trusted, name="first")
        yield self.admit(self.attributes())  # a pooled connection, the CA verified
        self.clear(self.validating_configs)
        self.configure("validating", untrusted, name="second")
        error = yield self.assertFailure(self.admit(self.attributes()), errors.StatusError)
        self.assertTrue(error.message.startswith(
            'Internal error occurred: failed calling webhook "untrusted.example.com": '
            'failed to call webhook: Post'), error.message)
        self.assertEqual(len(self.reviews()), 1)


class CaBundleTests(WebhookCase):
    def test_ca_bundle_decoded(self):
        self.configure("validating", self.hook())
        [hook] = self.validating.source.webhooks()
        self.assertTrue(hook.ca_bundle.startswith(b"-----BEGIN CERTIFICATE-----"))
        self.assertEqual(base64.b64encode(hook.ca_bundle).decode(), self.ca_bundle)
