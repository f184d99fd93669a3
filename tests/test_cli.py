"""
The command line as an operator meets it: ``twistd platformd`` with bad flags, unreadable
files, unknown feature gates and a port in use prints one line and exits non-zero.
"""

import os
import signal
import socket
import subprocess
import sys

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from platformd.featuregates import DEFAULTS, FeatureGates
from platformd.options import Options
from tests.e2e.daemon import Server, free_port, write_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def twistd(*args, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n",
         "--pidfile=", "platformd", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


class CommandLineTests(SynchronousTestCase):
    def setUp(self):
        self.data = os.path.abspath(self.mktemp())

    def assertOneLineError(self, result, *fragments):
        self.assertNotEqual(result.returncode, 0)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_unknown_flag(self):
        """An unknown flag is one line and a non-zero exit."""
        self.assertOneLineError(twistd("--no-such-flag"), "no-such-flag")

    def test_unknown_feature_gate(self):
        """An unknown feature gate is a startup error naming it."""
        self.assertOneLineError(twistd("--feature-gates", "Bogus=true"), "Bogus")

    def test_bad_port(self):
        """A port that is not a number is refused."""
        self.assertOneLineError(twistd("--secure-port", "http"), "--secure-port")

    def test_unreadable_token_file(self):
        """An unreadable token file is refused, naming it."""
        self.assertOneLineError(twistd("--data-dir", self.data, "--token-auth-file",
                                       "/nonexistent/tokens.csv"), "/nonexistent/tokens.csv")

    def test_malformed_token_file(self):
        """A token file with a short line is refused with its line number."""
        os.makedirs(self.data)
        path = os.path.join(self.data, "tokens.csv")
        with open(path, "w") as f:
            f.write("good,alice,1\nbad\n")
        self.assertOneLineError(twistd("--data-dir", self.data, "--token-auth-file", path),
                                "line 2")

    def test_bad_authorization_mode(self):
        """--authorization-mode as upstream validates it: one line, naming the mode."""
        self.assertOneLineError(twistd("--authorization-mode", "RBAC,ABAC"),
                                'authorization-mode "ABAC" is not a valid mode')
        self.assertOneLineError(twistd("--authorization-mode", "Webhook"),
                                "authorization-mode Webhook's authorization config file not "
                                "passed")

    def test_bad_authorization_config(self):
        """A malformed --authorization-config is one line with upstream's field path."""
        os.makedirs(self.data)
        path = os.path.join(self.data, "authz.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: apiserver.config.platform.io/v1\n"
                    "kind: AuthorizationConfiguration\nauthorizers: []\n")
        self.assertOneLineError(twistd("--data-dir", self.data, "--authorization-config", path),
                                "authorizers: Required value")

    def test_authentication_flags(self):
        """--oidc-* flags and --authentication-config exclude each other, as upstream."""
        self.assertOneLineError(twistd("--authentication-config", "/etc/hostname",
                                       "--oidc-client-id", "c"),
                                "authentication-config file and oidc-* flags are mutually "
                                "exclusive")
        self.assertOneLineError(twistd("--anonymous-auth", "maybe"), "--anonymous-auth")

    def test_port_in_use(self):
        """A port in use is one line naming the address."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            result = twistd("--data-dir", self.data, "--secure-port", str(port))
        self.assertOneLineError(result, f"127.0.0.1:{port}")

    def test_data_dir_not_creatable(self):
        """A --data-dir that cannot be made is one line naming it (read at start, not
        when the service is constructed)."""
        os.makedirs(self.data)
        blocker = os.path.join(self.data, "file")
        with open(blocker, "w"):
            pass
        self.assertOneLineError(twistd("--data-dir", os.path.join(blocker, "d")),
                                "cannot create --data-dir")

    def test_cert_without_key(self):
        """--tls-cert-file without --tls-private-key-file is refused."""
        self.assertOneLineError(twistd("--tls-cert-file", __file__), "--tls-private-key-file")

    def test_unknown_admission_plugin(self):
        """An unknown admission plugin is one line in upstream's words."""
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--enable-admission-plugins", "Bogus,ServiceAccount"),
            'enable-admission-plugins plugin "Bogus" is unknown')

    def test_admission_plugin_enabled_and_disabled(self):
        """A plugin both enabled and disabled is refused, as upstream."""
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--enable-admission-plugins", "ServiceAccount",
                   "--disable-admission-plugins", "ServiceAccount"),
            "[ServiceAccount] in enable-admission-plugins and disable-admission-plugins "
            "overlapped")

    def test_bad_admission_config(self):
        """An AdmissionConfiguration that cannot be read is one line at startup."""
        os.makedirs(self.data)
        path = os.path.join(self.data, "admission.yaml")
        with open(path, "w") as f:
            f.write("plugins: []\n")
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--secure-port", "0",
                   "--admission-control-config-file", path),
            "failed to read plugin config: Object 'Kind' is missing in 'plugins: []'")
        missing = os.path.join(self.data, "nope.yaml")
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--secure-port", "0",
                   "--admission-control-config-file", missing),
            f'failed to read plugin config: unable to read admission control configuration '
            f'from "{missing}"')


    def write_admission_configuration(self, plugins: str) -> str:
        os.makedirs(self.data, exist_ok=True)
        path = os.path.join(self.data, "admission.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: apiserver.config.platform.io/v1\n"
                    "kind: AdmissionConfiguration\nplugins:\n" + plugins)
        return path

    def test_bad_webhook_admission_configuration(self):
        """A webhook plugin refusing its configuration is one line in upstream's
        InitPlugin words."""
        path = self.write_admission_configuration(
            "- name: ValidatingAdmissionWebhook\n  configuration:\n"
            "    apiVersion: apiserver.config.platform.io/v1\n"
            "    kind: WebhookAdmissionConfiguration\n"
            "    kubeConfigFile: relative.kubeconfig\n")
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--secure-port", "0",
                   "--admission-control-config-file", path),
            'couldn\'t init admission plugin "ValidatingAdmissionWebhook": kubeConfigFile: '
            'Invalid value: "relative.kubeconfig": must be an absolute file path')
        missing = os.path.join(self.data, "missing.kubeconfig")
        path = self.write_admission_configuration(
            "- name: MutatingAdmissionWebhook\n  configuration:\n"
            "    apiVersion: apiserver.config.platform.io/v1\n"
            "    kind: WebhookAdmissionConfiguration\n"
            f"    kubeConfigFile: {missing}\n")
        self.assertOneLineError(
            twistd("--data-dir", self.data, "--secure-port", "0",
                   "--admission-control-config-file", path),
            f'couldn\'t init admission plugin "MutatingAdmissionWebhook": stat {missing}: '
            "no such file or directory")

    def test_unknown_plugin_in_admission_configuration(self):
        """A name no enabled plugin has (NotARealPlugin, or a plugin disabled) is unused,
        its path never opened, as upstream's config provider is asked about enabled
        plugins only: the server starts and serves, and says nothing of it."""
        path = self.write_admission_configuration(
            "- name: NotARealPlugin\n  path: missing.yaml\n"
            "- name: ValidatingAdmissionWebhook\n  path: missing.yaml\n")
        tokens = write_tokens(self.data, "t0ken")
        platform = Server(self.data, free_port(), tokens, token="t0ken", args=[
            "--admission-control-config-file", path,
            "--disable-admission-plugins", "ValidatingAdmissionWebhook"])
        self.addCleanup(platform.stop)
        platform.start()
        connection = platform.connection()
        self.addCleanup(connection.close)
        self.assertEqual(connection.request("GET", "/api/v1/namespaces/default")[0], 200)
        platform.signal(signal.SIGTERM)
        self.assertEqual(platform.wait(), 0)
        self.assertNotIn("NotARealPlugin", platform.output)


