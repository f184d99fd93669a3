"""
The Webhook authorizer against a real HTTPS server on loopback: the review it sends, each
answer, each failure under each failure policy, the decision cache, matchConditions.
"""

from __future__ import annotations

import json
import socket
import struct

from twisted.internet import defer, reactor
from twisted.internet import task
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web import resource, server

from platformd.auth import sar
from platformd.auth.authzconfig import compile_match_conditions
from platformd.auth.interfaces import ALLOW, DENY, NO_OPINION, Decision
from platformd.auth.kubeconfig import load_kubeconfig
from platformd.auth.webhook import WebhookAuthorizer
from platformd.files.pki import ADMIN_GROUP, ADMIN_USER
from platformd.edge.tlscontext import peer_identity, server_tls_options
from tests.authz.helpers import healthz, kubeconfig_for, pki, pods


class ReviewService(resource.Resource):
    """
    Answers each POST with ``answer`` (a dict, bytes, or ``None`` for never), after the
    ``failures`` queued: each ``(code, body, headers)``, or ``RESET`` (the connection
    reset, no answer).
    """

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.answer: object = {"status": {"allowed": True}}
        self.code = 200
        self.failures: list = []
        self.reviews: list = []
        self.identities: list = []
        self.headers: list = []
        self.pending: list = []

    def render_POST(self, request):
        self.reviews.append(json.loads(request.content.read()))
        self.identities.append(peer_identity(request.channel.transport))
        self.headers.append(request.getHeader(b"authorization"))
        if self.failures:
            return self._fail(request, self.failures.pop(0))
        request.setResponseCode(self.code)
        if self.answer is None:
            self.pending.append(request)
            return server.NOT_DONE_YET
        if isinstance(self.answer, bytes):
            return self.answer
        return json.dumps(self.answer).encode()

    def _fail(self, request, failure):
        if failure == RESET:
            tcp = request.channel.transport.transport  # under TLS
            tcp.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))  # closing sends RST
            tcp.abortConnection()
            return server.NOT_DONE_YET
        code, body, headers = failure
        request.setResponseCode(code)
        for name, value in headers.items():
            request.setHeader(name, value)
        return body


#: A queued failure of ``ReviewService``: the connection reset by the server.
RESET = "reset"


class WebhookTestCase(TestCase):
    def setUp(self):
        self.paths = pki(self)
        self.service = ReviewService()
        self.site = server.Site(self.service)
        self.connections: list = []
        self.site.buildProtocol = self._track(self.site.buildProtocol)
        tls = server_tls_options(self.paths.serving_cert, self.paths.serving_key,
                                 self.paths.client_ca)
        self.port = reactor.listenSSL(0, self.site, tls, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.addCleanup(self._all_lost)
        self.url = f"https://127.0.0.1:{self.port.getHost().port}/authorize"
        self.clock = Clock()

    def _track(self, build):
        def tracked(addr):
            protocol = build(addr)
            protocol.lost = defer.Deferred()
            lost = protocol.connectionLost

            def connection_lost(reason):
                lost(reason)
                protocol.lost.callback(None)

            protocol.connectionLost = connection_lost
            self.connections.append(protocol)
            return protocol

        return tracked

    def authorizer(self, url=None, *, failure_policy="Deny", conditions=(), clock=None,
                   timeout=3.0, authorized_ttl=300.0, unauthorized_ttl=30.0, version="v1"):
        connection = load_kubeconfig(kubeconfig_for(self, self.paths, url or self.url))
        matcher, errors = compile_match_conditions("", tuple(conditions))
        self.assertEqual(errors, [])
        webhook = WebhookAuthorizer(
            "w", connection, version=version, timeout=timeout, authorized_ttl=authorized_ttl,
            unauthorized_ttl=unauthorized_ttl, failure_policy=failure_policy, matcher=matcher,
            clock=clock or self.clock, reactor=reactor)
        self.addCleanup(self._close, webhook)
        return webhook

    @defer.inlineCallbacks
    def _close(self, webhook):
        for request in self.service.pending:
            if not request.finished and not request._disconnected:
                request.finish()
        yield webhook.close()

    def _all_lost(self):
        """Runs last: every webhook has closed its connections; wait for the server's end."""
        return defer.gatherResults([c.lost for c in self.connections])

    @defer.inlineCallbacks
    def decide(self, webhook, attributes) -> Decision:
        decision = yield defer.maybeDeferred(webhook.authorize, attributes)
        return decision


class AnswerTests(WebhookTestCase):
    @defer.inlineCallbacks
    def test_allow_sends_the_review_with_client_certificate(self):
        self.service.answer = {"apiVersion": "authorization.platform.io/v1",
                               "kind": "SubjectAccessReview",
                               "status": {"allowed": True, "reason": "friend"}}
        webhook = self.authorizer()
        decision = yield self.decide(webhook, pods(name="p", extra=(("scopes", ("a", "b")),),
                                                   uid="42"))
        self.assertEqual(decision, Decision(ALLOW, "friend"))
        self.assertEqual(self.service.reviews, [{
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.platform.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": {
                "resourceAttributes": {"namespace": "kube-system", "verb": "get",
                                       "version": "v1", "resource": "pods", "name": "p"},
                "user": "alice", "groups": ["dev"], "extra": {"scopes": ["a", "b"]},
                "uid": "42",
            },
            "status": {"allowed": False},
        }])
        # The kubeconfig's client certificate was presented.
        self.assertEqual(self.service.identities, [(ADMIN_USER, (ADMIN_GROUP,))])

    @defer.inlineCallbacks
    def test_v1beta1_and_non_resource(self):
        webhook = self.authorizer(version="v1beta1")
        decision = yield self.decide(webhook, healthz())
        self.assertEqual(decision.verdict, ALLOW)
        review = self.service.reviews[0]
        self.assertEqual(review["apiVersion"], "authorization.platform.io/v1beta1")
        self.assertEqual(review["spec"], {"nonResourceAttributes": {"path": "/healthz",
                                                                    "verb": "get"},
                                          "user": "alice", "group": ["dev"]})

    @defer.inlineCallbacks
    def test_deny_and_no_opinion(self):
        webhook = self.authorizer()
        self.service.answer = {"status": {"allowed": False, "denied": True, "reason": "no"}}
        self.assertEqual((yield self.decide(webhook, pods(verb="delete"))), Decision(DENY, "no"))
        self.service.answer = {"status": {"allowed": False, "reason": "dunno",
                                          "evaluationError": "rule broke"}}
        self.assertEqual((yield self.decide(webhook, pods(verb="list"))),
                         Decision(NO_OPINION, "dunno", "rule broke"))
        self.service.answer = {"status": {"allowed": True, "denied": True, "reason": "both"}}
        self.assertEqual((yield self.decide(webhook, pods(verb="watch"))),
                         Decision(DENY, "both", "webhook subject access review returned both "
                                                "allow and deny response"))

    @defer.inlineCallbacks
    def test_bearer_token(self):
        path = kubeconfig_for(self, self.paths, self.url)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("client-key-data:", "token: s3cret\n    client-key-data:"))
        connection = load_kubeconfig(path)
        webhook = WebhookAuthorizer("w", connection, timeout=3, authorized_ttl=1,
                                    unauthorized_ttl=1, failure_policy="Deny",
                                    clock=self.clock, reactor=reactor)
        self.addCleanup(self._close, webhook)
        yield self.decide(webhook, pods())
        self.assertEqual(self.service.headers, [b"Bearer s3cret"])


