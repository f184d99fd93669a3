"""
What ``ValidatingAdmissionPolicy`` and ``ValidatingAdmissionPolicyBinding``
(``admissionregistration.platform.io/v1``) are made of: their shapes, defaulting
(upstream's ``v1/defaults.go``) and validation (``pkg/apis/admissionregistration/validation``,
worded as upstream), whose expressions compile in ``cel.admission``'s policy environment,
the one the admission plugin evaluates them in.  The webhook kinds' rule and selector
shapes and checks (``webhookshapes``) are reused: upstream's types share them too.
"""

from __future__ import annotations

import re

from platformd import cel
from platformd.cel.admission import policy_environment
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, path_segment, qualified_name
from platformd.model.schema import INT64, STRING, TIME, ListOf, Prop, Struct
from platformd.registry.kinds import presence
from platformd.registry.kinds.clusterrole import LABEL_SELECTOR
from platformd.registry.kinds.webhookshapes import (
    FAILURE_POLICIES, GROUP, MATCH_CONDITION, MATCH_POLICIES, PREFIX, PRESENCE, PROTO,
    RULE_WITH_OPERATIONS, VERSION, dns1035, validate_label_selector,
    validate_match_conditions, validate_rule,
)
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column

REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")
VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
NOT_FOUND_ACTIONS = ("Deny", "Allow")
MAX_AUDIT_ANNOTATIONS = 20
MAX_VALUE_EXPRESSION_LENGTH = 5 * 1024

NAMED_RULE_WITH_OPERATIONS = Struct(f"{PREFIX}.NamedRuleWithOperations", {
    "resourceNames": Prop(ListOf(STRING), "The names the rule applies to; empty: all."),
    **RULE_WITH_OPERATIONS.props,
}, doc="A rule with operations and resource names.", atomic=True)

MATCH_RESOURCES = Struct(f"{PREFIX}.MatchResources", {
    "namespaceSelector": Prop(LABEL_SELECTOR, "Which namespaces' objects match, by the "
                                              "namespace's labels."),
    "objectSelector": Prop(LABEL_SELECTOR, "Which objects match, by their labels."),
    "resourceRules": Prop(ListOf(NAMED_RULE_WITH_OPERATIONS), "The operations and "
                                                              "resources that match."),
    "excludeResourceRules": Prop(ListOf(NAMED_RULE_WITH_OPERATIONS), "The operations and "
                                                                     "resources that do "
                                                                     "not match."),
    "matchPolicy": Prop(STRING, "Exact or Equivalent (the default)."),
}, doc="Which requests a policy or binding applies to.", atomic=True)

PARAM_KIND = Struct(f"{PREFIX}.ParamKind", {
    "apiVersion": Prop(STRING, "The API group version the parameter resource belongs to."),
    "kind": Prop(STRING, "The kind of the parameter resource."),
}, doc="The kind of the parameters a policy takes.", atomic=True)

VALIDATION = Struct(f"{PREFIX}.Validation", {
    "expression": Prop(STRING, "A CEL expression that must be true.", required=True),
    "message": Prop(STRING, "The message of a failed validation."),
    "reason": Prop(STRING, "The reason of a failed validation: Unauthorized, Forbidden, "
                           "Invalid (the default) or RequestEntityTooLarge."),
    "messageExpression": Prop(STRING, "A CEL expression giving the message (a string)."),
}, doc="A CEL expression a request must satisfy.")

VARIABLE = Struct(f"{PREFIX}.Variable", {
    "name": Prop(STRING, "The variable's name (variables.<name>).", required=True),
    "expression": Prop(STRING, "The CEL expression of its value.", required=True),
}, doc="A named expression, evaluated for every request, available as variables.<name>.",
    atomic=True)

AUDIT_ANNOTATION = Struct(f"{PREFIX}.AuditAnnotation", {
    "key": Prop(STRING, "The annotation's key, combined with the policy's name.",
                required=True),
    "valueExpression": Prop(STRING, "A CEL expression giving the value (a string, or null "
                                    "for none).", required=True),
}, doc="An audit annotation added to the request's audit event.")

