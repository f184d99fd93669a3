"""
The discovery documents, field by field against upstream's shapes, and read by the real
kubectl.
"""

from __future__ import annotations

from twisted.trial import unittest

from platformd.api import discovery
from platformd.registry.catalog import builtin
from tests.api.docserver import KubectlTestCase

RBAC = "rbac.authorization.platform.io"
AUTHZ = "authorization.platform.io"
AUTHN = "authentication.platform.io"
ADMISSION = "admissionregistration.platform.io"
EVENTS = "events.platform.io"
COORDINATION = "coordination.platform.io"
APIEXTENSIONS = "apiextensions.platform.io"
POLICY = "policy.platform.io"
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _gv(group: str) -> dict:
    return {"groupVersion": f"{group}/v1", "version": "v1"}


def _by_name(document) -> dict:
    return {r["name"]: r for r in document["resources"]}


class APIVersionsTests(unittest.TestCase):
    def test_core_versions(self):
        self.assertEqual(discovery.api_versions("10.0.0.1:6443"), {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"},
            ],
        })

    def test_field_order(self):
        self.assertEqual(list(discovery.api_versions("h:1")),
                         ["kind", "versions", "serverAddressByClientCIDRs"])


class APIGroupTests(unittest.TestCase):
    gv = {"groupVersion": f"{RBAC}/v1", "version": "v1"}

    def test_group_list_has_every_named_group(self):
        self.assertEqual(discovery.api_group_list(builtin()), {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            # Upstream's order (kube-aggregator's group priorities): events,
            # authentication, authorization, policy, RBAC, admissionregistration,
            # coordination, apiextensions, discovery.
            "groups": [{"name": group, "versions": [gv], "preferredVersion": gv}
                       for group, gv in ((EVENTS, _gv(EVENTS)), (AUTHN, _gv(AUTHN)),
                                         (AUTHZ, _gv(AUTHZ)), (POLICY, _gv(POLICY)),
                                         (RBAC, self.gv), (ADMISSION, _gv(ADMISSION)),
                                         (COORDINATION, _gv(COORDINATION)),
                                         (APIEXTENSIONS, _gv(APIEXTENSIONS)),
                                         ("discovery.platform.io",
                                          _gv("discovery.platform.io")))],
        })

    def test_group(self):
        document = discovery.api_group(builtin(), RBAC)
        self.assertEqual(list(document),
                         ["kind", "apiVersion", "name", "versions", "preferredVersion"])
        self.assertEqual(document, {"kind": "APIGroup", "apiVersion": "v1", "name": RBAC,
                                    "versions": [self.gv], "preferredVersion": self.gv})

    def test_unknown_group(self):
        self.assertIsNone(discovery.api_group(builtin(), "apps"))

    def test_core_group_is_not_a_named_group(self):
        """The core group is only under /api; /apis/ with an empty group is a 404."""
        self.assertIsNone(discovery.api_group(builtin(), ""))