class OptionsTests(SynchronousTestCase):
    def test_defaults(self):
        """Defaults follow the issue: ./platformd-data, 127.0.0.1:6443, spec gate defaults."""
        options = Options()
        options.parseOptions([])
        self.assertEqual((options["data-dir"], options["bind-address"], options["secure-port"]),
                         ("./platformd-data", "127.0.0.1", 6443))
        self.assertEqual(options["feature-gates"].enabled, DEFAULTS)
        self.assertFalse(options["feature-gates"]["PodsAPI"])
        self.assertTrue(options["feature-gates"]["APIResponseCompression"])

    def test_feature_gates(self):
        """Gates parse as NAME=true|false lists; bad values are usage errors."""
        gates = FeatureGates.parse("PodsAPI=true, WatchList=false")
        self.assertTrue(gates["PodsAPI"])
        self.assertFalse(gates["WatchList"])
        for bad in ("PodsAPI", "PodsAPI=yes", "Nope=true"):
            options = Options()
            self.assertRaises(usage.UsageError, options.parseOptions, ["--feature-gates", bad])

    def test_deprecated_gate_warns(self):
        """Setting a deprecated gate (KMSv1, default false) logs upstream's warning."""
        from twisted.logger import capturedLogs, formatEvent
        self.assertFalse(FeatureGates()["KMSv1"])
        with capturedLogs() as events:
            self.assertTrue(FeatureGates.parse("KMSv1=true")["KMSv1"])
            FeatureGates.parse("PodsAPI=true")
        self.assertEqual([formatEvent(e) for e in events], [
            "Setting deprecated feature gate KMSv1=true. It will be removed in a future "
            "release."])

    def test_overload_flags(self):
        """Upstream's defaults (400, 200, 1m0s); negative counts refused in its words."""
        options = Options()
        options.parseOptions([])
        self.assertEqual((options["max-requests-inflight"],
                          options["max-mutating-requests-inflight"], options["request-timeout"]),
                         (400, 200, 60.0))
        options = Options()
        options.parseOptions(["--max-requests-inflight", "0", "--request-timeout", "30s"])
        self.assertEqual((options["max-requests-inflight"], options["request-timeout"]),
                         (0, 30.0))
        for flag, value, message in (
                ("max-requests-inflight", "-1", "--max-requests-inflight can not be negative value"),
                ("max-mutating-requests-inflight", "x",
                 "--max-mutating-requests-inflight: 'x' is not an integer"),
                ("request-timeout", "soon", "--request-timeout: invalid duration 'soon' "
                                            "(examples: 5m, 90s, 1h30m)")):
            with self.assertRaises(usage.UsageError) as caught:
                Options().parseOptions([f"--{flag}", value])
            self.assertEqual(str(caught.exception), message)
