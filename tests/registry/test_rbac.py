"""Validation and defaulting of the RBAC kinds (spec 2.2, 2.3), cause by cause."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.registry import rbac
from platformd.registry.kinds.rbacshapes import GROUP
from platformd.model.schema import DecodeContext


def check(kind, obj):
    """Decode, default and validate like a create; the list of (reason, field)."""
    obj = kind.schema.decode(obj, "", DecodeContext())
    obj.setdefault("metadata", {}).setdefault("name", "b")
    if kind.namespaced:
        obj["metadata"].setdefault("namespace", "default")
    kind.default(obj)
    return obj, [(c.reason, c.field) for c in kind.validate_all(obj)]


def binding(**fields):
    out = {"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}}
    out.update(fields)
    return out


class RoleBindingValidationTests(SynchronousTestCase):
    def test_valid(self):
        """A binding of a Role to a user, a group and a service account is valid."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "default"},
        ]))
        self.assertEqual(causes, [])

    def test_role_ref_required(self):
        """roleRef is required."""
        _, causes = check(rbac.ROLE_BINDING, {"subjects": []})
        self.assertEqual(causes, [("FieldValueRequired", "roleRef")])

    def test_role_ref_name_required(self):
        """roleRef.name is required."""
        _, causes = check(rbac.ROLE_BINDING, {"roleRef": {"kind": "Role"}})
        self.assertEqual(causes, [("FieldValueRequired", "roleRef.name")])

    def test_role_ref_kind(self):
        """A RoleBinding's roleRef.kind is Role or ClusterRole."""
        _, causes = check(rbac.ROLE_BINDING, {"roleRef": {"kind": "Pod", "name": "r"}})
        self.assertEqual(causes, [("FieldValueNotSupported", "roleRef.kind")])

    def test_role_ref_api_group_defaulted(self):
        """An empty roleRef.apiGroup defaults to the RBAC group."""
        obj, causes = check(rbac.ROLE_BINDING, {"roleRef": {"kind": "ClusterRole", "name": "r"}})
        self.assertEqual(causes, [])
        self.assertEqual(obj["roleRef"]["apiGroup"], GROUP)

    def test_role_ref_api_group_other(self):
        """Another roleRef.apiGroup is not supported."""
        _, causes = check(rbac.ROLE_BINDING, {"roleRef": {"apiGroup": "x.io", "kind": "Role",
                                                          "name": "r"}})
        self.assertEqual(causes, [("FieldValueNotSupported", "roleRef.apiGroup")])

    def test_subject_defaults(self):
        """User and Group subjects default apiGroup to the RBAC group; ServiceAccount to ''."""
        obj, _ = check(rbac.ROLE_BINDING, binding(subjects=[
            {"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
            {"kind": "ServiceAccount", "name": "s"}]))
        self.assertEqual([s.get("apiGroup", "") for s in obj["subjects"]], [GROUP, GROUP, ""])

    def test_subject_kind_unknown(self):
        """An unrecognised subject kind is rejected, naming the field."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[{"kind": "Robot", "name": "r"}]))
        self.assertEqual(causes, [("FieldValueNotSupported", "subjects[0].kind")])

    def test_subject_name_required(self):
        """Every subject needs a name."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[{"kind": "User"}]))
        self.assertEqual(causes, [("FieldValueRequired", "subjects[0].name")])

    def test_namespace_on_user_accepted(self):
        """A namespace on a User or Group subject passes validation, as upstream's
        ValidateRoleBindingSubject: spec 2.2/7.4 make it the authorizer's error."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[
            {"kind": "User", "name": "u", "namespace": "ns"},
            {"kind": "Group", "name": "g", "namespace": "ns"}]))
        self.assertEqual(causes, [])

    def test_service_account_api_group(self):
        """A ServiceAccount subject's apiGroup must be empty."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[
            {"kind": "ServiceAccount", "name": "s", "apiGroup": GROUP}]))
        self.assertEqual(causes, [("FieldValueNotSupported", "subjects[0].apiGroup")])

    def test_role_ref_immutable(self):
        """roleRef cannot change on update."""
        old, _ = check(rbac.ROLE_BINDING, binding())
        new, _ = check(rbac.ROLE_BINDING, {"roleRef": {"kind": "Role", "name": "other"}})
        causes = rbac.ROLE_BINDING.validate_update(new, old)
        self.assertEqual([(c.reason, c.field, c.message.endswith("cannot change roleRef"))
                          for c in causes], [("FieldValueInvalid", "roleRef", True)])

    def test_name_path_segment(self):
        """RBAC names may hold anything but '/', '%', '.' and '..'."""
        _, causes = check(rbac.ROLE_BINDING, dict(binding(), metadata={"name": "a/b"}))
        self.assertEqual(causes, [("FieldValueInvalid", "metadata.name")])
        _, causes = check(rbac.ROLE_BINDING, dict(binding(), metadata={"name": "system:Admin"}))
        self.assertEqual(causes, [])


class ClusterRoleBindingValidationTests(SynchronousTestCase):
    def test_only_cluster_role(self):
        """A ClusterRoleBinding may refer only to a ClusterRole."""
        _, causes = check(rbac.CLUSTER_ROLE_BINDING, binding())
        self.assertEqual(causes, [("FieldValueNotSupported", "roleRef.kind")])
        _, causes = check(rbac.CLUSTER_ROLE_BINDING,
                          {"roleRef": {"kind": "ClusterRole", "name": "c"}})
        self.assertEqual(causes, [])

    def test_service_account_needs_namespace(self):
        """A cluster-wide binding of a ServiceAccount must say its namespace."""
        _, causes = check(rbac.CLUSTER_ROLE_BINDING, {
            "roleRef": {"kind": "ClusterRole", "name": "c"},
            "subjects": [{"kind": "ServiceAccount", "name": "s"}]})
        self.assertEqual(causes, [("FieldValueRequired", "subjects[0].namespace")])

    def test_namespace_forbidden_in_metadata(self):
        """A cluster-scoped object carries no namespace."""
        obj = {"metadata": {"name": "x", "namespace": "ns"},
               "roleRef": {"kind": "ClusterRole", "name": "c"}}
        _, causes = check(rbac.CLUSTER_ROLE_BINDING, obj)
        self.assertEqual(causes, [("FieldValueForbidden", "metadata.namespace")])


class RoleValidationTests(SynchronousTestCase):
    def test_rules(self):
        """Rules need verbs, and resource rules need apiGroups and resources."""
        _, causes = check(rbac.ROLE, {"rules": [{"verbs": ["get"]}, {"resources": ["pods"],
                                                                      "apiGroups": [""]}]})
        self.assertEqual(causes, [("FieldValueRequired", "rules[0].apiGroups"),
                                  ("FieldValueRequired", "rules[0].resources"),
                                  ("FieldValueRequired", "rules[1].verbs")])

    def test_non_resource_urls_not_namespaced(self):
        """A Role cannot name non-resource URLs; a ClusterRole can."""
        rule = {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}
        _, causes = check(rbac.ROLE, rule)
        self.assertEqual(causes, [("FieldValueInvalid", "rules[0].nonResourceURLs")])
        _, causes = check(rbac.CLUSTER_ROLE, rule)
        self.assertEqual(causes, [])
