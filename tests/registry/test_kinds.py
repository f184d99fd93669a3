"""
One module per kind (``registry/kinds/``): each holds the whole of its kind, the catalog
registers them by ``gvr``, and what moved there from per-aspect tables is unchanged.
"""

import importlib
import pkgutil

import attrs
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.cache.watchcache import WatchCache
from platformd.codecs import gopresence
from platformd.model.schema import structs
from platformd.registry import kinds, tables
from platformd.registry.catalog import Catalog, builtin
from platformd.registry.kinds import (
    accessreviews, configmap, event, eventsv1, lease, pod, poddisruptionbudget, rbacshapes,
    role, selfsubjectreview, webhookshapes,
)
from platformd.registry.kinds import endpointslice
from platformd.storage.memory import MemoryStorage

RBAC = rbacshapes.GROUP
AUTHZ = accessreviews.GROUP
AUTHN = selfsubjectreview.GROUP
ADMISSION = webhookshapes.GROUP
DISCOVERY = endpointslice.GROUP
POLICY = poddisruptionbudget.GROUP

EVENTS = eventsv1.GROUP
COORDINATION = lease.GROUP
EVENT_COLUMNS = ["Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message",
                 "First Seen", "Count", "Name"]

#: The table columns of each kind, as they stood in registry/tables.py.
COLUMNS = {
    ("", "Namespace"): ["Name", "Status", "Age"],
    ("", "Pod"): ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"],
    ("", "ConfigMap"): ["Name", "Data", "Age"],
    ("apiextensions.platform.io", "CustomResourceDefinition"): ["Name", "Created At"],
    ("", "Secret"): ["Name", "Type", "Data", "Age"],
    ("", "ServiceAccount"): ["Name", "Secrets", "Age"],
    ("", "Binding"): ["Name", "Created At"],  # create only: never listed
    ("", "Node"): ["Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP",
                   "OS-Image", "Kernel-Version", "Container-Runtime"],
    (POLICY, "PodDisruptionBudget"): ["Name", "Min Available", "Max Unavailable",
                                      "Allowed Disruptions", "Age"],
    (RBAC, "Role"): ["Name", "Created At"],
    (RBAC, "ClusterRole"): ["Name", "Created At"],
    (RBAC, "RoleBinding"): ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
    (RBAC, "ClusterRoleBinding"): ["Name", "Role", "Age", "Users", "Groups",
                                   "ServiceAccounts"],
    (ADMISSION, "MutatingWebhookConfiguration"): ["Name", "Webhooks", "Age"],
    (ADMISSION, "ValidatingWebhookConfiguration"): ["Name", "Webhooks", "Age"],
    (ADMISSION, "ValidatingAdmissionPolicy"): ["Name", "Validations", "ParamKind", "Age"],
    (ADMISSION, "ValidatingAdmissionPolicyBinding"): ["Name", "PolicyName", "ParamRef", "Age"],
    # The reviews are never listed; they keep the default.
    (AUTHN, "SelfSubjectReview"): ["Name", "Created At"],
    (AUTHN, "TokenReview"): ["Name", "Created At"],
    (AUTHZ, "LocalSubjectAccessReview"): ["Name", "Created At"],
    (AUTHZ, "SelfSubjectAccessReview"): ["Name", "Created At"],
    (AUTHZ, "SelfSubjectRulesReview"): ["Name", "Created At"],
    (AUTHZ, "SubjectAccessReview"): ["Name", "Created At"],
    # Issue 32: printers.go's eventColumnDefinitions (both versions) and Lease's.
    ("", "Event"): EVENT_COLUMNS,
    (EVENTS, "Event"): EVENT_COLUMNS,
    (COORDINATION, "Lease"): ["Name", "Holder", "Age"],
    # Upstream's printers (pkg/printers/internalversion/printers.go).
    ("", "Service"): ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age",
                      "Selector"],
    ("", "Endpoints"): ["Name", "Endpoints", "Age"],
    (DISCOVERY, "EndpointSlice"): ["Name", "AddressType", "Ports", "Endpoints", "Age"],
}

