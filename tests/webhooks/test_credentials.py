"""
The webhook plugins' WebhookAdmissionConfiguration (admission/webhooks/config.py), its
kubeconfig read as client-go reads it (platformd/files/kubeconfig.py), the user chosen per
webhook host as upstream's AuthenticationInfoResolver chooses it (authinfo.py) and the
credentials made from that user (credentials.py), each message as upstream's.
"""

from __future__ import annotations

import base64
import json
import os
import shutil

import yaml
from twisted.internet.task import Clock
from twisted.logger import capturedLogs, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from platformd.admission.config import AdmissionConfigError
from platformd.admission.webhooks.authinfo import AuthInfoResolver, target
from platformd.admission.webhooks.config import kubeconfig_file
from platformd.admission.webhooks.credentials import (
    ANONYMOUS, CredentialsError, TOKEN_FILE_PERIOD, credentials,
)
from platformd.admission.webhooks.source import service_url
from platformd.files.pki import ensure_pki

HEAD = "apiVersion: apiserver.config.platform.io/v1\nkind: WebhookAdmissionConfiguration\n"


class ConfigTests(SynchronousTestCase):
    """upstream's webhook/config/kubeconfig_test.go TestLoadConfig, in this API group."""

    def assertRefused(self, text: str, message: str):
        e = self.assertRaises(AdmissionConfigError, kubeconfig_file, text.encode())
        self.assertEqual(str(e), message)

    def test_valid(self):
        self.assertEqual(kubeconfig_file((HEAD + "kubeConfigFile: /foo\n").encode()), "/foo")
        self.assertEqual(kubeconfig_file(json.dumps({
            "apiVersion": "apiserver.config.platform.io/v1",
            "kind": "WebhookAdmissionConfiguration", "kubeConfigFile": "/foo"}).encode()),
            "/foo")

    def test_no_configuration_or_no_kubeconfig(self):
        """Both mean no credentials, as upstream (kubeConfigFile may be empty)."""
        self.assertEqual(kubeconfig_file(None), "")
        self.assertEqual(kubeconfig_file(HEAD.encode()), "")

    def test_empty(self):
        self.assertRefused("", "Object 'Kind' is missing in ''")

    def test_unknown_kind(self):
        self.assertRefused('{"kind":"Unknown","apiVersion":"v1"}',
                           'no kind "Unknown" is registered for version "v1" in scheme')

    def test_internal_kind_name(self):
        """WebhookAdmission names the internal type only: v1 registers
        WebhookAdmissionConfiguration."""
        self.assertRefused("apiVersion: apiserver.config.platform.io/v1\n"
                           "kind: WebhookAdmission\nkubeConfigFile: /foo\n",
                           'no kind "WebhookAdmission" is registered for version '
                           '"apiserver.config.platform.io/v1" in scheme')

    def test_relative_kubeconfig(self):
        self.assertRefused(HEAD + "kubeConfigFile: relative/path\n",
                           'kubeConfigFile: Invalid value: "relative/path": must be an '
                           "absolute file path")

    def test_strict(self):
        self.assertRefused(HEAD + "kubeconfigFile: /foo\n",
                           'strict decoding error: unknown field "kubeconfigFile"')
        self.assertRefused(HEAD + "kubeConfigFile: 5\n",
                           "json: cannot unmarshal number into Go struct field "
                           "WebhookAdmission.kubeConfigFile of type string")

    def test_static_manifests_forbidden(self):
        """The ManifestBasedAdmissionControlConfig gate is not served: always off."""
        self.assertRefused(HEAD + "kubeConfigFile: /foo\nstaticManifestsDir: /etc/x\n",
                           "staticManifestsDir: Forbidden: staticManifestsDir requires the "
                           "ManifestBasedAdmissionControlConfig feature gate to be enabled")


class Files:
    """A temporary directory of kubeconfigs, with the test PKI's admin pair beside them."""

    def __init__(self, testcase):
        self.dir = os.path.abspath(testcase.mktemp())
        paths = ensure_pki(self.dir, [], [], "https://127.0.0.1:1")
        pki = os.path.dirname(paths.ca_cert)
        self.cert = os.path.join(pki, "admin.crt")
        self.key = os.path.join(pki, "admin.key")
        self.ca_key = os.path.join(pki, "ca.key")

    def write(self, name: str, content) -> str:
        path = os.path.join(self.dir, name)
        data = content if isinstance(content, (str, bytes)) else yaml.safe_dump(content)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    def kubeconfig(self, users: dict, **extra) -> str:
        return self.write("webhooks.kubeconfig", {
            "apiVersion": "v1", "kind": "Config", **extra,
            "users": [{"name": name, "user": user} for name, user in users.items()]})