class FailureTests(WebhookTestCase):
    @defer.inlineCallbacks
    def check_failure(self, setup, expected_error):
        for policy, verdict in (("Deny", DENY), ("NoOpinion", NO_OPINION)):
            webhook = setup(policy)
            decision = yield self.decide(webhook, pods())
            self.assertEqual(decision.verdict, verdict)
            self.assertEqual(decision.reason, "")
            expected_error(decision.error)
        self.flushLoggedErrors()

    def test_connection_refused(self):
        closed = f"https://127.0.0.1:{self.port.getHost().port}/authorize"
        self.port.stopListening()

        def check(error):
            self.assertTrue(error.startswith(f'Post "{closed}": '), error)
            self.assertIn("refused", error)

        return self.check_failure(lambda policy: self.authorizer(closed, failure_policy=policy),
                                  check)

    @defer.inlineCallbacks
    def test_timeout_on_the_clock(self):
        self.service.answer = None
        for policy, verdict in (("Deny", DENY), ("NoOpinion", NO_OPINION)):
            webhook = self.authorizer(failure_policy=policy, timeout=2.0)
            asked = webhook.authorize(pods())
            got: list = []
            asked.addCallback(lambda d: got.append(d) or d)
            while len(self.service.pending) < (1 if policy == "Deny" else 2):
                yield deferLater(0.01)
            self.clock.advance(1.9)
            self.assertEqual(got, [])
            self.clock.advance(0.1)
            decision = yield asked
            self.assertEqual(decision, Decision(verdict, "",
                                                f'Post "{self.url}": context deadline exceeded'))

    @defer.inlineCallbacks
    def test_malformed_answers(self):
        answers = [
            (b"not json", "invalid SubjectAccessReview response: "),
            (b"[1]", "invalid SubjectAccessReview response: not a JSON object"),
            (json.dumps({"status": {"allowed": "yes"}}).encode(),
             "invalid SubjectAccessReview response: status.allowed is not a boolean"),
            (json.dumps({"kind": "Status", "status": "Failure"}).encode(),
             "invalid SubjectAccessReview response: kind 'Status'"),
        ]
        for body, expected in answers:
            def setup(policy, body=body):
                self.service.answer = body
                return self.authorizer(failure_policy=policy)

            yield self.check_failure(setup, lambda error, expected=expected: self.assertTrue(
                error.startswith(expected), error))

    @defer.inlineCallbacks
    def test_error_answers(self):
        """Answers other than 2xx in client-go's words (``NewGenericServerResponse``, or
        the Status sent); none of these is retried."""
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "message": "bad review", "reason": "BadRequest", "code": 400}
        for code, body, headers, expected in [
            (418, b"oops", {}, "the server responded with the status code 418 but did not "
                               "return more information"),
            (403, b"  go away\n", {}, "go away"),
            (403, b"{}", {b"content-type": b"application/json"}, "unknown"),
            (404, b"", {}, "the server could not find the requested resource"),
            (503, b"", {}, "the server is currently unable to handle the request"),
            (400, json.dumps(status).encode(), {b"content-type": b"application/json"},
             "bad review"),
        ]:
            def setup(policy, answer=(code, body, headers)):
                self.service.failures = [answer]
                return self.authorizer(failure_policy=policy)

            calls = len(self.service.reviews)
            yield self.check_failure(
                setup, lambda error, expected=expected: self.assertEqual(error, expected))
            self.assertEqual(len(self.service.reviews), calls + 2)  # once per policy


