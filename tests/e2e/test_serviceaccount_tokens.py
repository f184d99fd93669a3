"""
Service-account tokens on a real server: minted with TokenRequest, used as a bearer
token (also by kubectl through a kubeconfig), refused once the bound pod is deleted; a
token the token file does not know still reaches the other token authenticators.
"""

from __future__ import annotations

import json
import os
import subprocess

import yaml
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.e2e.harness import Client, start_token_server, token_client
from tests.e2e.test_clients import kubectl_binary

SA = "/api/v1/namespaces/default/serviceaccounts"
WHOAMI = "/apis/authentication.platform.io/v1/selfsubjectreviews"


class ServiceAccountTokenTests(TestCase):
    timeout = 60

    @inlineCallbacks
    def setUp(self):
        # A token file is configured too: its authenticator must let other tokens pass.
        self.server = yield start_token_server(self, "static-1,alice,1\n")
        self.admin = Client(self, self.server.pki_dir, self.server.port_number)
        r = yield self.admin.post(SA, {"metadata": {"name": "robot"}})
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def mint(self, body=None):
        r = yield self.admin.post(f"{SA}/robot/token", body or {})
        self.assertEqual(r.code, 201, r.body)
        return r.json()["status"]["token"]

    @inlineCallbacks
    def test_token_authenticates_and_kubectl_uses_it(self):
        token = yield self.mint()
        r = yield token_client(self, self.server, token).post(WHOAMI, {})
        self.assertEqual(r.code, 201, r.body)
        info = r.json()["status"]["userInfo"]
        self.assertEqual((info["username"], info["groups"]),
                         ("system:serviceaccount:default:robot",
                          ["system:serviceaccounts", "system:serviceaccounts:default",
                           "system:authenticated"]))
        # Authorization applies: the robot holds no binding.
        r = yield token_client(self, self.server, token).get("/api/v1/namespaces/default/pods")
        self.assertEqual(r.code, 403)
        r = yield token_client(self, self.server, "static-1").post(WHOAMI, {})
        self.assertEqual(r.json()["status"]["userInfo"]["username"], "alice")
        r = yield token_client(self, self.server, token + "x").post(WHOAMI, {})
        self.assertEqual((r.code, r.json()["message"]), (401, "Unauthorized"))
        kubectl = kubectl_binary()
        if kubectl is None:
            return
        with open(os.path.join(self.server.data_dir, "admin.kubeconfig")) as f:
            config = yaml.safe_load(f)
        config["users"] = [{"name": "robot", "user": {"token": token}}]
        config["contexts"][0]["context"]["user"] = "robot"
        kubeconfig = os.path.abspath(self.mktemp())
        with open(kubeconfig, "w") as f:
            json.dump(config, f)
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        env.pop("KUBECONFIG", None)
        result = yield deferToThread(subprocess.run, [kubectl, "--kubeconfig", kubeconfig,
                                                      "auth", "whoami", "-o", "json"],
                                     capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["status"]["userInfo"]["username"],
                         "system:serviceaccount:default:robot")

    @inlineCallbacks
    def test_bound_pod_deleted(self):
        r = yield self.admin.post("/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "robot",
                     "containers": [{"name": "c", "image": "busybox"}]}})
        self.assertEqual(r.code, 201, r.body)
        bound = {"spec": {"boundObjectRef": {
            "kind": "Pod", "apiVersion": "v1", "name": "p", "uid": r.json()["metadata"]["uid"]}}}
        used = yield self.mint(bound)
        unused = yield self.mint(bound)
        r = yield token_client(self, self.server, used).post(WHOAMI, {})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.admin.delete("/api/v1/namespaces/default/pods/p")
        self.assertEqual(r.code, 200, r.body)
        # A token not yet seen is checked now: its pod is gone.  (One already accepted
        # stays cached for the token cache's 10 s, as upstream's.)
        r = yield token_client(self, self.server, unused).post(WHOAMI, {})
        self.assertEqual(r.code, 401)

    @inlineCallbacks
    def test_openid_documents(self):
        anonymous = Client(self, self.server.pki_dir, self.server.port_number, identity=None)
        r = yield self.admin.get("/.well-known/openid-configuration")
        self.assertEqual((r.code, r.json()["issuer"]), (200, "https://platform.default.svc"))
        r = yield self.admin.get("/openid/v1/jwks")
        self.assertEqual((r.code, len(r.json()["keys"])), (200, 1))
        r = yield anonymous.get("/openid/v1/jwks")
        self.assertEqual(r.code, 401)