class KubeconfigTests(SynchronousTestCase):
    """The kubeconfig is read when the plugin is made; client-go's loading errors."""

    def setUp(self):
        self.files = Files(self)

    def assertRefused(self, path: str, message: str):
        e = self.assertRaises(AdmissionConfigError, AuthInfoResolver.load, path, Clock())
        self.assertEqual(str(e), message)

    def test_missing(self):
        path = os.path.join(self.files.dir, "nope")
        self.assertRefused(path, f"stat {path}: no such file or directory")

    def test_unreadable(self):
        self.assertRefused(self.files.dir, f'error loading config file "{self.files.dir}": '
                                           f"read {self.files.dir}: is a directory")

    def test_not_yaml(self):
        path = self.files.write("k", "users: [\n")
        e = self.assertRaises(AdmissionConfigError, AuthInfoResolver.load, path, Clock())
        self.assertTrue(str(e).startswith(
            f'error loading config file "{path}": error converting YAML to JSON: '), str(e))

    def test_not_an_object(self):
        path = self.files.write("k", "- a\n")
        self.assertRefused(path, f'error loading config file "{path}": couldn\'t get '
                                 "version/kind; json parse error: json: cannot unmarshal "
                                 'array into Go value of type struct { APIVersion string '
                                 '"json:\\"apiVersion,omitempty\\""; Kind string '
                                 '"json:\\"kind,omitempty\\"" }')

    def test_wrong_types(self):
        path = self.files.write("k", "users: 5\n")
        self.assertRefused(path, f'error loading config file "{path}": json: cannot '
                                 "unmarshal number into Go struct field Config.users of "
                                 "type []v1.NamedAuthInfo")
        path = self.files.kubeconfig({"u": {"token": 5}})
        self.assertRefused(path, f'error loading config file "{path}": json: cannot '
                                 "unmarshal number into Go struct field "
                                 "AuthInfo.users.user.token of type string")

    def test_bad_base64(self):
        path = self.files.kubeconfig({"u": {"client-certificate-data": "ab!c"}})
        self.assertRefused(path, f'error loading config file "{path}": illegal base64 data '
                                 "at input byte 2")
        path = self.files.kubeconfig({"u": {"client-key-data": "abcde"}})
        self.assertRefused(path, f'error loading config file "{path}": illegal base64 data '
                                 "at input byte 4")

    def test_unsupported_fields_logged(self):
        """exec and impersonation are not acted upon: one warning per user at startup,
        naming them; the user's other credentials are used."""
        path = self.files.kubeconfig({"*": {"token": "t", "exec": {"command": "x"},
                                            "as": "someone"}, "plain": {"token": "p"}})
        with capturedLogs() as events:
            resolver = AuthInfoResolver.load(path, Clock())
        self.assertEqual([formatEvent(e) for e in events], [
            f"webhook admission kubeconfig {path}: user '*' sets exec, as, not supported "
            "here: its webhooks are called without them"])
        self.assertEqual(resolver.credentials(Hook("https://h/")).headers(),
                         {b"Authorization": [b"Bearer t"]})

    def test_lenient(self):
        """No validation and unknown fields skipped, as RawConfig: an empty file, no
        contexts, clusters of any shape."""
        self.assertIsNone(AuthInfoResolver.load(self.files.write("e", ""), Clock())
                          .user_for("a:443"))
        path = self.files.kubeconfig({"*": {"token": "t", "color": "blue"}},
                                     clusters="anything", preferences={})
        self.assertEqual(AuthInfoResolver.load(path, Clock()).user_for("h:1").token, "t")


class Hook:
    """The parts of a compiled webhook the resolver reads."""

    def __init__(self, url="", service=None):
        self.service = service
        self.url = url or service_url(service)


