"""
``--authorization-config``: the AuthorizationConfiguration file, decoded, defaulted and
validated as kube-apiserver does it (spec 2.5, 5.5 and 8).

``load_authorization_config(path)`` reads the file (YAML or JSON) and answers an
``AuthorizationConfiguration`` ready for ``modes.build_authorizers``: matchConditions
compiled, each webhook's kubeconfig read.  Anything wrong raises one
``AuthorizationConfigError`` whose ``str`` is upstream's message on one line (the field
errors aggregated as ``field.ErrorList.ToAggregate`` prints them, ``[a, b]`` for several)
and whose ``errors`` lists them one by one.

The stages, as upstream's: strict decoding (``apiVersion``/``kind``, field types, unknown
fields: ``failed to load AuthorizationConfiguration from file: ...``); defaulting (v1's
``SetDefaults_WebhookConfiguration``: TTLs 5m0s and 30s, both caches on); the generic
validation (``ValidateAuthorizationConfiguration``, every field path and message as
upstream's, webhook fields under ``authorizers[i]`` as upstream reports them); then what
kube-apiserver adds (``LoadAndValidateData``): a non-webhook authorizer is named after its
type in lower case, types in use at startup stay on reload, and ``InClusterConfig`` is
refused (a server cannot be its own webhook).  Types served: ``AlwaysAllow``,
``AlwaysDeny``, ``RBAC``, ``Webhook``; ``Node`` and ``ABAC`` are not, and are refused as
unknown types.
"""

from __future__ import annotations

import os
import stat

import attrs
import yaml

from platformd import cel
from platformd.goformat import gotext
from platformd.auth import kubeconfig, sar
from platformd.goformat.gotext import os_error
from platformd.goformat.durations import go_duration, go_parse_duration
from platformd.errors import Cause
from platformd.model import fielderrors
from platformd.model.meta import dns_subdomain

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KIND = "AuthorizationConfiguration"
#: Upstream accepts apiserver.config.k8s.io/{v1alpha1,v1beta1,v1}; spec 2.5 also names
#: apiserver.platform.io/v1beta1.
API_VERSIONS = frozenset({
    "apiserver.config.platform.io/v1", "apiserver.config.platform.io/v1beta1",
    "apiserver.config.platform.io/v1alpha1", "apiserver.platform.io/v1beta1",
})

WEBHOOK, RBAC, NODE, ABAC = "Webhook", "RBAC", "Node", "ABAC"
ALWAYS_ALLOW, ALWAYS_DENY = "AlwaysAllow", "AlwaysDeny"
KNOWN_TYPES = (ALWAYS_ALLOW, ALWAYS_DENY, RBAC, WEBHOOK)  # sorted, as sets.List prints them
REPEATABLE_TYPES = frozenset({WEBHOOK})
CONFIG_FILE, IN_CLUSTER = "PlatformConfigFile", "InClusterConfig"
MAX_MATCH_CONDITIONS = 64
MAX_TIMEOUT = 30.0
DEFAULT_AUTHORIZED_TTL = 300.0
DEFAULT_UNAUTHORIZED_TTL = 30.0


class AuthorizationConfigError(Exception):
    """The file cannot be used.  ``str``: one line; ``errors``: each problem."""

    def __init__(self, message: str, errors=()):
        super().__init__(" ".join(message.split()))
        self.errors = list(errors) or [message]


@attrs.frozen
class WebhookConfiguration:
    timeout: float
    authorized_ttl: float
    unauthorized_ttl: float
    cache_authorized_requests: bool
    cache_unauthorized_requests: bool
    subject_access_review_version: str
    match_condition_subject_access_review_version: str
    failure_policy: str
    connection_type: str
    platform_config_file: str | None
    match_conditions: tuple = ()
    #: Set by loading: the compiled matchConditions and the kubeconfig's connection.
    matcher: sar.Matcher | None = attrs.field(default=None, eq=False)
    connection: kubeconfig.Connection | None = None


