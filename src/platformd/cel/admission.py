"""
The CEL environments of admission: webhooks' ``matchConditions`` and
ValidatingAdmissionPolicy's expressions.  Each has two users, the kind's validation
(``registry/kinds/webhookshapes.py``, ``validatingadmissionpolicyshapes.py``) and the
admission plugin that evaluates what validation accepted (``admission/webhooks``,
``admission/policy``); defined once here, below both, an expression compiles in the one
exactly when it compiles in the other, with the same message.

Every variable is dynamic (upstream types ``object``, ``oldObject`` and ``params`` from
the OpenAPI schema and ``request`` as ``AdmissionRequest``): a misspelled field is an
evaluation error, not a compile error (see docs/admission.md).  Each environment is made
on first use.

No cost is estimated or limited at configuration time: upstream's
``admission/plugin/cel/compile.go`` estimates none and the admissionregistration
validation (``pkg/apis/admissionregistration/validation``) checks none for webhooks'
matchConditions or a policy's expressions; upstream bounds them at run time only
(``PerCallLimit`` per expression, ``RuntimeCELCostBudget`` per binding), which
cel-expr-python cannot do (see ``platformd.cel``).
"""

from __future__ import annotations

from typing import Optional

from platformd import cel
from platformd.cel import Environment, Program

#: The variables of a webhook's ``matchConditions``.
WEBHOOK_VARIABLES = ("object", "oldObject", "request")
#: The variables every expression of a ValidatingAdmissionPolicy sees.
POLICY_VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")

_webhook: Optional[Environment] = None
_policy: Optional[Environment] = None


def webhook_environment() -> Environment:
    """Webhooks' ``matchConditions``: ``object``, ``oldObject``, ``request``."""
    global _webhook
    if _webhook is None:
        _webhook = Environment({name: cel.DYN for name in WEBHOOK_VARIABLES})
    return _webhook


def compile_condition(expression: str) -> Program:
    """A webhook's matchCondition; ``CompileError`` unless a boolean expression."""
    return webhook_environment().compile(expression, cel.BOOL)


def policy_environment() -> Environment:
    """A ValidatingAdmissionPolicy's expressions: ``POLICY_VARIABLES``."""
    global _policy
    if _policy is None:
        _policy = Environment({name: cel.DYN for name in POLICY_VARIABLES})
    return _policy
