"""The schema language: type checks, pruning, unknown and duplicate fields."""

import json

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs.jsoncodec import JSONCodec
from platformd.model import meta
from platformd.registry import core, rbac
from platformd.registry.kinds import pod, rbacshapes
from platformd.goformat.gonumbers import BigNumber
from platformd.model.schema import (
    BOOLEAN, DOUBLE, INT64, MAX_PROBLEMS, STRING, DecodeContext, DecodeError, LaxContext,
    ListOf, MapOf, Prop, Struct, Untyped,
)


class DecodeTests(SynchronousTestCase):
    def test_wrong_type_names_field(self):
        """A field of the wrong type fails, naming the field and both types."""
        with self.assertRaises(DecodeError) as e:
            rbac.ROLE_BINDING.schema.decode({"subjects": [{"name": 5}]}, "", DecodeContext())
        self.assertEqual(e.exception.path, "subjects[0].name")
        self.assertIn("cannot unmarshal number", str(e.exception))

    def test_unknown_fields_pruned_and_reported(self):
        """Unknown fields at any depth are dropped and listed with their paths."""
        ctx = DecodeContext()
        obj = core.POD.schema.decode({"spec": {"containers": [{"name": "a", "foo": 1}],
                                               "bar": {}}, "top": 1}, "", ctx)
        self.assertEqual(obj, {"spec": {"containers": [{"name": "a"}]}})
        self.assertEqual(ctx.texts(), ['unknown field "spec.containers[0].foo"',
                                       'unknown field "spec.bar"', 'unknown field "top"'])

    def test_duplicates_reported(self):
        """Keys repeated in the body are reported with their paths."""
        value = JSONCodec().decode(b'{"metadata": {"name": "a", "name": "b"}, '
                                   b'"data": {"k": "1", "k": "2"}}')
        ctx = DecodeContext()
        obj = core.CONFIG_MAP.schema.decode(value, "", ctx)
        self.assertEqual(obj["metadata"]["name"], "b")
        self.assertEqual(ctx.texts(), ['duplicate field "metadata.name"',
                                       'duplicate field "data.k"'])

    def test_problems_in_upstream_order(self):
        """
        As sigs.k8s.io/json meets them (upstream's field_validation_test.go body): a
        repeated key before its value, a repeated unknown field once as unknown, each
        problem once, at most 100, paths strconv.Quote'd.
        """
        value = JSONCodec().decode(
            b'{"metadata": {"name": "a", "name": "b", "labels": {}, "unknownMeta": 1},'
            b' "spec": {"unknown1": 1, "unknownDupe": 1, "unknownDupe": 2,'
            b' "restartPolicy": "Always", "restartPolicy": "Never",'
            b' "containers": [{"name": "c", "unknownNested": 1,'
            b' "image": "i", "image": "j"}]}}')
        ctx = DecodeContext()
        core.POD.schema.decode(value, "", ctx)
        self.assertEqual(ctx.texts(), [
            'duplicate field "metadata.name"', 'unknown field "metadata.unknownMeta"',
            'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"',
            'duplicate field "spec.restartPolicy"',
            'unknown field "spec.containers[0].unknownNested"',
            'duplicate field "spec.containers[0].image"'])
        ctx = DecodeContext()
        core.CONFIG_MAP.schema.decode({f"x{i}": 1 for i in range(150)} | {'q"\n': 1}, "",
                                      ctx)
        self.assertEqual(len(ctx.texts()), MAX_PROBLEMS)
        ctx = DecodeContext()
        core.CONFIG_MAP.schema.decode({'q"\n': 1}, "", ctx)
        self.assertEqual(ctx.texts(), ['unknown field "q\\"\\n"'])

    def test_integers_from_whole_floats(self):
        """A whole float (from YAML or JSON 1.0) is accepted for an integer field."""
        obj = core.POD.schema.decode({"spec": {"terminationGracePeriodSeconds": 5.0}}, "",
                                     DecodeContext())
        self.assertEqual(obj["spec"]["terminationGracePeriodSeconds"], 5)

    def test_boolean_is_not_integer(self):
        """true is not an integer."""
        with self.assertRaises(DecodeError):
            core.POD.schema.decode({"spec": {"terminationGracePeriodSeconds": True}}, "",
                                   DecodeContext())


