"""
One policy evaluated for one request and one parameter object (upstream's
``validating/validator.go``): the match conditions, then every validation (with its
message), then the audit annotations, into ``Decision``s and ``AuditAnnotation``s that
the plugin turns into denials, warnings and audit annotations by the binding's
``validationActions``.

``variables`` are evaluated in order before the expressions, each seeing the ones
before it; one that fails is left out, and an expression using it fails with its error
(upstream evaluates them lazily, with the same outcome for the expressions that use them).
"""

from __future__ import annotations

import re
import attrs

from platformd.admission.policy.compiled import EvaluationError, Policy
from platformd.goformat.gotext import aggregate

ADMIT, DENY = "admit", "deny"
#: Upstream's ``celconfig.MaxEvaluatedMessageExpressionSizeBytes``.
MAX_MESSAGE_BYTES = 5 * 1024


@attrs.frozen
class Decision:
    action: str
    #: "admit", "deny" or "error".
    evaluation: str
    message: str = ""
    reason: str = ""


@attrs.frozen
class AuditAnnotation:
    key: str
    #: "publish", "error" or "exclude".
    action: str
    value: str = ""
    error: str = ""


@attrs.frozen
class Result:
    decisions: tuple = ()
    annotations: tuple = ()


def _on_error(policy: Policy) -> str:
    return ADMIT if policy.ignore_failures else DENY


class _Activation:
    """The variables of one evaluation; remembers which ``variables.x`` failed."""

    def __init__(self, policy: Policy, values: dict):
        self.values = dict(values)
        self.values["variables"] = composed = {}
        self.failed: dict = {}
        for name, expression in policy.variables:
            try:
                composed[name] = expression.evaluate(self.values)
            except EvaluationError as error:
                self.failed[name] = str(error)

    def evaluate(self, expression):
        try:
            return expression.evaluate(self.values)
        except EvaluationError:
            for name, cause in self.failed.items():
                if re.search(rf"\bvariables\.{re.escape(name)}\b", expression.source):
                    raise EvaluationError(f"expression '{expression.source}' resulted in "
                                          f"error: {_detail(cause)}") from None
            raise


def _detail(message: str) -> str:
    """The CEL error inside ``expression '...' resulted in error: <detail>``."""
    return message.split("' resulted in error: ", 1)[-1]


def _type_name(value) -> str:
    """cel-go's name of a value's type."""
    if isinstance(value, bool):
        return "bool"
    for python, name in ((int, "int"), (float, "double"), (bytes, "bytes"), (list, "list"),
                         (dict, "map")):
        if isinstance(value, python):
            return name
    return type(value).__name__


def _matches(policy: Policy, activation: _Activation) -> tuple:
    """
    ``(matches, error)`` as upstream's ``matchconditions.Matcher``: any condition false
    does not match; else errors do not match under Ignore and are the error under Fail.
    """
    errors = []
    for condition in policy.conditions:
        try:
            result = activation.evaluate(condition)
        except EvaluationError as error:
            errors.append(str(error))
            continue
        if result is False:
            return False, None
    if errors:
        return False, None if policy.ignore_failures else aggregate(errors)
    return True, None


def _message(validation, activation: _Activation) -> str:
    message = ""
    if validation.message_expression is not None:
        try:
            value = activation.evaluate(validation.message_expression)
        except EvaluationError:
            value = None  # logged upstream; the static message is used
        if isinstance(value, str):
            message = value.strip()
            if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                message = ""
    if not message and validation.message:
        message = validation.message.strip()
    if not message:
        message = f"failed expression: {validation.expression.source.strip()}"
    return message


def _annotation(policy: Policy, key: str, expression, activation) -> AuditAnnotation:
    try:
        value = activation.evaluate(expression)
    except EvaluationError as error:
        return AuditAnnotation(key, "exclude" if policy.ignore_failures else "error",
                               error=str(error))
    if value is None:
        return AuditAnnotation(key, "exclude")
    if isinstance(value, str):
        value = value.strip()
        return AuditAnnotation(key, "publish", value) if value else AuditAnnotation(key, "exclude")
    return AuditAnnotation(key, "error", error=(
        f"valueExpression '{expression.source}' resulted in unsupported return type: "
        f"{_type_name(value)}. Return type must be either string or null."))


def validate(policy: Policy, values: dict) -> Result:
    """``values``: object, oldObject, request, params, namespaceObject."""
    activation = _Activation(policy, values)
    matches, error = _matches(policy, activation)
    if error is not None:
        return Result((Decision(DENY, "error", error),))
    if not matches:
        return Result()
    decisions = []
    for validation in policy.validations:
        try:
            result = activation.evaluate(validation.expression)
        except EvaluationError as error:
            decisions.append(Decision(_on_error(policy), "error", str(error)))
            continue
        if result is True:
            decisions.append(Decision(ADMIT, "admit"))
            continue
        decisions.append(Decision(DENY, "deny", _message(validation, activation),
                                  validation.reason or "Invalid"))
    annotations = tuple(_annotation(policy, key, expression, activation)
                        for key, expression in policy.audit_annotations)
    return Result(tuple(decisions), annotations)
