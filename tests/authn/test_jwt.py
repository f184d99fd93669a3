"""JWTAuthenticator against a real HTTPS OIDC issuer, and its claim rules."""

from __future__ import annotations

from joserfc import jws
from twisted.internet import defer
from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import TestCase

from platformd.auth import authnconfig, jwks, jwt
from platformd.auth.interfaces import AUTHENTICATED_GROUP, AuthenticationError
from tests.authn.helpers import IssuerTestCase, document, jwt_entry, key, request_with


class IssuerTests(IssuerTestCase):
    def authenticator(self, **overrides):
        return jwt.build_authenticators(self.config(**overrides), self.clock, _reactor())[0]

    @defer.inlineCallbacks
    def test_discovery_jwks_and_then_synchronous(self):
        a = self.authenticator()
        d = a.authenticate(request_with(self.token()))
        self.assertIsInstance(d, defer.Deferred)
        user = yield d
        self.assertEqual(user.name, "alice")
        self.assertEqual(user.groups, (AUTHENTICATED_GROUP,))
        self.assertEqual(self.issuer.hits, ["/.well-known/openid-configuration", "/jwks"])
        user = a.authenticate(request_with(self.token({"sub": "bob"})))
        self.assertEqual(user.name, "bob")  # keys held: no Deferred, no fetch
        self.assertEqual(len(self.issuer.hits), 2)

    def test_other_issuer_and_no_token_are_none(self):
        a = self.authenticator()
        self.assertIsNone(a.authenticate(request_with(None)))
        self.assertIsNone(a.authenticate(request_with(self.token(iss="https://other"))))
        self.assertIsNone(a.authenticate(request_with("not.a.jwt")))
        self.assertEqual(self.issuer.hits, [])

    @defer.inlineCallbacks
    def test_key_rotation_refetches_rate_limited(self):
        a = self.authenticator()
        yield a.authenticate(request_with(self.token()))
        self.issuer.keys = [key("k2", "P-256")]
        self.clock.advance(11)
        user = yield a.authenticate(request_with(self.token(signing="k2")))
        self.assertEqual(user.name, "alice")
        self.assertEqual(len(self.issuer.hits), 4)
        # an unknown kid right after a fetch: no new fetch, refused at once
        with self.assertRaises(AuthenticationError) as caught:
            a.authenticate(request_with(self.token(signing="k3")))
        self.assertIn("failed to verify", str(caught.exception))
        self.assertEqual(len(self.issuer.hits), 4)

    @defer.inlineCallbacks
    def test_refusals_logged_once_a_minute(self):
        """The same refusal, however often a client causes it, is logged once a minute."""
        logged = []
        self.patch(jwt, "log", Logger(observer=logged.append))
        a = self.authenticator()
        yield a.authenticate(request_with(self.token()))
        bad = self.token(aud=["someone-else"])
        for _ in range(5):
            self.assertRaises(AuthenticationError, a.authenticate, request_with(bad))
        self.clock.advance(61)
        self.assertRaises(AuthenticationError, a.authenticate, request_with(bad))
        texts = [formatEvent(e) for e in logged]
        self.assertEqual(len(texts), 2, texts)
        self.assertTrue(texts[0].startswith(f"oidc authenticator for {a.url}: "), texts)

    @defer.inlineCallbacks
    def test_slow_issuer_one_fetch_for_concurrent_requests(self):
        self.issuer.hold = True
        a = self.authenticator()
        pending = [a.authenticate(request_with(self.token({"sub": f"u{i}"}))) for i in range(5)]
        while not self.issuer.held:
            yield _tick()
        self.issuer.hold = False
        self.issuer.release()
        users = yield defer.gatherResults(pending)
        self.assertEqual([u.name for u in users], [f"u{i}" for i in range(5)])
        self.assertEqual(self.issuer.hits, ["/.well-known/openid-configuration", "/jwks"])
        self.assertEqual(a.keys.fetches, 1)

    @defer.inlineCallbacks
    def test_failing_issuer_then_recovers(self):
        self.issuer.failing = True
        a = self.authenticator()
        error = yield self.assertFailure(a.authenticate(request_with(self.token())),
                                         AuthenticationError)
        self.assertIn("oidc: authenticator not initialized: 500 Internal Server Error", str(error))
        # within the rate limit: refused without asking the issuer
        self.assertRaises(AuthenticationError, a.authenticate, request_with(self.token()))
        self.assertEqual(len(self.issuer.hits), 1)
        self.issuer.failing = False
        self.clock.advance(10)
        user = yield a.authenticate(request_with(self.token()))
        self.assertEqual(user.name, "alice")

    @defer.inlineCallbacks
    def test_discovered_issuer_must_match(self):
        self.issuer.discovered_issuer = "https://elsewhere"
        a = self.authenticator()
        error = yield self.assertFailure(a.authenticate(request_with(self.token())),
                                         AuthenticationError)
        self.assertIn('oidc: issuer did not match the issuer returned by provider, expected '
                      f'"{self.url}" got "https://elsewhere"', str(error))

    @defer.inlineCallbacks
    def test_discovery_url_used_as_given(self):
        a = self.authenticator(issuer={"discoveryURL": self.url + "/discovery"})
        user = yield a.authenticate(request_with(self.token()))
        self.assertEqual(user.name, "alice")
        self.assertEqual(self.issuer.hits[0], "/discovery")

    @defer.inlineCallbacks
    def test_untrusted_certificate(self):
        config = authnconfig.parse_authentication_config(document(jwt_entry(self.url)))
        a = jwt.build_authenticators(config, self.clock, _reactor())[0]
        error = yield self.assertFailure(a.authenticate(request_with(self.token())),
                                         AuthenticationError)
        self.assertIn("not initialized", str(error))

    def test_stale_keys_refreshed_in_background(self):
        a = self.authenticator()
        a.keys.keys, a.keys.all_keys = {"k1": [key("k1")]}, [key("k1")]
        a.keys.fetched_at = a.keys.attempted_at = self.clock.seconds()
        self.clock.advance(jwks.DEFAULT_REFRESH + 1)
        self.assertEqual(a.authenticate(request_with(self.token())).name, "alice")
        self.assertEqual(a.keys.fetches, 1)
        return a.keys.fetch()  # wait for the background fetch to end


