"""
One ValidatingAdmissionPolicy compiled for evaluation (upstream's ``PolicyHook``
evaluator): its match conditions, variables, validations with their messages and audit
annotations, each an ``Expression`` compiled once per object version in the policy
environment (``cel.admission``: ``object``, ``oldObject``, ``request``, ``params``,
``namespaceObject``, ``variables``), the one validation checked it in.  An expression
that does not compile (stored before a CEL change) fails when evaluated, as upstream's
``compilation error: ...``.  No runtime cost budget (upstream's ``PerCallLimit`` per
expression, ``RuntimeCELCostBudget`` per binding, ``running out of cost budget``): the
library cannot count or interrupt an evaluation (see ``platformd.cel``); nor any static
one, as upstream.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs

from platformd import cel
from platformd.cel.admission import policy_environment


class EvaluationError(Exception):
    """An expression failed; ``str`` is upstream's message for it."""


@attrs.frozen
class Expression:
    source: str
    program: Any
    #: The compile error, or "".
    error: str = ""

    @classmethod
    def compile(cls, source: str, *result_types) -> "Expression":
        try:
            return cls(source, policy_environment().compile(source, *result_types))
        except cel.CompileError as error:
            return cls(source, None, f"compilation error: {error}")

    def evaluate(self, variables: dict):
        if self.program is None:
            raise EvaluationError(self.error)
        try:
            return self.program.evaluate(variables)
        except cel.EvaluationError as error:
            raise EvaluationError(f"expression '{self.source}' resulted in error: "
                                  f"{error}") from None


@attrs.frozen
class Validation:
    expression: Expression
    message: str
    message_expression: Optional[Expression]
    reason: str


@attrs.frozen
class Policy:
    name: str
    failure_policy: str
    #: ``(apiVersion, kind)`` or None.
    param_kind: Optional[tuple]
    match_constraints: Optional[dict]
    conditions: tuple
    #: ``((name, Expression), ...)`` in order.
    variables: tuple
    validations: tuple
    #: ``((key, Expression), ...)``.
    audit_annotations: tuple

    @property
    def ignore_failures(self) -> bool:
        return self.failure_policy == "Ignore"


def compile_policy(obj: dict) -> Policy:
    spec = obj.get("spec") or {}
    kind = spec.get("paramKind")
    return Policy(
        name=(obj.get("metadata") or {}).get("name", ""),
        failure_policy=spec.get("failurePolicy") or "Fail",
        param_kind=(kind.get("apiVersion", ""), kind.get("kind", "")) if kind else None,
        match_constraints=spec.get("matchConstraints"),
        conditions=tuple(Expression.compile(c.get("expression", ""), cel.BOOL)
                         for c in spec.get("matchConditions") or ()),
        variables=tuple((v.get("name", ""), Expression.compile(v.get("expression", "")))
                        for v in spec.get("variables") or ()),
        validations=tuple(
            Validation(Expression.compile(v.get("expression", ""), cel.BOOL),
                       v.get("message") or "",
                       Expression.compile(v["messageExpression"], cel.STRING)
                       if (v.get("messageExpression") or "").strip() else None,
                       v.get("reason") or "")
            for v in spec.get("validations") or ()),
        audit_annotations=tuple((a.get("key", ""), Expression.compile(a.get("valueExpression", "")))
                                for a in spec.get("auditAnnotations") or ()))
