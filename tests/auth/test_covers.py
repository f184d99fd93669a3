"""
Covers, the compact rule text and Go's text forms (platformd/auth/rbac/covers.py,
gotext.py), after upstream's policy_comparator.go, policy_compact.go and
CompactString.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.rbac.covers import (
    breakdown, compact, compact_string, covers, missing_descriptions,
)
from platformd.goformat.gotext import aggregate, quote, quote_list

from tests.auth.fixtures import rule


class CoversTests(SynchronousTestCase):
    def check(self, owner, requested, expected_missing):
        covered, missing = covers(owner, requested)
        self.assertEqual(missing, expected_missing)
        self.assertEqual(covered, not expected_missing)

    def test_breakdown(self):
        self.assertEqual(breakdown(rule(["get", "list"], ["", "apps"], ["pods"], names=["a"])), [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "resourceNames": ["a"]},
            {"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
            {"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["list"],
             "resourceNames": ["a"]}])
        self.assertEqual(breakdown(rule(["get"], urls=["/a", "/b"])), [
            {"nonResourceURLs": ["/a"], "verbs": ["get"]},
            {"nonResourceURLs": ["/b"], "verbs": ["get"]}])

    def test_exact_and_stars(self):
        self.check([rule(["get", "list"], [""], ["pods"])], [rule(["get"], [""], ["pods"])], [])
        self.check([rule(["*"], ["*"], ["*"])], [rule(["delete"], ["apps"], ["x/y"])], [])
        self.check([rule(["get"], [""], ["pods"])], [rule(["get", "list"], [""], ["pods"])],
                   [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])

    def test_subresources(self):
        self.check([rule(["get"], [""], ["*/status"])], [rule(["get"], [""], ["pods/status"])], [])
        self.check([rule(["get"], [""], ["pods"])], [rule(["get"], [""], ["pods/status"])],
                   [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]}])

    def test_resource_names(self):
        owner_named = [rule(["get"], [""], ["pods"], names=["a", "b"])]
        self.check(owner_named, [rule(["get"], [""], ["pods"], names=["a"])], [])
        # A named owner rule does not cover every name.
        self.check(owner_named, [rule(["get"], [""], ["pods"])],
                   [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
        self.check([rule(["get"], [""], ["pods"])], [rule(["get"], [""], ["pods"], names=["z"])],
                   [])

    def test_urls(self):
        self.check([rule(["get"], urls=["/logs/*"])], [rule(["get"], urls=["/logs/x"])], [])
        self.check([rule(["get"], urls=["*"])], [rule(["get"], urls=["/x"])], [])
        self.check([rule(["get"], ["*"], ["*"])], [rule(["get"], urls=["/x"])],
                   [{"nonResourceURLs": ["/x"], "verbs": ["get"]}])


class CompactTests(SynchronousTestCase):
    def test_compact_string(self):
        self.assertEqual(compact_string(rule(["get", "list"], ["", "apps"], ["pods"], names=["a"])),
                         '{APIGroups:["" "apps"], Resources:["pods"], ResourceNames:["a"], '
                         'Verbs:["get" "list"]}')
        self.assertEqual(compact_string(rule(["get"], urls=["/healthz"])),
                         '{NonResourceURLs:["/healthz"], Verbs:["get"]}')

    def test_compact_merges_simple_rules(self):
        pieces = breakdown(rule(["get", "list"], ["", "apps"], ["pods"])) + \
            breakdown(rule(["get"], [""], ["pods"], names=["a"]))
        self.assertEqual(compact(pieces), [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get", "list"]}])
        self.assertEqual(missing_descriptions(pieces), [
            '{APIGroups:[""], Resources:["pods"], ResourceNames:["a"], Verbs:["get"]}',
            '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}',
            '{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "list"]}'])


class GoTextTests(SynchronousTestCase):
    def test_quote(self):
        self.assertEqual(quote("jane"), '"jane"')
        self.assertEqual(quote('a"b\\c\n\t\x01\x7f'), '"a\\"b\\\\c\\n\\t\\x01\\x7f"')
        self.assertEqual(quote("é\u00a0"), '"é\\u00a0"')
        self.assertEqual(quote_list(["a", "b"]), '["a" "b"]')
        self.assertEqual(quote_list([]), "[]")

    def test_aggregate(self):
        self.assertEqual(aggregate([]), "")
        self.assertEqual(aggregate(["a"]), "a")
        self.assertEqual(aggregate(["a", "b"]), "[a, b]")
        self.assertEqual(aggregate(["a", "a"]), "a")
        self.assertEqual(aggregate(["a", "b", "a"]), "[a, b]")
