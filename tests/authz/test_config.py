"""AuthorizationConfiguration: decoding, defaulting, every validation rule's path and message."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth import authzconfig
from platformd.auth.authzconfig import (AuthorizationConfigError, load_authorization_config,
                                        parse_authorization_config)
from platformd.goformat.durations import go_duration
from tests.authz.helpers import document, kubeconfig_for, pki, webhook_entry, write


class ConfigTestCase(SynchronousTestCase):
    def setUp(self):
        self.paths = pki(self)
        self.kubeconfig = kubeconfig_for(self, self.paths, "https://127.0.0.1:1/authorize")

    def errors(self, data: bytes, require=frozenset()) -> list:
        with self.assertRaises(AuthorizationConfigError) as caught:
            parse_authorization_config(data, require)
        return caught.exception.errors

    def one(self, data: bytes, require=frozenset()) -> str:
        errors = self.errors(data, require)
        self.assertEqual(len(errors), 1, errors)
        return errors[0]

    def hook(self, **webhook) -> bytes:
        return document(webhook_entry("w", self.kubeconfig, **webhook))


class LoadingTests(ConfigTestCase):
    def test_valid_and_defaults(self):
        path = write(self, document(
            {"type": "RBAC", "name": "rbac"},
            webhook_entry("first.example", self.kubeconfig,
                          matchConditions=[{"expression": "request.user == 'a'"}]),
            webhook_entry("second", self.kubeconfig, cacheUnauthorizedRequests=False,
                          authorizedTTL="1m", unauthorizedTTL="0s"),
            {"type": "AlwaysDeny", "name": "alwaysdeny"}))
        config = load_authorization_config(path)
        self.assertEqual([a.type for a in config.authorizers],
                         ["RBAC", "Webhook", "Webhook", "AlwaysDeny"])
        first, second = config.authorizers[1].webhook, config.authorizers[2].webhook
        self.assertEqual((first.authorized_ttl, first.unauthorized_ttl), (300.0, 30.0))
        self.assertTrue(first.cache_authorized_requests and first.cache_unauthorized_requests)
        self.assertEqual((second.authorized_ttl, second.unauthorized_ttl), (60.0, 30.0))
        self.assertFalse(second.cache_unauthorized_requests)
        self.assertEqual(first.timeout, 3.0)
        self.assertEqual(len(first.matcher.programs), 1)
        self.assertIsNone(second.matcher)
        self.assertEqual(first.connection.server, "https://127.0.0.1:1/authorize")
        self.assertTrue(first.connection.ca_pem.startswith(b"-----BEGIN CERTIFICATE"))
        self.assertTrue(first.connection.client_key_pem)

    def test_json_and_every_api_version(self):
        for version in sorted(authzconfig.API_VERSIONS):
            config = parse_authorization_config(
                ('{"apiVersion": "%s", "kind": "AuthorizationConfiguration", '
                 '"authorizers": [{"type": "AlwaysAllow", "name": "alwaysallow"}]}'
                 % version).encode())
            self.assertEqual(config.api_version, version)

    def test_decoding_errors(self):
        failed = "failed to load AuthorizationConfiguration from file: "
        cases = [
            (document(api_version="apiserver.config.k8s.io/v1"),
             failed + 'no kind "AuthorizationConfiguration" is registered for version '
                      '"apiserver.config.k8s.io/v1" in scheme'),
            (b"apiVersion: apiserver.config.platform.io/v1\nauthorizers: []\n",
             failed + "Object 'Kind' is missing in 'apiVersion: apiserver.config.platform.io/v1 "
                      "authorizers: []'"),
            (document({"type": "RBAC", "name": "rbac", "color": "red"}),
             failed + 'strict decoding error: unknown field "authorizers[0].color"'),
            (self.hook(timeout=5),
             failed + "json: cannot unmarshal number into Go struct field "
                      "WebhookConfiguration.authorizers.webhook.timeout of type string"),
            (self.hook(timeout="soon"), failed + 'time: invalid duration "soon"'),
            (b"a: [", None),
        ]
        for data, expected in cases:
            message = self.one(data)
            if expected is None:
                self.assertTrue(message.startswith(failed + "error converting YAML to JSON"))
            else:
                self.assertEqual(message, expected)

    def test_empty_file_is_no_authorizers(self):
        self.assertEqual(self.one(b""),
                         "authorizers: Required value: at least one authorization mode must "
                         "be defined")

    def test_unreadable_file(self):
        with self.assertRaises(AuthorizationConfigError) as caught:
            load_authorization_config("/nonexistent/authz.yaml")
        self.assertEqual(str(caught.exception),
                         "open /nonexistent/authz.yaml: no such file or directory")


class ValidationTests(ConfigTestCase):
    def test_authorizer_rules(self):
        cases = [
            (document(), "authorizers: Required value: at least one authorization mode must "
                         "be defined"),
            (document({"name": "x"}), "authorizers[0].type: Required value"),
            (document({"type": "Node", "name": "node"}),
             'authorizers[0].type: Unsupported value: "Node": supported values: '
             '"AlwaysAllow", "AlwaysDeny", "RBAC", "Webhook"'),
            (document({"type": "ABAC", "name": "abac"}),
             'authorizers[0].type: Unsupported value: "ABAC": supported values: '
             '"AlwaysAllow", "AlwaysDeny", "RBAC", "Webhook"'),
            (document({"type": "RBAC", "name": "rbac"}, {"type": "RBAC", "name": "rbac2"}),
             'authorizers[1].type: Duplicate value: "RBAC"'),
            (document({"type": "RBAC"}), "authorizers[0].name: Required value"),
            (document({"type": "RBAC", "name": "rbac"}, webhook_entry("rbac", self.kubeconfig)),
             'authorizers[1].name: Duplicate value: "rbac"'),
            (document(webhook_entry("Bad_Name", self.kubeconfig)),
             'authorizers[0].name: Invalid value: "Bad_Name": authorizer name is invalid: a '
             "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
            (document({"type": "Webhook", "name": "w"}),
             "authorizers[0].webhook: Required value: required when type=Webhook"),
            (document({"type": "AlwaysAllow", "name": "alwaysallow", "webhook": {}}),
             'authorizers[0].webhook: Invalid value: "non-null": may only be specified when '
             "type=Webhook"),
        ]
        for data, expected in cases:
            self.assertEqual(self.one(data), expected)

    def test_webhook_rules(self):
        p = "authorizers[0]"
        cases = [
            ({"timeout": None}, f"{p}.timeout: Required value"),
            ({"timeout": "0s"}, f"{p}.timeout: Required value"),
            ({"timeout": "45s"}, f'{p}.timeout: Invalid value: "45s": must be > 0s and <= 30s'),
            ({"timeout": "1m"}, f'{p}.timeout: Invalid value: "1m0s": must be > 0s and <= 30s'),
            ({"timeout": "-30s"},
             f'{p}.timeout: Invalid value: "-30s": must be > 0s and <= 30s'),
            ({"authorizedTTL": "-1m"}, f'{p}.authorizedTTL: Invalid value: "-1m0s": must be > 0s'),
            ({"unauthorizedTTL": "-500ms"},
             f'{p}.unauthorizedTTL: Invalid value: "-500ms": must be > 0s'),
            ({"subjectAccessReviewVersion": None},
             f"{p}.subjectAccessReviewVersion: Required value"),
            ({"subjectAccessReviewVersion": "v2"},
             f'{p}.subjectAccessReviewVersion: Unsupported value: "v2": supported values: '
             '"v1", "v1beta1"'),
            ({"matchConditionSubjectAccessReviewVersion": None,
              "matchConditions": [{"expression": "true"}]},
             f"{p}.matchConditionSubjectAccessReviewVersion: Required value: required if match "
             "conditions are specified"),
            ({"matchConditionSubjectAccessReviewVersion": "v1beta1"},
             f'{p}.matchConditionSubjectAccessReviewVersion: Unsupported value: "v1beta1": '
             'supported values: "v1"'),
            ({"failurePolicy": None}, f"{p}.failurePolicy: Required value"),
            ({"failurePolicy": "Sometimes"},
             f'{p}.failurePolicy: Unsupported value: "Sometimes": supported values: '
             '"NoOpinion", "Deny"'),
            ({"connectionInfo": {}}, f"{p}.connectionInfo.type: Required value"),
            ({"connectionInfo": {"type": "Magic"}},
             f'{p}.connectionInfo.type: Unsupported value: "Magic": supported values: '
             '"InClusterConfig", "PlatformConfigFile"'),
            ({"connectionInfo": {"type": "PlatformConfigFile"}},
             f"{p}.connectionInfo.platformConfigFile: Required value"),
            ({"connectionInfo": {"type": "PlatformConfigFile",
                                 "platformConfigFile": "relative.kubeconfig"}},
             f'{p}.connectionInfo.platformConfigFile: Invalid value: "relative.kubeconfig": '
             "must be an absolute path"),
            ({"connectionInfo": {"type": "PlatformConfigFile",
                                 "platformConfigFile": "/nonexistent/kubeconfig"}},
             f'{p}.connectionInfo.platformConfigFile: Invalid value: "/nonexistent/kubeconfig": '
             "error loading file: stat /nonexistent/kubeconfig: no such file or directory"),
            ({"connectionInfo": {"type": "PlatformConfigFile", "platformConfigFile": "/"}},
             f'{p}.connectionInfo.platformConfigFile: Invalid value: "/": must be a regular '
             "file"),
            ({"connectionInfo": {"type": "InClusterConfig", "platformConfigFile": "/x"}},
             f'{p}.connectionInfo.platformConfigFile: Invalid value: "/x": can only be set '
             "when type=PlatformConfigFile"),
            ({"connectionInfo": {"type": "InClusterConfig"}},
             f'{p}.connectionInfo.type: Unsupported value: "InClusterConfig": supported '
             'values: "PlatformConfigFile"'),
        ]
        for webhook, expected in cases:
            self.assertEqual(self.one(self.hook(**webhook)), expected, webhook)

    def test_match_condition_rules(self):
        p = "authorizers[0].matchConditions"

        def conditions(*expressions):
            return self.hook(matchConditions=[{"expression": e} for e in expressions])

        self.assertEqual(self.one(conditions(*[f"request.user == '{i}'" for i in range(65)])),
                         f"{p}: Too many: 65: must have at most 64 items")
        parse_authorization_config(conditions(*[f"request.user == '{i}'" for i in range(64)]))
        self.assertEqual(self.one(conditions("  ")), f"{p}[0].expression: Required value")
        self.assertEqual(self.one(conditions("true", "true")),
                         f'{p}[1].expression: Duplicate value: "true"')
        self.assertEqual(self.one(conditions("request.user")),
                         f'{p}[0].expression: Invalid value: "request.user": must evaluate to '
                         "bool but got string")
        self.assertEqual(self.one(conditions("request.groups")),
                         f'{p}[0].expression: Invalid value: "request.groups": must evaluate '
                         "to bool but got list(string)")
        message = self.one(conditions("request.nope == 'x'"))
        self.assertTrue(message.startswith(
            f"{p}[0].expression: Invalid value: \"request.nope == 'x'\": compilation failed: "
            "ERROR: <input>:1:8: undefined field 'nope'"), message)
        message = self.one(conditions("request.user ==",))
        self.assertIn("compilation failed: ERROR: <input>:1:16: Syntax error", message)

    def test_several_errors_aggregate_on_one_line(self):
        data = self.hook(timeout="45s", failurePolicy="Sometimes",
                         matchConditions=[{"expression": "request.user"}])
        with self.assertRaises(AuthorizationConfigError) as caught:
            parse_authorization_config(data)
        error = caught.exception
        self.assertEqual(len(error.errors), 3)
        self.assertEqual(str(error), "[" + ", ".join(error.errors) + "]")
        self.assertNotIn("\n", str(error))

    def test_platform_rules(self):
        self.assertEqual(self.one(document({"type": "RBAC", "name": "authz"})),
                         "expected name rbac for authorizer RBAC instead of authz")
        self.assertEqual(
            self.one(document(webhook_entry("w", self.kubeconfig)), frozenset({"RBAC"})),
            "missing required types: [RBAC]")

    def test_bad_kubeconfig(self):
        broken = write(self, b"apiVersion: v1\nkind: Config\nclusters: []\n")
        message = self.one(document(webhook_entry("w", broken)))
        self.assertEqual(message, f"invalid configuration in {broken}: no configuration has "
                                  "been provided (current-context is not set)")


class DurationTests(SynchronousTestCase):
    def test_go_formatting(self):
        for seconds, text in [(0, "0s"), (45, "45s"), (60, "1m0s"), (5400, "1h30m0s"),
                              (0.5, "500ms"), (1.5, "1.5s"), (-30, "-30s"), (0.0015, "1.5ms")]:
            self.assertEqual(go_duration(seconds), text)
