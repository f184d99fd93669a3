"""
CEL ``matchConditions`` as upstream evaluates them (``apiserver/pkg/admission/plugin/cel``'s
and the webhook authorizer's ``matchconditions.Matcher``): any condition false skips the
webhook; otherwise a condition that failed to evaluate (or did not answer a boolean) is
an error, worded as upstream's; otherwise the webhook is called.  Authorization webhooks
(``auth/sar.py``) and admission webhooks (``admission/webhooks/matching.py``) share it,
each over its own environment.
"""

from __future__ import annotations

from platformd.cel import EvaluationError
from platformd.goformat.gotext import aggregate


class ConditionError(Exception):
    """A condition failed and none was false (the failure policy decides)."""


def evaluate(programs, variables: dict) -> bool:
    """
    ``programs``: compiled conditions (``cel.Program``).  False when one is false, True
    when all are true; ``ConditionError`` otherwise.
    """
    failures = []
    for program in programs:
        try:
            result = program.evaluate(variables)
        except EvaluationError as error:
            failures.append(f"cel evaluation error: expression '{program.source}' resulted "
                            f"in error: {error}")
            continue
        if not isinstance(result, bool):
            failures.append(f"cel evaluation error: expression '{program.source}' eval "
                            f"result type should be bool but got {type(result).__name__}")
            continue
        if not result:
            return False
    if failures:
        raise ConditionError(aggregate(failures))
    return True