class APIResourceListTests(unittest.TestCase):
    def setUp(self):
        self.core = discovery.api_resource_list(builtin(), "", "v1")
        self.rbac = discovery.api_resource_list(builtin(), RBAC, "v1")

    def test_core_list_has_no_api_version(self):
        """Upstream's legacy /api/v1 list is written without apiVersion."""
        self.assertEqual(list(self.core), ["kind", "groupVersion", "resources"])
        self.assertEqual(self.core["kind"], "APIResourceList")
        self.assertEqual(self.core["groupVersion"], "v1")

    def test_group_list_header(self):
        self.assertEqual(list(self.rbac), ["kind", "apiVersion", "groupVersion", "resources"])
        self.assertEqual((self.rbac["kind"], self.rbac["apiVersion"], self.rbac["groupVersion"]),
                         ("APIResourceList", "v1", f"{RBAC}/v1"))

    def test_rolebindings(self):
        entry = _by_name(self.rbac)["rolebindings"]
        self.assertEqual(list(entry), ["name", "singularName", "namespaced", "kind", "verbs",
                                       "storageVersionHash"])
        self.assertEqual(entry, {
            "name": "rolebindings",
            "singularName": "rolebinding",
            "namespaced": True,
            "kind": "RoleBinding",
            "verbs": ALL_VERBS,
            "storageVersionHash": discovery.storage_version_hash(RBAC, "v1", "RoleBinding"),
        })

    def test_rbac_scopes(self):
        scopes = {name: r["namespaced"] for name, r in _by_name(self.rbac).items()}
        self.assertEqual(scopes, {"clusterrolebindings": False, "clusterroles": False,
                                  "rolebindings": True, "roles": True})

    def test_pods_with_short_names_categories_and_status(self):
        resources = _by_name(self.core)
        self.assertEqual(list(resources["pods"]), [
            "name", "singularName", "namespaced", "kind", "verbs", "shortNames", "categories",
            "storageVersionHash"])
        self.assertEqual(resources["pods"]["shortNames"], ["po"])
        self.assertEqual(resources["pods"]["categories"], ["all"])
        self.assertEqual(resources["pods/status"], {
            "name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod",
            "verbs": ["get", "patch", "update"]})

    def test_namespaces(self):
        resources = _by_name(self.core)
        self.assertIs(resources["namespaces"]["namespaced"], False)
        self.assertEqual(resources["namespaces"]["shortNames"], ["ns"])
        self.assertNotIn("categories", resources["namespaces"])
        self.assertEqual(resources["namespaces/status"]["verbs"], ["get", "patch", "update"])

    def test_optional_fields_are_omitted(self):
        secrets = _by_name(self.core)["secrets"]
        self.assertNotIn("shortNames", secrets)
        self.assertNotIn("categories", secrets)
        self.assertNotIn("secrets/status", _by_name(self.core))

    def test_short_names(self):
        short = {name: r.get("shortNames") for name, r in _by_name(self.core).items()
                 if "/" not in name}
        self.assertEqual(short, {"bindings": None, "configmaps": ["cm"], "endpoints": ["ep"],
                                 "events": ["ev"], "namespaces": ["ns"], "nodes": ["no"],
                                 "pods": ["po"], "secrets": None, "serviceaccounts": ["sa"],
                                 "services": ["svc"]})

    def test_sorted_by_name(self):
        for document in (self.core, self.rbac):
            names = [r["name"] for r in document["resources"]]
            self.assertEqual(names, sorted(names))
        self.assertEqual([r["name"] for r in self.core["resources"]][:9],
                         ["bindings", "configmaps", "endpoints", "events", "namespaces",
                          "namespaces/status", "nodes", "nodes/status", "pods"])

    def test_every_kind_has_every_verb(self):
        for document in (self.core, self.rbac):
            for entry in document["resources"]:
                if entry["name"] == "bindings":  # create only, as upstream's
                    self.assertEqual(entry["verbs"], ["create"])
                elif "/" not in entry["name"]:
                    self.assertEqual(entry["verbs"], ALL_VERBS, entry["name"])

    def test_unknown_group_version(self):
        self.assertIsNone(discovery.api_resource_list(builtin(), RBAC, "v2"))
        self.assertIsNone(discovery.api_resource_list(builtin(), "apps", "v1"))


