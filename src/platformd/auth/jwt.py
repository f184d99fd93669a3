"""
JWT (OIDC) bearer tokens, one authenticator per issuer of ``AuthenticationConfiguration``
(upstream's ``plugin/pkg/authenticator/token/oidc``).

``JWTAuthenticator.authenticate(request)``: no bearer token, or a token whose unverified
``iss`` is another issuer's, is ``None`` (so at most one authenticator verifies a token);
otherwise the signature is checked against the issuer's keys (``jwks.KeySource``; RS, ES
and PS with 256/384/512, upstream's allow-list), then ``iss``, ``aud`` (one configured
audience must be in it), ``exp`` (no leeway) and ``nbf`` (5 minutes of leeway), as
go-oidc checks them; then the claim mappings, required claims, claim validation rules and
user validation rules, in upstream's order and words.  Once keys are held, a token is
verified synchronously; the first token (or one naming an unknown ``kid``) waits for a
fetch and the answer is a Deferred.

Failures raise (or fail with) ``AuthenticationError`` carrying upstream's reason; the
client sees 401 only.  Reasons are logged at most once a minute each.
"""

from __future__ import annotations

import base64
import binascii
import json

from joserfc import jws
from joserfc.errors import JoseError
from twisted.logger import Logger
from zope.interface import implementer

from platformd import cel
from platformd.goformat import gojson, gonumbers, gotext
from platformd.util.ratelog import RateLimitedLog
from platformd.auth import authnconfig, jwks
from platformd.auth.authenticators import bearer_token
from platformd.auth.interfaces import (
    AUTHENTICATED_GROUP, AuthenticationError, IAuthenticator, UserInfo,
)
from platformd.codecs.jsoncodec import dumps

log = Logger()

ALGORITHMS = ("ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384",
              "RS512")
#: go-oidc's leeway on ``nbf``; ``exp`` has none.
NBF_LEEWAY = 300.0


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def untrusted_issuer(token: str) -> str | None:
    """The ``iss`` of a compact JWT, unverified; None when it is not one."""
    if token.lstrip().startswith("{"):
        return None
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = gojson.loads(_b64(parts[1]))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(claims, dict):
        return None
    iss = claims.get("iss")
    if iss == "accounts.google.com":
        return "https://accounts.google.com"
    return iss if isinstance(iss, str) else None


#: go-oidc's time claims (``jsonTime``).
_TIME_CLAIMS = ("exp", "iat", "nbf")


def _claim_times(claims: dict) -> dict:
    """
    The time claims as go-oidc's ``jsonTime.UnmarshalJSON`` reads them: Unix seconds
    from an int64, else from a float64 truncated (past int64's range Go's conversion is
    left to the machine; clamped here).  A number past float64's range fails the whole
    unmarshal with ``strconv.ParseFloat``'s error, the first in the token's order.
    """
    times = {}
    for name, value in claims.items():
        if name not in _TIME_CLAIMS:
            continue
        if isinstance(value, gonumbers.BigNumber):
            if value.as_float() is None:
                raise AuthenticationError(
                    "oidc: verify token: oidc: failed to unmarshal claims: "
                    + str(gonumbers.NumError("ParseFloat", value.text, gonumbers.RANGE)))
            value = value.as_float()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            bounds = gonumbers.INT64
            times[name] = max(bounds.start, min(int(value), bounds.stop - 1))
    return times


