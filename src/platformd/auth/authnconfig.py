"""
``--authentication-config``: the AuthenticationConfiguration file (spec 2.5 and 5.4),
decoded and validated as kube-apiserver does it, and the legacy ``--oidc-*`` flags mapped
onto the same shape.

``load_authentication_config(path)`` answers an ``AuthenticationConfiguration`` whose JWT
authenticators carry their compiled CEL (``JWTAuthenticator.rules``), ready for
``jwt.build_authenticators``.  Anything wrong raises one ``AuthenticationConfigError``
whose ``str`` is one line (upstream's ``field.ErrorList.ToAggregate``: ``[a, b]`` for
several) and whose ``errors`` lists the problems one by one.

The stages, as upstream's: strict decoding (``apiVersion``/``kind``, field types,
unknown fields); ``ValidateAuthenticationConfiguration`` (every field path and message as
upstream's ``validation.go``: issuer URLs https, unique, no user/query/fragment;
discoveryURL different from url and unique; audiences non-empty, unique, and
audienceMatchPolicy ``MatchAny`` for several; claim/expression exclusive; prefix required
with a claim; extra keys domain-prefixed, lowercase, not Kubernetes', unique; every CEL
expression compiled with its result type checked; the ``email_verified`` rule; the
``anonymous`` block).

CEL, as upstream's ``authentication/cel`` compiler: claim expressions see ``claims``
(``map(string, dyn)``), user validation rules see ``user`` (``username``, ``uid``,
``groups``, ``extra``: authentication/v1 UserInfo).  Result types: claim validation and
user validation rules ``bool``; username and uid ``string`` (or ``dyn``, checked when
evaluated); groups and extra values ``string`` or a list (or ``dyn``), checked when
evaluated.  No cost is estimated or limited: upstream's ``authentication/cel`` compiler
estimates none and ``ValidateAuthenticationConfiguration`` checks none (see
``platformd.cel`` on runtime budgets).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import attrs
import yaml
from cryptography import x509

from platformd import cel
from platformd.goformat import gotext
from platformd.auth.authzconfig import _Decoder
from platformd.goformat.gotext import os_error
from platformd.errors import Cause
from platformd.model import fielderrors
from platformd.model.meta import dns_subdomain

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KIND = "AuthenticationConfiguration"
API_VERSIONS = frozenset({
    "apiserver.config.platform.io/v1", "apiserver.config.platform.io/v1beta1",
    "apiserver.config.platform.io/v1alpha1", "apiserver.platform.io/v1beta1",
})
MATCH_ANY = "MatchAny"
EGRESS_TYPES = ("controlplane", "cluster")
MAX_JWT = 64
#: kube-apiserver's errors when the file is combined with the legacy flags.
OIDC_FLAGS_EXCLUSIVE = "authentication-config file and oidc-* flags are mutually exclusive"
ANONYMOUS_FLAG_EXCLUSIVE = ("authentication-config file and anonymous-auth flags are "
                            "mutually exclusive")


class AuthenticationConfigError(Exception):
    """The file cannot be used.  ``str``: one line; ``errors``: each problem."""

    def __init__(self, message: str, errors=()):
        super().__init__(" ".join(message.split()))
        self.errors = list(errors) or [message]


# -- the configuration ----------------------------------------------------------------

@attrs.frozen
class Issuer:
    url: str
    audiences: tuple = ()
    discovery_url: str = ""
    certificate_authority: str = ""
    audience_match_policy: str = ""
    egress_selector_type: str = ""


@attrs.frozen
class ClaimValidationRule:
    claim: str = ""
    required_value: str = ""
    expression: str = ""
    message: str = ""


@attrs.frozen
class PrefixedClaimOrExpression:
    claim: str = ""
    #: ``None`` when unset (a claim then needs one); ``""`` is "no prefix".
    prefix: str | None = None
    expression: str = ""


@attrs.frozen
class ClaimOrExpression:
    claim: str = ""
    expression: str = ""


@attrs.frozen
class ExtraMapping:
    key: str
    value_expression: str


@attrs.frozen
class UserValidationRule:
    expression: str
    message: str = ""


@attrs.frozen
class ClaimMappings:
    username: PrefixedClaimOrExpression = PrefixedClaimOrExpression()
    groups: PrefixedClaimOrExpression = PrefixedClaimOrExpression()
    uid: ClaimOrExpression = ClaimOrExpression()
    extra: tuple = ()


@attrs.frozen
class CompiledRules:
    """The compiled CEL of one authenticator (upstream's ``CELMapper``)."""

    username: cel.Program | None = None
    groups: cel.Program | None = None
    uid: cel.Program | None = None
    #: ``((key, program), ...)``
    extra: tuple = ()
    #: ``((program, message), ...)``
    claim_validation: tuple = ()
    #: ``((program, message), ...)``
    user_validation: tuple = ()


@attrs.frozen
class JWTAuthenticator:
    issuer: Issuer
    claim_mappings: ClaimMappings = ClaimMappings()
    claim_validation_rules: tuple = ()
    user_validation_rules: tuple = ()
    rules: CompiledRules = attrs.field(default=CompiledRules(), eq=False)


@attrs.frozen
class AnonymousAuthConfig:
    enabled: bool = False
    #: the ``path`` of each condition
    conditions: tuple = ()


@attrs.frozen
class AuthenticationConfiguration:
    api_version: str = "apiserver.config.platform.io/v1"
    jwt: tuple = ()
    anonymous: AnonymousAuthConfig | None = None


# -- loading --------------------------------------------------------------------------

def load_authentication_config(path: str) -> AuthenticationConfiguration:
    """Read, decode and validate ``path``; ``AuthenticationConfigError`` naming problems."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise AuthenticationConfigError(f"open {path}: {os_error(error)}") from None
    return parse_authentication_config(data)


def parse_authentication_config(data: bytes, disallowed_issuers=()) -> AuthenticationConfiguration:
    """``load_authentication_config`` for the file's bytes."""
    config = decode(data)
    return validated(config, disallowed_issuers)


def validated(config: AuthenticationConfiguration, disallowed_issuers=()) -> AuthenticationConfiguration:
    """``config`` with its CEL compiled; ``AuthenticationConfigError`` when invalid."""
    causes, compiled = validate(config, disallowed_issuers)
    if causes:
        errors = [f"{c.field}: {c.message}" for c in causes]
        raise AuthenticationConfigError(gotext.aggregate(errors), errors)
    return attrs.evolve(config, jwt=tuple(
        attrs.evolve(a, rules=rules) for a, rules in zip(config.jwt, compiled)))


# -- decoding -------------------------------------------------------------------------

def decode(data: bytes) -> AuthenticationConfiguration:
    """Strict decoding, upstream's ``loadAuthenticationConfigFromData`` words."""
    if not data:
        raise AuthenticationConfigError("empty config data")
    try:
        document = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as error:
        raise AuthenticationConfigError("error converting YAML to JSON: "
                                        + " ".join(str(error).split())) from None
    if not isinstance(document, dict):
        raise AuthenticationConfigError(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{gotext.json_kind(document)} into Go value of type struct "
            '{ APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
            '"json:\\"kind,omitempty\\"" }')
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not kind:
        raise AuthenticationConfigError(
            f"Object 'Kind' is missing in '{' '.join(data.decode('utf-8', 'replace').split())[:200]}'")
    if not api_version or api_version not in API_VERSIONS or kind != KIND:
        raise AuthenticationConfigError(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme')
    d = _Decoder()
    top = d.fields(document, "", KIND, "", ("apiVersion", "kind", "jwt", "anonymous"))
    jwts = tuple(_decode_jwt(d, raw, f"jwt[{i}]")
                 for i, raw in enumerate(d.items(top, "jwt", KIND, "")))
    anonymous = None
    if top.get("anonymous") is not None:
        raw = d.fields(top["anonymous"], "anonymous", "AnonymousAuthConfig", "anonymous",
                       ("enabled", "conditions"))
        conditions = []
        for i, item in enumerate(d.items(raw, "conditions", "AnonymousAuthConfig", "anonymous")):
            condition = d.fields(item, f"anonymous.conditions[{i}]", "AnonymousAuthCondition",
                                 "anonymous.conditions", ("path",))
            conditions.append(d.string(condition, "path", "AnonymousAuthCondition",
                                       "anonymous.conditions"))
        anonymous = AnonymousAuthConfig(
            bool(d.boolean(raw, "enabled", "AnonymousAuthConfig", "anonymous")),
            tuple(conditions))
    if d.type_error:
        raise AuthenticationConfigError(d.type_error)
    if d.unknown:
        raise AuthenticationConfigError("strict decoding error: " + ", ".join(
            f'unknown field "{name}"' for name in d.unknown))
    return AuthenticationConfiguration(api_version, jwts, anonymous)


def _strings(d: _Decoder, obj: dict, key: str, struct: str, go: str) -> tuple:
    out = []
    for item in d.items(obj, key, struct, go):
        if not isinstance(item, str):
            d._wrong(item, struct, f"{go}.{key}", "string")
            continue
        out.append(item)
    return tuple(out)


def _decode_jwt(d: _Decoder, raw, path: str) -> JWTAuthenticator:
    go = "jwt"
    entry = d.fields(raw, path, "JWTAuthenticator", go,
                     ("issuer", "claimValidationRules", "claimMappings", "userValidationRules"))
    s, g = "Issuer", f"{go}.issuer"
    iss = d.fields(entry.get("issuer"), f"{path}.issuer", s, g,
                   ("url", "discoveryURL", "certificateAuthority", "audiences",
                    "audienceMatchPolicy", "egressSelectorType"))
    issuer = Issuer(
        url=d.string(iss, "url", s, g), audiences=_strings(d, iss, "audiences", s, g),
        discovery_url=d.string(iss, "discoveryURL", s, g),
        certificate_authority=d.string(iss, "certificateAuthority", s, g),
        audience_match_policy=d.string(iss, "audienceMatchPolicy", s, g),
        egress_selector_type=d.string(iss, "egressSelectorType", s, g))
    rules = []
    s, g = "ClaimValidationRule", f"{go}.claimValidationRules"
    for i, item in enumerate(d.items(entry, "claimValidationRules", "JWTAuthenticator", go)):
        rule = d.fields(item, f"{path}.claimValidationRules[{i}]", s, g,
                        ("claim", "requiredValue", "expression", "message"))
        rules.append(ClaimValidationRule(
            d.string(rule, "claim", s, g), d.string(rule, "requiredValue", s, g),
            d.string(rule, "expression", s, g), d.string(rule, "message", s, g)))
    mpath, g = f"{path}.claimMappings", f"{go}.claimMappings"
    m = d.fields(entry.get("claimMappings"), mpath, "ClaimMappings", g,
                 ("username", "groups", "uid", "extra"))

    def prefixed(name: str) -> PrefixedClaimOrExpression:
        s, gg = "PrefixedClaimOrExpression", f"{g}.{name}"
        obj = d.fields(m.get(name), f"{mpath}.{name}", s, gg, ("claim", "prefix", "expression"))
        prefix = obj.get("prefix")
        if prefix is not None and not isinstance(prefix, str):
            d.string(obj, "prefix", s, gg)
            prefix = None
        return PrefixedClaimOrExpression(d.string(obj, "claim", s, gg), prefix,
                                         d.string(obj, "expression", s, gg))

    username, groups = prefixed("username"), prefixed("groups")
    s = "ClaimOrExpression"
    uid_obj = d.fields(m.get("uid"), f"{mpath}.uid", s, f"{g}.uid", ("claim", "expression"))
    uid = ClaimOrExpression(d.string(uid_obj, "claim", s, f"{g}.uid"),
                            d.string(uid_obj, "expression", s, f"{g}.uid"))
    extra = []
    s = "ExtraMapping"
    for i, item in enumerate(d.items(m, "extra", "ClaimMappings", g)):
        obj = d.fields(item, f"{mpath}.extra[{i}]", s, f"{g}.extra", ("key", "valueExpression"))
        extra.append(ExtraMapping(d.string(obj, "key", s, f"{g}.extra"),
                                  d.string(obj, "valueExpression", s, f"{g}.extra")))
    user_rules = []
    s, g = "UserValidationRule", f"{go}.userValidationRules"
    for i, item in enumerate(d.items(entry, "userValidationRules", "JWTAuthenticator", go)):
        obj = d.fields(item, f"{path}.userValidationRules[{i}]", s, g, ("expression", "message"))
        user_rules.append(UserValidationRule(d.string(obj, "expression", s, g),
                                             d.string(obj, "message", s, g)))
    return JWTAuthenticator(issuer, ClaimMappings(username, groups, uid, tuple(extra)),
                            tuple(rules), tuple(user_rules))


# -- CEL ------------------------------------------------------------------------------

_USER = "platform.UserInfo"
_USER_MESSAGES = cel.proto_file("platform/authentication/userinfo.proto", "platform", {
    "UserInfo": [("username", "string"), ("uid", "string"), ("groups", "repeated string"),
                 ("extra", "map:google.protobuf.ListValue")],
})
_claims_env: cel.Environment | None = None
_user_env: cel.Environment | None = None


def claims_environment() -> cel.Environment:
    """``claims``: ``map(string, dyn)``, as upstream's claims environment."""
    global _claims_env
    if _claims_env is None:
        _claims_env = cel.Environment({"claims": cel.map_of(cel.STRING, cel.DYN)})
    return _claims_env


def user_environment() -> cel.Environment:
    """``user``: authentication/v1 UserInfo (``username``, ``uid``, ``groups``, ``extra``)."""
    global _user_env
    if _user_env is None:
        _user_env = cel.Environment({"user": cel.message_type(_USER)}, _USER_MESSAGES)
    return _user_env


def user_value(name: str, uid: str, groups, extra) -> object:
    """The ``user`` variable for ``user_environment`` programs."""
    env = user_environment()
    message = env.message_class(_USER)(username=name, uid=uid, groups=list(groups))
    for key, values in extra:
        message.extra[key].extend(list(values))
    return message


_STRING_TYPES = (cel.STRING, cel.DYN)
_LIST_TYPES = (cel.STRING, cel.list_of(cel.STRING), cel.list_of(cel.DYN), cel.DYN)


def _compile(env: cel.Environment, field: str, expression: str, types, errs: list):
    try:
        return env.compile(expression, *types)
    except cel.CompileError as error:
        errs.append(fielderrors.invalid(field, expression, str(error)))
        return None


_LITERALS = re.compile(r"""'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*\"""", re.S)


def _selects(expression: str, field: str) -> bool:
    """Whether ``expression`` selects ``claims.<field>`` (upstream's ``hasSelectExp``)."""
    code = _LITERALS.sub('""', expression)
    return re.search(r"(?<![\w.])claims\s*\.\s*\??\s*" + field + r"(?!\w)", code) is not None


# -- validation -----------------------------------------------------------------------

def validate(config: AuthenticationConfiguration, disallowed_issuers=()) -> tuple:
    """upstream's ``ValidateAuthenticationConfiguration``: ``(causes, [CompiledRules])``."""
    errs: list = []
    compiled: list = []
    if len(config.jwt) > MAX_JWT:
        return [Cause("FieldValueTooMany",
                      f"Too many: {len(config.jwt)}: must have at most {MAX_JWT} items",
                      "jwt")], []
    seen_issuers: set = set()
    seen_discovery: set = set()
    for i, authenticator in enumerate(config.jwt):
        path = f"jwt[{i}]"
        rules, causes = validate_jwt_authenticator(authenticator, path, disallowed_issuers)
        errs.extend(causes)
        compiled.append(rules)
        url = authenticator.issuer.url
        if url in seen_issuers:
            errs.append(fielderrors.duplicate(f"{path}.issuer.url", url))
        seen_issuers.add(url)
        discovery = authenticator.issuer.discovery_url
        if discovery:
            if discovery in seen_discovery:
                errs.append(fielderrors.duplicate(f"{path}.issuer.discoveryURL", discovery))
            seen_discovery.add(discovery)
    anonymous = config.anonymous
    if anonymous is not None and not anonymous.enabled and anonymous.conditions:
        errs.append(fielderrors.invalid(
            "anonymous.conditions", [{"path": p} for p in anonymous.conditions],
            "enabled should be set to true when conditions are defined"))
    return errs, compiled


def validate_jwt_authenticator(a: JWTAuthenticator, path: str = "", disallowed_issuers=()) -> tuple:
    """``(CompiledRules, causes)`` for one authenticator (``CompileAndValidateJWTAuthenticator``)."""
    def child(name: str) -> str:
        return f"{path}.{name}" if path else name

    errs: list = []
    errs.extend(_validate_issuer(a.issuer, child("issuer"), disallowed_issuers))
    claims_env = claims_environment()
    uses_email = uses_email_verified = False

    # claimValidationRules
    seen_claims: set = set()
    seen_expressions: set = set()
    claim_validation = []
    for i, rule in enumerate(a.claim_validation_rules):
        fp = f"{child('claimValidationRules')}[{i}]"
        if rule.claim and rule.expression:
            errs.append(fielderrors.invalid(fp, rule.claim, "claim and expression can't both be set"))
        elif not rule.claim and not rule.expression:
            errs.append(fielderrors.required(fp, "claim or expression is required"))
        elif rule.claim:
            if rule.message:
                errs.append(fielderrors.invalid(f"{fp}.message", rule.message,
                                                "may not be specified when claim is set"))
            if rule.claim in seen_claims:
                errs.append(fielderrors.duplicate(f"{fp}.claim", rule.claim))
            seen_claims.add(rule.claim)
        else:
            if rule.required_value:
                errs.append(fielderrors.invalid(f"{fp}.requiredValue", rule.required_value,
                                                "may not be specified when expression is set"))
            if rule.expression in seen_expressions:
                errs.append(fielderrors.duplicate(f"{fp}.expression", rule.expression))
                continue
            seen_expressions.add(rule.expression)
            program = _compile(claims_env, f"{fp}.expression", rule.expression, (cel.BOOL,), errs)
            if program is not None:
                claim_validation.append((program, rule.message))
                uses_email_verified |= _selects(rule.expression, "email_verified")

    # claimMappings
    mp = child("claimMappings")
    m = a.claim_mappings
    username = _validate_prefixed(m.username, f"{mp}.username", True, _STRING_TYPES, errs)
    if username is not None:
        uses_email = _selects(m.username.expression, "email")
        uses_email_verified |= _selects(m.username.expression, "email_verified")
    groups = _validate_prefixed(m.groups, f"{mp}.groups", False, _LIST_TYPES, errs)
    uid = None
    if m.uid.claim and m.uid.expression:
        errs.append(fielderrors.invalid(f"{mp}.uid", "", "claim and expression can't both be set"))
    elif m.uid.expression:
        uid = _compile(claims_env, f"{mp}.uid.expression", m.uid.expression, _STRING_TYPES, errs)
    extra = []
    seen_keys: set = set()
    for i, mapping in enumerate(m.extra):
        fp = f"{mp}.extra[{i}]"
        errs.extend(_domain_prefixed_path(f"{fp}.key", mapping.key))
        if mapping.key != mapping.key.lower():
            errs.append(fielderrors.invalid(f"{fp}.key", mapping.key, "must be lowercase"))
        if _kubernetes_domain(mapping.key):
            errs.append(fielderrors.invalid(
                f"{fp}.key", mapping.key,
                "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"))
        if mapping.key in seen_keys:
            errs.append(fielderrors.duplicate(f"{fp}.key", mapping.key))
            continue
        seen_keys.add(mapping.key)
        if not mapping.value_expression:
            errs.append(fielderrors.required(f"{fp}.valueExpression"))
            continue
        program = _compile(claims_env, f"{fp}.valueExpression", mapping.value_expression,
                           _LIST_TYPES, errs)
        if program is not None:
            extra.append((mapping.key, program))
            uses_email_verified |= _selects(mapping.value_expression, "email_verified")
    if uses_email and not uses_email_verified:
        errs.append(fielderrors.invalid(
            f"{mp}.username.expression", m.username.expression,
            "claims.email_verified must be used in claimMappings.username.expression or "
            "claimMappings.extra[*].valueExpression or claimValidationRules[*].expression "
            "when claims.email is used in claimMappings.username.expression"))

    # userValidationRules
    user_env = user_environment()
    seen_expressions = set()
    user_validation = []
    for i, user_rule in enumerate(a.user_validation_rules):
        fp = f"{child('userValidationRules')}[{i}]"
        if not user_rule.expression:
            errs.append(fielderrors.required(f"{fp}.expression"))
            continue
        if user_rule.expression in seen_expressions:
            errs.append(fielderrors.duplicate(f"{fp}.expression", user_rule.expression))
            continue
        seen_expressions.add(user_rule.expression)
        program = _compile(user_env, f"{fp}.expression", user_rule.expression, (cel.BOOL,), errs)
        if program is not None:
            user_validation.append((program, user_rule.message))
    return CompiledRules(username, groups, uid, tuple(extra), tuple(claim_validation),
                         tuple(user_validation)), errs


def _validate_prefixed(mapping: PrefixedClaimOrExpression, fp: str, required: bool, types,
                       errs: list):
    if mapping.expression and mapping.claim:
        errs.append(fielderrors.invalid(fp, "", "claim and expression can't both be set"))
    elif not mapping.expression and not mapping.claim and required:
        errs.append(fielderrors.required(fp, "claim or expression is required"))
    elif mapping.expression:
        if mapping.prefix is not None:
            errs.append(fielderrors.invalid(f"{fp}.prefix", mapping.prefix,
                                            "may not be specified when expression is set"))
        return _compile(claims_environment(), f"{fp}.expression", mapping.expression, types,
                        errs)
    elif mapping.claim and mapping.prefix is None:
        errs.append(fielderrors.required(
            f"{fp}.prefix", "prefix is required when claim is set. It can be set to an empty "
            "string to disable prefixing"))
    return None


def _validate_issuer(issuer: Issuer, fp: str, disallowed) -> list:
    errs: list = []
    if not issuer.url:
        errs.append(fielderrors.required(f"{fp}.url"))
    else:
        errs.extend(_validate_url(issuer.url, disallowed, f"{fp}.url"))
    if issuer.discovery_url:
        if issuer.url and issuer.url.rstrip("/") == issuer.discovery_url.rstrip("/"):
            errs.append(fielderrors.invalid(f"{fp}.discoveryURL", issuer.discovery_url,
                                            "discoveryURL must be different from URL"))
        errs.extend(_validate_url(issuer.discovery_url, (), f"{fp}.discoveryURL"))
    errs.extend(_validate_audiences(issuer, fp))
    if issuer.certificate_authority:
        try:
            x509.load_pem_x509_certificates(issuer.certificate_authority.encode())
        except ValueError:
            errs.append(fielderrors.invalid(
                f"{fp}.certificateAuthority", "<omitted>",
                "data does not contain any valid RSA or ECDSA certificates"))
    if issuer.egress_selector_type and issuer.egress_selector_type not in EGRESS_TYPES:
        errs.append(fielderrors.invalid(f"{fp}.egressSelectorType", issuer.egress_selector_type,
                                        "egress selector must be either controlplane or cluster"))
    return errs


def _validate_url(url: str, disallowed, fp: str) -> list:
    errs: list = []
    if url in disallowed:
        errs.append(fielderrors.invalid(
            fp, url, "URL must not overlap with disallowed issuers: "
            f"[{' '.join(sorted(disallowed))}]"))
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as error:
        errs.append(fielderrors.invalid(fp, url, f'parse "{url}": {error}'))
        return errs
    if parts.scheme != "https":
        errs.append(fielderrors.invalid(fp, url, "URL scheme must be https"))
    if "@" in parts.netloc:
        errs.append(fielderrors.invalid(fp, url, "URL must not contain a username or password"))
    if parts.query:
        errs.append(fielderrors.invalid(fp, url, "URL must not contain a query"))
    if parts.fragment:
        errs.append(fielderrors.invalid(fp, url, "URL must not contain a fragment"))
    return errs


def _validate_audiences(issuer: Issuer, fp: str) -> list:
    path = f"{fp}.audiences"
    if not issuer.audiences:
        return [fielderrors.required(path, f"at least one {path} is required")]
    errs: list = []
    seen: set = set()
    for i, audience in enumerate(issuer.audiences):
        if not audience:
            errs.append(fielderrors.required(f"{path}[{i}]"))
        if audience in seen:
            errs.append(fielderrors.duplicate(f"{path}[{i}]", audience))
        seen.add(audience)
    policy = issuer.audience_match_policy
    if len(issuer.audiences) > 1 and policy != MATCH_ANY:
        errs.append(fielderrors.invalid(f"{fp}.audienceMatchPolicy", policy,
                                        "audienceMatchPolicy must be MatchAny for multiple audiences"))
    if len(issuer.audiences) == 1 and policy and policy != MATCH_ANY:
        errs.append(fielderrors.invalid(
            f"{fp}.audienceMatchPolicy", policy,
            "audienceMatchPolicy must be empty or MatchAny for single audience"))
    return errs


_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile("^" + _HTTP_PATH_FMT + "$")


def _domain_prefixed_path(fp: str, value: str) -> list:
    """upstream's ``IsDomainPrefixedPath``."""
    if not value:
        return [fielderrors.required(fp)]
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1]:
        return [fielderrors.invalid(fp, value,
                                    'must be a domain-prefixed path (such as "acme.io/foo")')]
    host, path = segments
    errs = [fielderrors.invalid(fp, host, problem) for problem in dns_subdomain(host)]
    if not _HTTP_PATH.match(path):
        errs.append(fielderrors.invalid(
            fp, path, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')"))
    return errs


def _kubernetes_domain(key: str) -> bool:
    parts = key.split("/", 1)
    domain = parts[0] if len(parts) == 2 else ""
    return any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


# -- the legacy flags -----------------------------------------------------------------

def from_legacy_flags(issuer_url: str, client_id: str, ca_file: str = "",
                      username_claim: str = "sub", username_prefix: str = "",
                      groups_claim: str = "", groups_prefix: str = "",
                      required_claims=None) -> AuthenticationConfiguration:
    """
    The configuration the ``--oidc-*`` flags mean (upstream's ``ToAuthenticationConfig``):
    one authenticator for ``issuer_url`` with audience ``client_id``; the username from
    ``username_claim`` (default ``sub``), prefixed with ``username_prefix``, where ``-``
    means no prefix and an empty prefix means ``<issuer_url>#`` unless the claim is
    ``email``; groups from ``groups_claim`` with ``groups_prefix``; each required claim a
    claim validation rule (sorted by claim); ``ca_file``'s PEM as the certificate
    authority.  Validated and compiled as the file is; ``AuthenticationConfigError``.
    """
    if not issuer_url or not client_id:
        raise AuthenticationConfigError("oidc-issuer-url and oidc-client-id must be specified "
                                        "together when any oidc-* flags are set")
    username_claim = username_claim or "sub"
    prefix = username_prefix
    if username_prefix == "" and username_claim != "email":
        prefix = issuer_url + "#"
    if username_prefix == "-":
        prefix = ""
    ca = ""
    if ca_file:
        try:
            with open(ca_file, encoding="utf-8") as f:
                ca = f.read()
        except OSError as error:
            raise AuthenticationConfigError(f"open {ca_file}: {os_error(error)}") from None
    groups = PrefixedClaimOrExpression()
    if groups_claim:
        groups = PrefixedClaimOrExpression(claim=groups_claim, prefix=groups_prefix)
    rules = tuple(ClaimValidationRule(claim=k, required_value=v)
                  for k, v in sorted((required_claims or {}).items()))
    authenticator = JWTAuthenticator(
        Issuer(url=issuer_url, audiences=(client_id,), certificate_authority=ca),
        ClaimMappings(username=PrefixedClaimOrExpression(claim=username_claim, prefix=prefix),
                      groups=groups),
        rules)
    return validated(AuthenticationConfiguration(jwt=(authenticator,)))
