"""
What ``MutatingWebhookConfiguration`` and ``ValidatingWebhookConfiguration``
(``admissionregistration.platform.io/v1``) share: the webhook's shapes (client config,
rules, selectors, match conditions), their defaulting (upstream's ``v1/defaults.go``)
and validation (``pkg/apis/admissionregistration/validation``, worded as upstream), the
``ResourceType`` factory; ``matchConditions`` compile in ``cel.admission``'s environment,
the one the admission plugins evaluate them in.

Protobuf: upstream's ``admissionregistration/v1`` messages (``proto/``); ``PRESENCE``
holds what upstream's marshallers write even when zero for the messages the webhook
and policy kinds share (``gopresence``'s notation, read off ``types.go``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from platformd.cel import CompileError
from platformd.cel.admission import compile_condition
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, label_value, qualified_name
from platformd.model.schema import BYTES, INT32, STRING, ListOf, Prop, Struct
from platformd.registry.kinds import presence
from platformd.registry.kinds.clusterrole import LABEL_SELECTOR
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column

GROUP = "admissionregistration.platform.io"
VERSION = "v1"
PREFIX = "io.platform.api.admissionregistration.v1"
PROTO = "platform.api.admissionregistration.v1."
#: Messages several kinds use: ``Rule`` (every field a slice or pointer) is embedded in
#: ``RuleWithOperations`` (a non-pointer struct, always written); ``MatchCondition``'s
#: two strings have no ``omitempty``.
PRESENCE = {"RuleWithOperations": "rule", "Rule": "", "MatchCondition": "name expression"}

FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
REINVOCATION_POLICIES = ("IfNeeded", "Never")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
REVIEW_VERSIONS = ("v1", "v1beta1")
MAX_MATCH_CONDITIONS = 64

SERVICE_REFERENCE = Struct(f"{PREFIX}.ServiceReference", {
    "namespace": Prop(STRING, "The namespace of the service.", required=True),
    "name": Prop(STRING, "The name of the service.", required=True),
    "path": Prop(STRING, "An optional URL path sent in any request to this service."),
    "port": Prop(INT32, "The port on the service hosting the webhook (default 443)."),
}, doc="A reference to a Service.")

CLIENT_CONFIG = Struct(f"{PREFIX}.WebhookClientConfig", {
    "url": Prop(STRING, "The location of the webhook, as https://host[:port][/path]."),
    "service": Prop(SERVICE_REFERENCE, "A reference to the service for this webhook."),
    "caBundle": Prop(BYTES, "PEM CA certificates that validate the webhook's serving "
                            "certificate; the system trust roots when empty."),
}, doc="How to communicate with the webhook.")

RULE_WITH_OPERATIONS = Struct(f"{PREFIX}.RuleWithOperations", {
    "operations": Prop(ListOf(STRING), "The operations the rule matches: CREATE, UPDATE, "
                                       "DELETE, CONNECT or '*'."),
    "apiGroups": Prop(ListOf(STRING), "The API groups the resources belong to; '*' is all."),
    "apiVersions": Prop(ListOf(STRING), "The API versions the resources belong to; '*' is all."),
    "resources": Prop(ListOf(STRING), "The resources the rule applies to ('pods', "
                                      "'pods/status', 'pods/*', '*/status', '*', '*/*')."),
    "scope": Prop(STRING, "Cluster, Namespaced or '*' (the default)."),
}, doc="The operations and resources a webhook cares about.")

MATCH_CONDITION = Struct(f"{PREFIX}.MatchCondition", {
    "name": Prop(STRING, "An identifier for this match condition.", required=True),
    "expression": Prop(STRING, "A CEL expression evaluating to a bool (variables object, "
                               "oldObject, request).", required=True),
}, doc="A condition the request must meet to be sent to a webhook.")


def _webhook_fields(mutating: bool) -> dict:
    fields = {
        "name": Prop(STRING, "The webhook's fully qualified name (imagepolicy.example.com).",
                     required=True),
        "clientConfig": Prop(CLIENT_CONFIG, "How to communicate with the hook.", required=True),
        "rules": Prop(ListOf(RULE_WITH_OPERATIONS), "The operations and resources the "
                                                    "webhook cares about."),
        "failurePolicy": Prop(STRING, "Ignore or Fail (the default): how an error calling "
                                      "the webhook is handled."),
        "matchPolicy": Prop(STRING, "Exact or Equivalent (the default)."),
        "namespaceSelector": Prop(LABEL_SELECTOR, "Which namespaces' objects the webhook "
                                                  "sees, by the namespace's labels."),
        "objectSelector": Prop(LABEL_SELECTOR, "Which objects the webhook sees, by labels."),
        "sideEffects": Prop(STRING, "None or NoneOnDryRun.", required=True),
        "timeoutSeconds": Prop(INT32, "The call's timeout, 1 to 30 seconds (default 10)."),
        "admissionReviewVersions": Prop(ListOf(STRING), "The AdmissionReview versions the "
                                                        "webhook accepts, preferred first.",
                                        required=True),
    }
    if mutating:
        fields["reinvocationPolicy"] = Prop(STRING, "Never (the default) or IfNeeded: "
                                                    "called again once if later plugins "
                                                    "change the object.")
    fields["matchConditions"] = Prop(ListOf(MATCH_CONDITION, "map", ("name",), "merge", "name"),
                                     "Conditions, all true, for the request to be sent.")
    return fields


def webhook_struct(mutating: bool) -> Struct:
    name = "MutatingWebhook" if mutating else "ValidatingWebhook"
    return Struct(f"{PREFIX}.{name}", _webhook_fields(mutating),
                  doc="An admission webhook and the resources and operations it applies to.")


# Defaulting (v1/defaults.go).

def default_configuration(mutating: bool):
    def default(obj: dict) -> None:
        for hook in obj.get("webhooks") or ():
            if not isinstance(hook, dict):
                continue
            if hook.get("failurePolicy") is None:
                hook["failurePolicy"] = "Fail"
            if hook.get("matchPolicy") is None:
                hook["matchPolicy"] = "Equivalent"
            if hook.get("namespaceSelector") is None:
                hook["namespaceSelector"] = {}
            if hook.get("objectSelector") is None:
                hook["objectSelector"] = {}
            if hook.get("timeoutSeconds") is None:
                hook["timeoutSeconds"] = 10
            if mutating and hook.get("reinvocationPolicy") is None:
                hook["reinvocationPolicy"] = "Never"
            for rule in hook.get("rules") or ():
                if isinstance(rule, dict) and rule.get("scope") is None:
                    rule["scope"] = "*"
            service = (hook.get("clientConfig") or {}).get("service")
            if isinstance(service, dict) and service.get("port") is None:
                service["port"] = 443
    return default


# Validation.

def _fully_qualified(path: str, name: str) -> list:
    if not name:
        return [fe.required(path)]
    problems = dns_subdomain(name)
    if problems:
        return [fe.invalid(path, name, ",".join(problems))]
    if len(name.split(".")) < 3:
        return [fe.invalid(path, name, "should be a domain with at least three segments "
                                       "separated by dots")]
    return []


def _validate_resources(resources: list, path: str) -> list:
    causes = []
    if not resources:
        causes.append(fe.required(path))
    with_wildcard_sub: set = set()
    sub_with_wildcard_res: set = set()
    double = single = plain = False
    for i, res_sub in enumerate(resources or ()):
        if res_sub == "":
            causes.append(fe.required(f"{path}[{i}]"))
            continue
        if res_sub == "*/*":
            double = True
        if res_sub == "*":
            single = True
        res, slash, sub = res_sub.partition("/")
        if not slash:
            plain = res_sub != "*"
            continue
        if res in with_wildcard_sub:
            causes.append(fe.invalid(f"{path}[{i}]", res_sub,
                                     f"if '{res}/*' is present, must not specify {res_sub}"))
        if sub in sub_with_wildcard_res:
            causes.append(fe.invalid(f"{path}[{i}]", res_sub,
                                     f"if '*/{sub}' is present, must not specify {res_sub}"))
        if sub == "*":
            with_wildcard_sub.add(res)
        if res == "*":
            sub_with_wildcard_res.add(sub)
    if len(resources or ()) > 1 and double:
        causes.append(fe.invalid(path, resources,
                                 "if '*/*' is present, must not specify other resources"))
    if single and plain:
        causes.append(fe.invalid(path, resources, "if '*' is present, must not specify other "
                                                  "resources without subresources"))
    return causes


def validate_rule(rule: dict, path: str) -> list:
    causes = []
    operations = rule.get("operations") or []
    if not operations:
        causes.append(fe.required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        causes.append(fe.invalid(f"{path}.operations", operations,
                                 "if '*' is present, must not specify other operations"))
    for i, operation in enumerate(operations):
        if operation not in OPERATIONS:
            causes.append(fe.not_supported(f"{path}.operations[{i}]", operation, OPERATIONS))
    groups = rule.get("apiGroups") or []
    if not groups:
        causes.append(fe.required(f"{path}.apiGroups"))
    if len(groups) > 1 and "*" in groups:
        causes.append(fe.invalid(f"{path}.apiGroups", groups,
                                 "if '*' is present, must not specify other API groups"))
    versions = rule.get("apiVersions") or []
    if not versions:
        causes.append(fe.required(f"{path}.apiVersions"))
    if len(versions) > 1 and "*" in versions:
        causes.append(fe.invalid(f"{path}.apiVersions", versions,
                                 "if '*' is present, must not specify other API versions"))
    for i, version in enumerate(versions):
        if version == "":
            causes.append(fe.required(f"{path}.apiVersions[{i}]"))
    causes.extend(_validate_resources(rule.get("resources") or [], f"{path}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        causes.append(fe.not_supported(f"{path}.scope", scope, SCOPES))
    return causes


def validate_label_selector(selector: dict, path: str) -> list:
    """metav1validation.ValidateLabelSelector's messages."""
    causes = []
    for i, expression in enumerate(selector.get("matchExpressions") or ()):
        at = f"{path}.matchExpressions[{i}]"
        operator = expression.get("operator", "")
        values = expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(fe.required(f"{at}.values", "must be specified when `operator` "
                                                          "is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(fe.forbidden(f"{at}.values", "may not be specified when "
                                                           "`operator` is 'Exists' or "
                                                           "'DoesNotExist'"))
        else:
            causes.append(fe.invalid(f"{at}.operator", operator, "not a valid selector "
                                                                 "operator"))
        key = expression.get("key", "")
        causes.extend(fe.invalid(f"{at}.key", key, p) for p in qualified_name(key))
        for j, value in enumerate(values):
            causes.extend(fe.invalid(f"{at}.values[{j}]", value, p) for p in label_value(value))
    for key, value in (selector.get("matchLabels") or {}).items():
        causes.extend(fe.invalid(f"{path}.matchLabels", key, p) for p in qualified_name(key))
        causes.extend(fe.invalid(f"{path}.matchLabels", value, p) for p in label_value(value))
    return causes


