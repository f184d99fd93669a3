"""
Structured label selectors (``metav1.LabelSelector``: ``matchLabels`` and
``matchExpressions``), matched against an object's labels as upstream's
``LabelSelectorAsSelector`` does: an empty selector matches everything; an unknown
operator is an error (``ValueError``).  Aggregation rules' ``clusterRoleSelectors`` and
webhooks' ``namespaceSelector``/``objectSelector`` carry them.  (``api/selectors.py``
parses the text form of a request's ``labelSelector``.)
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
    """``labels -> bool``, or None for an empty selector (it matches everything)."""
    if not selector:
        return None
    tests = [(lambda labels, k=k, v=v: labels.get(k) == v)
             for k, v in (selector.get("matchLabels") or {}).items()]
    tests.extend(_requirement(e) for e in selector.get("matchExpressions") or ())
    if not tests:
        return None
    return lambda labels: all(test(labels) for test in tests)


def matches(compiled, labels: dict) -> bool:
    """Whether labels satisfy a compiled selector (None: everything)."""
    return compiled is None or compiled(labels)


def labels_of(obj) -> dict:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}
