"""
Label selectors as a webhook's ``namespaceSelector``/``objectSelector`` carry them
(``metav1.LabelSelector``), matched as upstream's ``LabelSelectorAsSelector``: an empty
selector matches everything.  (``registry/bootstrap/labelselectors.py`` does the same
for aggregation rules; the admission layer may not import the registry.)
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
    raise ValueError(f'"{operator}" is not a valid label selector operator')


def compile_selector(selector):
    """``labels -> bool``, or None for an empty selector (everything); ValueError."""
    if not selector:
        return None
    tests = [(lambda labels, k=k, v=v: labels.get(k) == v)
             for k, v in (selector.get("matchLabels") or {}).items()]
    tests.extend(_requirement(e) for e in selector.get("matchExpressions") or ())
    if not tests:
        return None
    return lambda labels: all(test(labels) for test in tests)


def labels_of(obj) -> dict:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}
