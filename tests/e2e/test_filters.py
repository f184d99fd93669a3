"""
The filter chain on a real server: Audit-Id, authorizers and authenticators that answer
later, impersonation, and the in-flight limit's 429.
"""

from __future__ import annotations

from twisted.internet import reactor, task
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from platformd.auth.interfaces import ALLOW, DENY, Decision
from tests.e2e.harness import Client, start_token_server, token_client


class Later:
    """Answers after a real reactor delay, as a webhook or a JWKS fetch would."""

    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def authorize(self, attributes):
        self.asked.append((attributes.user.name, attributes.info.verb,
                           attributes.info.resource))
        return task.deferLater(reactor, 0.05, self.answer, attributes)

    def authenticate(self, request):
        return task.deferLater(reactor, 0.05, self.answer, request)


class FilterChainTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        self.server = yield start_token_server(self, 'secret-1,alice,uid-1,"devs"\n')
        self.admin = Client(self, self.server.pki_dir, self.server.port_number)
        self.alice = token_client(self, self.server, "secret-1")

    @inlineCallbacks
    def test_audit_id(self):
        r = yield self.admin.get("/api/v1/namespaces/default",
                                 headers={"Audit-ID": "trace-me-1"})
        self.assertEqual(r.header("audit-id"), "trace-me-1")
        r = yield self.admin.get("/api/v1/namespaces/nope")
        self.assertEqual((r.code, len(r.header("audit-id"))), (404, 36))

    @inlineCallbacks
    def test_authorizer_answering_later(self):
        """
        A slow authorizer (a webhook) delays the answer without blocking the server.  A
        namespace is its own namespace in upstream's request info, hence the message.
        """
        slow = Later(lambda a: Decision(ALLOW if a.info.verb != "delete" else DENY, "no"))
        self.server.api.authorizer.authorizers = [slow]
        r = yield self.alice.get("/api/v1/namespaces/default")
        self.assertEqual(r.code, 200, r.body)
        r = yield self.alice.delete("/api/v1/namespaces/default")
        self.assertEqual(r.code, 403)
        self.assertEqual(r.json()["message"],
                         'namespaces "default" is forbidden: User "alice" cannot delete '
                         'resource "namespaces" in API group "" in the namespace "default": no')
        self.assertEqual(slow.asked, [("alice", "get", "namespaces"),
                                      ("alice", "delete", "namespaces")])

    @inlineCallbacks
    def test_authenticator_answering_later(self):
        from platformd.auth.interfaces import UserInfo
        chain = self.server.api.authenticator.authenticators
        chain.insert(0, Later(lambda request: UserInfo("carol", "", ("system:authenticated",))
                              if request.getHeader(b"x-carol") else None))
        seen = Later(lambda a: Decision(ALLOW))
        self.server.api.authorizer.authorizers = [seen]
        r = yield self.alice.get("/api/v1/namespaces", headers={"X-Carol": "1"})
        self.assertEqual(r.code, 200, r.body)
        r = yield self.alice.get("/api/v1/namespaces")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual([who for who, _, _ in seen.asked], ["carol", "alice"])

    @inlineCallbacks
    def test_impersonation(self):
        """The admin may impersonate; the request then runs as the impersonated user."""
        seen = Later(lambda a: Decision(ALLOW))
        self.server.api.authorizer.authorizers = [seen]
        r = yield self.admin.get("/api/v1/namespaces/default/configmaps",
                                 headers={"Impersonate-User": "jane",
                                          "Impersonate-Group": "devs"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(seen.asked, [("admin", "impersonate", "users"),
                                      ("admin", "impersonate", "groups"),
                                      ("jane", "list", "configmaps")])

    @inlineCallbacks
    def test_too_many_requests(self):
        """Over the in-flight limit: upstream's plain-text 429; system:masters still served."""
        limit = self.server.api.max_in_flight
        limit.readonly = 1
        limit.in_flight[False] += 1  # a read in flight (0 would mean no limit)
        self.addCleanup(limit.in_flight.__setitem__, False, 0)
        r = yield self.alice.get("/api/v1/namespaces")
        self.assertEqual((r.code, r.body, r.header("retry-after")),
                         (429, b"Too many requests, please try again later.\n", "1"))
        r = yield self.admin.get("/api/v1/namespaces")
        self.assertEqual(r.code, 200)

    @inlineCallbacks
    def test_request_timeout(self):
        """A request slower than its ?timeout= gets upstream's 504 over the wire; the
        server keeps serving (the slot it held is free again)."""
        self.server.api.authorizer.authorizers = [Later(lambda a: Decision(ALLOW))]
        r = yield self.alice.get("/api/v1/namespaces/default?timeout=10ms")
        self.assertEqual((r.code, r.header("content-type")),
                         (504, "text/plain; charset=utf-8"))
        self.assertEqual(r.json()["message"],
                         "Timeout: request did not complete within the allotted timeout")
        self.assertEqual(len(r.header("audit-id")), 36)
        self.assertEqual(self.server.api.max_in_flight.in_flight, {False: 0, True: 0})
        r = yield self.alice.get("/api/v1/namespaces/default?timeout=5s")
        self.assertEqual(r.code, 200, r.body)
