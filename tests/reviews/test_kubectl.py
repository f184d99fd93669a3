"""
The real kubectl against a real server (default chain: AlwaysAllow, the admin
kubeconfig).  ``explain`` and ``create -f`` find the reviews through discovery.  The
``kubectl auth`` commands use client-go's typed clients, whose paths name upstream's
groups (``/apis/authorization.k8s.io/v1/selfsubjectaccessreviews``), which this server
does not serve under those names: those tests are skipped until it does.
"""

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from tests.e2e import test_clients

TYPED_GROUPS = ("kubectl auth posts to authorization.k8s.io / authentication.k8s.io, "
                "not served under those names")


class KubectlReviewTests(TestCase):
    timeout = test_clients.KubectlTests.timeout
    setUp = test_clients.KubectlTests.setUp
    run_kubectl = test_clients.KubectlTests.run_kubectl

    @inlineCallbacks
    def test_explain_and_create(self):
        r = yield self.run_kubectl("explain", "selfsubjectaccessreviews.spec.resourceAttributes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("namespace", r.stdout)
        review = ("apiVersion: authorization.platform.io/v1\nkind: SubjectAccessReview\n"
                  "spec:\n  user: jane\n  resourceAttributes:\n    verb: get\n"
                  "    resource: pods\n")
        # --validate=false: kubectl's client-side validation fails to parse this group's
        # OpenAPI (open; see the report), explain reads it fine.
        r = yield self.run_kubectl("create", "--validate=false", "-f", "-", "-o",
                                   "jsonpath={.status.allowed}",
                                   stdin=review)
        self.assertEqual((r.returncode, r.stdout), (0, "true"), r.stderr)

    @inlineCallbacks
    def test_can_i(self):
        r = yield self.run_kubectl("auth", "can-i", "get", "pods")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "yes"), r.stderr)
        r = yield self.run_kubectl("auth", "can-i", "--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(["*.*", "[]", "[]", "[*]"], [line.split() for line in r.stdout.splitlines()])
    test_can_i.skip = TYPED_GROUPS

    @inlineCallbacks
    def test_whoami(self):
        r = yield self.run_kubectl("auth", "whoami", "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"username": "admin"', r.stdout)
    test_whoami.skip = TYPED_GROUPS
