"""
Structured label selectors (``metav1.LabelSelector``: ``matchLabels`` and
``matchExpressions``), as an aggregation rule's ``clusterRoleSelectors`` carry them,
matched against an object's labels as upstream's ``LabelSelectorAsSelector`` does: an
empty selector matches everything; an unknown operator is an error (``ValueError``).

(``api/selectors.py`` parses the text form of a request's ``labelSelector``; the
registry layer may not import it.)
"""

from __future__ import annotations


def _requirement(expression: dict):
    key = expression.get("key", "")
    operator = expression.get("operator", "")
    values = frozenset(expression.get("values") or ())
    if operator == "In":
        return lambda labels: key in labels and labels[key] in values
    if operator == "NotIn":
        return lambda labels: key not in labels or labels[key] not in values
    if operator == "Exists":
        return lambda labels: key in labels
    if operator == "DoesNotExist":
        return lambda labels: key not in labels
    raise ValueError(f"{operator!r} is not a valid label selector operator")


def compile_selector(selector: dict):
    """``labels -> bool`` for one LabelSelector dict (ValueError when malformed)."""
    tests = [(lambda labels, k=k, v=v: labels.get(k) == v)
             for k, v in (selector.get("matchLabels") or {}).items()]
    tests.extend(_requirement(e) for e in selector.get("matchExpressions") or ())
    return lambda labels: all(test(labels) for test in tests)
