"""
The real kubectl against a real server (RBAC, the admin kubeconfig).  ``explain`` and
``create -f`` find the reviews through discovery.  The ``kubectl auth`` commands use
client-go's typed clients, whose paths name upstream's groups
(``/apis/authorization.k8s.io/v1/selfsubjectaccessreviews``, in
``application/vnd.kubernetes.protobuf``): the server answers there too (an undiscovered
alias, authorized as the platform group), so they work unchanged.
"""

from twisted.internet.defer import inlineCallbacks

from tests.e2e import test_clients


class KubectlReviewTests(test_clients.KubectlCase):
    @inlineCallbacks
    def test_explain_and_create(self):
        r = yield self.run_kubectl("explain", "selfsubjectaccessreviews.spec.resourceAttributes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("namespace", r.stdout)
        # The daemon authorizes with RBAC: jane holds nothing, system:masters everything.
        review = ("apiVersion: authorization.platform.io/v1\nkind: SubjectAccessReview\n"
                  "spec:\n  user: jane\n  resourceAttributes:\n    verb: get\n"
                  "    resource: pods\n")
        # --validate=false: kubectl's client-side validation fails to parse this group's
        # OpenAPI (open; see the report), explain reads it fine.
        r = yield self.run_kubectl("create", "--validate=false", "-f", "-", "-o",
                                   "jsonpath={.status.allowed}",
                                   stdin=review)
        self.assertEqual((r.returncode, r.stdout), (0, "false"), r.stderr)
        r = yield self.run_kubectl("create", "--validate=false", "-f", "-", "-o",
                                   "jsonpath={.status.allowed}",
                                   stdin=review + "  groups: [system:masters]\n")
        self.assertEqual((r.returncode, r.stdout), (0, "true"), r.stderr)

    @inlineCallbacks
    def test_can_i(self):
        """kubectl auth can-i, unchanged (its typed client posts to authorization.k8s.io)."""
        r = yield self.run_kubectl("auth", "can-i", "get", "pods")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "yes"), r.stderr)
        r = yield self.run_kubectl("auth", "can-i", "get", "pods", "--as", "jane")
        self.assertEqual((r.returncode, r.stdout.strip()), (1, "no"), r.stderr)
        r = yield self.run_kubectl("auth", "can-i", "--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(["*.*", "[]", "[]", "[*]"], [line.split() for line in r.stdout.splitlines()])
        r = yield self.run_kubectl("auth", "can-i", "--list", "--as", "jane")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.split() for line in r.stdout.splitlines()]
        self.assertIn(["selfsubjectaccessreviews.authorization.platform.io", "[]", "[]",
                       "[create]"], rows)
        self.assertNotIn(["*.*", "[]", "[]", "[*]"], rows)

    @inlineCallbacks
    def test_whoami(self):
        r = yield self.run_kubectl("auth", "whoami", "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"username": "admin"', r.stdout)
        r = yield self.run_kubectl("auth", "whoami", "--as", "jane", "--as-group", "devs")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("jane", r.stdout)
        self.assertIn("devs", r.stdout)