#: The field selector labels of each kind, as they stood in api/selectors.py (None:
#: apimachinery's default, metadata.name and metadata.namespace).
FIELD_LABELS = {
    ("", "Namespace"): ("metadata.name", "status.phase"),
    ("", "Pod"): ("metadata.name", "metadata.namespace", "spec.nodeName",
                  "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                  "status.phase", "status.podIP"),
    ("", "Secret"): ("metadata.name", "metadata.namespace", "type"),
    ("", "Event"): event.FIELD_LABELS,
    (EVENTS, "Event"): eventsv1.KIND.field_labels,
    ("", "Service"): ("metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"),
    ("", "Node"): ("metadata.name", "spec.unschedulable"),
}


class BuiltinTests(SynchronousTestCase):
    def test_every_kind_module_is_served(self):
        """Each module of registry/kinds/ with a KIND is in builtin()."""
        served = {kind.gvr for kind in builtin().kinds}
        modules = [importlib.import_module(f"{kinds.__name__}.{info.name}")
                   for info in pkgutil.iter_modules(kinds.__path__)]
        defined = {m.KIND.gvr for m in modules if hasattr(m, "KIND")}
        self.assertEqual(defined, served)
        self.assertEqual(len(builtin().kinds), 29)

    def test_columns(self):
        for kind in builtin().kinds:
            self.assertEqual([c.name for c in kind.columns], COLUMNS[kind.group, kind.kind],
                             kind.kind)
        self.assertIs(role.KIND.columns, tables.DEFAULT)

    def test_field_labels(self):
        for kind in builtin().kinds:
            self.assertEqual(kind.field_labels, FIELD_LABELS.get((kind.group, kind.kind)),
                             kind.kind)

    def test_presence_covers_the_schema(self):
        """A kind's presence names its message, its List and every message its schema
        reaches (meta's aside), and nothing of another package."""
        for kind in builtin().kinds:
            if kind.group == "apiextensions.platform.io":
                continue  # no Protobuf message yet (docs/customresources.md)
            package = {"": "platform.api.core.v1.", RBAC: "platform.api.rbac.v1.",
                       AUTHZ: accessreviews.PROTO, AUTHN: selfsubjectreview.PROTO,
                       ADMISSION: webhookshapes.PROTO, EVENTS: eventsv1.PROTO,
                       COORDINATION: lease.PROTO, DISCOVERY: endpointslice.PROTO,
                       POLICY: poddisruptionbudget.PROTO}[kind.group]
            reached = {s.name.removeprefix("io.") for s in structs(kind.schema)}
            reached = {name for name in reached if name.startswith(package)}
            self.assertEqual(reached - set(kind.presence), set(), kind.kind)
            if kind.stored:  # a review has no List
                self.assertIn(package + kind.kind + "List", kind.presence)
            self.assertTrue(all(name.startswith(package) for name in kind.presence))

    def test_gvr(self):
        self.assertEqual(pod.KIND.gvr, ("", "v1", "pods"))
        self.assertEqual(role.KIND.gvr, (RBAC, "v1", "roles"))


class CatalogTests(SynchronousTestCase):
    def test_add_and_remove(self):
        """Kinds come and go by gvr; lookups and group versions follow."""
        catalog = Catalog([pod.KIND])
        self.assertEqual(catalog.group_versions(), {"": ["v1"]})
        catalog.add(role.KIND)
        self.assertIs(catalog.lookup(RBAC, "v1", "roles"), role.KIND)
        self.assertEqual(catalog.kinds, (pod.KIND, role.KIND))
        catalog.remove(pod.KIND)
        self.assertIsNone(catalog.lookup("", "v1", "pods"))
        self.assertEqual(catalog.kinds, (role.KIND,))
        self.assertEqual(catalog.kinds_in("", "v1"), [])
        self.assertEqual(catalog.group_versions(), {RBAC: ["v1"]})

    def test_one_kind_per_gvr(self):
        catalog = Catalog([configmap.KIND])
        with self.assertRaises(ValueError):
            catalog.add(configmap.KIND)
        self.assertEqual(catalog.kinds, (configmap.KIND,))

    def test_add_registers_presence(self):
        Catalog([pod.KIND])
        for name, words in pod.KIND.presence.items():
            self.assertEqual(gopresence.ALWAYS[name], words)

    def test_keyed_by_gvr(self):
        """The watch cache (as the stores) knows a kind by gvr: a kind redefined at the
        same group, version and resource is the same kind to it."""
        cache = WatchCache(MemoryStorage(Clock()), builtin(), Clock())
        redefined = attrs.evolve(pod.KIND, doc="Redefined.")
        self.assertIs(cache.for_kind(redefined), cache.for_kind(pod.KIND))
