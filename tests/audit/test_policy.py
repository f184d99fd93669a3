"""
The audit policy: upstream's rule matching (``policy/checker.go``) and its loading and
validation messages (``policy/reader.go``, ``validation.go``).
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.audit.policy import PolicyError, load, load_file
from platformd.auth.interfaces import UserInfo
from platformd.requestinfo import RequestInfo

HEAD = "apiVersion: audit.platform.io/v1\nkind: Policy\n"
JANE = UserInfo("jane", "", ("devs", "system:authenticated"))
BOB = UserInfo("bob", "", ("ops",))


def resource(verb="get", resource="pods", namespace="ns", name="", group="",
             subresource=""):
    return RequestInfo(True, "/x", verb, "api", group, "v1", resource, subresource,
                       namespace, name)


def path(p, verb="get"):
    return RequestInfo(False, p, verb)


class MatchingTests(SynchronousTestCase):
    def level(self, rules: str, user, info, omit="") -> str:
        return load((HEAD + omit + "rules:\n" + rules).encode()).evaluate(user, info).level

    def test_first_match_wins_and_default_none(self):
        rules = "- level: Request\n  users: [jane]\n- level: Metadata\n"
        self.assertEqual(self.level(rules, JANE, resource()), "Request")
        self.assertEqual(self.level(rules, BOB, resource()), "Metadata")
        self.assertEqual(self.level("- level: Metadata\n  users: [x]\n", BOB, resource()),
                         "None")

    def test_users_groups_verbs(self):
        rules = ("- level: Request\n  userGroups: [ops]\n  verbs: [get]\n"
                 "- level: Metadata\n  verbs: [list, watch]\n")
        self.assertEqual(self.level(rules, BOB, resource()), "Request")
        self.assertEqual(self.level(rules, JANE, resource()), "None")
        self.assertEqual(self.level(rules, JANE, resource("watch")), "Metadata")
        # An unauthenticated request (no user) never matches users or groups.
        self.assertEqual(self.level("- level: Request\n  userGroups: [ops]\n", None,
                                    resource()), "None")

    def test_resources(self):
        rules = """- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/log", "*/status", "secrets/*"]
  - group: rbac.authorization.platform.io
- level: Request
  resources:
  - group: ""
    resources: [configmaps]
    resourceNames: [special]
"""
        cases = [(resource(resource="pods", subresource="log"), "RequestResponse"),
                 (resource(resource="pods"), "None"),
                 (resource(resource="pods", subresource="exec"), "None"),
                 (resource(resource="namespaces", subresource="status"), "RequestResponse"),
                 (resource(resource="secrets"), "RequestResponse"),
                 (resource(resource="secrets", subresource="x"), "RequestResponse"),
                 (resource(resource="roles", group="rbac.authorization.platform.io"),
                  "RequestResponse"),
                 (resource(resource="configmaps", name="special"), "Request"),
                 (resource(resource="configmaps", name="other"), "None"),
                 (path("/api"), "None")]
        for info, expected in cases:
            self.assertEqual(self.level(rules, JANE, info), expected, info)
        self.assertEqual(self.level("- level: Request\n  resources: [{resources: ['*']}]\n",
                                    JANE, resource(resource="anything", subresource="s")),
                         "Request")

    def test_namespaces(self):
        rules = ("- level: Request\n  namespaces: ['']\n"
                 "- level: Metadata\n  namespaces: [a]\n")
        self.assertEqual(self.level(rules, JANE, resource(namespace="")), "Request")
        self.assertEqual(self.level(rules, JANE, resource(namespace="a")), "Metadata")
        self.assertEqual(self.level(rules, JANE, resource(namespace="b")), "None")
        self.assertEqual(self.level(rules, JANE, path("/version")), "None")

    def test_non_resource_urls(self):
        rules = "- level: Request\n  nonResourceURLs: [/healthz*, /version]\n"
        for p, expected in (("/healthz", "Request"), ("/healthz/etcd", "Request"),
                            ("/version", "Request"), ("/versions", "None"),
                            ("/api", "None")):
            self.assertEqual(self.level(rules, JANE, path(p)), expected, p)
        self.assertEqual(self.level(rules, JANE, resource()), "None")
        self.assertEqual(self.level("- level: Request\n  nonResourceURLs: ['*']\n", JANE,
                                    path("/x")), "Request")

    def test_omit_stages_and_managed_fields(self):
        policy = load((HEAD + "omitStages: [RequestReceived]\nomitManagedFields: true\n"
                       "rules:\n- level: Request\n  users: [jane]\n  omitStages: [Panic]\n"
                       "  omitManagedFields: false\n- level: Metadata\n").encode())
        jane = policy.evaluate(JANE, resource())
        self.assertEqual((jane.omit_stages, jane.omit_managed_fields),
                         ({"RequestReceived", "Panic"}, False))
        bob = policy.evaluate(BOB, resource())
        self.assertEqual((bob.omit_stages, bob.omit_managed_fields),
                         ({"RequestReceived"}, True))


class LoadingTests(SynchronousTestCase):
    def error(self, text: str) -> str:
        with self.assertRaises(PolicyError) as caught:
            load(text.encode())
        return str(caught.exception)

    def test_validation_messages(self):
        self.assertEqual(self.error(HEAD + "rules:\n- users: [a]\n"),
                         "rules[0].level: Required value")
        self.assertEqual(self.error(HEAD + "rules:\n- level: Everything\n"),
                         'rules[0].level: Unsupported value: "Everything": supported values: '
                         '"None", "Metadata", "Request", "RequestResponse"')
        self.assertEqual(
            self.error(HEAD + "rules:\n- level: None\n  nonResourceURLs: [a*b]\n"
                       "  resources: [{group: Bad_Group}]\n  omitStages: [Later]\n"),
            '[rules[0].nonResourceURLs[0]: Invalid value: "a*b": non-resource URL rules '
            "must begin with a '/' character, rules[0].nonResourceURLs[0]: Invalid value: "
            "\"a*b\": non-resource URL wildcards '*' must be the final character of the "
            'rule, rules[0].resources.group: Invalid value: "Bad_Group": a lowercase RFC '
            "1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?"
            "(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), rules[0].omitStages[0]: Invalid value: "
            '"Later": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,'
            'Panic, rules[0].nonResourceURLs: Invalid value: []string{"a*b"}: rules cannot '
            "apply to both regular resources and non-resource URLs]")
        self.assertEqual(
            self.error(HEAD + "rules:\n- level: None\n  resources: [{resourceNames: [x]}]\n"),
            'rules[0].resources.resourceNames: Invalid value: []string{"x"}: using '
            "resourceNames requires at least one resource")
        self.assertEqual(self.error(HEAD + "rules: []\n"),
                         "loaded illegal policy with 0 rules")
        self.assertEqual(self.error(HEAD + "omitStages: [Never]\nrules:\n- level: None\n"),
                         'omitStages[0]: Invalid value: "Never": allowed stages are '
                         "RequestReceived,ResponseStarted,ResponseComplete,Panic")

    def test_decoding_messages(self):
        self.assertEqual(self.error("apiVersion: audit.platform.io/v2\nkind: Policy\n"
                                    "rules: [{level: None}]\n"),
                         'failed decoding: no kind "Policy" is registered for version '
                         '"audit.platform.io/v2" in scheme "platformd/audit"')
        self.assertEqual(self.error("rules: [{level: None}]\n"),
                         "failed decoding: Object 'Kind' is missing in "
                         "'rules: [{level: None}]'")
        self.assertEqual(self.error(HEAD + "rules: {level: None}\n"),
                         "failed decoding: json: cannot unmarshal object into Go struct "
                         "field Policy.rules of type []")
        self.assertEqual(self.error(HEAD + "rules:\n- level: None\n  users: [1]\n"),
                         "failed decoding: json: cannot unmarshal number into Go struct "
                         "field PolicyRule.users of type string")

    def test_older_versions_and_unknown_fields_are_read(self):
        policy = load(b"apiVersion: audit.platform.io/v1beta1\nkind: Policy\n"
                      b"rules:\n- level: Metadata\n  colour: blue\n")
        self.assertEqual(policy.evaluate(JANE, resource()).level, "Metadata")

    def test_file_errors_name_the_file(self):
        missing = os.path.abspath(self.mktemp())
        with self.assertRaises(PolicyError) as caught:
            load_file(missing)
        self.assertEqual(str(caught.exception),
                         f'failed to read file path "{missing}": open {missing}: '
                         "no such file or directory")
        with open(missing, "w") as f:
            f.write(HEAD + "rules: []\n")
        with self.assertRaises(PolicyError) as caught:
            load_file(missing)
        self.assertEqual(str(caught.exception),
                         f"loaded illegal policy with 0 rules: from file {missing}")
