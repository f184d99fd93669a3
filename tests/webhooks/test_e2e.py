"""
The daemon end to end: webhook configurations created through the API reach a real
HTTPS webhook; a mutating webhook's patch is stored and seen by the validating one;
a denial is the client's error; warnings come back as ``Warning`` headers; a dry run
reaches the webhook and stores nothing.
"""

from __future__ import annotations

import base64

from twisted.internet import defer, reactor
from twisted.internet.task import deferLater
from twisted.web import server

from platformd.files.pki import ensure_pki
from platformd.edge.tlscontext import server_tls_options
from tests.e2e.harness import ServerTestCase
from tests.webhooks.helpers import ReviewServer, allow, deny, patch

GROUP = "admissionregistration.platform.io"


class EndToEndTests(ServerTestCase):
    @defer.inlineCallbacks
    def setUp(self):
        yield super().setUp()
        paths = ensure_pki(self.mktemp(), [], [], "https://127.0.0.1:1")
        with open(paths.ca_cert, "rb") as f:
            self.ca_bundle = base64.b64encode(f.read()).decode()
        self.service = ReviewServer()
        port = reactor.listenSSL(0, server.Site(self.service),
                                 server_tls_options(paths.serving_cert, paths.serving_key),
                                 interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.addCleanup(self._close_webhook_connections)
        self.base = f"https://127.0.0.1:{port.getHost().port}"

    @defer.inlineCallbacks
    def _close_webhook_connections(self):
        """The daemon keeps connections to webhooks open; close them before the reactor
        is checked (the server's ends go one turn later)."""
        for plugin in self.server.components.admission.plugins:
            caller = getattr(plugin, "caller", None)
            if caller is not None:
                yield caller.close()
        yield deferLater(reactor, 0.05, lambda: None)

    def hook(self, name, path, **fields):
        hook = {"name": name,
                "clientConfig": {"url": self.base + path, "caBundle": self.ca_bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"]}],
                "sideEffects": "NoneOnDryRun", "admissionReviewVersions": ["v1"]}
        hook.update(fields)
        return hook

    @defer.inlineCallbacks
    def configure(self, plural, *hooks):
        r = yield self.client.post(f"/apis/{GROUP}/v1/{plural}",
                                   {"metadata": {"name": "config"}, "webhooks": list(hooks)})
        self.assertEqual(r.code, 201, r.body)
        # The configuration is read from the watch cache; the create has been answered
        # only once the cache holds it, so the next write sees it.

    @defer.inlineCallbacks
    def test_mutate_validate_deny_warn_dry_run(self):
        self.service.handlers["/mutate"] = lambda review: patch(review, [
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])

        def validate(review):
            obj = review["request"]["object"]
            if obj["metadata"]["name"] == "bad":
                return deny(review, message="bad is a bad name", code=403, reason="Forbidden")
            return allow(review, warnings=[f"seen {obj['metadata']['labels']['mutated']}"])

        self.service.handlers["/validate"] = validate
        yield self.configure("mutatingwebhookconfigurations",
                             self.hook("mutate.example.com", "/mutate"))
        yield self.configure("validatingwebhookconfigurations",
                             self.hook("validate.example.com", "/validate"))
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "good"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["metadata"]["labels"], {"mutated": "yes"})
        self.assertEqual(r.headers_named("Warning"), ['299 - "seen yes"'])
        r = yield self.client.get("/api/v1/namespaces/default/configmaps/good")
        self.assertEqual(r.json()["metadata"]["labels"], {"mutated": "yes"})

        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "bad"}})
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["message"], 'admission webhook "validate.example.com" '
                                              "denied the request: bad is a bad name")
        self.assertEqual(r.json()["reason"], "Forbidden")
        self.assertIsNone(r.header("Warning"))

        r = yield self.client.post("/api/v1/namespaces/default/configmaps?dryRun=All",
                                   {"metadata": {"name": "dry"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertIs(self.service.reviews["/validate"][-1]["request"]["dryRun"], True)
        r = yield self.client.get("/api/v1/namespaces/default/configmaps/dry")
        self.assertEqual(r.code, 404)
        # Each call timed as upstream's webhook duration metric; a denial is "rejected".
        calls = self.server.components.metrics.admission_webhooks
        self.assertEqual(calls.count(("mutate.example.com", "admit", "CREATE", "false")), 3)
        self.assertEqual(calls.count(("validate.example.com", "validating", "CREATE", "false")),
                         2)
        self.assertEqual(calls.count(("validate.example.com", "validating", "CREATE", "true")),
                         1)

    @defer.inlineCallbacks
    def test_unreachable_webhook_fails_closed_and_deleting_the_configuration_reopens(self):
        yield self.configure("validatingwebhookconfigurations", self.hook(
            "down.example.com", "/x", clientConfig={"url": "https://127.0.0.1:1/x"}))
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 500, r.body)
        self.assertEqual(self.server.components.metrics.admission_webhooks.count(
            ("down.example.com", "validating", "CREATE", "true")), 1)
        self.assertTrue(r.json()["message"].startswith(
            'Internal error occurred: failed calling webhook "down.example.com": failed to '
            'call webhook: Post "https://127.0.0.1:1/x?timeout=10s": '), r.json()["message"])
        r = yield self.client.delete(
            f"/apis/{GROUP}/v1/validatingwebhookconfigurations/config")
        self.assertEqual(r.code, 200, r.body)
        r = yield self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 201, r.body)

    @defer.inlineCallbacks
    def test_subresource_creates_are_admitted(self):
        """Evictions, bindings and token requests go through admission as creates of
        their subresource (the object's own kind, the parent's resource), as upstream's
        create handler runs it: a mutating webhook's change reaches what the subresource
        does, a validating webhook's denial stops it."""
        rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                  "resources": ["pods/binding", "pods/eviction", "serviceaccounts/token"]}]
        self.service.handlers["/mutate"] = lambda review: patch(review, [
            {"op": "add", "path": "/metadata/annotations", "value": {"mutated": "yes"}}])

        def validate(review):
            if review["request"]["name"] == "keep":
                return deny(review, message="keep stays", code=403, reason="Forbidden")
            return allow(review)
        self.service.handlers["/validate"] = validate
        yield self.configure("mutatingwebhookconfigurations",
                             self.hook("mutate.example.com", "/mutate", rules=rules))
        yield self.configure("validatingwebhookconfigurations",
                             self.hook("validate.example.com", "/validate", rules=rules))
        pods = "/api/v1/namespaces/default/pods"
        for name in ("p", "keep"):
            r = yield self.client.post(pods, {"metadata": {"name": name}, "spec": {
                "containers": [{"name": "c", "image": "i:1"}]}})
            self.assertEqual(r.code, 201, r.body)

        r = yield self.client.post(f"{pods}/p/binding", {
            "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.get(f"{pods}/p")
        self.assertEqual(r.json()["spec"]["nodeName"], "n1")
        self.assertEqual(r.json()["metadata"]["annotations"], {"mutated": "yes"})
        [review] = [v["request"] for v in self.service.reviews["/validate"]
                    if v["request"].get("subResource") == "binding"]
        self.assertEqual(
            {key: review[key] for key in ("kind", "resource", "subResource", "requestKind",
                                          "requestResource", "requestSubResource", "name",
                                          "namespace", "operation")},
            {"kind": {"group": "", "version": "v1", "kind": "Binding"},
             "resource": {"group": "", "version": "v1", "resource": "pods"},
             "subResource": "binding",
             "requestKind": {"group": "", "version": "v1", "kind": "Binding"},
             "requestResource": {"group": "", "version": "v1", "resource": "pods"},
             "requestSubResource": "binding", "name": "p", "namespace": "default",
             "operation": "CREATE"})
        self.assertEqual(review["object"]["target"], {"kind": "Node", "name": "n1"})
        self.assertEqual(review["object"]["metadata"]["annotations"], {"mutated": "yes"})

        r = yield self.client.post(f"{pods}/keep/eviction", {"metadata": {"name": "keep"}})
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["message"], 'admission webhook "validate.example.com" '
                                              "denied the request: keep stays")
        self.assertEqual((yield self.client.get(f"{pods}/keep")).code, 200)
        r = yield self.client.post(f"{pods}/p/eviction", {"metadata": {"name": "p"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((yield self.client.get(f"{pods}/p")).code, 404)
        evictions = [v["request"] for v in self.service.reviews["/validate"]
                     if v["request"].get("subResource") == "eviction"]
        self.assertEqual([e["name"] for e in evictions], ["keep", "p"])
        self.assertEqual(evictions[1]["kind"], {"group": "policy.platform.io", "version": "v1",
                                                "kind": "Eviction"})
        self.assertEqual(evictions[1]["resource"], {"group": "", "version": "v1",
                                                    "resource": "pods"})

        r = yield self.client.post("/api/v1/namespaces/default/serviceaccounts", {
            "metadata": {"name": "keep"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.post("/api/v1/namespaces/default/serviceaccounts/keep/token",
                                   {"spec": {}})
        self.assertEqual(r.code, 403, r.body)
        [token] = [v["request"] for v in self.service.reviews["/validate"]
                   if v["request"].get("subResource") == "token"]
        self.assertEqual(token["kind"], {"group": "authentication.platform.io",
                                         "version": "v1", "kind": "TokenRequest"})
        self.assertEqual(token["resource"], {"group": "", "version": "v1",
                                             "resource": "serviceaccounts"})

    @defer.inlineCallbacks
    def test_review_creates_are_admitted(self):
        """An access review is a create admission sees (a webhook may deny it), except
        that NamespaceLifecycle lets a LocalSubjectAccessReview into a namespace that
        does not exist (upstream's ``isAccessReview``: the answer would leak it)."""
        self.service.handlers["/validate"] = lambda review: deny(
            review, message="no reviews", code=403, reason="Forbidden")
        yield self.configure("validatingwebhookconfigurations", self.hook(
            "validate.example.com", "/validate", rules=[{
                "operations": ["CREATE"], "apiGroups": ["authorization.platform.io"],
                "apiVersions": ["v1"], "resources": ["subjectaccessreviews"]}]))
        authz = "/apis/authorization.platform.io/v1"
        spec = {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}}
        r = yield self.client.post(f"{authz}/subjectaccessreviews", {"spec": spec})
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["message"], 'admission webhook "validate.example.com" '
                                              "denied the request: no reviews")
        [review] = self.service.reviews["/validate"]
        self.assertEqual(review["request"]["kind"], {
            "group": "authorization.platform.io", "version": "v1",
            "kind": "SubjectAccessReview"})
        self.assertNotIn("subResource", review["request"])
        r = yield self.client.post(f"{authz}/namespaces/ghost/localsubjectaccessreviews", {
            "spec": {**spec, "resourceAttributes": {**spec["resourceAttributes"],
                                                     "namespace": "ghost"}}})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.client.post("/api/v1/namespaces/ghost/configmaps",
                                   {"metadata": {"name": "cm"}})
        self.assertEqual(r.code, 404, r.body)
        self.assertEqual(r.json()["message"], 'namespaces "ghost" not found')