class MatchingTests(SynchronousTestCase):
    """upstream's defaultAuthenticationInfoResolver.clientConfig, rule by rule."""

    def resolver(self, *names, **extra):
        path = Files(self).kubeconfig({name: {"token": name} for name in names}, **extra)
        return AuthInfoResolver.load(path, Clock())

    def chosen(self, resolver, target_: str):
        user = resolver.user_for(target_)
        return None if user is None else user.token

    def test_targets(self):
        """A URL's host:port (443 added when absent, Go's JoinHostPort brackets an IPv6
        host), a service's name.namespace.svc:port."""
        self.assertEqual(target(Hook("https://hooks.example.com:8443/x")),
                         "hooks.example.com:8443")
        self.assertEqual(target(Hook("https://hooks.example.com/x")), "hooks.example.com:443")
        self.assertEqual(target(Hook("https://[::1]:8443/x")), "[::1]:8443")
        self.assertEqual(target(Hook(service={"name": "hooks", "namespace": "ns",
                                              "port": 8443})), "hooks.ns.svc:8443")
        self.assertEqual(target(Hook(service={"name": "hooks", "namespace": "ns"})),
                         "hooks.ns.svc:443")

    def test_exact_then_wildcards_keeping_the_port(self):
        r = self.resolver("a.b.example.com:8443", "*.b.example.com:8443",
                          "*.example.com:8443", "*.example.com", "*")
        self.assertEqual(self.chosen(r, "a.b.example.com:8443"), "a.b.example.com:8443")
        self.assertEqual(self.chosen(r, "c.b.example.com:8443"), "*.b.example.com:8443")
        self.assertEqual(self.chosen(r, "c.d.example.com:8443"), "*.example.com:8443")
        # A wildcard without a port is for port 443 only.
        self.assertEqual(self.chosen(r, "c.example.com:9443"), "*")
        self.assertEqual(self.chosen(r, "c.example.com:443"), "*.example.com")

    def test_port_443_without_port(self):
        """On 443 the names without the port are tried after those with it."""
        r = self.resolver("hooks.ns.svc", "hooks.ns.svc:443", "*.svc")
        self.assertEqual(self.chosen(r, "hooks.ns.svc:443"), "hooks.ns.svc:443")
        r = self.resolver("hooks.ns.svc", "*.svc")
        self.assertEqual(self.chosen(r, "hooks.ns.svc:443"), "hooks.ns.svc")
        self.assertEqual(self.chosen(r, "other.ns.svc:443"), "*.svc")
        self.assertIsNone(self.chosen(r, "other.ns.svc:8443"))

    def test_default_then_current_context_then_none(self):
        r = self.resolver("ctx-user", "*", contexts=[
            {"name": "c", "context": {"user": "ctx-user", "cluster": "x"}}],
            **{"current-context": "c"})
        self.assertEqual(self.chosen(r, "anywhere:443"), "*")
        r = self.resolver("ctx-user", contexts=[{"name": "c", "context": {"user": "ctx-user"}}],
                          **{"current-context": "c"})
        self.assertEqual(self.chosen(r, "anywhere:443"), "ctx-user")
        r = self.resolver("ctx-user")
        self.assertIsNone(self.chosen(r, "anywhere:443"))

    def test_no_kubeconfig_anonymous(self):
        resolver = AuthInfoResolver.load("", Clock())
        self.assertIs(resolver.credentials(Hook("https://h/")), ANONYMOUS)
        self.assertEqual(ANONYMOUS.headers(), {})


