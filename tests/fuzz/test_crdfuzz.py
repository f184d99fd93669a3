"""
No CustomResourceDefinition and no custom object yields a 5xx, a non-Status error or a
held reactor (issue 31, "Bad input"): a bounded, seeded run of ``crdrun.run`` against a
real server on loopback, plus the findings it made, each pinned.  ``bench/fuzz.py
--crds N`` runs the same generator for longer.
"""

import json
import time

import cbor2
from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import ServerTestCase
from tests.fuzz import crdrun, definitions

SEED = 20261127
#: Definitions drawn, and object requests per one served: about 10 s on a quiet machine,
#: 30 s on a loaded one.
COUNT, PER_DEFINITION = 200, 20
CRDS = definitions.CRDS


def _crd(schema: dict, plural: str = "widgets", **version) -> dict:
    return {"apiVersion": "apiextensions.platform.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.fuzz.example.com"},
            "spec": {"group": "fuzz.example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "kind": plural.capitalize()[:-1]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}, **version}]}}


class CustomResourceFuzzTests(ServerTestCase):
    timeout = 240
    server_args = ("--feature-gates", "CBORServingAndStorage=true")

    @inlineCallbacks
    def test_seeded_run(self):
        """200 fuzzed definitions and the objects of those served: no 5xx, every error a
        Status in its encoding, no answer slower than crdrun.SLOW, and the server serves
        afterwards."""
        outcome = yield crdrun.run(self.client, SEED, COUNT, PER_DEFINITION)
        report = "\n".join(f"{found}\n  for {fuzzed.describe()}"
                           for fuzzed, found in outcome.problems[:10])
        self.assertEqual(outcome.problems, [], f"seed {SEED}: {len(outcome.problems)} "
                                               f"problems\n{report}")
        self.assertEqual(outcome.definitions, COUNT)
        self.assertGreater(outcome.served, 0, outcome)  # not all refused
        self.assertGreater(outcome.codes[201], outcome.served, outcome.codes)
        r = yield self.client.get("/api/v1/namespaces")
        self.assertEqual(r.code, 200)

    @inlineCallbacks
    def expect(self, method, path, body=None, content_type="application/json", code=None):
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        r = yield self.client.request(method, path, body, content_type=content_type)
        self.assertLess(r.code, 500, r.body)
        if code:
            self.assertEqual(r.code, code, r.body)
        return r

    @inlineCallbacks
    def served(self, crd: dict):
        """``crd`` created and established."""
        yield self.expect("POST", CRDS, crd, code=201)
        established = yield crdrun.established(self.client, crd["metadata"]["name"])
        self.assertIsNotNone(established)

    @inlineCallbacks
    def test_schema_keywords_of_the_wrong_type(self):
        """A keyword of the wrong JSON type is refused as the body is read (400, Go's
        decoder), not a 500 from the validation tripping over it (the fuzzer's first
        finding; the typed JSONSchemaProps answers it); additionalProperties neither a
        schema nor a boolean is its union's own error."""
        for schema, where, message in (
                ({"type": "object", "x-kubernetes-validations": [{"rule": 5}]},
                 "x-kubernetes-validations[0].rule", "cannot unmarshal number into field "
                 "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule "
                 "of type string"),
                ({"type": "object", "properties": {"a": {"type": ["string"]}}},
                 "properties.a.type", "cannot unmarshal array into field spec.versions[0]."
                 "schema.openAPIV3Schema.properties.a.type of type string"),
                ({"type": "object", "properties": {"a": {"type": "string",
                                                         "maxLength": 2 ** 64}}},
                 "maxLength", "cannot unmarshal number 18446744073709551616 into field "
                 "spec.versions[0].schema.openAPIV3Schema.properties.a.maxLength of type "
                 "int64")):
            r = yield self.expect("POST", CRDS, _crd(schema), code=400)
            self.assertEqual(r.json()["message"], 'CustomResourceDefinition in version "v1" '
                             "cannot be handled as a CustomResourceDefinition: json: "
                             + message, where)
        r = yield self.expect("POST", CRDS, _crd({"type": "object",
                                                  "additionalProperties": "x"}), code=400)
        self.assertTrue(r.json()["message"].endswith("boolean or JSON schema expected"),
                        r.body)

    @inlineCallbacks
    def test_catastrophic_patterns_answer_at_once(self):
        """A pattern a backtracking engine takes exponential time over (^(a+)+$ against
        40 a's and a !) is matched by RE2, as upstream: 422 at once, the loop free; so are
        the find and findAll of rules; RE2's repetition limit is refused in Go's words."""
        yield self.served(_crd({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "name": {"type": "string", "pattern": "^(a+)+$"},
                "other": {"type": "string", "maxLength": 64, "x-kubernetes-validations": [
                    {"rule": "self.find('^(a|a)*$') == '' && "
                             "self.findAll('(x+x+)+y').size() == 0"}]}}}}}))
        path = "/apis/fuzz.example.com/v1/namespaces/default/widgets"
        started = time.monotonic()
        r = yield self.expect("POST", path, {"metadata": {"name": "w"}, "spec": {
            "name": "a" * 40 + "!", "other": "a" * 40 + "!"}}, code=422)
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertEqual([c["message"] for c in r.json()["details"]["causes"]],
                         [f'Invalid value: "{"a" * 40}!": spec.name in body should match '
                          "'^(a+)+$'"])
        yield self.expect("POST", path, {"metadata": {"name": "w"}, "spec": {
            "name": "aaa", "other": "x" * 60}}, code=201)
        r = yield self.expect("POST", path, {"metadata": {"name": "v"}, "spec": {
            "other": "aaaa"}}, code=422)
        self.assertIn("failed rule", r.json()["message"])
        r = yield self.expect("POST", CRDS, _crd({"type": "object", "properties": {
            "a": {"type": "string", "pattern": "(a{500}){500}"}}}, "gadgets"), code=422)
        self.assertIn("properties[a].pattern: Invalid value: \"(a{500}){500}\": must be a "
                      "valid regular expression, but isn't: error parsing regexp: invalid "
                      "repeat count: `{500}`", r.json()["message"])

    @inlineCallbacks
    def test_map_fields_named_as_cel_keywords(self):
        """A map named "if" (a CEL keyword: a field as "__if__" and as "if") under a
        rule: the two map entries' message names were one (a duplicate symbol, 500)."""
        yield self.served(_crd({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-validations": [
                {"rule": "!has(self.if) || self.if.all(k, self.__if__[k] != 'bad')"}],
            "properties": {"if": {"type": "object", "additionalProperties": {
                "type": "string"}}}}}}))
        r = yield self.expect("POST", "/apis/fuzz.example.com/v1/namespaces/default/widgets",
                              cbor2.dumps({"apiVersion": "fuzz.example.com/v1",
                                           "kind": "Widget", "metadata": {"name": "w"},
                                           "spec": {"if": {"a": "b"}}}),
                              content_type="application/cbor", code=201)
        self.assertEqual(r.json()["spec"], {"if": {"a": "b"}})
        r = yield self.expect("POST", "/apis/fuzz.example.com/v1/namespaces/default/widgets",
                              {"metadata": {"name": "v"}, "spec": {"if": {"a": "bad"}}},
                              code=422)
        self.assertIn("spec: Invalid value: failed rule: !has(self.if)", r.json()["message"])

    @inlineCallbacks
    def test_float64_keywords_past_uint64(self):
        """maximum: 2**64 is a float64 (1.8446744073709552e19), as Go decodes it; it was
        kept as the int 18446744073709551616, which the JSON encoder refused (500), on
        create and update alike."""
        crd = _crd({"type": "object", "properties": {"a": {
            "type": "integer", "maximum": 2 ** 64, "minimum": -2 ** 63 - 1}}})
        yield self.served(crd)
        path = f"{CRDS}/{crd['metadata']['name']}"
        current = (yield self.expect("GET", path, code=200)).json()
        schema = current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        self.assertEqual(schema["properties"]["a"]["maximum"], 2.0 ** 64)
        self.assertEqual(schema["properties"]["a"]["minimum"], -2.0 ** 63)
        current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["a"][
            "multipleOf"] = 2 ** 65
        yield self.expect("PUT", path, current, code=200)

    @inlineCallbacks
    def test_embedded_metadata_of_the_wrong_type(self):
        """An embedded resource whose metadata.name is a number (in a field or a list's
        item) is not validated as a name (upstream's coercion drops the malformed field
        first): it was a TypeError, 500."""
        yield self.served(_crd({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "tmpl": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True},
                "list": {"type": "array", "items": {
                    "type": "object", "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True}}}}}}))
        path = "/apis/fuzz.example.com/v1/namespaces/default/widgets"
        embedded = {"apiVersion": "v1", "kind": "K", "metadata": {"name": 1.5}}
        for name, spec in (("a", {"tmpl": embedded}), ("b", {"list": [embedded]})):
            for query in ("", "?fieldValidation=Strict"):
                yield self.expect("POST", path + query, {
                    "metadata": {"name": name}, "spec": spec}, code=201)
                yield self.expect("DELETE", f"{path}/{name}", code=200)
