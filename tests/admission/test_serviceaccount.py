"""
The ServiceAccount admission plugin (platformd/admission/serviceaccount.py) through the
in-memory server: defaulting to ``default``, refusing a pod whose service account does
not exist (upstream's message), image pull secrets, mountable secrets, mirror pods.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.stub import StubServer

PODS = "/api/v1/namespaces/default/pods"
ACCOUNTS = "/api/v1/namespaces/default/serviceaccounts"


def pod(name="p", **spec):
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


class ServiceAccountTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.client = self.stub.client()

    def test_defaults_to_default(self):
        """A pod naming no service account runs as ``default``."""
        r = self.client.post(PODS, pod())
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"]["serviceAccountName"], "default")
        self.assertEqual(r.json()["spec"]["serviceAccount"], "default")

    def test_new_namespace(self):
        """The controller has made ``default`` in a new namespace by the time a pod comes."""
        self.assertEqual(self.client.post("/api/v1/namespaces",
                                          {"metadata": {"name": "ns1"}}).code, 201)
        r = self.client.post("/api/v1/namespaces/ns1/pods", pod())
        self.assertEqual(r.code, 201, r.body)

    def test_missing_account_refused(self):
        """Upstream's words: the service account is looked up and not found."""
        r = self.client.post(PODS, pod(serviceAccountName="robot"))
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["reason"], "Forbidden")
        self.assertEqual(r.json()["message"],
                         'pods "p" is forbidden: error looking up service account '
                         'default/robot: serviceaccount "robot" not found')

    def test_existing_account(self):
        self.assertEqual(self.client.post(ACCOUNTS, {"metadata": {"name": "robot"}}).code, 201)
        r = self.client.post(PODS, pod(serviceAccountName="robot"))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["spec"]["serviceAccountName"], "robot")

    def test_deprecated_field(self):
        """``serviceAccount`` alone names the account (upstream's v1 conversion)."""
        r = self.client.post(PODS, pod(serviceAccount="robot"))
        self.assertEqual(r.code, 403, r.body)
        self.assertIn("default/robot", r.json()["message"])

    def test_missing_default_waits_then_refuses(self):
        """A missing ``default`` is looked for again (ten times, 0.1 s apart), then the
        pod is refused."""
        self.stub.components.service_accounts.stop()
        self.assertEqual(self.client.delete(f"{ACCOUNTS}/default").code, 200)
        pending = self.client.start("POST", PODS, pod())
        for _ in range(8):
            self.stub.advance(0.1)
        self.assertEqual(pending.answered, [])
        self.stub.advance(0.11)
        r = pending.result()
        self.assertEqual(r.code, 403, r.body)
        self.assertIn('serviceaccount "default" not found', r.json()["message"])

    def test_default_appearing_while_waiting(self):
        """A ``default`` created while the pod waits lets it in."""
        controller = self.stub.components.service_accounts
        controller.stop()
        self.client.delete(f"{ACCOUNTS}/default")
        pending = self.client.start("POST", PODS, pod())
        self.assertEqual(pending.answered, [])
        controller.start()
        self.stub.advance(0.1)
        self.assertEqual(pending.result().code, 201)

    def test_image_pull_secrets_copied(self):
        """A pod without imagePullSecrets gets its service account's."""
        self.client.post(ACCOUNTS, {"metadata": {"name": "puller"},
                                    "imagePullSecrets": [{"name": "registry"}]})
        r = self.client.post(PODS, pod(serviceAccountName="puller"))
        self.assertEqual(r.json()["spec"]["imagePullSecrets"], [{"name": "registry"}])
        r = self.client.post(PODS, pod("q", serviceAccountName="puller",
                                       imagePullSecrets=[{"name": "own"}]))
        self.assertEqual(r.json()["spec"]["imagePullSecrets"], [{"name": "own"}])

    def test_enforce_mountable_secrets(self):
        """With the annotation, a pull secret the account does not reference is refused."""
        self.client.post(ACCOUNTS, {
            "metadata": {"name": "strict",
                         "annotations": {"platform.io/enforce-mountable-secrets": "true"}},
            "imagePullSecrets": [{"name": "ok"}]})
        r = self.client.post(PODS, pod(serviceAccountName="strict",
                                       imagePullSecrets=[{"name": "ok"}, {"name": "other"}]))
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.json()["message"],
                         'pods "p" is forbidden: imagePullSecrets[1].name="other" is not '
                         "allowed because service account strict does not reference that "
                         "imagePullSecret")
        r = self.client.post(PODS, pod(serviceAccountName="strict",
                                       imagePullSecrets=[{"name": "ok"}]))
        self.assertEqual(r.code, 201, r.body)

    def test_mirror_pod(self):
        """A mirror pod is not defaulted and may name no account and no secret."""
        mirror = {"platform.io/config.mirror": "x"}
        body = pod()
        body["metadata"]["annotations"] = mirror
        r = self.client.post(PODS, body)
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("serviceAccountName", r.json()["spec"])
        body = pod("m2", serviceAccountName="default")
        body["metadata"]["annotations"] = mirror
        r = self.client.post(PODS, body)
        self.assertEqual(r.json()["message"], 'pods "m2" is forbidden: a mirror pod may not '
                                              "reference service accounts")
        body = pod("m3", imagePullSecrets=[{"name": "s"}])
        body["metadata"]["annotations"] = mirror
        r = self.client.post(PODS, body)
        self.assertEqual(r.json()["message"], 'pods "m3" is forbidden: a mirror pod may not '
                                              "reference secrets")

    def test_updates_untouched(self):
        """Only creates are checked: an update of a pod whose account is gone passes."""
        self.client.post(ACCOUNTS, {"metadata": {"name": "robot"}})
        self.client.post(PODS, pod(serviceAccountName="robot"))
        self.client.delete(f"{ACCOUNTS}/robot")
        r = self.client.patch(f"{PODS}/p", {"metadata": {"labels": {"a": "b"}}})
        self.assertEqual(r.code, 200, r.body)

    def test_disabled(self):
        """Without the plugin a pod keeps no account and may name a missing one."""
        stub = StubServer(admission_names=["NamespaceLifecycle"])
        self.addCleanup(stub.stop)
        r = stub.client().post(PODS, pod(serviceAccountName="robot"))
        self.assertEqual(r.code, 201, r.body)
