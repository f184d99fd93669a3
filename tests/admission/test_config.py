"""
--admission-control-config-file (platformd/admission/config.py): AdmissionConfiguration
with each plugin's path or embedded configuration (embedded wins), relative paths against
the file's directory, strict decoding, upstream's errors.
"""

from __future__ import annotations

import json
import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.admission.config import AdmissionConfigError, read_admission_configuration

HEAD = "apiVersion: apiserver.config.platform.io/v1\nkind: AdmissionConfiguration\n"


class ConfigTests(SynchronousTestCase):
    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_no_file(self):
        """No file: no plugin has configuration."""
        self.assertIsNone(read_admission_configuration("").config_for("ServiceAccount"))

    def test_path_relative_to_file(self):
        """A relative path is read from the configuration file's directory."""
        os.makedirs(os.path.join(self.dir, "sub"))
        self.write("sub/webhook.yaml", "kubeConfigFile: /x\n")
        path = self.write("admission.yaml", HEAD + "plugins:\n"
                          "- name: ValidatingAdmissionWebhook\n  path: sub/webhook.yaml\n")
        config = read_admission_configuration(path)
        self.assertEqual(config.plugins[0].path, os.path.join(self.dir, "sub/webhook.yaml"))
        self.assertEqual(config.config_for("ValidatingAdmissionWebhook"),
                         b"kubeConfigFile: /x\n")
        self.assertIsNone(config.config_for("MutatingAdmissionWebhook"))

    def test_absolute_path_kept(self):
        other = self.write("other.yaml", "a: 1\n")
        path = self.write("admission.yaml", HEAD + f"plugins:\n- name: P\n  path: {other}\n")
        self.assertEqual(read_admission_configuration(path).config_for("P"), b"a: 1\n")

    def test_embedded_wins(self):
        """An embedded configuration is used instead of the path (even a missing one)."""
        path = self.write("admission.yaml", HEAD + "plugins:\n"
                          "- name: P\n  path: missing.yaml\n  configuration:\n"
                          "    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: /k\n")
        got = read_admission_configuration(path).config_for("P")
        self.assertEqual(json.loads(got),
                         {"kind": "WebhookAdmissionConfiguration", "kubeConfigFile": "/k"})

    def test_json(self):
        path = self.write("admission.json", json.dumps({
            "apiVersion": "apiserver.config.platform.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [{"name": "P", "configuration": {"a": 1}}]}))
        self.assertEqual(json.loads(read_admission_configuration(path).config_for("P")),
                         {"a": 1})

    def test_unknown_fields_refused(self):
        """Upstream's codec is strict (serializer.EnableStrict, since 1.32): every unknown
        field, nested ones by their path; the embedded configuration is not checked."""
        path = self.write("admission.yaml", HEAD + "extra: 1\nplugins:\n"
                          "- name: P\n  foo: bar\n  configuration: {anything: 1}\n")
        self.assertError(path, 'strict decoding error: unknown field "extra", '
                               'unknown field "plugins[0].foo"')

    def test_unknown_plugin_names_kept(self):
        """Any name is accepted here: only the enabled plugins are ever asked for theirs
        (tests/admission/test_plugins.py ConfigurationTests)."""
        path = self.write("admission.yaml", HEAD + "plugins:\n- name: NotARealPlugin\n"
                          "  path: missing.yaml\n")
        self.assertEqual([p.name for p in read_admission_configuration(path).plugins],
                         ["NotARealPlugin"])

    def test_empty_file(self):
        """An empty file decodes to nothing, so its kind is missing."""
        self.assertError(self.write("a.yaml", ""), "Object 'Kind' is missing in ''")

    def test_wrong_type(self):
        path = self.write("a.yaml", HEAD + "plugins:\n- name: 5\n")
        self.assertError(path, "json: cannot unmarshal number into Go struct field "
                               "AdmissionPluginConfiguration.plugins.name of type string")

    def assertError(self, path: str, message: str):
        e = self.assertRaises(AdmissionConfigError, read_admission_configuration, path)
        self.assertEqual(str(e), message)

    def test_missing_file(self):
        path = os.path.join(self.dir, "nope.yaml")
        self.assertError(path, f'unable to read admission control configuration from "{path}" '
                               f"[open {path}: no such file or directory]")

    def test_missing_kind(self):
        path = self.write("a.yaml", "apiVersion: apiserver.config.platform.io/v1\n")
        self.assertError(path, "Object 'Kind' is missing in "
                               "'apiVersion: apiserver.config.platform.io/v1'")

    def test_missing_version(self):
        path = self.write("a.yaml", "kind: AdmissionConfiguration\n")
        self.assertError(path, "Object 'apiVersion' is missing in 'kind: AdmissionConfiguration'")

    def test_wrong_version(self):
        """AdmissionConfiguration exists in v1 only (spec 2.5)."""
        path = self.write("a.yaml", "apiVersion: apiserver.platform.io/v1beta1\n"
                                    "kind: AdmissionConfiguration\n")
        self.assertError(path, 'no kind "AdmissionConfiguration" is registered for version '
                               '"apiserver.platform.io/v1beta1" in scheme')

    def test_plugins_not_a_list(self):
        path = self.write("a.yaml", HEAD + "plugins: x\n")
        self.assertError(path, "json: cannot unmarshal string into Go struct field "
                               "AdmissionConfiguration.plugins of type "
                               "[]v1.AdmissionPluginConfiguration")

    def test_plugin_path_unreadable(self):
        """A plugin's file that cannot be read fails when that plugin is configured."""
        path = self.write("a.yaml", HEAD + "plugins:\n- name: P\n  path: gone.yaml\n")
        config = read_admission_configuration(path)
        gone = os.path.join(self.dir, "gone.yaml")
        e = self.assertRaises(AdmissionConfigError, config.config_for, "P")
        self.assertEqual(str(e), f"Couldn't open admission plugin configuration {gone}: "
                                 f"open {gone}: no such file or directory")
