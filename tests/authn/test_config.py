"""AuthenticationConfiguration: decoding, every validation rule with its message, legacy flags."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from platformd.auth import authnconfig
from platformd.auth.authnconfig import AuthenticationConfigError, from_legacy_flags
from tests.authn.helpers import document, jwt_entry

URL = "https://issuer.example"


class Validation(TestCase):
    def errors(self, *entries, **top):
        with self.assertRaises(AuthenticationConfigError) as caught:
            authnconfig.parse_authentication_config(document(*entries, **top))
        self.assertNotIn("\n", str(caught.exception))
        return caught.exception.errors

    def one(self, expected, *entries, **top):
        self.assertEqual(self.errors(*entries, **top), [expected])

    def test_valid_both_versions(self):
        for version in ("apiserver.config.platform.io/v1", "apiserver.platform.io/v1beta1"):
            config = authnconfig.parse_authentication_config(document(
                jwt_entry(URL), api_version=version,
                anonymous={"enabled": True, "conditions": [{"path": "/livez"}]}))
            self.assertEqual(config.anonymous, authnconfig.AnonymousAuthConfig(True, ("/livez",)))
        self.assertEqual(authnconfig.parse_authentication_config(document()).jwt, ())

    def test_optional_as_upstream(self):
        """
        Accepted as upstream accepts them, though the reference marks them [Required]:
        neither jwt nor anonymous (validation_test.go "jwt authenticator is empty": no
        authenticators now, some by a reload later), and uid {} (a struct, not a
        pointer: {} is no uid mapping; validateClaimMappings checks only claim and
        expression both set).
        """
        config = authnconfig.parse_authentication_config(
            b"apiVersion: apiserver.config.platform.io/v1\nkind: AuthenticationConfiguration\n")
        self.assertEqual((config.jwt, config.anonymous), ((), None))
        config = authnconfig.parse_authentication_config(document(jwt_entry(URL, uid={})))
        self.assertEqual(config.jwt[0].claim_mappings.uid, authnconfig.ClaimOrExpression())
        self.assertIsNone(config.jwt[0].rules.uid)

    def test_decoding(self):
        for data, message in (
            (b"", "empty config data"),
            (b"kind: AuthenticationConfiguration\napiVersion: v9\n",
             'no kind "AuthenticationConfiguration" is registered for version "v9" in scheme'),
            (document(jwt_entry(URL, bogus=1)), 'strict decoding error: unknown field "jwt[0].bogus"'),
            (document(jwt_entry(URL, issuer={"audiences": "a"})),
             "json: cannot unmarshal string into Go struct field Issuer.jwt.issuer.audiences "
             "of type []audiences"),
        ):
            with self.assertRaises(AuthenticationConfigError) as caught:
                authnconfig.parse_authentication_config(data)
            self.assertEqual(str(caught.exception), message)

    def test_issuer_url(self):
        self.one("jwt[0].issuer.url: Required value", jwt_entry(""))
        self.one('jwt[0].issuer.url: Invalid value: "http://x": URL scheme must be https',
                 jwt_entry("http://x"))
        self.assertEqual(self.errors(jwt_entry("https://u:p@x/?q#f")), [
            'jwt[0].issuer.url: Invalid value: "https://u:p@x/?q#f": URL must not contain a '
            "username or password",
            'jwt[0].issuer.url: Invalid value: "https://u:p@x/?q#f": URL must not contain a query',
            'jwt[0].issuer.url: Invalid value: "https://u:p@x/?q#f": URL must not contain a '
            "fragment"])
        self.one(f'jwt[1].issuer.url: Duplicate value: "{URL}"', jwt_entry(URL), jwt_entry(URL))

    def test_discovery_url(self):
        self.one(f'jwt[0].issuer.discoveryURL: Invalid value: "{URL}/": discoveryURL must be '
                 "different from URL", jwt_entry(URL, issuer={"discoveryURL": URL + "/"}))
        d = "https://d.example/.well-known/openid-configuration"
        self.one(f'jwt[1].issuer.discoveryURL: Duplicate value: "{d}"',
                 jwt_entry(URL, issuer={"discoveryURL": d}),
                 jwt_entry(URL + "/2", issuer={"discoveryURL": d}))

    def test_audiences(self):
        self.one("jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences "
                 "is required", jwt_entry(URL, audiences=()))
        self.one('jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy '
                 "must be MatchAny for multiple audiences", jwt_entry(URL, audiences=("a", "b")))
        self.one('jwt[0].issuer.audienceMatchPolicy: Invalid value: "Exact": audienceMatchPolicy '
                 "must be empty or MatchAny for single audience",
                 jwt_entry(URL, issuer={"audienceMatchPolicy": "Exact"}))
        self.assertEqual(self.errors(jwt_entry(URL, audiences=("a", "a", ""),
                                               issuer={"audienceMatchPolicy": "MatchAny"})),
                         ['jwt[0].issuer.audiences[1]: Duplicate value: "a"',
                          "jwt[0].issuer.audiences[2]: Required value"])

    def test_certificate_authority_and_egress(self):
        self.one('jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": data does not '
                 "contain any valid RSA or ECDSA certificates",
                 jwt_entry(URL, issuer={"certificateAuthority": "nope"}))
        self.one('jwt[0].issuer.egressSelectorType: Invalid value: "etcd": egress selector must '
                 "be either controlplane or cluster",
                 jwt_entry(URL, issuer={"egressSelectorType": "etcd"}))

    def test_claim_validation_rules(self):
        p = "jwt[0].claimValidationRules"
        for rule, expected in (
            ({"claim": "a", "expression": "true"},
             f'{p}[0]: Invalid value: "a": claim and expression can\'t both be set'),
            ({}, f"{p}[0]: Required value: claim or expression is required"),
            ({"claim": "a", "message": "m"},
             f'{p}[0].message: Invalid value: "m": may not be specified when claim is set'),
            ({"expression": "true", "requiredValue": "v"},
             f'{p}[0].requiredValue: Invalid value: "v": may not be specified when expression '
             "is set"),
            ({"expression": "claims.sub"},
             f'{p}[0].expression: Invalid value: "claims.sub": must evaluate to bool but got dyn'),
            ({"expression": "claims.("},
             None),
        ):
            errors = self.errors(jwt_entry(URL, claimValidationRules=[rule]))
            if expected is None:
                self.assertTrue(errors[0].startswith(f'{p}[0].expression: Invalid value: '
                                                     '"claims.(": compilation failed: ERROR:'))
            else:
                self.assertEqual(errors, [expected])
        self.one(f'{p}[1].claim: Duplicate value: "a"',
                 jwt_entry(URL, claimValidationRules=[{"claim": "a"}, {"claim": "a"}]))
        self.one(f'{p}[1].expression: Duplicate value: "true"',
                 jwt_entry(URL, claimValidationRules=[{"expression": "true"},
                                                      {"expression": "true"}]))

    def test_claim_mappings(self):
        p = "jwt[0].claimMappings"
        self.one(f"{p}.username: Required value: claim or expression is required",
                 jwt_entry(URL, username={"prefix": ""}))
        self.one(f'{p}.username: Invalid value: "": claim and expression can\'t both be set',
                 jwt_entry(URL, username={"claim": "sub", "expression": "claims.sub"}))
        self.one(f"{p}.username.prefix: Required value: prefix is required when claim is set. "
                 "It can be set to an empty string to disable prefixing",
                 jwt_entry(URL, username={"claim": "sub"}))
        self.one(f'{p}.username.prefix: Invalid value: "p": may not be specified when '
                 "expression is set", jwt_entry(URL, username={"expression": "claims.sub",
                                                               "prefix": "p"}))
        self.one(f'{p}.username.expression: Invalid value: "1": must evaluate to one of '
                 "[string dyn]", jwt_entry(URL, username={"expression": "1"}))
        self.one(f"{p}.groups.prefix: Required value: prefix is required when claim is set. "
                 "It can be set to an empty string to disable prefixing",
                 jwt_entry(URL, groups={"claim": "g"}))
        self.one(f'{p}.groups.expression: Invalid value: "1": must evaluate to one of '
                 "[string list(string) list(dyn) dyn]", jwt_entry(URL, groups={"expression": "1"}))
        self.one(f'{p}.uid: Invalid value: "": claim and expression can\'t both be set',
                 jwt_entry(URL, uid={"claim": "a", "expression": "claims.a"}))
        self.one(f'{p}.uid.expression: Invalid value: "true": must evaluate to one of '
                 "[string dyn]", jwt_entry(URL, uid={"expression": "true"}))

    def test_email_verified_rule(self):
        message = ("claims.email_verified must be used in claimMappings.username.expression or "
                   "claimMappings.extra[*].valueExpression or claimValidationRules[*].expression "
                   "when claims.email is used in claimMappings.username.expression")
        self.one(f'jwt[0].claimMappings.username.expression: Invalid value: "claims.email": '
                 f"{message}", jwt_entry(URL, username={"expression": "claims.email"}))
        for ok in (
            jwt_entry(URL, username={"expression": "claims.email_verified ? claims.email : ''"}),
            jwt_entry(URL, username={"expression": "claims.email"},
                      claimValidationRules=[{"expression": "claims.email_verified == true"}]),
            jwt_entry(URL, username={"expression": "claims.email"},
                      extra=[{"key": "a.io/v", "valueExpression": "string(claims.email_verified)"}]),
            jwt_entry(URL, username={"expression": "'claims.email'"}),
        ):
            authnconfig.parse_authentication_config(document(ok))

    def test_extra(self):
        p = "jwt[0].claimMappings.extra"

        def extra(*mappings):
            return jwt_entry(URL, extra=list(mappings))

        self.one(f'{p}[0].key: Invalid value: "foo": must be a domain-prefixed path (such as '
                 '"acme.io/foo")', extra({"key": "foo", "valueExpression": "'x'"}))
        self.one(f"{p}[0].key: Required value", extra({"key": "", "valueExpression": "'x'"}))
        self.one(f'{p}[0].key: Invalid value: "a.io/Foo": must be lowercase',
                 extra({"key": "a.io/Foo", "valueExpression": "'x'"}))
        self.one(f'{p}[0].key: Invalid value: "x.k8s.io/a": k8s.io, kubernetes.io and their '
                 "subdomains are reserved for Kubernetes use",
                 extra({"key": "x.k8s.io/a", "valueExpression": "'x'"}))
        self.one(f'{p}[1].key: Duplicate value: "a.io/a"',
                 extra({"key": "a.io/a", "valueExpression": "'x'"},
                       {"key": "a.io/a", "valueExpression": "'y'"}))
        self.one(f"{p}[0].valueExpression: Required value", extra({"key": "a.io/a"}))
        self.one(f'{p}[0].key: Invalid value: "a b": Invalid path (regex used for validation '
                 "is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
                 extra({"key": "a.io/a b", "valueExpression": "'x'"}))

    def test_user_validation_rules(self):
        p = "jwt[0].userValidationRules"
        self.one(f"{p}[0].expression: Required value",
                 jwt_entry(URL, userValidationRules=[{"message": "m"}]))
        self.one(f'{p}[1].expression: Duplicate value: "true"',
                 jwt_entry(URL, userValidationRules=[{"expression": "true"},
                                                     {"expression": "true"}]))
        self.one(f'{p}[0].expression: Invalid value: "user.username": must evaluate to bool '
                 "but got string", jwt_entry(URL, userValidationRules=[
                     {"expression": "user.username"}]))
        errors = self.errors(jwt_entry(URL, userValidationRules=[{"expression": "user.nope"}]))
        self.assertIn("compilation failed", errors[0])

    def test_anonymous_and_limits(self):
        self.one('anonymous.conditions: Invalid value: [{"path": "/livez"}]: enabled should be '
                 "set to true when conditions are defined",
                 anonymous={"enabled": False, "conditions": [{"path": "/livez"}]})
        entries = [jwt_entry(f"{URL}/{i}") for i in range(65)]
        self.one("jwt: Too many: 65: must have at most 64 items", *entries)

    def test_several_errors_aggregate_on_one_line(self):
        with self.assertRaises(AuthenticationConfigError) as caught:
            authnconfig.parse_authentication_config(document(jwt_entry("http://x", audiences=())))
        self.assertEqual(str(caught.exception), '[jwt[0].issuer.url: Invalid value: "http://x": '
                         "URL scheme must be https, jwt[0].issuer.audiences: Required value: at "
                         "least one jwt[0].issuer.audiences is required]")

    def test_load_file(self):
        path = self.mktemp()
        with open(path, "wb") as f:
            f.write(document(jwt_entry(URL)))
        self.assertEqual(authnconfig.load_authentication_config(path).jwt[0].issuer.url, URL)
        with self.assertRaises(AuthenticationConfigError) as caught:
            authnconfig.load_authentication_config(path + "x")
        self.assertIn("no such file or directory", str(caught.exception))


class LegacyFlags(TestCase):
    def mapped(self, **flags):
        config = from_legacy_flags(URL, "client", **flags)
        return config.jwt[0]

    def test_username(self):
        m = self.mapped().claim_mappings.username
        self.assertEqual((m.claim, m.prefix), ("sub", URL + "#"))
        m = self.mapped(username_claim="email").claim_mappings.username
        self.assertEqual((m.claim, m.prefix), ("email", ""))
        m = self.mapped(username_claim="name", username_prefix="-").claim_mappings.username
        self.assertEqual((m.claim, m.prefix), ("name", ""))
        m = self.mapped(username_claim="email", username_prefix="oidc:").claim_mappings.username
        self.assertEqual((m.claim, m.prefix), ("email", "oidc:"))

    def test_groups_required_claims_ca(self):
        a = self.mapped()
        self.assertEqual(a.claim_mappings.groups, authnconfig.PrefixedClaimOrExpression())
        a = self.mapped(groups_claim="groups", groups_prefix="",
                        required_claims={"b": "2", "a": "1"})
        self.assertEqual((a.claim_mappings.groups.claim, a.claim_mappings.groups.prefix),
                         ("groups", ""))
        self.assertEqual([(r.claim, r.required_value) for r in a.claim_validation_rules],
                         [("a", "1"), ("b", "2")])
        self.assertEqual(a.issuer.audiences, ("client",))
        with self.assertRaises(AuthenticationConfigError) as caught:
            self.mapped(ca_file="/nonexistent")
        self.assertEqual(str(caught.exception), "open /nonexistent: no such file or directory")

    def test_issuer_and_client_together(self):
        with self.assertRaises(AuthenticationConfigError) as caught:
            from_legacy_flags(URL, "")
        self.assertEqual(str(caught.exception), "oidc-issuer-url and oidc-client-id must be "
                         "specified together when any oidc-* flags are set")
