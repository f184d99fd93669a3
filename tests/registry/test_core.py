"""Defaulting and validation of the core kinds."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.registry import core
from platformd.registry.kinds.namespace import NAMESPACE_NAME_LABEL
from platformd.model.schema import DecodeContext


def check(kind, obj):
    obj = kind.schema.decode(obj, "", DecodeContext())
    meta = obj.setdefault("metadata", {})
    meta.setdefault("name", "x")
    if kind.namespaced:
        meta.setdefault("namespace", "default")
    kind.default(obj)
    return obj, [(c.reason, c.field) for c in kind.validate_all(obj)]


class PodTests(SynchronousTestCase):
    def test_defaults(self):
        """Pods get upstream's defaults: restart policy, grace period, pull policy."""
        obj, causes = check(core.POD, {"spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx:1.25",
                                              "ports": [{"containerPort": 80}]}]}})
        self.assertEqual(causes, [])
        spec = obj["spec"]
        self.assertEqual(spec["restartPolicy"], "Always")
        self.assertEqual(spec["terminationGracePeriodSeconds"], 30)
        self.assertEqual([c["imagePullPolicy"] for c in spec["containers"]],
                         ["Always", "IfNotPresent"])
        self.assertEqual(spec["containers"][1]["ports"][0]["protocol"], "TCP")

    def test_containers_required(self):
        """A pod needs at least one container, each with a name and an image."""
        _, causes = check(core.POD, {"spec": {"containers": []}})
        self.assertEqual(causes, [("FieldValueRequired", "spec.containers")])
        _, causes = check(core.POD, {"spec": {"containers": [{"name": "a"}, {"name": "a",
                                                                            "image": "i"}]}})
        self.assertEqual(causes, [("FieldValueRequired", "spec.containers[0].image"),
                                  ("FieldValueDuplicate", "spec.containers[1].name")])

    def test_name_rules(self):
        """Pod names are DNS subdomains."""
        _, causes = check(core.POD, {"metadata": {"name": "Bad_Name"},
                                     "spec": {"containers": [{"name": "a", "image": "i"}]}})
        self.assertEqual(causes, [("FieldValueInvalid", "metadata.name")])


    def test_deprecated_service_account_alias(self):
        """serviceAccount fills an empty serviceAccountName and always mirrors it."""
        containers = [{"name": "a", "image": "i"}]
        obj, _ = check(core.POD, {"spec": {"containers": containers, "serviceAccount": "old"}})
        self.assertEqual((obj["spec"]["serviceAccountName"], obj["spec"]["serviceAccount"]),
                         ("old", "old"))
        obj, _ = check(core.POD, {"spec": {"containers": containers,
                                           "serviceAccountName": "new",
                                           "serviceAccount": "old"}})
        self.assertEqual(obj["spec"]["serviceAccount"], "new")
        obj, _ = check(core.POD, {"spec": {"containers": containers}})
        self.assertNotIn("serviceAccount", obj["spec"])

    def test_upstream_only_fields_kept(self):
        """Fields upstream writes in every Pod's Protobuf are schema fields here too."""
        obj, causes = check(core.POD, {
            "spec": {"containers": [{"name": "a", "image": "i", "stdin": True, "tty": True}],
                     "hostPID": True, "subdomain": "web", "priorityClassName": "high"},
            "status": {"nominatedNodeName": "n1", "observedGeneration": 2,
                       "conditions": [{"type": "Ready", "status": "True",
                                       "observedGeneration": 2}]}})
        self.assertEqual(causes, [])
        self.assertTrue(obj["spec"]["containers"][0]["tty"])
        self.assertEqual(obj["status"]["conditions"][0]["observedGeneration"], 2)

    def test_subdomain_is_a_dns_label(self):
        """spec.subdomain is validated as a DNS-1123 label, as upstream."""
        _, causes = check(core.POD, {"spec": {"containers": [{"name": "a", "image": "i"}],
                                              "subdomain": "a.b"}})
        self.assertEqual(causes, [("FieldValueInvalid", "spec.subdomain")])

class NamespaceTests(SynchronousTestCase):
    def test_label_and_name(self):
        """A namespace carries its name as a label; its name is a DNS label."""
        obj, causes = check(core.NAMESPACE, {"metadata": {"name": "team-a"}})
        self.assertEqual(causes, [])
        self.assertEqual(obj["metadata"]["labels"], {NAMESPACE_NAME_LABEL: "team-a"})
        _, causes = check(core.NAMESPACE, {"metadata": {"name": "a.b"}})
        self.assertEqual(causes, [("FieldValueInvalid", "metadata.name")])


class SecretTests(SynchronousTestCase):
    def test_string_data_folded(self):
        """stringData is merged into data, base64-encoded."""
        obj, causes = check(core.SECRET, {"stringData": {"k": "v"}})
        self.assertEqual(causes, [])
        self.assertEqual(obj["data"], {"k": "dg=="})
        self.assertNotIn("stringData", obj)
        self.assertEqual(obj["type"], "Opaque")

    def test_data_base64(self):
        """data values must be base64."""
        _, causes = check(core.SECRET, {"data": {"k": "not base64!"}})
        self.assertEqual(causes, [("FieldValueInvalid", "data[k]")])


class ConfigMapTests(SynchronousTestCase):
    def test_keys(self):
        """ConfigMap keys are config keys, unique across data and binaryData."""
        _, causes = check(core.CONFIG_MAP, {"data": {"a b": "1", "k": "1"},
                                            "binaryData": {"k": "AA=="}})
        self.assertEqual(causes, [("FieldValueInvalid", "data[a b]"),
                                  ("FieldValueInvalid", "binaryData[k]")])
