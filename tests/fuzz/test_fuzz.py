"""
Bad input never yields a 5xx or a non-Status answer (issue 11.6): a bounded, seeded run
of ``requests.generate`` against a real server on loopback, plus the findings that
started it, each pinned.  ``bench/fuzz.py`` runs the same generator for longer.
"""

import base64

import cbor2
from twisted.internet.defer import inlineCallbacks

from tests.e2e.harness import Client, ServerTestCase
from tests.fuzz import check, requests

SEED = 20261124
COUNT = 600
CM = "/api/v1/namespaces/default/configmaps"
RB = "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings"


class FuzzTests(ServerTestCase):
    timeout = 240
    server_args = ("--feature-gates", "CBORServingAndStorage=true")

    @inlineCallbacks
    def test_seeded_run(self):
        """600 fuzzed requests: no 5xx, every error a Status in its encoding, and the
        server serves afterwards."""
        codes, problems = yield check.run(self.client, requests.generate(SEED, COUNT))
        report = "\n".join(f"{found}\n  for {fuzzed.describe()}" for fuzzed, found in problems[:10])
        self.assertEqual(problems, [], f"seed {SEED}: {len(problems)} problems\n{report}")
        self.assertEqual(sum(codes.values()), COUNT)
        self.assertGreater(codes[200] + codes[201], 0, codes)  # not all refused
        r = yield self.client.get("/api/v1/namespaces")
        self.assertEqual(r.code, 200)

    @inlineCallbacks
    def expect(self, method, path, body=None, content_type="application/json", code=None,
               reason=None):
        r = yield self.client.request(method, path, body, content_type=content_type)
        self.assertLess(r.code, 500, r.body)
        if code:
            self.assertEqual(r.code, code, r.body)
        if reason:
            self.assertEqual(r.json()["reason"], reason, r.body)
        return r

    @inlineCallbacks
    def test_null_items_are_zero_values(self):
        """null in a list or map is the element's zero value, as Go decodes it: a ""
        finalizer and a {} subject are then 422 Invalid, a "" label value is fine."""
        r = yield self.expect("POST", CM, b'{"metadata":{"name":"n","finalizers":[null]}}',
                              code=422, reason="Invalid")
        self.assertIn("metadata.finalizers[0]", r.json()["message"])
        body = (b'{"metadata":{"name":"n"},"subjects":[null],"roleRef":{"apiGroup":'
                b'"rbac.authorization.platform.io","kind":"ClusterRole","name":"x"}}')
        r = yield self.expect("POST", RB, body, code=422, reason="Invalid")
        self.assertIn("subjects[0].kind: Unsupported value", r.json()["message"])
        r = yield self.expect("POST", CM, b"metadata:\n  name: yml\n  labels:\n    a: ~\n",
                              content_type="application/yaml", code=201)
        self.assertEqual(r.json()["metadata"]["labels"], {"a": ""})

    @inlineCallbacks
    def test_lone_surrogate_becomes_replacement_character(self):
        """An unpaired \\ud800 escape reads as U+FFFD (Go's decoder): an invalid name,
        422, as a JSON Status (it was twisted.web's HTML page)."""
        r = yield self.expect("POST", CM, b'{"metadata":{"name":"\\ud800"}}', code=422,
                              reason="Invalid")
        self.assertEqual(r.json()["details"]["name"], "\ufffd")

    @inlineCallbacks
    def test_charsets_and_huge_numbers(self):
        """Non-UTF-8 bodies under any charset parameter, and 30-digit integers, are
        400 BadRequest Status answers."""
        for content_type, body in (
                ("application/json; charset=latin1", b'{"metadata":{"name":"a\xff"}}'),
                ("application/json; charset=utf-16", '{"metadata":{}}'.encode("utf-16")),
                ("application/json", b'{"metadata":{"name":123456789012345678901234567890}}')):
            yield self.expect("POST", CM, body, content_type=content_type, code=400,
                              reason="BadRequest")

    @inlineCallbacks
    def test_non_utf8_path(self):
        """A %ff path segment reads as U+FFFD (it was a text/html 400): a namespace of
        that name simply holds nothing."""
        r = yield self.expect("GET", "/api/v1/namespaces/%ff/configmaps", code=200)
        self.assertEqual(r.json()["items"], [])
        yield self.expect("GET", "/api/v1/namespaces/%ff/configmaps/x", code=404,
                          reason="NotFound")

    @inlineCallbacks
    def test_long_paths(self):
        """A 70,000-byte path segment is served (Go reads 1 MiB of request line and
        headers; twisted.web dropped the connection past 16 KiB); past 1 MiB the answer
        is a 431 Status."""
        r = yield self.expect("GET", "/api/v1/namespaces/default/configmaps/" + "a" * 70000,
                              code=404, reason="NotFound")
        self.assertEqual(r.header("Content-Type"), "application/json")
        r = yield self.client.request("GET", "/api/v1/namespaces/" + "a" * (1 << 20))
        self.assertEqual(r.code, 431)
        self.assertEqual(r.json()["kind"], "Status")
        r = yield self.client.get("/api/v1/namespaces")
        self.assertEqual(r.code, 200)

    @inlineCallbacks
    def test_resource_version_past_uint64(self):
        """A resourceVersion that strconv.ParseUint(rv, 10, 64) refuses is a 400 at once,
        not a wait ending in 504; a JSON patch of arrays is a 400 with Go's words (those
        of UnmarshalStrict unless fieldValidation=Ignore)."""
        for rv in ("18446744073709551616", "99999999999999999999", "+5", "%D9%A3"):
            r = yield self.expect("GET", f"{CM}?resourceVersion={rv}", code=400,
                                  reason="BadRequest")
            self.assertIn("invalid resource version", r.json()["message"])
        yield self.expect("POST", CM, b'{"metadata":{"name":"x"}}', code=201)
        for level, message in (("Warn", "error decoding patch: json: cannot unmarshal array "
                                         "into Go value of type handlers.jsonPatchOp"),
                               ("Ignore", "json: cannot unmarshal array into Go value of "
                                          "type jsonpatch.Operation")):
            r = yield self.expect("PATCH", f"{CM}/x?fieldValidation={level}", b'[[""]]',
                                  content_type="application/json-patch+json", code=400)
            self.assertEqual(r.json()["message"], message)

    @inlineCallbacks
    def test_numbers_of_any_length(self):
        """
        A number of 5,000 digits (past Python's int-string limit: these were 500s) is read
        as upstream reads it wherever one is read: a body's int64 field refuses it with
        its text, a string field as "number", an unknown one skips it; YAML makes it a
        string (go-yaml v2), CBOR refuses the bignum; every patch kind, apply, query
        parameters, continue tokens, JSON patch indices and a bearer token's claims
        answer 4xx in Go's words.
        """
        long = "9" * 5000
        prefix = 'RoleBinding in version "v1" cannot be handled as a RoleBinding: json: '
        body = b'{"metadata": {"name": "n", "generation": %s}}' % long.encode()
        r = yield self.expect("POST", RB, body, code=400, reason="BadRequest")
        self.assertEqual(r.json()["message"], prefix + f"cannot unmarshal number {long} into "
                                                       "field metadata.generation of type int64")
        r = yield self.expect("POST", RB, b'{"metadata": {"name": %s}}' % long.encode(),
                              code=400)
        self.assertEqual(r.json()["message"], prefix + "cannot unmarshal number into field "
                                                       "metadata.name of type string")
        r = yield self.expect("POST", RB, b"metadata: {name: x, generation: %s}"
                              % long.encode(), content_type="application/yaml", code=400)
        self.assertEqual(r.json()["message"], prefix + "cannot unmarshal string into field "
                                                       "metadata.generation of type int64")
        r = yield self.expect("POST", RB, cbor2.dumps({"metadata": {"generation": 10 ** 5000}}),
                              content_type="application/cbor", code=400)
        self.assertEqual(r.json()["message"], 'RoleBinding in version "v1" cannot be handled '
                                              "as a RoleBinding: cbor: data item of cbor type "
                                              "tag is not accepted by protocol: bignum")
        r = yield self.client.request("POST", RB, b'{"metadata": {"name": "n"}, "roleRef": '
                                                  b'{"kind": "ClusterRole", "name": "view"}, '
                                                  b'"huge": -%s}' % long.encode())
        self.assertEqual((r.code, r.headers_named("Warning")), (201, ['299 - "unknown field '
                                                                      '\\"huge\\""']))

        patched = (yield self.expect("PATCH", f"{RB}/n", b'{"metadata": {"generation": %s}}'
                                     % long.encode(), "application/merge-patch+json",
                                     code=422, reason="Invalid")).json()["message"]
        self.assertTrue(patched.startswith(' "" is invalid: patch: Invalid value: "{'), patched)
        self.assertIn(f'\\"generation\\":{long}}}', patched)  # written as it came
        self.assertTrue(patched.endswith(f'": json: cannot unmarshal number {long} into field '
                                         "metadata.generation of type int64"), patched[-300:])
        for path in (f"/subjects/{long}", "/subjects/99999999999999999999", "/subjects/-1"):
            r = yield self.expect("PATCH", f"{RB}/n", b'[{"op": "add", "path": "%s", '
                                  b'"value": {}}]' % path.encode(),
                                  "application/json-patch+json", code=422)
            self.assertEqual(r.json()["message"], "the server rejected our request due to an "
                                                  "error in our request")
        yield self.expect("PATCH", f"{RB}/n?fieldManager=a", b"apiVersion: rbac.authorization."
                          b"platform.io/v1\nkind: RoleBinding\nmetadata: {generation: %s}\n"
                          % long.encode(), "application/apply-patch+yaml", code=400)

        for query, message in (
                (f"limit={long}", f'strconv.ParseInt: parsing "{long}": value out of range'),
                ("limit=", 'strconv.ParseInt: parsing "": invalid syntax'),
                ("limit=1_0", 'strconv.ParseInt: parsing "1_0": invalid syntax'),
                (f"watch=1&timeoutSeconds=-{long}",
                 f'strconv.ParseInt: parsing "-{long}": value out of range'),
                (f"resourceVersion={long}",
                 f'invalid resource version "{long}": must be a non-negative decimal integer'),
                (f"timeout={long}s", "invalid timeout specified in the request URL - time: "
                                     f'invalid duration "{long}s"')):
            r = yield self.expect("GET", f"{RB}?{query}", code=400, reason="BadRequest")
            self.assertEqual(r.json()["message"], message)
        r = yield self.expect("DELETE", f"{RB}/n?gracePeriodSeconds={long}", code=400)
        self.assertEqual(r.json()["message"],
                         f'strconv.ParseInt: parsing "{long}": value out of range')
        token = base64.urlsafe_b64encode(b'{"v":"meta.platform.io/v1","rv":%s,"start":"a"}'
                                         % long.encode()).decode().rstrip("=")
        r = yield self.expect("GET", f"{RB}?limit=1&continue={token}", code=400)
        self.assertEqual(r.json()["message"], "invalid continue token: continue key is not "
                                              f"valid: json: cannot unmarshal number {long} "
                                              "into Go struct field continueToken.rv of type "
                                              "int64")
        tokens_only = Client(self, self.server.pki_dir, self.server.port_number, identity=None)
        for jwt in requests.BIG_JWTS:
            r = yield tokens_only.request("GET", RB, headers={"Authorization": "Bearer " + jwt})
            self.assertEqual((r.code, r.json()["reason"]), (401, "Unauthorized"))
        yield self.expect("GET", f"{RB}/n", code=200)