@attrs.frozen
class AuthorizerConfiguration:
    type: str
    name: str
    webhook: WebhookConfiguration | None = None


@attrs.frozen
class AuthorizationConfiguration:
    api_version: str
    authorizers: tuple

    def types(self) -> frozenset:
        return frozenset(a.type for a in self.authorizers)


def load_authorization_config(path: str, require_types=frozenset()) -> AuthorizationConfiguration:
    """
    Read, decode, validate and prepare ``path``.  ``require_types``: non-webhook types
    that must still be configured (on reload, those configured at startup).
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise AuthorizationConfigError(f"open {path}: {os_error(error)}") from None
    return parse_authorization_config(data, require_types)


def parse_authorization_config(data: bytes, require_types=frozenset()) -> AuthorizationConfiguration:
    """``load_authorization_config`` for the file's bytes."""
    config = _decode(data)
    errors = [f"{c.field}: {c.message}" for c in validate(config)]
    if errors:
        raise AuthorizationConfigError(gotext.aggregate(errors), errors)
    errors = _platform_checks(config, require_types)
    if errors:
        raise AuthorizationConfigError(gotext.aggregate(errors), errors)
    return _prepare(config)


# -- decoding ---------------------------------------------------------------------------



class _Decoder:
    """Strict decoding: the first type error wins, else every unknown field is reported."""

    def __init__(self):
        self.type_error = ""
        self.unknown: list = []

    def fields(self, value, path: str, struct: str, go_path: str, known) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self._wrong(value, struct, go_path, "object")
            return {}
        for key in value:
            if key not in known:
                self.unknown.append(f"{path}.{key}" if path else str(key))
        return value

    def _wrong(self, value, struct: str, go_path: str, want: str) -> None:
        if not self.type_error:
            got = gotext.json_kind(value)
            where = f"Go struct field {struct}.{go_path}" if go_path else "Go value"
            self.type_error = f"json: cannot unmarshal {got} into {where} of type {want}"

    def string(self, obj: dict, key: str, struct: str, go_path: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self._wrong(value, struct, _join(go_path, key), "string")
            return ""
        return value

    def boolean(self, obj: dict, key: str, struct: str, go_path: str):
        value = obj.get(key)
        if value is not None and not isinstance(value, bool):
            self._wrong(value, struct, _join(go_path, key), "bool")
            return None
        return value

    def duration(self, obj: dict, key: str, struct: str, go_path: str) -> float:
        text = self.string(obj, key, struct, go_path)
        if not text:
            return 0.0
        try:
            return go_parse_duration(text)
        except ValueError:
            if not self.type_error:
                self.type_error = f"time: invalid duration {fielderrors.go_quote(text)}"
            return 0.0

    def items(self, obj: dict, key: str, struct: str, go_path: str) -> list:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self._wrong(value, struct, _join(go_path, key), f"[]{key}")
            return []
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _decode(data: bytes) -> AuthorizationConfiguration:
    failed = "failed to load AuthorizationConfiguration from file: "
    if not data.strip():
        # Upstream: no data is the default configuration (no authorizers).
        return AuthorizationConfiguration("", ())
    try:
        document = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as error:
        raise AuthorizationConfigError(failed + "error converting YAML to JSON: "
                                       + " ".join(str(error).split())) from None
    if not isinstance(document, dict):
        raise AuthorizationConfigError(
            failed + "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{gotext.json_kind(document)} into Go value of type struct "
            '{ APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
            '"json:\\"kind,omitempty\\"" }')
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not kind:
        raise AuthorizationConfigError(failed + f"Object 'Kind' is missing in '{_compact(data)}'")
    if not api_version or api_version not in API_VERSIONS or kind != KIND:
        raise AuthorizationConfigError(
            failed + f'no kind "{kind}" is registered for version "{api_version}" in scheme')
    decoder = _Decoder()
    top = decoder.fields(document, "", KIND, "", ("apiVersion", "kind", "authorizers"))
    authorizers = []
    for index, raw in enumerate(decoder.items(top, "authorizers", KIND, "")):
        path = f"authorizers[{index}]"
        entry = decoder.fields(raw, path, "AuthorizerConfiguration", "authorizers",
                               ("type", "name", "webhook"))
        struct, go = "AuthorizerConfiguration", "authorizers"
        webhook = None
        if entry.get("webhook") is not None:
            webhook = _decode_webhook(decoder, entry["webhook"], f"{path}.webhook")
        authorizers.append(AuthorizerConfiguration(
            decoder.string(entry, "type", struct, go), decoder.string(entry, "name", struct, go),
            webhook))
    if decoder.type_error:
        raise AuthorizationConfigError(failed + decoder.type_error)
    if decoder.unknown:
        raise AuthorizationConfigError(failed + "strict decoding error: " + ", ".join(
            f'unknown field "{name}"' for name in decoder.unknown))
    return AuthorizationConfiguration(api_version, tuple(authorizers))


_WEBHOOK_FIELDS = ("authorizedTTL", "cacheAuthorizedRequests", "unauthorizedTTL",
                   "cacheUnauthorizedRequests", "timeout", "subjectAccessReviewVersion",
                   "matchConditionSubjectAccessReviewVersion", "failurePolicy",
                   "connectionInfo", "matchConditions")


def _decode_webhook(decoder: _Decoder, raw, path: str) -> WebhookConfiguration:
    struct, go = "WebhookConfiguration", "authorizers.webhook"
    hook = decoder.fields(raw, path, struct, go, _WEBHOOK_FIELDS)
    info = decoder.fields(hook.get("connectionInfo"), f"{path}.connectionInfo",
                          "WebhookConnectionInfo", f"{go}.connectionInfo",
                          ("type", "platformConfigFile"))
    config_file = info.get("platformConfigFile")
    if config_file is not None and not isinstance(config_file, str):
        decoder.string(info, "platformConfigFile", "WebhookConnectionInfo",
                       f"{go}.connectionInfo")
        config_file = None
    conditions = []
    for index, item in enumerate(decoder.items(hook, "matchConditions", struct, go)):
        condition = decoder.fields(item, f"{path}.matchConditions[{index}]",
                                   "WebhookMatchCondition", f"{go}.matchConditions",
                                   ("expression",))
        conditions.append(decoder.string(condition, "expression", "WebhookMatchCondition",
                                         f"{go}.matchConditions"))
    # v1's SetDefaults_WebhookConfiguration: a zero TTL is the default, caches are on.
    authorized = decoder.duration(hook, "authorizedTTL", struct, go) or DEFAULT_AUTHORIZED_TTL
    unauthorized = (decoder.duration(hook, "unauthorizedTTL", struct, go)
                    or DEFAULT_UNAUTHORIZED_TTL)
    cache_authorized = decoder.boolean(hook, "cacheAuthorizedRequests", struct, go)
    cache_unauthorized = decoder.boolean(hook, "cacheUnauthorizedRequests", struct, go)
    return WebhookConfiguration(
        timeout=decoder.duration(hook, "timeout", struct, go),
        authorized_ttl=authorized,
        unauthorized_ttl=unauthorized,
        cache_authorized_requests=cache_authorized is not False,
        cache_unauthorized_requests=cache_unauthorized is not False,
        subject_access_review_version=decoder.string(hook, "subjectAccessReviewVersion",
                                                     struct, go),
        match_condition_subject_access_review_version=decoder.string(
            hook, "matchConditionSubjectAccessReviewVersion", struct, go),
        failure_policy=decoder.string(hook, "failurePolicy", struct, go),
        connection_type=decoder.string(info, "type", "WebhookConnectionInfo",
                                       f"{go}.connectionInfo"),
        platform_config_file=config_file,
        match_conditions=tuple(conditions),
    )


def _compact(data: bytes) -> str:
    return " ".join(data.decode("utf-8", "replace").split())[:200]


# -- validation ---------------------------------------------------------------------------

def validate(config: AuthorizationConfiguration) -> list:
    """upstream's ``ValidateAuthorizationConfiguration``: a list of ``Cause``."""
    errs: list = []
    if not config.authorizers:
        errs.append(fielderrors.required("authorizers",
                                         "at least one authorization mode must be defined"))
    seen_types: set = set()
    seen_names: set = set()
    for index, authorizer in enumerate(config.authorizers):
        path = f"authorizers[{index}]"
        kind = authorizer.type
        if not kind:
            errs.append(fielderrors.required(f"{path}.type"))
            continue
        if kind not in KNOWN_TYPES:
            errs.append(fielderrors.not_supported(f"{path}.type", kind, KNOWN_TYPES))
            continue
        if kind in seen_types and kind not in REPEATABLE_TYPES:
            errs.append(fielderrors.duplicate(f"{path}.type", kind))
            continue
        seen_types.add(kind)
        name = authorizer.name
        if not name:
            errs.append(fielderrors.required(f"{path}.name"))
        elif name in seen_names:
            errs.append(fielderrors.duplicate(f"{path}.name", name))
        elif problems := dns_subdomain(name):
            errs.append(fielderrors.invalid(f"{path}.name", name,
                                            "authorizer name is invalid: " + ", ".join(problems)))
        seen_names.add(name)
        if kind == WEBHOOK:
            if authorizer.webhook is None:
                errs.append(fielderrors.required(f"{path}.webhook", "required when type=Webhook"))
                continue
            errs.extend(validate_webhook(path, authorizer.webhook))
        elif authorizer.webhook is not None:
            errs.append(fielderrors.invalid(f"{path}.webhook", "non-null",
                                            "may only be specified when type=Webhook"))
    return errs


def validate_webhook(path: str, hook: WebhookConfiguration) -> list:
    """upstream's ``ValidateWebhookConfiguration`` (its paths hang off the authorizer's)."""
    errs: list = []
    if hook.timeout == 0:
        errs.append(fielderrors.required(f"{path}.timeout"))
    elif hook.timeout > MAX_TIMEOUT or hook.timeout < 0:
        errs.append(fielderrors.invalid(f"{path}.timeout", go_duration(hook.timeout),
                                        "must be > 0s and <= 30s"))
    for field, ttl in (("authorizedTTL", hook.authorized_ttl),
                       ("unauthorizedTTL", hook.unauthorized_ttl)):
        if ttl == 0:
            errs.append(fielderrors.required(f"{path}.{field}"))
        elif ttl < 0:
            errs.append(fielderrors.invalid(f"{path}.{field}", go_duration(ttl), "must be > 0s"))
    version = hook.subject_access_review_version
    if not version:
        errs.append(fielderrors.required(f"{path}.subjectAccessReviewVersion"))
    elif version not in ("v1", "v1beta1"):
        errs.append(fielderrors.not_supported(f"{path}.subjectAccessReviewVersion", version,
                                              ("v1", "v1beta1")))
    match_version = hook.match_condition_subject_access_review_version
    if not match_version:
        if hook.match_conditions:
            errs.append(fielderrors.required(f"{path}.matchConditionSubjectAccessReviewVersion",
                                             "required if match conditions are specified"))
    elif match_version != "v1":
        errs.append(fielderrors.not_supported(f"{path}.matchConditionSubjectAccessReviewVersion",
                                              match_version, ("v1",)))
    if not hook.failure_policy:
        errs.append(fielderrors.required(f"{path}.failurePolicy"))
    elif hook.failure_policy not in ("NoOpinion", "Deny"):
        errs.append(fielderrors.not_supported(f"{path}.failurePolicy", hook.failure_policy,
                                              ("NoOpinion", "Deny")))
    errs.extend(_validate_connection(f"{path}.connectionInfo", hook))
    errs.extend(compile_match_conditions(path, hook.match_conditions)[1])
    return errs


def _validate_connection(path: str, hook: WebhookConfiguration) -> list:
    file_path, config_file = f"{path}.platformConfigFile", hook.platform_config_file
    if not hook.connection_type:
        return [fielderrors.required(f"{path}.type")]
    if hook.connection_type == IN_CLUSTER:
        if config_file is not None:
            return [fielderrors.invalid(file_path, config_file,
                                        f"can only be set when type={CONFIG_FILE}")]
        return []
    if hook.connection_type != CONFIG_FILE:
        # Upstream prints the whole connectionInfo struct (pointer address included);
        # its type is what matters.
        return [fielderrors.not_supported(f"{path}.type", hook.connection_type,
                                          (IN_CLUSTER, CONFIG_FILE))]
    if not config_file:
        return [fielderrors.required(file_path)]
    if not os.path.isabs(config_file):
        return [fielderrors.invalid(file_path, config_file, "must be an absolute path")]
    try:
        mode = os.stat(config_file).st_mode
    except OSError as error:
        return [fielderrors.invalid(file_path, config_file,
                                    f"error loading file: stat {config_file}: "
                                    f"{os_error(error)}")]
    if not stat.S_ISREG(mode):
        return [fielderrors.invalid(file_path, config_file, "must be a regular file")]
    return []


def compile_match_conditions(path: str, expressions) -> tuple:
    """``(Matcher or None, causes)``: upstream's ``compileMatchConditions``."""
    if len(expressions) > MAX_MATCH_CONDITIONS:
        return None, [_too_many(f"{path}.matchConditions", len(expressions),
                                MAX_MATCH_CONDITIONS)]
    errs: list = []
    seen: set = set()
    programs = []
    for index, expression in enumerate(expressions):
        field = f"{path}.matchConditions[{index}].expression"
        if not expression.strip():
            errs.append(fielderrors.required(field))
            continue
        if expression in seen:
            errs.append(fielderrors.duplicate(field, expression))
            continue
        seen.add(expression)
        try:
            programs.append(sar.compile_condition(expression))
        except cel.CompileError as error:
            errs.append(fielderrors.invalid(field, expression, str(error)))
    return (sar.Matcher(programs) if programs else None), errs


def _too_many(field: str, actual: int, limit: int) -> Cause:
    return Cause("FieldValueTooMany", f"Too many: {actual}: must have at most {limit} items",
                 field)


# -- what kube-apiserver adds -------------------------------------------------------------

def _platform_checks(config: AuthorizationConfiguration, require_types) -> list:
    errors = []
    seen = set()
    for index, authorizer in enumerate(config.authorizers):
        if authorizer.type == WEBHOOK:
            if authorizer.webhook.connection_type == IN_CLUSTER:
                cause = fielderrors.not_supported(
                    f"authorizers[{index}].connectionInfo.type", IN_CLUSTER, (CONFIG_FILE,))
                errors.append(f"{cause.field}: {cause.message}")
            continue
        seen.add(authorizer.type)
        expected = authorizer.type.lower()
        if authorizer.name != expected:
            errors.append(f"expected name {expected} for authorizer {authorizer.type} "
                          f"instead of {authorizer.name}")
    missing = sorted(set(require_types) - seen)
    if missing:
        errors.append(f"missing required types: [{' '.join(missing)}]")
    return errors


def _prepare(config: AuthorizationConfiguration) -> AuthorizationConfiguration:
    """Compile each webhook's matchConditions and read its kubeconfig."""
    prepared = []
    for authorizer in config.authorizers:
        hook = authorizer.webhook
        if hook is not None:
            matcher, _ = compile_match_conditions("", hook.match_conditions)
            try:
                connection = kubeconfig.load_kubeconfig(hook.platform_config_file or "")
            except kubeconfig.KubeconfigError as error:
                raise AuthorizationConfigError(str(error)) from None
            authorizer = attrs.evolve(authorizer, webhook=attrs.evolve(
                hook, matcher=matcher, connection=connection))
        prepared.append(authorizer)
    return attrs.evolve(config, authorizers=tuple(prepared))