@implementer(IAuthenticator)
class JWTAuthenticator:
    def __init__(self, config: authnconfig.JWTAuthenticator, clock, reactor, *,
                 keys: jwks.KeySource | None = None, egress=None):
        self.config = config
        self.issuer = config.issuer
        self.url = config.issuer.url
        self.clock = clock
        self.keys = keys or jwks.KeySource(config.issuer, clock, reactor, egress=egress)
        self.audiences = frozenset(config.issuer.audiences)
        self.required_claims = {r.claim: r.required_value
                                for r in config.claim_validation_rules if r.claim}
        # The URL is part of the format, its braces escaped (the log formats it).
        issuer = self.url.replace("{", "{{").replace("}", "}}")
        self._log = RateLimitedLog(log, f"oidc authenticator for {issuer}: {{detail}}",
                                   clock=clock)

    def __repr__(self):
        return f"<JWTAuthenticator {self.url}>"

    # -- IAuthenticator -----------------------------------------------------------------

    def authenticate(self, request):
        token = bearer_token(request)
        if token is None or untrusted_issuer(token) != self.url:
            return None
        return self.authenticate_token(token)

    def authenticate_token(self, token: str):
        """``UserInfo`` or a Deferred of one; ``AuthenticationError``."""
        try:
            header, kid, alg = self._header(token)
            if self.keys.stale():
                self.keys.fetch().addErrback(lambda f: self._log.warn(
                    f"refreshing keys: {f.value}"))
            known = self.keys.ready and (not kid or kid in self.keys.keys)
            if known or not self.keys.may_refetch():
                if not self.keys.ready:
                    raise AuthenticationError("oidc: authenticator not initialized")
                return self._verify(token, kid, alg)
        except AuthenticationError as error:
            self._log.warn(str(error))
            raise
        d = self.keys.fetch()

        def fetched(_):
            return self._verify(token, kid, alg)

        def failed(failure):
            failure.trap(jwks.FetchError)
            if not self.keys.ready:
                raise AuthenticationError("oidc: authenticator not initialized: "
                                          f"{failure.value}")
            return self._verify(token, kid, alg)

        d.addCallbacks(fetched, failed)
        d.addErrback(self._logged)
        return d

    def _logged(self, failure):
        if failure.check(AuthenticationError):
            self._log.warn(str(failure.value))
        return failure

    # -- verification -------------------------------------------------------------------

    def _header(self, token: str):
        parts = token.split(".")
        try:
            header = gojson.loads(_b64(parts[0]))
            if not isinstance(header, dict):
                raise ValueError("not an object")
        except (ValueError, binascii.Error) as error:
            raise AuthenticationError(f"oidc: verify token: oidc: malformed jwt: {error}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise AuthenticationError(
                "oidc: verify token: oidc: id token signed with unsupported algorithm, "
                f"expected {gotext.quote_list(ALGORITHMS)} got {dumps(alg).decode()}")
        kid = header.get("kid") or ""
        return header, kid if isinstance(kid, str) else "", alg

    def _verify(self, token: str, kid: str, alg: str) -> UserInfo:
        payload = None
        for key in self.keys.candidates(kid):
            try:
                payload = jws.deserialize_compact(token, key, algorithms=[alg]).payload
                break
            except (JoseError, ValueError, TypeError):
                continue
        if payload is None:
            raise AuthenticationError("oidc: verify token: failed to verify signature: "
                                      "failed to verify id token signature")
        try:
            claims = gojson.loads(payload)
        except ValueError as error:
            raise AuthenticationError(f"oidc: verify token: oidc: failed to unmarshal claims: "
                                      f"{error}") from None
        if not isinstance(claims, dict):
            raise AuthenticationError("oidc: verify token: oidc: failed to unmarshal claims")
        self._check_standard(claims)
        return self._user(claims)

    def _check_standard(self, claims: dict) -> None:
        def fail(reason: str):
            raise AuthenticationError("oidc: verify token: " + reason)

        if claims.get("iss") != self.url:
            fail("oidc: id token issued by a different provider, expected "
                 f"{json.dumps(self.url)} got {dumps(claims.get('iss')).decode()}")
        aud = claims.get("aud")
        audience = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not self.audiences & {a for a in audience if isinstance(a, str)}:
            got = gotext.quote_list(a for a in audience if isinstance(a, str))
            if len(self.audiences) == 1:
                fail(f"oidc: expected audience {gotext.quote(next(iter(self.audiences)))} "
                     f"got {got}")
            fail(f"oidc: expected audience in {gotext.quote_list(sorted(self.audiences))} "
                 f"got {got}")
        now = self.clock.seconds()
        times = _claim_times(claims)
        exp = times.get("exp", 0)
        if exp < now:
            fail(f"oidc: token is expired (Token Expiry: {gotext.unix_time(exp)})")
        nbf = times.get("nbf")
        if nbf is not None and now + NBF_LEEWAY < nbf:
            fail(f"oidc: current time {gotext.unix_time(int(now))} before the nbf (not "
                 f"before) time: {gotext.unix_time(nbf)}")

    # -- mapping ------------------------------------------------------------------------

    def _user(self, claims: dict) -> UserInfo:
        rules = self.config.rules
        mappings = self.config.claim_mappings
        variables = {"claims": claims}
        name = self._username(claims, variables)
        groups = self._groups(claims, variables)
        uid = ""
        if mappings.uid.claim:
            uid = self._string_claim(claims, mappings.uid.claim, "oidc: parse uid claim "
                                     + json.dumps(mappings.uid.claim))
        elif rules.uid is not None:
            value = self._eval(rules.uid, variables, "uid claim expression")
            if not isinstance(value, str):
                raise AuthenticationError("oidc: error evaluating uid claim expression: "
                                          "uid claim expression must return a string")
            uid = value
        extra = []
        for key, program in rules.extra:
            try:
                values = _string_list(program.evaluate(variables))
            except cel.EvaluationError as error:
                raise AuthenticationError(str(error)) from None
            except ValueError as error:
                raise AuthenticationError("oidc: error evaluating extra claim expression: "
                                          f"{program.source}: {error}") from None
            if values:
                extra.append((key, tuple(values)))
        for claim, wanted in self.required_claims.items():
            if claim not in claims:
                raise AuthenticationError(f"oidc: required claim {claim} not present in ID token")
            value = claims[claim]
            if not isinstance(value, str):
                raise AuthenticationError(
                    f"oidc: parse claim {claim}: json: cannot unmarshal {gotext.json_kind(value)} "
                    "into Go value of type string")
            if value != wanted:
                raise AuthenticationError(f"oidc: required claim {claim} value does not match. "
                                          f"Got = {value}, want = {wanted}")
        for program, message in rules.claim_validation:
            self._check_rule(program, variables, message,
                             "oidc: error evaluating claim validation expression")
        if rules.user_validation:
            user = {"user": authnconfig.user_value(name, uid, groups, extra)}
            for program, message in rules.user_validation:
                self._check_rule(program, user, message,
                                 "oidc: error evaluating user info validation rule")
        return UserInfo(name, uid, tuple(groups) + (AUTHENTICATED_GROUP,),
                        tuple(sorted(extra)))

    def _eval(self, program, variables, what: str):
        try:
            return program.evaluate(variables)
        except cel.EvaluationError as error:
            raise AuthenticationError(f"oidc: error evaluating {what}: {error}") from None

    def _check_rule(self, program, variables, message: str, what: str) -> None:
        value = self._eval(program, variables, what.split("evaluating ", 1)[1])
        if not isinstance(value, bool):
            raise AuthenticationError(f"{what}: validation expression must return a boolean")
        if not value:
            raise AuthenticationError(f"{what}: validation expression '{program.source}' "
                                      f"failed: {message}")

    def _string_claim(self, claims: dict, claim: str, what: str) -> str:
        if claim not in claims:
            raise AuthenticationError(f"{what}: claim not present")
        value = claims[claim]
        if not isinstance(value, str):
            raise AuthenticationError(f"{what}: json: cannot unmarshal "
                                      f"{gotext.json_kind(value)} into Go value of type string")
        return value

    def _username(self, claims: dict, variables: dict) -> str:
        mapping = self.config.claim_mappings.username
        program = self.config.rules.username
        if program is not None:
            value = self._eval(program, variables, "username claim expression")
            if not isinstance(value, str):
                raise AuthenticationError("oidc: error evaluating username claim expression: "
                                          "username claim expression must return a string")
            if not value:
                raise AuthenticationError("oidc: empty username via CEL expression is not "
                                          "allowed")
            return value
        name = self._string_claim(claims, mapping.claim,
                                  f"oidc: parse username claims {json.dumps(mapping.claim)}")
        if mapping.claim == "email" and "email_verified" in claims:
            verified = claims["email_verified"]
            if not isinstance(verified, bool):
                raise AuthenticationError(
                    "oidc: parse 'email_verified' claim: json: cannot unmarshal "
                    f"{gotext.json_kind(verified)} into Go value of type bool")
            if not verified:
                raise AuthenticationError("oidc: email not verified")
        return (mapping.prefix or "") + name

    def _groups(self, claims: dict, variables: dict) -> list:
        mapping = self.config.claim_mappings.groups
        if mapping.claim and mapping.claim in claims:
            value = claims[mapping.claim]
            if value is None:
                return []
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise AuthenticationError(
                    f"oidc: parse groups claim {json.dumps(mapping.claim)}: json: cannot "
                    f"unmarshal {gotext.json_kind(value)} into Go value of type string")
            return [(mapping.prefix or "") + g for g in value if g]
        program = self.config.rules.groups
        if program is None:
            return []
        value = self._eval(program, variables, "group claim expression")
        try:
            return _string_list(value)
        except ValueError as error:
            raise AuthenticationError(f"oidc: error evaluating group claim expression: {error}") from None


def _string_list(value) -> list:
    """upstream's ``convertCELValueToStringList``: "", [] and null are no values."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, str) for v in value):
            raise ValueError("expression must return a string or a list of strings")
        return [v for v in value if v]
    raise ValueError("expression must return a string or a list of strings")


def build_authenticators(config: authnconfig.AuthenticationConfiguration, clock, reactor,
                         egress=None) -> list:
    """One ``JWTAuthenticator`` per ``config.jwt`` entry, in order, fetching keys through
    ``egress`` (the server's ``EgressSelector``; None: directly)."""
    return [JWTAuthenticator(entry, clock, reactor, egress=egress) for entry in config.jwt]