def deferLater(seconds):
    return task.deferLater(reactor, seconds, lambda: None)


class CacheTests(WebhookTestCase):
    @defer.inlineCallbacks
    def test_hits_and_expiry(self):
        webhook = self.authorizer(authorized_ttl=300, unauthorized_ttl=30)
        first = yield self.decide(webhook, pods())
        again = webhook.authorize(pods())
        self.assertIsInstance(again, Decision)  # at once, from the cache
        self.assertEqual(again, first)
        self.assertEqual(webhook.calls, 1)
        self.clock.advance(299)
        self.assertIsInstance(webhook.authorize(pods()), Decision)
        self.clock.advance(1)
        yield self.decide(webhook, pods())
        self.assertEqual(webhook.calls, 2)
        # Another request is another key; a denial lives for unauthorizedTTL.
        self.service.answer = {"status": {"allowed": False}}
        yield self.decide(webhook, pods(verb="delete"))
        self.clock.advance(29)
        self.assertEqual(webhook.authorize(pods(verb="delete")).verdict, NO_OPINION)
        self.clock.advance(1)
        yield self.decide(webhook, pods(verb="delete"))
        self.assertEqual(webhook.calls, 4)

    @defer.inlineCallbacks
    def test_cache_switched_off_and_failures_not_cached(self):
        webhook = self.authorizer(authorized_ttl=0)
        yield self.decide(webhook, pods())
        yield self.decide(webhook, pods())
        self.assertEqual(webhook.calls, 2)
        self.service.code, self.service.answer = 403, b"down"
        yield self.decide(webhook, pods(verb="list"))
        self.service.code, self.service.answer = 200, {"status": {"allowed": True}}
        decision = yield self.decide(webhook, pods(verb="list"))
        self.assertEqual(decision.verdict, ALLOW)
        self.flushLoggedErrors()


class MatchConditionTests(WebhookTestCase):
    IN_KUBE_SYSTEM = ("has(request.resourceAttributes) && "
                      "request.resourceAttributes.namespace == 'kube-system'")

    @defer.inlineCallbacks
    def test_all_true_calls(self):
        webhook = self.authorizer(conditions=[self.IN_KUBE_SYSTEM, "'dev' in request.groups"])
        decision = yield self.decide(webhook, pods())
        self.assertEqual(decision.verdict, ALLOW)
        self.assertEqual(webhook.calls, 1)

    def test_any_false_skips(self):
        webhook = self.authorizer(conditions=[self.IN_KUBE_SYSTEM, "request.user == 'bob'"])
        self.assertEqual(webhook.authorize(pods()), Decision(NO_OPINION))
        self.assertEqual(webhook.authorize(healthz()), Decision(NO_OPINION))
        self.assertEqual(webhook.calls, 0)

    def test_false_wins_over_an_error(self):
        webhook = self.authorizer(conditions=["request.extra['missing'][0] == 'x'",
                                              "request.user == 'bob'"])
        self.assertEqual(webhook.authorize(pods()), Decision(NO_OPINION))

    def test_error_follows_failure_policy(self):
        broken = "request.extra['missing'][0] == 'x'"
        for policy, verdict in (("Deny", DENY), ("NoOpinion", NO_OPINION)):
            webhook = self.authorizer(conditions=[broken, "true"], failure_policy=policy)
            decision = webhook.authorize(pods())
            self.assertEqual(decision.verdict, verdict)
            self.assertTrue(decision.error.startswith(
                f"cel evaluation error: expression '{broken}' resulted in error: "),
                decision.error)
            self.assertEqual(webhook.calls, 0)

    def test_request_variable(self):
        env_checks = {
            "request.user == 'alice' && request.uid == '7'": True,
            "request.extra['scopes'] == ['a']": True,
            "has(request.nonResourceAttributes)": False,
            "has(request.resourceAttributes.name)": True,  # present even when empty
            "request.resourceAttributes.name == ''": True,
        }
        attributes = pods(uid="7", extra=(("scopes", ("a",)),))
        for expression, expected in env_checks.items():
            program = sar.compile_condition(expression)
            self.assertEqual(program.evaluate({"request": sar.request_value(attributes)}),
                             expected, expression)