POLICY_SPEC = Struct(f"{PREFIX}.ValidatingAdmissionPolicySpec", {
    "paramKind": Prop(PARAM_KIND, "The kind of the parameters; none if unset."),
    "matchConstraints": Prop(MATCH_RESOURCES, "The resources the policy validates."),
    "validations": Prop(ListOf(VALIDATION), "The CEL expressions that must all hold."),
    "failurePolicy": Prop(STRING, "Ignore or Fail (the default): how an error evaluating "
                                  "the policy is handled."),
    "auditAnnotations": Prop(ListOf(AUDIT_ANNOTATION), "Audit annotations of the request."),
    "matchConditions": Prop(ListOf(MATCH_CONDITION, "map", ("name",), "merge", "name"),
                            "Conditions, all true, for the policy to apply."),
    "variables": Prop(ListOf(VARIABLE), "Named expressions other expressions may use."),
}, doc="The specification of a ValidatingAdmissionPolicy.")

EXPRESSION_WARNING = Struct(f"{PREFIX}.ExpressionWarning", {
    "fieldRef": Prop(STRING, "The path to the field of the expression.", required=True),
    "warning": Prop(STRING, "The type-checking message.", required=True),
}, doc="A warning about an expression.")

TYPE_CHECKING = Struct(f"{PREFIX}.TypeChecking", {
    "expressionWarnings": Prop(ListOf(EXPRESSION_WARNING), "The type-checking warnings."),
}, doc="The results of type-checking the expressions.")

CONDITION = Struct("io.platform.apimachinery.pkg.apis.meta.v1.Condition", {
    "type": Prop(STRING, "The type of condition.", required=True),
    "status": Prop(STRING, "True, False or Unknown.", required=True),
    "observedGeneration": Prop(INT64, "The generation the condition was set for."),
    "lastTransitionTime": Prop(TIME, "When the condition last changed.", required=True),
    "reason": Prop(STRING, "Why, in CamelCase.", required=True),
    "message": Prop(STRING, "Why, for humans.", required=True),
}, doc="One aspect of the current state of a resource.")

POLICY_STATUS = Struct(f"{PREFIX}.ValidatingAdmissionPolicyStatus", {
    "observedGeneration": Prop(INT64, "The generation the controller observed."),
    "typeChecking": Prop(TYPE_CHECKING, "The results of type-checking (not written here)."),
    "conditions": Prop(ListOf(CONDITION, "map", ("type",)), "The policy's conditions."),
}, doc="The status of a ValidatingAdmissionPolicy.")

PARAM_REF = Struct(f"{PREFIX}.ParamRef", {
    "name": Prop(STRING, "The name of the parameter object."),
    "namespace": Prop(STRING, "The namespace of the parameter objects (namespaced kinds); "
                              "the request's namespace when unset."),
    "selector": Prop(LABEL_SELECTOR, "Selects the parameter objects by label."),
    "parameterNotFoundAction": Prop(STRING, "Allow or Deny (the default) when no "
                                            "parameter object is found."),
}, doc="How a binding finds the parameters of its policy.", atomic=True)

BINDING_SPEC = Struct(f"{PREFIX}.ValidatingAdmissionPolicyBindingSpec", {
    "policyName": Prop(STRING, "The name of the ValidatingAdmissionPolicy bound."),
    "paramRef": Prop(PARAM_REF, "The parameters of the policy."),
    "matchResources": Prop(MATCH_RESOURCES, "Limits which requests the policy sees "
                                            "(within its matchConstraints)."),
    "validationActions": Prop(ListOf(STRING, "set"), "Deny, Warn and/or Audit: what a "
                                                      "failed validation does."),
}, doc="The specification of a ValidatingAdmissionPolicyBinding.")


def compile_bool(expression: str) -> cel.Program:
    return policy_environment().compile(expression, cel.BOOL)


# Defaulting (v1/defaults.go).

def _default_match_resources(match) -> None:
    if not isinstance(match, dict):
        return
    if match.get("matchPolicy") is None:
        match["matchPolicy"] = "Equivalent"
    if match.get("namespaceSelector") is None:
        match["namespaceSelector"] = {}
    if match.get("objectSelector") is None:
        match["objectSelector"] = {}
    for field in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(field) or ():
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"


def default_policy(obj: dict) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    _default_match_resources(spec.get("matchConstraints"))


def default_binding(obj: dict) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    _default_match_resources(spec.get("matchResources"))
    ref = spec.get("paramRef")
    if isinstance(ref, dict) and ref.get("parameterNotFoundAction") is None:
        ref["parameterNotFoundAction"] = "Deny"


def prepare_policy_for_create(obj: dict) -> None:
    """Upstream's strategy: status is the controller's (empty: ``{}``, as Go's JSON
    shows an empty struct), generation starts at 1."""
    obj["status"] = {}
    obj.setdefault("metadata", {})["generation"] = 1