class NumberTests(SynchronousTestCase):
    """
    A number that misses its field, named as Go's decoder names it (sigs.k8s.io/json
    ``literalStore``): with its text where the field is numeric (``UnmarshalTypeError``
    of ``"number " + s``), as ``number`` elsewhere; skipped in an unknown field; a float64
    in a free-form one if it fits (``convertNumber``).
    """

    def message(self, body: bytes, kind=core.POD) -> str:
        with self.assertRaises(DecodeError) as e:
            kind.schema.decode(JSONCodec().decode(body), "", DecodeContext())
        return str(e.exception)

    def test_past_the_field_type(self):
        """Past int64 (any length), past int32, a fraction or a float64 past its range
        into an integer field: the number as written (a float as Go writes it)."""
        digits = "1" * 5000
        for body, got, field, go_type in (
                (b'{"metadata": {"generation": %s}}' % digits.encode(), digits,
                 "metadata.generation", "int64"),
                (b'{"metadata": {"generation": -9223372036854775809}}',
                 "-9223372036854775809", "metadata.generation", "int64"),
                (b'{"metadata": {"generation": 1e400}}', "1e400", "metadata.generation",
                 "int64"),
                (b'{"metadata": {"generation": 1e19}}', "10000000000000000000",
                 "metadata.generation", "int64"),
                (b'{"metadata": {"generation": 1e308}}', "1e+308", "metadata.generation",
                 "int64"),
                (b'{"metadata": {"generation": 1.5}}', "1.5", "metadata.generation", "int64"),
                (b'{"spec": {"containers": [{"name": "c", "ports": [{"containerPort": '
                 b'2147483648}]}]}}', "2147483648", "spec.containers[0].ports[0].containerPort",
                 "int32")):
            self.assertEqual(self.message(body), f"json: cannot unmarshal number {got} into "
                                                 f"field {field} of type {go_type}")

    def test_other_fields(self):
        """Into a string or an object a number is only "number"; in an unknown field it
        is skipped; a free-form one takes it as a float64 unless past its range."""
        digits = b"1" * 5000
        self.assertEqual(self.message(b'{"metadata": {"name": %s}}' % digits),
                         "json: cannot unmarshal number into field metadata.name of type string")
        self.assertEqual(self.message(b'{"spec": %s}' % digits),
                         "json: cannot unmarshal number into field spec of type object")
        ctx = DecodeContext()
        obj = core.CONFIG_MAP.schema.decode(JSONCodec().decode(
            b'{"metadata": {"name": "a", "x": %s}, "y": 1e400}' % digits), "", ctx)
        self.assertEqual((obj, ctx.texts()), ({"metadata": {"name": "a"}},
                                              ['unknown field "metadata.x"', 'unknown field "y"']))
        status = b'{"status": {"containerStatuses": [{"name": "c", "state": {"a": [%s]}}]}}'
        obj = core.POD.schema.decode(JSONCodec().decode(status % (b"1" * 30)), "",
                                     DecodeContext())
        self.assertEqual(obj["status"]["containerStatuses"][0]["state"],
                         {"a": [1.1111111111111111e29]})
        self.assertEqual(self.message(status % digits), (
            f"json: cannot unmarshal number {digits.decode()} into field "
            "status.containerStatuses[0].state.a[0] of type float64"))


