"""Field errors worded as apimachinery's field.Error words them."""

from twisted.trial.unittest import SynchronousTestCase

from platformd.errors import invalid
from platformd.model import fielderrors as fe


class FieldErrorTests(SynchronousTestCase):
    def test_go_quote(self):
        """Strings are quoted as Go's %q (strconv.Quote): printable characters kept,
        control characters as \\x.., non-printable runes as \\u...."""
        self.assertEqual(fe.go_quote('a"b\\c\n\x01é\ufffd\u200b'),
                         '"a\\"b\\\\c\\n\\x01é\ufffd\\u200b"')

    def test_values_by_type(self):
        """ErrorBody: strings %q, numbers and booleans %v, anything else as JSON."""
        self.assertEqual(fe.invalid("f", "x", "bad").message, 'Invalid value: "x": bad')
        self.assertEqual(fe.invalid("f", 5, "bad").message, "Invalid value: 5: bad")
        self.assertEqual(fe.invalid("f", True, "bad").message, "Invalid value: true: bad")
        self.assertEqual(fe.invalid("f", ["a"], "bad").message, 'Invalid value: ["a"]: bad')

    def test_aggregate(self):
        """One cause alone; several as ToAggregate's bracketed list (errors.NewInvalid)."""
        one = invalid("RoleBinding", "rbac.authorization.platform.io", "x",
                      [fe.required("roleRef.name")])
        self.assertEqual(one.message, 'RoleBinding.rbac.authorization.platform.io "x" is '
                                      "invalid: roleRef.name: Required value")
        two = invalid("RoleBinding", "rbac.authorization.platform.io", "x",
                      [fe.not_supported("roleRef.kind", "", ["Role", "ClusterRole"]),
                       fe.required("roleRef.name")])
        self.assertEqual(two.message, 'RoleBinding.rbac.authorization.platform.io "x" is '
                                      'invalid: [roleRef.kind: Unsupported value: "": supported '
                                      'values: "Role", "ClusterRole", roleRef.name: Required '
                                      "value]")

    def test_aggregate_drops_repeats(self):
        """ToAggregate names a repeated message once; the causes keep every one."""
        error = invalid("ConfigMap", "", "x", [fe.required("data"), fe.required("data")])
        self.assertEqual(error.message, 'ConfigMap "x" is invalid: data: Required value')
        self.assertEqual(len(error.causes), 2)