class CredentialsTests(SynchronousTestCase):
    """restConfigFromKubeconfig and client-go's transport: what is sent, what fails."""

    def setUp(self):
        self.files = Files(self)
        self.clock = Clock()

    def make(self, user: dict):
        path = self.files.kubeconfig({"*": user})
        return credentials(AuthInfoResolver.load(path, self.clock).user_for("h:443"),
                           self.clock)

    def assertRefused(self, user: dict, message: str):
        e = self.assertRaises(CredentialsError, self.make, user)
        self.assertEqual(str(e), message)

    def authorization(self, made) -> list:
        return made.headers().get(b"Authorization", [])

    def test_token(self):
        self.assertEqual(self.authorization(self.make({"token": "s3cret"})), [b"Bearer s3cret"])

    def test_basic(self):
        made = self.make({"username": "ann", "password": "pw"})
        self.assertEqual(self.authorization(made),
                         [b"Basic " + base64.b64encode(b"ann:pw")])
        # client-go's HasBasicAuth is the username alone.
        self.assertEqual(self.authorization(self.make({"password": "pw"})), [])

    def test_token_file_read_again_each_minute(self):
        """Relative to the kubeconfig, trimmed, read again after 50 s; a failed read
        keeps the last token."""
        self.files.write("token", "one\n")
        made = self.make({"tokenFile": "token"})
        self.assertEqual(self.authorization(made), [b"Bearer one"])
        self.files.write("token", "two\n")
        self.clock.advance(TOKEN_FILE_PERIOD - 1)
        self.assertEqual(self.authorization(made), [b"Bearer one"])
        self.clock.advance(1)
        self.assertEqual(self.authorization(made), [b"Bearer two"])
        os.remove(os.path.join(self.files.dir, "token"))
        self.clock.advance(TOKEN_FILE_PERIOD)
        self.assertEqual(self.authorization(made), [b"Bearer two"])

    def test_token_and_token_file(self):
        """Both: the file's token once read, the inline one while it cannot be."""
        made = self.make({"token": "inline", "tokenFile": "missing"})
        self.assertEqual(self.authorization(made), [b"Bearer inline"])
        self.files.write("missing", "from-file")
        self.clock.advance(TOKEN_FILE_PERIOD)
        self.assertEqual(self.authorization(made), [b"Bearer from-file"])

    def test_client_certificate(self):
        made = self.make({"client-certificate": self.files.cert,
                          "client-key": self.files.key})
        self.assertIn(b"BEGIN CERTIFICATE", made.client_pem)
        self.assertEqual(made.headers(), {})
        with open(self.files.cert, "rb") as f:
            cert = base64.b64encode(f.read()).decode()
        with open(self.files.key, "rb") as f:
            key = base64.b64encode(f.read()).decode()
        made = self.make({"client-certificate-data": cert, "client-key-data": key})
        self.assertIn(b"PRIVATE KEY", made.client_pem)
        # One without the other is nothing, as client-go's HasCertAuth.
        self.assertEqual(self.make({"client-certificate": self.files.cert}).client_pem, b"")
        self.assertEqual(self.make({"client-key": self.files.key}).client_pem, b"")

    def test_file_errors(self):
        missing = os.path.join(self.files.dir, "missing")
        self.assertRefused({"tokenFile": missing},
                           f"open {missing}: no such file or directory")
        self.assertRefused({"client-certificate": missing, "client-key": self.files.key},
                           f"open {missing}: no such file or directory")

    def test_key_pair_errors(self):
        """Go's tls.X509KeyPair words."""
        self.assertRefused({"client-certificate": self.files.key,
                            "client-key": self.files.cert},
                           "tls: failed to find certificate PEM data in certificate input, "
                           "but did find a private key; PEM inputs may have been switched")
        empty = self.files.write("empty", "")
        self.assertRefused({"client-certificate": empty, "client-key": self.files.key},
                           "tls: failed to find any PEM data in certificate input")
        self.assertRefused({"client-certificate": self.files.cert, "client-key": empty},
                           "tls: failed to find any PEM data in key input")
        self.assertRefused({"client-certificate": self.files.cert,
                            "client-key": self.files.cert},
                           "tls: found a certificate rather than a key in the PEM for the "
                           "private key")
        self.assertRefused({"client-certificate": self.files.cert,
                            "client-key": self.files.ca_key},
                           "tls: private key does not match public key")

    def test_conflicts_and_auth_provider(self):
        self.assertRefused({"token": "t", "username": "ann"},
                           "username/password or bearer token may be set, but not both")
        self.assertRefused({"token": "t", "auth-provider": {"name": "gcp"}},
                           "auth provider not supported")

    def test_cached_per_target_errors_not(self):
        """Made once per host while it works; a failure is tried again next call."""
        token = self.files.write("token", "one")
        resolver = AuthInfoResolver.load(self.files.kubeconfig({"*": {"tokenFile": token}}),
                                         self.clock)
        hook = Hook("https://h/")
        self.assertIs(resolver.credentials(hook), resolver.credentials(hook))
        broken = AuthInfoResolver.load(self.files.kubeconfig(
            {"*": {"tokenFile": os.path.join(self.files.dir, "later")}}), self.clock)
        self.assertRaises(CredentialsError, broken.credentials, hook)
        shutil.copy(token, os.path.join(self.files.dir, "later"))
        self.assertEqual(broken.credentials(hook).headers(), {b"Authorization": [b"Bearer one"]})