class OrderTests(SynchronousTestCase):
    """
    ``Struct.order``: Go's struct declaration order, as encoding/json writes it (checked
    against ``api/core/v1/types.go``, ``api/rbac/v1/types.go`` and apimachinery's
    ``pkg/apis/meta/v1/types.go``), map keys sorted.
    """

    def test_declarations_follow_go(self):
        """Every modelled field in the Go struct's order (fields not modelled left out)."""
        expected = [
            (core.POD.schema, ["kind", "apiVersion", "metadata", "spec", "status"]),
            (rbac.ROLE_BINDING.schema, ["kind", "apiVersion", "metadata", "subjects", "roleRef"]),
            (core.CONFIG_MAP.schema, ["kind", "apiVersion", "metadata", "immutable", "data",
                                      "binaryData"]),
            (core.SECRET.schema, ["kind", "apiVersion", "metadata", "immutable", "data",
                                  "stringData", "type"]),
            (core.POD.list_schema, ["kind", "apiVersion", "metadata", "items"]),
            (meta.OBJECT_META, [
                "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
                "generation", "creationTimestamp", "deletionTimestamp",
                "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
                "finalizers", "managedFields"]),
            (meta.LIST_META, ["selfLink", "resourceVersion", "continue", "remainingItemCount"]),
            (pod.CONTAINER_PORT, ["name", "hostPort", "containerPort", "protocol", "hostIP"]),
            (pod.CONTAINER, [
                "name", "image", "command", "args", "workingDir", "ports", "env", "resources",
                "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
                "stdin", "stdinOnce", "tty"]),
            (pod.POD_SPEC, [
                "initContainers", "containers", "restartPolicy",
                "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy",
                "nodeSelector", "serviceAccountName", "serviceAccount",
                "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID",
                "hostIPC", "imagePullSecrets", "hostname", "subdomain", "schedulerName",
                "priorityClassName", "priority"]),
            (pod.POD_CONDITION, ["type", "observedGeneration", "status", "lastProbeTime",
                                  "lastTransitionTime", "reason", "message"]),
            (pod.CONTAINER_STATUS, ["name", "state", "lastState", "ready", "restartCount",
                                     "image", "imageID", "containerID", "started"]),
            (pod.POD_STATUS, [
                "observedGeneration", "phase", "conditions", "message", "reason",
                "nominatedNodeName", "hostIP", "podIP", "podIPs", "startTime",
                "initContainerStatuses", "containerStatuses", "qosClass", "resize"]),
            (rbacshapes.SUBJECT, ["kind", "apiGroup", "name", "namespace"]),
            (rbacshapes.ROLE_REF, ["apiGroup", "kind", "name"]),
            (rbacshapes.POLICY_RULE, ["verbs", "apiGroups", "resources", "resourceNames",
                                "nonResourceURLs"]),
        ]
        for struct, names in expected:
            self.assertEqual(list(struct.props), names, struct.name)

    def test_order_in_place(self):
        """Fields, nested structs, list items and map keys; the same dicts, reordered."""
        meta_value = {"labels": {"b": "1", "a": "2"}, "uid": "u", "name": "n"}
        obj = {"roleRef": {"name": "r", "kind": "Role"}, "metadata": meta_value,
               "subjects": [{"name": "a", "kind": "User"}], "kind": "RoleBinding"}
        rbac.ROLE_BINDING.schema.order(obj)
        self.assertIs(obj["metadata"], meta_value)
        self.assertEqual(json.dumps(obj), json.dumps({
            "kind": "RoleBinding", "metadata": {"name": "n", "uid": "u",
                                                "labels": {"a": "2", "b": "1"}},
            "subjects": [{"kind": "User", "name": "a"}],
            "roleRef": {"kind": "Role", "name": "r"}}))

    def test_unknown_fields_follow(self):
        """A free-form struct's fields (ContainerState) stay as they came, after known ones."""
        status = {"containerStatuses": [{"state": {"waiting": {}, "running": {}},
                                         "name": "c"}], "phase": "Running"}
        pod.POD_STATUS.order(status)
        self.assertEqual(json.dumps(status), json.dumps({
            "phase": "Running", "containerStatuses": [
                {"name": "c", "state": {"waiting": {}, "running": {}}}]}))

    def test_order_interleaved(self):
        """Unnamed fields of a free-form struct go after the named ones, in the order
        they came, wherever they were; structs in maps and in lists of lists are
        ordered; ordering an ordered object changes nothing."""
        inner = Struct("t.In", {"a": Prop(STRING), "b": Prop(STRING)})
        outer = Struct("t.Out", {"x": Prop(STRING), "m": Prop(MapOf(inner)),
                                 "ll": Prop(ListOf(ListOf(inner))), "y": Prop(STRING)},
                       preserve_unknown=True)
        value = {"u2": 1, "y": "1", "u1": {"b": 1, "a": 2}, "ll": [[{"b": "1", "a": "2"}]],
                 "m": {"z": {"b": "1", "a": "2"}, "c": {"b": "1"}}, "x": "2"}
        expected = ('{"x": "2", "m": {"c": {"b": "1"}, "z": {"a": "2", "b": "1"}}, '
                    '"ll": [[{"a": "2", "b": "1"}]], "y": "1", "u2": 1, '
                    '"u1": {"b": 1, "a": 2}}')
        outer.order(value)
        self.assertEqual(json.dumps(value), expected)
        outer.order(value)
        self.assertEqual(json.dumps(value), expected)

    def test_set_resource_version(self):
        """resourceVersion goes after uid (ObjectMeta's order), or is replaced in place."""
        value = {"name": "n", "namespace": "d", "uid": "u", "labels": {}}
        meta.set_resource_version(value, "5")
        self.assertEqual(list(value), ["name", "namespace", "uid", "resourceVersion", "labels"])
        meta.set_resource_version(value, "6")
        self.assertEqual(list(value.items())[3], ("resourceVersion", "6"))
        only = {"name": "n"}
        meta.set_resource_version(only, "1")
        self.assertEqual(list(only), ["name", "resourceVersion"])


