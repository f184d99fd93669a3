"""
Whether a policy's ``matchConstraints`` or a binding's ``matchResources`` take a request
(upstream's ``policy/matching.Matcher.Matches``): the namespace selector, the object
selector, ``excludeResourceRules``, then ``resourceRules`` (none: every resource), each
rule also limited by ``resourceNames``.  A selector that cannot be used (or a namespace
that is not found) is an error only when the rules take the request: the caller's
failure policy decides, as upstream's configuration errors.  The rules, selectors and
namespace labels are the webhooks' (``webhooks/matching.py``), as upstream shares them.
"""

from __future__ import annotations

from typing import Optional

from platformd import errors
from platformd.admission.webhooks.matching import namespace_labels, rule_matches
from platformd.util.labelselectors import compile_selector, labels_of

#: The policy kinds themselves never go through policies (upstream's
#: ``isPolicyResource``).
EXEMPT = frozenset({("admissionregistration.platform.io", "validatingadmissionpolicies"),
                    ("admissionregistration.platform.io", "validatingadmissionpolicybindings")})


class MatchError(Exception):
    """A configuration error found while matching; the failure policy decides."""


def exempt(a) -> bool:
    return (a.kind.group, a.kind.plural) in EXEMPT


def request_name(a) -> str:
    return a.name or ((a.obj or {}).get("metadata") or {}).get("name") or ""


def _rules_match(rules, a, namespaces) -> bool:
    for rule in rules or ():
        if not rule_matches(rule, a, namespaces):
            continue
        names = rule.get("resourceNames") or ()
        if not names or request_name(a) in names:
            return True
    return False


def _selector_error(selector: Optional[dict], labels_fn) -> tuple:
    """``(matches, error)`` of one selector (None or {}: everything)."""
    if not selector:
        return True, None
    try:
        matcher = compile_selector(selector)
    except ValueError as error:
        return False, str(error)
    if matcher is None:
        return True, None
    try:
        return labels_fn(matcher), None
    except errors.StatusError as error:
        return False, error.message


def matches(match: Optional[dict], a, namespaces) -> bool:
    """Whether ``match`` (MatchResources) takes ``a``; ``MatchError`` when it cannot tell.
    ``namespaces``: ``webhooks.matching.Namespaces``."""
    match = match or {}

    def namespace_ok(selector) -> bool:
        labels = namespace_labels(a, namespaces)
        return labels is None or selector(labels)

    def object_ok(selector) -> bool:
        return ((a.obj is not None and selector(labels_of(a.obj)))
                or (a.old is not None and selector(labels_of(a.old))))

    ns_match, ns_error = _selector_error(match.get("namespaceSelector"), namespace_ok)
    if not ns_match and ns_error is None:
        return False
    obj_match, obj_error = _selector_error(match.get("objectSelector"), object_ok)
    if not obj_match and obj_error is None:
        return False
    if _rules_match(match.get("excludeResourceRules"), a, namespaces):
        return False
    rules = match.get("resourceRules")
    if rules and not _rules_match(rules, a, namespaces):
        return False
    if ns_error is not None or obj_error is not None:
        raise MatchError(ns_error or obj_error)
    return True
