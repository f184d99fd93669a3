"""The daemon's authorizer chain from its flags (platformd/auth/fromflags.py)."""

import os

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.authorizers import AlwaysAllow, AuthorizerChain, PrivilegedGroups
from platformd.auth.fromflags import AuthFlagError, authorizers_from_flags
from platformd.auth.authorizers import AlwaysDeny
from platformd.auth.webhook import WebhookAuthorizer
from platformd.options import Options

RBAC = object()


def options(*args):
    o = Options()
    o.parseOptions(list(args))
    return o


class FromFlagsTests(SynchronousTestCase):
    def chain_for(self, *args):
        chain = AuthorizerChain([])
        reloader = authorizers_from_flags(options(*args), chain, RBAC, Clock())
        return chain.authorizers, reloader

    def test_default_is_rbac_after_system_masters(self):
        authorizers, reloader = self.chain_for()
        self.assertEqual((type(authorizers[0]), authorizers[1:], reloader),
                         (PrivilegedGroups, [RBAC], None))

    def test_modes_in_order(self):
        authorizers, _ = self.chain_for("--authorization-mode", "AlwaysDeny,RBAC,AlwaysAllow")
        self.assertEqual([type(a) for a in authorizers[1:2] + authorizers[3:]],
                         [AlwaysDeny, AlwaysAllow])
        self.assertIs(authorizers[2], RBAC)

    def test_webhook_mode_from_its_kubeconfig(self):
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "clusters: [{name: s, cluster: {server: 'https://127.0.0.1:1/authz'}}]\n"
                    "users: [{name: u, user: {token: t}}]\n"
                    "contexts: [{name: c, context: {cluster: s, user: u}}]\n")
        authorizers, _ = self.chain_for("--authorization-mode", "Webhook,RBAC",
                                        "--authorization-webhook-config-file", path)
        self.assertIsInstance(authorizers[1], WebhookAuthorizer)
        self.assertEqual(authorizers[1].url, "https://127.0.0.1:1/authz")

    def test_bad_webhook_kubeconfig(self):
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write("- not a kubeconfig\n")
        with self.assertRaises(AuthFlagError) as e:
            self.chain_for("--authorization-mode", "Webhook",
                           "--authorization-webhook-config-file", path)
        self.assertTrue(str(e.exception).startswith("--authorization-webhook-config-file: "))

    def test_config_file_and_its_reloader(self):
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write("apiVersion: apiserver.config.platform.io/v1\n"
                    "kind: AuthorizationConfiguration\n"
                    "authorizers:\n- type: RBAC\n  name: rbac\n"
                    "- type: AlwaysDeny\n  name: alwaysdeny\n")
        authorizers, reloader = self.chain_for("--authorization-config", path)
        self.assertEqual([type(a) for a in authorizers[::2]], [PrivilegedGroups, AlwaysDeny])
        self.assertIs(authorizers[1], RBAC)
        self.assertIsNotNone(reloader)
