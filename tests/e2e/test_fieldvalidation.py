"""
fieldValidation over a socket (spec 4.8.3, 4.8.4), level by level, for create, update,
the three patch kinds and server-side apply, with an unknown or repeated field alone
and beside another error; the table is docs/api-conventions.md's.  Messages are
upstream's (endpoints/handlers create.go, update.go, patch.go; sigs.k8s.io/json's and
go-yaml's strict errors; test/integration/apiserver/field_validation_test.go).
"""

import json

from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import ServerTestCase

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
RB = "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings"
APPLY = "application/apply-patch+yaml"
CANNOT_HANDLE = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '


def warning(text):
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class FieldValidationCase(ServerTestCase):
    @inlineCallbacks
    def expect(self, deferred, code, reason=None, warnings=None):
        r = yield deferred
        self.assertEqual(r.code, code, r.body[:800])
        if reason is not None:
            self.assertEqual(r.json().get("reason"), reason)
        if warnings is not None:
            self.assertEqual(r.headers_named("Warning"), [warning(w) for w in warnings])
        return r


class BodyTests(FieldValidationCase):
    """POST and PUT: the body decoded strictly (create.go, update.go)."""

    JSON = (b'{"metadata": {"name": "a", "name": "a", "labels": {}, "unknownMeta": 1},'
            b' "data": {"k": "1", "k": "2"}, "unknown1": 1, "unknownDupe": 1, "unknownDupe": 2}')
    #: sigs.k8s.io/json's order: where each is met, a repeated unknown field once.
    PROBLEMS = ['duplicate field "metadata.name"', 'unknown field "metadata.unknownMeta"',
                'duplicate field "data.k"', 'unknown field "unknown1"',
                'unknown field "unknownDupe"']

    def send(self, method, level, body, content_type="application/json", name="a"):
        path = CM if method == "POST" else f"{CM}/{name}"
        query = f"?fieldValidation={level}" if level else ""
        return self.client.request(method, path + query, body, content_type=content_type)

    @inlineCallbacks
    def test_unknown_and_duplicate_fields(self):
        """Strict: 400 naming every problem in order; Warn (default): one warning each;
        Ignore: nothing; the last of repeated values is kept, unknown fields dropped."""
        for method, code in (("POST", 201), ("PUT", 200)):
            r = yield self.expect(self.send(method, "Strict", self.JSON), 400, "BadRequest",
                                  warnings=[])
            self.assertEqual(r.json()["message"], CANNOT_HANDLE + "strict decoding error: "
                             + ", ".join(self.PROBLEMS))
            self.assertNotIn("details", r.json())
            for level, warnings in (("Warn", self.PROBLEMS), (None, self.PROBLEMS),
                                    ("Ignore", [])):
                if method == "PUT":
                    yield self.client.post(CM, {"metadata": {"name": "a"}})
                r = yield self.expect(self.send(method, level, self.JSON), code,
                                      warnings=warnings)
                self.assertEqual(r.json()["data"], {"k": "2"})
                self.assertNotIn("unknown1", r.json())
                yield self.client.delete(f"{CM}/a")

    @inlineCallbacks
    def test_yaml_body(self):
        """A YAML body's repeated keys are go-yaml's one error (the line of each repeated
        value), its unknown fields follow in key order (the JSON sigs.k8s.io/yaml makes
        from a Go map); Warn splits the YAML error into its lines."""
        body = (b'metadata:\n  name: ya\n  name: ya\n  unknownMeta: 1\ndata:\n  k: "1"\n'
                b'  k: "2"\nzunknown: 1\nunknown1: 1\n')
        r = yield self.expect(self.send("POST", "Strict", body, "application/yaml"), 400,
                              "BadRequest")
        self.assertEqual(r.json()["message"], CANNOT_HANDLE + (
            'strict decoding error: yaml: unmarshal errors:\n'
            '  line 3: key "name" already set in map\n'
            '  line 7: key "k" already set in map, unknown field "metadata.unknownMeta", '
            'unknown field "unknown1", unknown field "zunknown"'))
        r = yield self.expect(self.send("POST", None, body, "application/yaml"), 201, warnings=[
            'line 3: key "name" already set in map', 'line 7: key "k" already set in map',
            'unknown field "metadata.unknownMeta"', 'unknown field "unknown1"',
            'unknown field "zunknown"'])
        self.assertEqual(r.json()["data"], {"k": "2"})

    @inlineCallbacks
    def test_type_error_first(self):
        """A field of the wrong type beside unknown ones: 400 naming it alone, whatever
        the level, no warnings (spec 4.8.4)."""
        body = b'{"metadata": {"name": "t"}, "bogus": 1, "data": {"k": 1}}'
        for method in ("POST", "PUT"):
            for level in ("Strict", "Warn", "Ignore"):
                r = yield self.expect(self.send(method, level, body, name="t"), 400,
                                      "BadRequest", warnings=[])
                self.assertTrue(r.json()["message"].startswith(CANNOT_HANDLE))
                self.assertIn("data.k", r.json()["message"])
                self.assertNotIn("bogus", r.json()["message"])

    @inlineCallbacks
    def test_beside_a_validation_error(self):
        """Strict: the 400 of the unknown field, before validation; Warn: 422 listing
        every cause, with the warning (upstream's recorder wrote it when the body was
        decoded); Ignore: the same 422 without it."""
        body = {"apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "rb"}, "bogus": 1}
        r = yield self.expect(self.client.post(f"{RB}?fieldValidation=Strict", body), 400,
                              "BadRequest", warnings=[])
        self.assertEqual(r.json()["message"], 'RoleBinding in version "v1" cannot be handled '
                         'as a RoleBinding: strict decoding error: unknown field "bogus"')
        for level, warnings in (("Warn", ['unknown field "bogus"']), ("Ignore", [])):
            r = yield self.expect(self.client.post(f"{RB}?fieldValidation={level}", body), 422,
                                  "Invalid", warnings=warnings)
            self.assertEqual([(c["reason"], c["field"]) for c in r.json()["details"]["causes"]],
                             [("FieldValueNotSupported", "roleRef.kind"),
                              ("FieldValueRequired", "roleRef.name")])
        yield self.client.post(CM, {"metadata": {"name": "u"}})
        bad = {"metadata": {"name": "u"}, "data": {"a b": "1", "c d": "2"}, "bogus": 1}
        r = yield self.expect(self.client.put(f"{CM}/u", bad), 422, "Invalid",
                              warnings=['unknown field "bogus"'])
        self.assertEqual([c["field"] for c in r.json()["details"]["causes"]],
                         ["data[a b]", "data[c d]"])

    @inlineCallbacks
    def test_beside_a_conflict(self):
        """Warn's warnings go with any refusal: a stale resourceVersion's 409 too."""
        yield self.client.post(CM, {"metadata": {"name": "s"}})
        body = {"metadata": {"name": "s", "resourceVersion": "1"}, "bogus": 1}
        yield self.expect(self.client.put(f"{CM}/s", body), 409, "Conflict",
                          warnings=['unknown field "bogus"'])


class PatchTests(FieldValidationCase):
    """JSON, merge and strategic merge patches (patch.go: jsonPatcher, smpPatcher)."""

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        yield self.client.post(CM, {"metadata": {"name": "c"}, "data": {"a": "1"}})

    def patch(self, body, content_type, level=None):
        query = f"?fieldValidation={level}" if level else ""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.client.patch(f"{CM}/c{query}", data, content_type=content_type)

    @inlineCallbacks
    def strict(self, body, content_type, shown_start, problems):
        """Strict: 422 on field "patch", the patch's problems then the object's."""
        r = yield self.expect(self.patch(body, content_type, "Strict"), 422, "Invalid",
                              warnings=[])
        status = r.json()
        message = "strict decoding error: " + ", ".join(problems)
        self.assertTrue(status["message"].startswith(
            ' "" is invalid: patch: Invalid value: "' + shown_start), status["message"])
        self.assertTrue(status["message"].endswith('": ' + message), status["message"])
        self.assertEqual([(c["reason"], c["field"]) for c in status["details"]["causes"]],
                         [("FieldValueInvalid", "patch")])
        for level, warnings in (("Warn", problems), (None, problems), ("Ignore", [])):
            yield self.expect(self.patch(body, content_type, level), 200, warnings=warnings)
        return status["message"]

    @inlineCallbacks
    def test_merge_patch(self):
        """The patch's repeated keys, then the result's unknown fields in key order."""
        body = b'{"data": {"x": "1", "x": "2"}, "zeta": 1, "alpha": {"b": 1}}'
        yield self.strict(body, "application/merge-patch+json", "{", [
            'duplicate field "data.x"', 'unknown field "alpha"', 'unknown field "zeta"'])

    @inlineCallbacks
    def test_strategic_merge_patch(self):
        """As merge, the value shown being the patch as Go's %+v prints a map."""
        body = b'{"data": {"x": "1", "x": "2"}, "zeta": 1e6, "alpha": {"b": 1.5, "c": null}}'
        message = yield self.strict(body, "application/strategic-merge-patch+json",
                                    "map[alpha:map[b:1.5 c:<nil>] data:map[x:2] zeta:1e+06]",
                                    ['duplicate field "data.x"', 'unknown field "alpha"',
                                     'unknown field "zeta"'])
        self.assertTrue(message.startswith(' "" is invalid: patch: Invalid value: "map[alpha:'
                                           'map[b:1.5 c:<nil>] data:map[x:2] zeta:1e+06]": '))

    @inlineCallbacks
    def test_json_patch(self):
        """The operations' own unknown and repeated fields (a value's too), prefixed
        "json patch", then the result's unknown fields in key order."""
        body = (b'[{"op": "add", "path": "/zeta", "value": 1, "foo": "bar"},'
                b' {"op": "add", "path": "/data/y", "path": "/alpha", "value": {"b": 1, "b": 2}}]')
        yield self.strict(body, "application/json-patch+json", "{", [
            'json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"',
            'json patch duplicate field "[1].value.b"', 'unknown field "alpha"',
            'unknown field "zeta"'])

    @inlineCallbacks
    def test_patch_documents_read_strictly(self):
        """Warn and Strict read the patch as UnmarshalStrict does first (400 "error
        decoding patch: ..."); Ignore as json-patch does."""
        json_patch = "application/json-patch+json"
        for body, level, message in (
                ({"op": "add"}, None, "error decoding patch: json: cannot unmarshal object "
                                      "into Go value of type []handlers.jsonPatchOp"),
                (["add"], "Strict", "error decoding patch: json: cannot unmarshal string into "
                                    "Go value of type handlers.jsonPatchOp"),
                ([{"op": 1}], None, "error decoding patch: json: cannot unmarshal number into "
                                    "Go struct field jsonPatchOp.op of type string"),
                ({"op": "add"}, "Ignore", "json: cannot unmarshal object into Go value of "
                                          "type jsonpatch.Patch"),
                (["add"], "Ignore", "json: cannot unmarshal string into Go value of type "
                                    "jsonpatch.Operation")):
            r = yield self.expect(self.patch(body, json_patch, level), 400, "BadRequest")
            self.assertEqual(r.json()["message"], message)
        for content_type, level, message in (
                ("application/merge-patch+json", None, "error decoding patch: json: cannot "
                 "unmarshal array into Go value of type map[string]interface {}"),
                ("application/merge-patch+json", "Ignore", "Invalid JSON Patch"),
                ("application/strategic-merge-patch+json", None, "json: cannot unmarshal array "
                 "into Go value of type map[string]interface {}")):
            r = yield self.expect(self.patch([1], content_type, level), 400, "BadRequest")
            self.assertEqual(r.json()["message"], message)

    @inlineCallbacks
    def test_beside_a_validation_error(self):
        """Strict: the strict 422 on "patch" first; Warn: the object's 422 with the
        warnings; Ignore: without them."""
        body = {"data": {"a b": "1"}, "bogus": 1}
        for content_type in ("application/merge-patch+json",
                             "application/strategic-merge-patch+json"):
            r = yield self.expect(self.patch(body, content_type, "Strict"), 422, "Invalid")
            self.assertEqual(r.json()["details"]["causes"][0]["field"], "patch")
            for level, warnings in (("Warn", ['unknown field "bogus"']), ("Ignore", [])):
                r = yield self.expect(self.patch(body, content_type, level), 422, "Invalid",
                                      warnings=warnings)
                self.assertEqual([c["field"] for c in r.json()["details"]["causes"]],
                                 ["data[a b]"])

    @inlineCallbacks
    def test_type_error_first(self):
        """A field of the wrong type in the patched object: 422 on "patch" naming it, the
        patch's own problems dropped, no warnings."""
        body = b'{"data": {"x": 1, "x": 2}, "bogus": 1}'
        for level in ("Strict", "Warn", "Ignore"):
            r = yield self.expect(self.patch(body, "application/merge-patch+json", level), 422,
                                  "Invalid", warnings=[])
            self.assertIn("cannot unmarshal number", r.json()["message"])
            self.assertNotIn("strict decoding", r.json()["message"])


class ApplyTests(FieldValidationCase):
    """Server-side apply (patch.go applyPatcher, structured-merge-diff)."""

    def apply(self, path, body: bytes, level=None, manager="m"):
        query = f"?fieldManager={manager}" + (f"&fieldValidation={level}" if level else "")
        return self.client.patch(path + query, body, content_type=APPLY)

    @inlineCallbacks
    def test_undeclared_field(self):
        """A field the schema does not declare fails the typed conversion whatever the
        level: a 500 without a reason, the path as structured-merge-diff prints it."""
        cm = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "bogus": 1}'
        pod = (b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": '
               b'"default"}, "spec": {"containers": [{"name": "web", "colour": "red"}]}}')
        for level in ("Strict", "Warn", "Ignore"):
            r = yield self.expect(self.apply(f"{CM}/u", cm, level), 500, warnings=[])
            self.assertEqual(r.json()["message"], "failed to create typed patch object (/u; "
                             "/v1, Kind=ConfigMap): .bogus: field not declared in schema")
            self.assertNotIn("reason", r.json())
            r = yield self.expect(self.apply(f"{PODS}/p", pod, level), 500)
            self.assertEqual(r.json()["message"], (
                'failed to create typed patch object (default/p; /v1, Kind=Pod): '
                '.spec.containers[name="web"].colour: field not declared in schema'))

    @inlineCallbacks
    def test_repeated_keys(self):
        """Only go-yaml's repeated keys: Strict 400 in sigs.k8s.io/yaml's words, Warn one
        warning per line, Ignore nothing; the last value is applied."""
        body = (b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},\n'
                b'"data": {"x": "1",\n"x": "2"}}')
        r = yield self.expect(self.apply(f"{CM}/d", body, "Strict"), 400, "BadRequest")
        self.assertEqual(r.json()["message"], (
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal "
            'errors:\n  line 3: key "x" already set in map'))
        r = yield self.expect(self.apply(f"{CM}/d", body), 201,
                              warnings=['line 3: key "x" already set in map'])
        self.assertEqual(r.json()["data"], {"x": "2"})
        yield self.expect(self.apply(f"{CM}/d", body, "Ignore"), 200, warnings=[])

    @inlineCallbacks
    def test_conflict_first(self):
        """The merge's 409 comes before the strict check of repeated keys."""
        yield self.client.post(CM, {"metadata": {"name": "k"}, "data": {"a": "1"}})
        body = (b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "k"},\n'
                b'"data": {"a": "2",\n"a": "3"}}')
        for level in ("Strict", "Warn"):
            yield self.expect(self.apply(f"{CM}/k", body, level), 409, "Conflict", warnings=[])