def prepare_policy_for_update(new: dict, old: dict) -> None:
    """The generation moves when the spec changes (status is carried over generically)."""
    generation = (old.get("metadata") or {}).get("generation") or 1
    default_policy(new)  # defaulting comes after this: compare like with like
    if new.get("spec") != old.get("spec"):
        generation += 1
    new.setdefault("metadata", {})["generation"] = generation


# Validation.

def _validate_param_kind(kind: dict, path: str) -> list:
    causes = []
    api_version = kind.get("apiVersion") or ""
    if not api_version:
        causes.append(fe.required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1:
        causes.append(fe.invalid(f"{path}.apiVersion", api_version,
                                 f"unexpected GroupVersion string: {api_version}"))
    else:
        group, _, version = api_version.rpartition("/")
        if group:
            causes.extend(fe.invalid(f"{path}.apiVersion", group, p)
                          for p in dns_subdomain(group))
        if not version:
            causes.append(fe.invalid(f"{path}.apiVersion", api_version,
                                     "version must be specified"))
        else:
            causes.extend(fe.invalid(f"{path}.apiVersion", version, p)
                          for p in dns1035(version))
    name = kind.get("kind") or ""
    if not name:
        causes.append(fe.required(f"{path}.kind"))
    else:
        problems = dns1035(name.lower())
        if problems:
            causes.append(fe.invalid(f"{path}.kind", name, "may have mixed case, but should "
                                                          "otherwise match: " + ",".join(problems)))
    return causes


def _validate_named_rule(rule: dict, path: str) -> list:
    causes: list = []
    seen: set = set()
    for i, name in enumerate(rule.get("resourceNames") or ()):
        causes.extend(fe.invalid(f"{path}.resourceNames[{i}]", name, p)
                      for p in path_segment(name))
        if name in seen:
            causes.append(fe.duplicate(f"{path}.resourceNames[{i}]", name))
        seen.add(name)
    causes.extend(validate_rule(rule, path))
    return causes


def validate_match_resources(match, path: str) -> list:
    """``validateMatchResources`` (the object selector's path is ``labelSelector``, as
    upstream's)."""
    if match is None:
        return []
    causes = []
    policy = match.get("matchPolicy")
    if policy is None:
        causes.append(fe.required(f"{path}.matchPolicy"))
    elif policy not in MATCH_POLICIES:
        causes.append(fe.not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    if match.get("namespaceSelector") is None:
        causes.append(fe.required(f"{path}.namespaceSelector"))
    else:
        causes.extend(validate_label_selector(match["namespaceSelector"],
                                              f"{path}.namespaceSelector"))
    if match.get("objectSelector") is None:
        causes.append(fe.required(f"{path}.labelSelector"))
    else:
        causes.extend(validate_label_selector(match["objectSelector"],
                                              f"{path}.labelSelector"))
    for field in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(field) or ()):
            causes.extend(_validate_named_rule(rule, f"{path}.{field}[{i}]"))
    return causes


def _compile_problem(path: str, expression: str, *types) -> list:
    try:
        policy_environment().compile(expression, *types)
    except cel.CompileError as error:
        return [fe.invalid(path, expression, str(error))]
    return []


_CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED = frozenset(
    "true false null in as break const continue else for function if import let loop "
    "package namespace return var void while".split())


def _validate_variable(variable: dict, path: str) -> list:
    causes = []
    name = variable.get("name") or ""
    if not name.strip():
        causes.append(fe.required(f"{path}.name", "name is not specified"))
    elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
        causes.append(fe.invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
    expression = variable.get("expression") or ""
    if not expression.strip():
        causes.append(fe.required(f"{path}.expression", "expression is not specified"))
    else:
        causes.extend(_compile_problem(f"{path}.expression", expression))
    return causes


def _validate_validation(validation: dict, path: str) -> list:
    causes = []
    expression = validation.get("expression") or ""
    if not expression.strip():
        causes.append(fe.required(f"{path}.expression", "expression is not specified"))
    else:
        causes.extend(_compile_problem(f"{path}.expression", expression, cel.BOOL))
    message_expression = validation.get("messageExpression") or ""
    if message_expression and not message_expression.strip():
        causes.append(fe.invalid(f"{path}.messageExpression", message_expression,
                                 "must be non-empty if specified"))
    elif message_expression:
        causes.extend(_compile_problem(f"{path}.messageExpression", message_expression,
                                       cel.STRING))
    message = validation.get("message") or ""
    if message and not message.strip():
        causes.append(fe.invalid(f"{path}.message", message,
                                 "message must be non-empty if specified"))
    elif "\n" in message.strip():
        causes.append(fe.invalid(f"{path}.message", message,
                                 "message must not contain line breaks"))
    reason = validation.get("reason")
    if reason is not None and reason not in REASONS:
        causes.append(fe.not_supported(f"{path}.reason", reason, REASONS))
    return causes


def _validate_audit_annotation(policy_name: str, annotation: dict, path: str) -> list:
    causes: list = []
    key = annotation.get("key") or ""
    if policy_name:
        causes.extend(fe.invalid(f"{path}.key", f"{policy_name}/{key}", p)
                      for p in qualified_name(f"{policy_name}/{key}"))
    else:
        causes.append(fe.invalid(f"{path}.key", key, "requires metadata.name be non-empty"))
    expression = (annotation.get("valueExpression") or "").strip()
    if not expression:
        causes.append(fe.required(f"{path}.valueExpression", "valueExpression is not "
                                                             "specified"))
    elif len(expression) > MAX_VALUE_EXPRESSION_LENGTH:
        causes.append(fe.required(f"{path}.valueExpression", "must not exceed "
                                  f"{MAX_VALUE_EXPRESSION_LENGTH} bytes in length"))
    else:
        causes.extend(_compile_problem(f"{path}.valueExpression", expression))
    return causes


def validate_policy(obj: dict) -> list:
    spec = obj.get("spec") or {}
    causes = []
    policy = spec.get("failurePolicy")
    if policy is None:
        causes.append(fe.required("spec.failurePolicy"))
    elif policy not in FAILURE_POLICIES:
        causes.append(fe.not_supported("spec.failurePolicy", policy, FAILURE_POLICIES))
    if spec.get("paramKind") is not None:
        causes.extend(_validate_param_kind(spec["paramKind"], "spec.paramKind"))
    match = spec.get("matchConstraints")
    if match is None:
        causes.append(fe.required("spec.matchConstraints"))
    else:
        causes.extend(validate_match_resources(match, "spec.matchConstraints"))
        if not match.get("resourceRules"):
            causes.append(fe.required("spec.matchConstraints.resourceRules"))
    causes.extend(validate_match_conditions(spec.get("matchConditions") or [],
                                            "spec.matchConditions", compile_bool))
    for i, variable in enumerate(spec.get("variables") or ()):
        causes.extend(_validate_variable(variable, f"spec.variables[{i}]"))
    validations = spec.get("validations") or []
    annotations = spec.get("auditAnnotations") or []
    if not validations and not annotations:
        why = "validations or auditAnnotations must contain at least one item"
        causes.append(fe.required("spec.validations", why))
        causes.append(fe.required("spec.auditAnnotations", why))
        return causes
    for i, validation in enumerate(validations):
        causes.extend(_validate_validation(validation, f"spec.validations[{i}]"))
    if len(annotations) > MAX_AUDIT_ANNOTATIONS:
        causes.append(fe.invalid("spec.auditAnnotations", annotations,
                                 f"must not have more than {MAX_AUDIT_ANNOTATIONS} "
                                 "auditAnnotations"))
    keys: set = set()
    name = (obj.get("metadata") or {}).get("name") or ""
    for i, annotation in enumerate(annotations):
        causes.extend(_validate_audit_annotation(name, annotation,
                                                 f"spec.auditAnnotations[{i}]"))
        key = annotation.get("key") or ""
        if key in keys:
            causes.append(fe.duplicate(f"spec.auditAnnotations[{i}].key", key))
        keys.add(key)
    return causes


def _validate_param_ref(ref, path: str) -> list:
    if ref is None:
        return []
    causes: list = []
    name, selector = ref.get("name") or "", ref.get("selector")
    exclusive = "name and selector are mutually exclusive"
    if name:
        causes.extend(fe.invalid(f"{path}.name", name, p) for p in path_segment(name))
        if selector is not None:
            causes.append(fe.forbidden(f"{path}.name", exclusive))
    if selector is not None:
        causes.extend(validate_label_selector(selector, f"{path}.selector"))
        if name:
            causes.append(fe.forbidden(f"{path}.selector", exclusive))
    if not name and selector is None:
        causes.append(fe.required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        causes.append(fe.required(f"{path}.parameterNotFoundAction"))
    elif action not in NOT_FOUND_ACTIONS:
        causes.append(fe.not_supported(f"{path}.parameterNotFoundAction", action,
                                       NOT_FOUND_ACTIONS))
    return causes


def _validate_actions(actions: list, path: str) -> list:
    causes = []
    seen: set = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            causes.append(fe.not_supported(f"{path}[{i}]", action, VALIDATION_ACTIONS))
        if action in seen:
            causes.append(fe.duplicate(f"{path}[{i}]", action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        causes.append(fe.invalid(path, actions, "must not contain both Deny and Warn "
                                                "(repeating the same validation failure "
                                                "information in the API response and "
                                                "headers serves no purpose)"))
    if not seen:
        causes.append(fe.required(path, "at least one validation action is required"))
    return causes


def validate_binding(obj: dict) -> list:
    spec = obj.get("spec") or {}
    causes = []
    policy = spec.get("policyName") or ""
    if not policy:
        causes.append(fe.required("spec.policyName"))
    else:
        causes.extend(fe.invalid("spec.policyName", policy, p) for p in dns_subdomain(policy))
    causes.extend(_validate_param_ref(spec.get("paramRef"), "spec.paramRef"))
    # "matchResouces": upstream's spelling of the path.
    causes.extend(validate_match_resources(spec.get("matchResources"),
                                           "spec.matchResouces"))
    causes.extend(_validate_actions(spec.get("validationActions") or [],
                                    "spec.validationActions"))
    return causes


# The kinds.

def _param_kind(obj, now) -> str:
    kind = (obj.get("spec") or {}).get("paramKind") or {}
    if not kind:
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def _count(field: str):
    return lambda obj, now: len((obj.get("spec") or {}).get(field) or ())


def _param_ref(obj, now) -> str:
    ref = (obj.get("spec") or {}).get("paramRef")
    if not ref:
        return "<unset>"
    return "/".join(p for p in (ref.get("namespace"), ref.get("name")) if p) or "*"


POLICY_COLUMNS = (
    NAME,
    Column("Validations", "integer", _count("validations"), "The number of validations."),
    Column("ParamKind", "string", _param_kind, "The kind of the parameters."),
    AGE)

BINDING_COLUMNS = (
    NAME,
    Column("PolicyName", "string", lambda obj, now: (obj.get("spec") or {}).get(
        "policyName", ""), "The policy bound."),
    Column("ParamRef", "string", _param_ref, "The parameters."),
    AGE)

POLICY_KIND = ResourceType(
    group=GROUP, version=VERSION, kind="ValidatingAdmissionPolicy",
    plural="validatingadmissionpolicies", singular="validatingadmissionpolicy",
    namespaced=False, fields={
        "spec": Prop(POLICY_SPEC, "The policy's validations, matching and parameters."),
        "status": Prop(POLICY_STATUS, "The status of the policy (read-only)."),
    }, doc="Describes the definition of an admission validation policy that accepts or "
           "rejects an object without changing it.",
    categories=("api-extensions",), name_rule=dns_subdomain, definition_prefix=PREFIX,
    has_status=True, default=default_policy, validate=validate_policy,
    prepare_for_create=prepare_policy_for_create,
    prepare_for_update=prepare_policy_for_update, columns=POLICY_COLUMNS,
    presence=presence(PROTO, "ValidatingAdmissionPolicy", {
        "ValidatingAdmissionPolicy": "metadata spec status",
        # Every field of the spec, MatchResources, TypeChecking and Rule is a pointer or
        # a slice; the strings below have no omitempty unless marked.
        "ValidatingAdmissionPolicySpec": "", "MatchResources": "", "TypeChecking": "",
        "ParamKind": "apiVersion? kind?",
        "NamedRuleWithOperations": "ruleWithOperations",
        "Validation": "expression message? messageExpression?",
        "Variable": "name expression", "AuditAnnotation": "key valueExpression",
        "ValidatingAdmissionPolicyStatus": "observedGeneration?",
        "ExpressionWarning": "fieldRef warning", **PRESENCE}))

BINDING_KIND = ResourceType(
    group=GROUP, version=VERSION, kind="ValidatingAdmissionPolicyBinding",
    plural="validatingadmissionpolicybindings",
    singular="validatingadmissionpolicybinding", namespaced=False, fields={
        "spec": Prop(BINDING_SPEC, "The policy bound, its parameters and resources."),
    }, doc="Binds a ValidatingAdmissionPolicy to parameters and scopes it to resources.",
    categories=("api-extensions",), name_rule=dns_subdomain, definition_prefix=PREFIX,
    default=default_binding, validate=validate_binding, columns=BINDING_COLUMNS,
    presence=presence(PROTO, "ValidatingAdmissionPolicyBinding", {
        "ValidatingAdmissionPolicyBinding": "metadata spec",
        "ValidatingAdmissionPolicyBindingSpec": "policyName?",
        "ParamRef": "name? namespace?", "MatchResources": "",
        "NamedRuleWithOperations": "ruleWithOperations", **PRESENCE}))
