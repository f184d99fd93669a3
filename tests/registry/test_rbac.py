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


def messages(kind, obj):
    """Decode, default and validate like a create; each cause as ``reason field: message``."""
    obj = kind.schema.decode(obj, "", DecodeContext())
    obj.setdefault("metadata", {}).update(name="b", namespace="default")
    if not kind.namespaced:
        del obj["metadata"]["namespace"]
    kind.default(obj)
    return [f"{c.reason} {c.field}: {c.message}" for c in kind.validate_all(obj)]


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

    def test_role_ref_missing_or_empty(self):
        """A binding without a roleRef (absent, null or {}) is refused for its kind and
        name, as upstream's: the struct is always there in Go and its apiGroup is
        defaulted, so there is no "roleRef: Required value"."""
        for body in ({}, {"roleRef": None}, {"roleRef": {}}, {"roleRef": {"apiGroup": ""}}):
            self.assertEqual(messages(rbac.ROLE_BINDING, body), [
                'FieldValueNotSupported roleRef.kind: Unsupported value: "": supported '
                'values: "Role", "ClusterRole"',
                "FieldValueRequired roleRef.name: Required value"], body)
            self.assertEqual(messages(rbac.CLUSTER_ROLE_BINDING, body), [
                'FieldValueNotSupported roleRef.kind: Unsupported value: "": supported '
                'values: "ClusterRole"',
                "FieldValueRequired roleRef.name: Required value"], body)

    def test_everything_wrong_in_upstream_order(self):
        """Metadata, then roleRef's apiGroup, kind and name, then each subject in turn,
        as upstream's ValidateRoleBinding lists them."""
        self.assertEqual(messages(rbac.ROLE_BINDING, {
            "metadata": {"labels": {"a": "-"}},
            "roleRef": {"apiGroup": "x.io", "kind": "Pod", "name": ".."},
            "subjects": [{"kind": "User"}, {"kind": "Group", "name": "g", "apiGroup": "y.io"},
                         {"kind": "ServiceAccount", "name": "S", "apiGroup": "z.io"},
                         {"kind": "Robot", "name": "r"}]}), [
            'FieldValueInvalid metadata.labels: Invalid value: "-": a valid label must be an '
            "empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
            "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
            "[A-Za-z0-9])?')",
            'FieldValueNotSupported roleRef.apiGroup: Unsupported value: "x.io": supported '
            'values: "rbac.authorization.platform.io"',
            'FieldValueNotSupported roleRef.kind: Unsupported value: "Pod": supported values: '
            '"Role", "ClusterRole"',
            "FieldValueInvalid roleRef.name: Invalid value: \"..\": may not be '..'",
            "FieldValueRequired subjects[0].name: Required value",
            'FieldValueNotSupported subjects[1].apiGroup: Unsupported value: "y.io": '
            'supported values: "rbac.authorization.platform.io"',
            'FieldValueInvalid subjects[2].name: Invalid value: "S": a lowercase RFC 1123 '
            "subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex "
            "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
            "([-a-z0-9]*[a-z0-9])?)*')",
            'FieldValueNotSupported subjects[2].apiGroup: Unsupported value: "z.io": '
            'supported values: ""',
            'FieldValueNotSupported subjects[3].kind: Unsupported value: "Robot": supported '
            'values: "ServiceAccount", "User", "Group"'])

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
        """Every subject needs a name: one cause, as v1.36.2 answers (the conformance
        pack's test_subject_name_required)."""
        _, causes = check(rbac.ROLE_BINDING, binding(subjects=[
            {"kind": "User"}, {"kind": "Group"}, {"kind": "ServiceAccount"}]))
        self.assertEqual(causes, [("FieldValueRequired", "subjects[0].name"),
                                  ("FieldValueRequired", "subjects[1].name"),
                                  ("FieldValueRequired", "subjects[2].name")])

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
        """roleRef cannot change on update; the new one is shown as Go's json.Marshal of
        the internal rbac.RoleRef (no JSON tags: Go's field names)."""
        old, _ = check(rbac.ROLE_BINDING, binding())
        new, _ = check(rbac.ROLE_BINDING, {"roleRef": {"kind": "Role", "name": "<&>"}})
        causes = rbac.ROLE_BINDING.validate_update(new, old)
        self.assertEqual([(c.reason, c.field, c.message) for c in causes], [(
            "FieldValueInvalid", "roleRef",
            'Invalid value: {"APIGroup":"rbac.authorization.platform.io","Kind":"Role",'
            '"Name":"\\u003c\\u0026\\u003e"}: cannot change roleRef')])

    def test_update_order(self):
        """An update's causes in ValidateRoleBindingUpdate's order: the binding as a new
        one, then its metadata changes, then the roleRef change."""
        old, _ = check(rbac.ROLE_BINDING, dict(binding(), metadata={
            "name": "b", "finalizers": ["a.io/x"], "deletionTimestamp": "2026-01-01T00:00:00Z"}))
        new, _ = check(rbac.ROLE_BINDING, {
            "metadata": {"name": "b", "finalizers": ["a.io/x", "b.io/y"],
                         "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "roleRef": {"kind": "Role", "name": "other"}, "subjects": [{"kind": "Robot"}]})
        causes = rbac.ROLE_BINDING.validate_update_all(new, old)
        self.assertEqual([c.field for c in causes], [
            "subjects[0].name", "subjects[0].kind", "metadata.finalizers", "roleRef"])

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