class StorageVersionHashTests(unittest.TestCase):
    def test_upstream_values(self):
        """The same values upstream's servers publish for the same group/version/kind."""
        self.assertEqual(discovery.storage_version_hash("", "v1", "Pod"), "xPOwRZ+Yhw8=")
        self.assertEqual(discovery.storage_version_hash("", "v1", "Namespace"), "Q3oi5N2YM8M=")
        self.assertEqual(discovery.storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=")

    def test_published(self):
        entry = _by_name(discovery.api_resource_list(builtin(), "", "v1"))["pods"]
        self.assertEqual(entry["storageVersionHash"], "xPOwRZ+Yhw8=")


class KubectlDiscoveryTests(KubectlTestCase):
    """kubectl falls back from aggregated discovery to these documents and reads them."""

    def _rows(self, output: str) -> dict:
        lines = output.splitlines()
        header = lines[0].split()
        self.assertEqual(header, ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"])
        rows = {}
        for line in lines[1:]:
            fields = line.split()
            if len(fields) == 4:  # no short names
                fields.insert(1, "")
            rows[fields[0]] = fields[1:]
        return rows

    def test_api_resources(self):
        d = self.kubectl("api-resources")

        def check(result):
            rows = self._rows(self.assertSucceeded(result))
            self.assertEqual(rows["rolebindings"], ["", f"{RBAC}/v1", "true", "RoleBinding"])
            self.assertEqual(rows["clusterroles"], ["", f"{RBAC}/v1", "false", "ClusterRole"])
            self.assertEqual(rows["pods"], ["po", "v1", "true", "Pod"])
            self.assertEqual(rows["namespaces"], ["ns", "v1", "false", "Namespace"])
            self.assertNotIn("pods/status", rows)
            self.assertEqual(rows["subjectaccessreviews"],
                             ["", f"{AUTHZ}/v1", "false", "SubjectAccessReview"])
            self.assertEqual(rows["selfsubjectreviews"],
                             ["", f"{AUTHN}/v1", "false", "SelfSubjectReview"])
            self.assertEqual(rows["tokenreviews"], ["", f"{AUTHN}/v1", "false", "TokenReview"])
            self.assertEqual(rows["validatingwebhookconfigurations"],
                             ["", f"{ADMISSION}/v1", "false", "ValidatingWebhookConfiguration"])
            self.assertEqual(rows["validatingadmissionpolicybindings"],
                             ["", f"{ADMISSION}/v1", "false",
                              "ValidatingAdmissionPolicyBinding"])
            self.assertEqual(rows["leases"], ["", f"{COORDINATION}/v1", "true", "Lease"])
            # Two rows named events (core v1, then events.platform.io/v1): the later wins.
            self.assertEqual(rows["events"], ["ev", f"{EVENTS}/v1", "true", "Event"])
            self.assertEqual([line.split()[2] for line in result.stdout.splitlines()
                              if line.startswith("events ")], ["v1", f"{EVENTS}/v1"])
            self.assertEqual(rows["services"], ["svc", "v1", "true", "Service"])
            self.assertEqual(rows["endpointslices"],
                             ["", "discovery.platform.io/v1", "true", "EndpointSlice"])
            self.assertEqual(rows["customresourcedefinitions"],
                             ["crd,crds", f"{APIEXTENSIONS}/v1", "false",
                              "CustomResourceDefinition"])
            self.assertEqual(rows["poddisruptionbudgets"],
                             ["pdb", f"{POLICY}/v1", "true", "PodDisruptionBudget"])
            self.assertEqual(rows["nodes"], ["no", "v1", "false", "Node"])
            self.assertEqual(rows["bindings"], ["", "v1", "true", "Binding"])
            self.assertEqual(len(rows), 28)
        return d.addCallback(check)

    def test_namespaced_filter(self):
        d = self.kubectl("api-resources", "--namespaced=true", "-o", "name")

        def check(result):
            names = self.assertSucceeded(result).split()
            self.assertEqual(sorted(names), [
                "bindings", "configmaps", "endpoints", "endpointslices.discovery.platform.io",
                "events", f"events.{EVENTS}", f"leases.{COORDINATION}",
                f"localsubjectaccessreviews.{AUTHZ}", f"poddisruptionbudgets.{POLICY}", "pods",
                f"rolebindings.{RBAC}", f"roles.{RBAC}", "secrets", "serviceaccounts",
                "services"])
        return d.addCallback(check)
