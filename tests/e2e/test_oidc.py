"""
JWT/OIDC authentication on a real server against a real HTTPS issuer: the legacy
--oidc-* flags, an AuthenticationConfiguration file with CEL mappings, and
`kubectl auth whoami` with a kubeconfig holding the ID token.
"""

from __future__ import annotations

import json
import os
import subprocess

from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread

from tests.authn.helpers import IssuerTestCase, document, jwt_entry
from tests.e2e.harness import Client, start_server
from tests.e2e.test_clients import kubectl_binary

REVIEW = "/apis/authentication.platform.io/v1/selfsubjectreviews"


class OIDCTests(IssuerTestCase):
    timeout = 60

    def bearer(self, server, token):
        return Client(self, server.pki_dir, server.port_number, identity=None, token=token)

    @inlineCallbacks
    def whoami(self, server, token):
        r = yield self.bearer(server, token).post(REVIEW, {})
        return r

    @inlineCallbacks
    def test_legacy_flags(self):
        ca = os.path.abspath(self.mktemp())
        with open(ca, "w") as f:
            f.write(self.ca)
        server = yield start_server(self, "--oidc-issuer-url", self.url, "--oidc-client-id",
                                    "platform", "--oidc-ca-file", ca, "--oidc-groups-claim",
                                    "groups", "--oidc-groups-prefix", "oidc:")
        r = yield self.whoami(server, self.token({"groups": ["devs"]}))
        self.assertEqual(r.code, 201, r.body)
        # Upstream's mapping of an empty --oidc-username-prefix with claim sub: "<issuer>#".
        self.assertEqual(r.json()["status"]["userInfo"],
                         {"username": f"{self.url}#alice",
                          "groups": ["oidc:devs", "system:authenticated"]})
        for bad in (self.token(aud=["other"]), self.token(exp=1), "not-a-jwt"):
            r = yield self.whoami(server, bad)
            self.assertEqual((r.code, r.json()["message"]), (401, "Unauthorized"))

    @inlineCallbacks
    def test_configuration_file_and_kubectl_whoami(self):
        path = os.path.abspath(self.mktemp())
        with open(path, "wb") as f:
            f.write(document(jwt_entry(
                self.url, ca=self.ca,
                username={"expression": "'oidc:' + claims.sub"},
                groups={"claim": "groups", "prefix": ""},
                uid={"claim": "sub"},
                extra=[{"key": "example.com/team", "valueExpression": "claims.team"}],
                userValidationRules=[{"expression": "!user.username.startsWith('system:')",
                                      "message": "no system users"}])))
        server = yield start_server(self, "--authentication-config", path)
        token = self.token({"groups": ["devs"], "team": "blue"})
        r = yield self.whoami(server, token)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["status"]["userInfo"], {
            "username": "oidc:alice", "uid": "alice",
            "groups": ["devs", "system:authenticated"],
            "extra": {"example.com/team": ["blue"]}})
        kubectl = kubectl_binary()
        if kubectl is None:
            return
        kubeconfig = os.path.abspath(self.mktemp())
        with open(os.path.join(server.data_dir, "admin.kubeconfig")) as f:
            admin = f.read()
        config = json.loads(json.dumps(__import__("yaml").safe_load(admin)))
        config["users"] = [{"name": "oidc", "user": {"token": token}}]
        config["contexts"][0]["context"]["user"] = "oidc"
        with open(kubeconfig, "w") as f:
            json.dump(config, f)
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        env.pop("KUBECONFIG", None)
        result = yield deferToThread(subprocess.run,
                                     [kubectl, "--kubeconfig", kubeconfig, "auth", "whoami",
                                      "-o", "json"], capture_output=True, text=True, env=env,
                                     timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        info = json.loads(result.stdout)["status"]["userInfo"]
        self.assertEqual((info["username"], info["uid"], info["extra"]),
                         ("oidc:alice", "alice", {"example.com/team": ["blue"]}))