class GoTypeTests(SynchronousTestCase):
    """What the language says of Go types beyond plain fields: omitempty, float64, a
    type with its own JSON form, and decoding below one."""

    def setUp(self):
        self.struct = Struct("t.T", {
            "kept": Prop(STRING), "s": Prop(STRING, omit_empty=True),
            "b": Prop(BOOLEAN, omit_empty=True), "n": Prop(INT64, omit_empty=True),
            "l": Prop(ListOf(STRING), omit_empty=True),
            "m": Prop(MapOf(STRING), omit_empty=True),
            "inner": Prop(Struct("t.I", {}), omit_empty=True),
            "d": Prop(DOUBLE), "any": Prop(Untyped("t.Any", {}, preserve_unknown=True))})

    def test_omit_empty(self):
        """An omitempty field's zero value is dropped, a struct never; a field without
        omitempty keeps its zero."""
        got = self.struct.decode({"kept": "", "s": "", "b": False, "n": 0, "l": [], "m": {},
                                  "inner": {}}, "", DecodeContext())
        self.assertEqual(got, {"kept": "", "inner": {}})
        got = self.struct.decode({"s": "x", "b": True, "n": 1, "l": ["a"], "m": {"k": "v"}},
                                 "", DecodeContext())
        self.assertEqual(got, {"s": "x", "b": True, "n": 1, "l": ["a"], "m": {"k": "v"}})

    def test_double(self):
        """A float64 comes back as Go's JSON writes it; past its range, or not a number,
        it is refused."""
        for given, expected in ((5.0, 5), (2, 2), (-1.5, -1.5), (1e21, 1e21),
                                (BigNumber("1" + "0" * 29), 1e29)):
            got = self.struct.decode({"d": given}, "", DecodeContext())["d"]
            self.assertEqual((got, type(got)), (expected, type(expected)))
        for bad, message in ((BigNumber("1e400"), "number 1e400"), (True, "bool"),
                             ("1", "string")):
            with self.assertRaises(DecodeError) as e:
                self.struct.decode({"d": bad}, "", DecodeContext())
            self.assertEqual(str(e.exception),
                             f"json: cannot unmarshal {message} into field d of type float64")

    def test_untyped_kept_whole(self):
        """An untyped value is any JSON, kept as written and never reordered; null is
        absent."""
        value = {"z": [1, {"y": None}], "a": "b"}
        obj = {"any": value}
        got = self.struct.decode(obj, "", DecodeContext())
        self.struct.order(got)
        self.assertEqual(list(got["any"]), ["z", "a"])
        self.assertEqual(got, obj)
        self.assertEqual(self.struct.decode({"any": None}, "", DecodeContext()), {})

    def test_lax_context_reports_nothing(self):
        """Below a type with its own UnmarshalJSON nothing strict is reported; unknown
        fields are still pruned."""
        ctx = LaxContext()
        value = JSONCodec().decode(b'{"kept": "a", "kept": "b", "foo": 1}')
        self.assertEqual(self.struct.decode(value, "", ctx), {"kept": "b"})
        self.assertEqual(ctx.texts(), [])