_FORM = "; desired format: https://host[/path]"


def _validate_url(path: str, url: str) -> list:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError as error:
        return [fe.required(path, f"url must be a valid URL: {error}{_FORM}")]
    causes = []
    if parts.scheme != "https":
        causes.append(fe.invalid(path, parts.scheme, "'https' is the only allowed URL scheme"
                                 + _FORM))
    host = parts.netloc.rpartition("@")[2]
    if not host:
        causes.append(fe.invalid(path, host, "host must be specified" + _FORM))
    if "@" in parts.netloc:
        causes.append(fe.invalid(path, parts.netloc.rpartition("@")[0],
                                 "user information is not permitted in the URL"))
    if parts.fragment:
        causes.append(fe.invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(fe.invalid(path, parts.query,
                                 "query parameters are not permitted in the URL"))
    return causes


def _validate_service(path: str, service: dict) -> list:
    causes = []
    if not service.get("name"):
        causes.append(fe.required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        causes.append(fe.required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port")
    if port is not None and not 1 <= port <= 65535:
        causes.append(fe.invalid(f"{path}.port", port, "port is not valid: must be between 1 "
                                                      "and 65535, inclusive"))
    url_path = service.get("path")
    if url_path in (None, "", "/"):
        return causes
    if url_path == "//":
        causes.append(fe.invalid(f"{path}.path", url_path, "segment[0] may not be empty"))
    elif not url_path.startswith("/"):
        causes.append(fe.invalid(f"{path}.path", url_path, "must start with a '/'"))
    else:
        for i, segment in enumerate(url_path[1:].split("/")):
            if segment == "" and i != len(url_path[1:].split("/")) - 1:
                causes.append(fe.invalid(f"{path}.path", url_path,
                                         f"segment[{i}] may not be empty"))
            elif segment:
                causes.extend(fe.invalid(f"{path}.path", url_path, f"segment[{i}]: {p}")
                              for p in dns_subdomain(segment))
    return causes


def validate_match_conditions(conditions: list, path: str, compile=None) -> list:
    """Upstream's ``validateMatchConditions``; ``compile`` is the environment's compiler
    (the webhooks' by default; admission policies have more variables)."""
    compile = compile or compile_condition
    causes = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        causes.append(fe.Cause("FieldValueTooMany", f"Too many: {len(conditions)}: must have "
                                                    f"at most {MAX_MATCH_CONDITIONS} items", path))
    names: set = set()
    for i, condition in enumerate(conditions):
        at = f"{path}[{i}]"
        name = condition.get("name", "")
        if not name:
            causes.append(fe.required(f"{at}.name"))
        else:
            causes.extend(fe.invalid(f"{at}.name", name, p) for p in qualified_name(name))
            if name in names:
                causes.append(fe.duplicate(f"{at}.name", name))
            names.add(name)
        expression = condition.get("expression", "")
        if not expression:
            causes.append(fe.required(f"{at}.expression"))
            continue
        try:
            compile(expression)
        except CompileError as error:
            causes.append(fe.invalid(f"{at}.expression", expression, str(error)))
    return causes


def _validate_review_versions(versions: list, path: str) -> list:
    if not versions:
        return [fe.required(path, "must specify one of " + ", ".join(REVIEW_VERSIONS))]
    causes = []
    seen: set = set()
    for i, version in enumerate(versions):
        if version in seen:
            causes.append(fe.invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        causes.extend(fe.invalid(f"{path}[{i}]", version, p) for p in dns1035(version))
    if not seen & set(REVIEW_VERSIONS):
        causes.append(fe.invalid(path, versions,
                                 "must include at least one of " + ", ".join(REVIEW_VERSIONS)))
    return causes


_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns1035(value: str) -> list:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1035.match(value):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character "
            "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')")
    return problems


def _validate_webhook(hook: dict, path: str, mutating: bool) -> list:
    causes = _fully_qualified(f"{path}.name", hook.get("name", ""))
    for i, rule in enumerate(hook.get("rules") or ()):
        causes.extend(validate_rule(rule, f"{path}.rules[{i}]"))
    for field, allowed in (("failurePolicy", FAILURE_POLICIES), ("matchPolicy", MATCH_POLICIES)):
        value = hook.get(field)
        if value is not None and value not in allowed:
            causes.append(fe.not_supported(f"{path}.{field}", value, allowed))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(fe.required(f"{path}.sideEffects",
                                  "must specify one of " + ", ".join(NO_SIDE_EFFECTS)))
    elif side_effects not in NO_SIDE_EFFECTS:
        causes.append(fe.not_supported(f"{path}.sideEffects", side_effects, NO_SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and not 1 <= timeout <= 30:
        causes.append(fe.invalid(f"{path}.timeoutSeconds", timeout,
                                 "the timeout value must be between 1 and 30 seconds"))
    for field in ("namespaceSelector", "objectSelector"):
        if hook.get(field) is not None:
            causes.extend(validate_label_selector(hook[field], f"{path}.{field}"))
    if mutating:
        policy = hook.get("reinvocationPolicy")
        if policy is not None and policy not in REINVOCATION_POLICIES:
            causes.append(fe.not_supported(f"{path}.reinvocationPolicy", policy,
                                           REINVOCATION_POLICIES))
    config = hook.get("clientConfig") or {}
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        causes.append(fe.required(f"{path}.clientConfig",
                                  "exactly one of url or service is required"))
    elif url is not None:
        causes.extend(_validate_url(f"{path}.clientConfig.url", url))
    else:
        assert service is not None  # exactly one of url and service is set
        causes.extend(_validate_service(f"{path}.clientConfig.service", service))
    causes.extend(validate_match_conditions(hook.get("matchConditions") or [],
                                             f"{path}.matchConditions"))
    return causes


def configuration_validator(mutating: bool):
    def validate(obj: dict) -> list:
        causes = []
        names: set = set()
        for i, hook in enumerate(obj.get("webhooks") or ()):
            path = f"webhooks[{i}]"
            causes.extend(_validate_webhook(hook, path, mutating))
            causes.extend(_validate_review_versions(hook.get("admissionReviewVersions") or [],
                                                    f"{path}.admissionReviewVersions"))
            name = hook.get("name", "")
            if name:
                if name in names:
                    causes.append(fe.duplicate(f"{path}.name", name))
                names.add(name)
        return causes
    return validate


def _webhooks(obj, now):
    return len(obj.get("webhooks") or ())


COLUMNS = (NAME, Column("Webhooks", "integer", _webhooks, "The number of webhooks in the configuration."), AGE)


def configuration_kind(mutating: bool) -> ResourceType:
    kind = ("Mutating" if mutating else "Validating") + "WebhookConfiguration"
    webhook = webhook_struct(mutating)
    return ResourceType(
        group=GROUP, version=VERSION, kind=kind, plural=kind.lower() + "s",
        singular=kind.lower(), namespaced=False, fields={
            "webhooks": Prop(ListOf(webhook, "map", ("name",), "merge", "name"),
                             "The webhooks and the resources and operations they apply to."),
        }, doc=f"Describes the configuration of {'mutating' if mutating else 'validating'} "
               "admission webhooks that accept or reject (and may change) objects.",
        categories=("api-extensions",), name_rule=dns_subdomain, definition_prefix=PREFIX,
        allow_create_on_update=False, default=default_configuration(mutating),
        validate=configuration_validator(mutating), columns=COLUMNS,
        presence=presence(PROTO, kind, {
            kind: "metadata", webhook.name.rpartition(".")[2]: "name clientConfig",
            # url and service are pointers, caBundle a []byte (written when non-nil).
            "WebhookClientConfig": "", "ServiceReference": "namespace name", **PRESENCE}))
