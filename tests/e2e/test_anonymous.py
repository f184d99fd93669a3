"""
Anonymous access (--anonymous-auth=true): no credentials is system:anonymous in
system:unauthenticated, then authorized like anyone (the bootstrap policy lets it read
/version and the health paths); wrong credentials stay 401.  Off by default (401).
"""

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, start_server, start_token_server, token_client


class AnonymousTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def test_on(self):
        server = yield start_token_server(self, "t1,alice,1\n", "--anonymous-auth", "true")
        anonymous = Client(self, server.pki_dir, server.port_number, identity=None)
        r = yield anonymous.get("/version")
        self.assertEqual(r.code, 200, r.body)
        r = yield anonymous.get("/api/v1/namespaces")
        self.assertEqual((r.code, r.json()["message"]),
                         (403, 'namespaces is forbidden: User "system:anonymous" cannot list '
                               'resource "namespaces" in API group "" at the cluster scope'))
        r = yield token_client(self, server, "wrong").get("/version")
        self.assertEqual((r.code, r.json()["reason"]), (401, "Unauthorized"))

    @inlineCallbacks
    def test_off_by_default(self):
        server = yield start_server(self)
        r = yield Client(self, server.pki_dir, server.port_number, identity=None).get("/version")
        self.assertEqual((r.code, r.json()["message"]), (401, "Unauthorized"))