def _reactor():
    from twisted.internet import reactor
    return reactor


def _tick():
    from twisted.internet import reactor
    from twisted.internet.task import deferLater
    return deferLater(reactor, 0.01, lambda: None)


class Rules(TestCase):
    """Every claim rule, with keys already held (no network)."""

    def setUp(self):
        from twisted.internet.task import Clock
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.url = "https://issuer.example"

    def make(self, **overrides):
        config = authnconfig.parse_authentication_config(document(jwt_entry(self.url, **overrides)))
        a = jwt.JWTAuthenticator(config.jwt[0], self.clock, None,
                                 keys=jwks.KeySource(config.jwt[0].issuer, self.clock, None,
                                                     agent=object()))
        k = key("k1")
        a.keys.keys, a.keys.all_keys = {"k1": [k]}, [k]
        a.keys.fetched_at = a.keys.attempted_at = self.clock.seconds()
        return a

    def token(self, claims=None, signing="k1", alg=None, **extra):
        return IssuerTestCase.token(self, claims, signing, alg, **extra)

    def user(self, a, claims=None, **extra):
        return a.authenticate(request_with(self.token(claims, **extra)))

    def fails(self, a, reason, claims=None, **extra):
        with self.assertRaises(AuthenticationError) as caught:
            self.user(a, claims, **extra)
        self.assertEqual(str(caught.exception), reason)

    def test_standard_claims(self):
        a = self.make()
        self.fails(a, 'oidc: verify token: oidc: expected audience "platform" got ["x"]',
                   aud=["x"])
        self.assertEqual(self.user(a, aud="platform").name, "alice")
        self.fails(a, "oidc: verify token: oidc: token is expired (Token Expiry: "
                   "2023-11-14 22:13:19 +0000 UTC)", exp=int(self.clock.seconds()) - 1)
        self.fails(a, "oidc: verify token: oidc: token is expired (Token Expiry: "
                   "1970-01-01 00:00:00 +0000 UTC)", exp=None)
        self.assertEqual(self.user(a, nbf=int(self.clock.seconds()) + 299).name, "alice")
        self.fails(a, "oidc: verify token: oidc: current time 2023-11-14 22:13:20 +0000 UTC "
                   "before the nbf (not before) time: 2023-11-14 22:18:21 +0000 UTC",
                   nbf=int(self.clock.seconds()) + 301)

    def test_time_claims_of_any_length(self):
        """
        exp, iat and nbf as go-oidc's jsonTime reads them: past float64's range the
        claims do not unmarshal (strconv.ParseFloat's words); past int64 a float64,
        clamped, and the time printed as Go prints any int64's.
        """
        a = self.make()
        signer = key("k1")

        def user(times: str):
            payload = ('{"iss": "%s", "aud": ["platform"], "sub": "alice", %s}'
                       % (self.url, times)).encode()
            token = jws.serialize_compact({"alg": "RS256", "kid": signer.kid}, payload, signer)
            return a.authenticate(request_with(token))

        digits = "1" * 5000
        with self.assertRaises(AuthenticationError) as caught:
            user(f'"exp": 1e30, "iat": {digits}, "nbf": -{digits}')
        self.assertEqual(str(caught.exception), (
            "oidc: verify token: oidc: failed to unmarshal claims: strconv.ParseFloat: "
            f'parsing "{digits}": value out of range'))
        for exp in ("1e30", "99999999999999999999", "9223372036854775807"):
            self.assertEqual(user(f'"exp": {exp}, "nbf": -1e30').name, "alice")
        with self.assertRaises(AuthenticationError) as caught:
            user('"exp": -99999999999999999999')
        self.assertEqual(str(caught.exception), "oidc: verify token: oidc: token is expired "
                                                "(Token Expiry: -292277022657-01-27 08:29:52 "
                                                "+0000 UTC)")

    def test_multiple_audiences_match_any(self):
        a = self.make(audiences=("a", "b"), issuer={"audienceMatchPolicy": "MatchAny"})
        self.assertEqual(self.user(a, aud=["b", "z"]).name, "alice")
        self.fails(a, 'oidc: verify token: oidc: expected audience in ["a" "b"] got ["z"]',
                   aud=["z"])

    def test_signatures(self):
        a = self.make()
        self.fails(a, "oidc: verify token: failed to verify signature: failed to verify id "
                   "token signature", signing=key("other"))
        token = self.token()
        head, body, sig = token.split(".")
        with self.assertRaises(AuthenticationError):
            a.authenticate(request_with(f"{head}.{body}.{sig[:-4]}AAAA"))
        for alg in ("RS384", "RS512", "PS256", "PS512"):
            self.assertEqual(self.user(a, alg=alg).name, "alice")
        with self.assertRaises(AuthenticationError) as caught:
            a.authenticate(request_with(
                "eyJhbGciOiJub25lIn0." + token.split(".")[1] + "."))
        self.assertIn('unsupported algorithm, expected ["ES256" "ES384" "ES512" "PS256" '
                      '"PS384" "PS512" "RS256" "RS384" "RS512"] got "none"', str(caught.exception))

    def test_ecdsa(self):
        a = self.make()
        for curve, alg in (("P-256", "ES256"), ("P-384", "ES384"), ("P-521", "ES512")):
            k = key(f"ec-{curve}", curve)
            a.keys.keys[k.kid] = [k]
            self.assertEqual(self.user(a, signing=k, alg=alg).name, "alice")

    def test_username_claim_and_prefix(self):
        a = self.make(username={"claim": "sub", "prefix": "oidc:"})
        self.assertEqual(self.user(a).name, "oidc:alice")
        self.fails(a, 'oidc: parse username claims "sub": json: cannot unmarshal number into '
                   "Go value of type string", sub=7)
        self.fails(a, 'oidc: parse username claims "sub": claim not present', sub=None)

    def test_email_verified(self):
        a = self.make(username={"claim": "email", "prefix": ""})
        self.assertEqual(self.user(a, email="a@x").name, "a@x")
        self.assertEqual(self.user(a, email="a@x", email_verified=True).name, "a@x")
        self.fails(a, "oidc: email not verified", email="a@x", email_verified=False)
        self.fails(a, "oidc: parse 'email_verified' claim: json: cannot unmarshal string into "
                   "Go value of type bool", email="a@x", email_verified="yes")

    def test_username_expression(self):
        a = self.make(username={"expression": "claims.email_verified ? claims.email : ''"})
        self.assertEqual(self.user(a, email="a@x", email_verified=True).name, "a@x")
        self.fails(a, "oidc: empty username via CEL expression is not allowed",
                   email="a@x", email_verified=False)
        b = self.make(username={"expression": "claims.n"})
        self.fails(b, "oidc: error evaluating username claim expression: username claim "
                   "expression must return a string", n=3)
        with self.assertRaises(AuthenticationError) as caught:
            self.user(b)
        self.assertIn("oidc: error evaluating username claim expression: ", str(caught.exception))

    def test_groups(self):
        a = self.make(groups={"claim": "groups", "prefix": "g:"})
        self.assertEqual(self.user(a, groups=["a", "b"]).groups, ("g:a", "g:b", AUTHENTICATED_GROUP))
        self.assertEqual(self.user(a, groups="a").groups, ("g:a", AUTHENTICATED_GROUP))
        self.assertEqual(self.user(a).groups, (AUTHENTICATED_GROUP,))
        self.assertEqual(self.user(a, groups=[]).groups, (AUTHENTICATED_GROUP,))
        self.fails(a, 'oidc: parse groups claim "groups": json: cannot unmarshal number into '
                   "Go value of type string", groups=3)
        b = self.make(groups={"expression": "claims.roles.map(r, 'r:' + r)"})
        self.assertEqual(self.user(b, roles=["x"]).groups, ("r:x", AUTHENTICATED_GROUP))
        c = self.make(groups={"expression": "has(claims.team) ? claims.team : ''"})
        self.assertEqual(self.user(c).groups, (AUTHENTICATED_GROUP,))
        self.assertEqual(self.user(c, team="t").groups, ("t", AUTHENTICATED_GROUP))
        d = self.make(groups={"expression": "claims.n"})
        self.fails(d, "oidc: error evaluating group claim expression: expression must return "
                   "a string or a list of strings", n=1)

    def test_uid(self):
        a = self.make(uid={"claim": "oid"})
        self.assertEqual(self.user(a, oid="42").uid, "42")
        self.fails(a, 'oidc: parse uid claim "oid": claim not present')
        b = self.make(uid={"expression": "claims.sub + '-uid'"})
        self.assertEqual(self.user(b).uid, "alice-uid")

    def test_extra(self):
        a = self.make(extra=[
            {"key": "example.com/constant", "valueExpression": "'c'"},
            {"key": "example.com/copy", "valueExpression": "claims.tags"},
            {"key": "example.com/cond", "valueExpression": "has(claims.x) ? claims.x : ''"},
        ])
        user = self.user(a, tags=["t1", "", "t2"])
        self.assertEqual(user.extra, (("example.com/constant", ("c",)),
                                      ("example.com/copy", ("t1", "t2"))))
        user = self.user(a, tags=[], x="y")
        self.assertEqual(user.extra, (("example.com/cond", ("y",)),
                                      ("example.com/constant", ("c",))))

    def test_required_claims(self):
        a = self.make(claimValidationRules=[{"claim": "hd", "requiredValue": "example.com"}])
        self.assertEqual(self.user(a, hd="example.com").name, "alice")
        self.fails(a, "oidc: required claim hd not present in ID token")
        self.fails(a, "oidc: required claim hd value does not match. Got = x, want = example.com",
                   hd="x")
        self.fails(a, "oidc: parse claim hd: json: cannot unmarshal bool into Go value of "
                   "type string", hd=True)

    def test_claim_validation_expression(self):
        a = self.make(claimValidationRules=[
            {"expression": "claims.sub != 'mallory'", "message": "no mallory"}])
        self.assertEqual(self.user(a).name, "alice")
        self.fails(a, "oidc: error evaluating claim validation expression: validation "
                   "expression 'claims.sub != 'mallory'' failed: no mallory", sub="mallory")

    def test_user_validation(self):
        a = self.make(username={"claim": "sub", "prefix": ""},
                      groups={"claim": "groups", "prefix": ""},
                      extra=[{"key": "example.com/k", "valueExpression": "'v'"}],
                      userValidationRules=[
                          {"expression": "!user.username.startsWith('system:')",
                           "message": "no system names"},
                          {"expression": "!('evil' in user.groups) && "
                                         "user.extra['example.com/k'] == ['v']"}])
        self.assertEqual(self.user(a, groups=["ok"]).name, "alice")
        self.fails(a, "oidc: error evaluating user info validation rule: validation expression "
                   "'!user.username.startsWith('system:')' failed: no system names",
                   sub="system:admin")
        with self.assertRaises(AuthenticationError):
            self.user(a, groups=["evil"])

    def test_reasons_logged_once_a_minute(self):
        from twisted.logger import globalLogPublisher
        seen: list = []
        globalLogPublisher.addObserver(seen.append)
        self.addCleanup(globalLogPublisher.removeObserver, seen.append)
        a = self.make()
        for _ in range(3):
            self.assertRaises(AuthenticationError, self.user, a, aud=["x"])
        self.clock.advance(61)
        self.assertRaises(AuthenticationError, self.user, a, aud=["x"])
        logged = [e for e in seen if e.get("log_namespace", "").endswith("auth.jwt")]
        self.assertEqual(len(logged), 2)
