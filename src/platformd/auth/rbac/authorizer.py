"""
``RBACAuthorizer``: upstream's RBAC authorizer (``plugin/pkg/auth/authorizer/rbac``)
over an ``RBACIndex``.

A request is allowed when a rule of a binding that applies to its user allows it
(``rules.allows``), with the reason ``RBAC: allowed by <binding>``.  Otherwise the
answer is NoOpinion (RBAC never denies), with the reason ``RBAC: <errors>`` when
evaluation met errors (an unresolvable roleRef, a bad subject; upstream's aggregate
text) and no reason otherwise; ``Decision.error`` carries the same errors' text for
access reviews.  Each distinct error is logged at most once a minute.

As ``IRuleResolver`` it answers ``rules_for`` (SelfSubjectRulesReview):
the rules split into resource and non-resource rules, never incomplete (upstream's
``RBACAuthorizer.RulesFor``), and the errors joined.
"""

from __future__ import annotations


from twisted.logger import Logger
from zope.interface import implementer

from platformd.auth.interfaces import (
    ALLOW, NO_OPINION, Decision, IAuthorizer, IRuleResolver, RulesForUser,
)
from platformd.goformat.gotext import aggregate
from platformd.auth.rbac.index import RBACIndex, role_error
from platformd.auth.rbac.resolver import rules_for
from platformd.auth.rbac.rules import allows
from platformd.util.ratelog import RateLimitedLog

log = Logger()

_NO_OPINION = Decision(NO_OPINION)


@implementer(IAuthorizer, IRuleResolver)
class RBACAuthorizer:
    def __init__(self, index: RBACIndex, clock=None):
        self.index = index
        self._errors = RateLimitedLog(log, "RBAC: evaluation error: {detail}", clock)

    def authorize(self, attributes) -> Decision:
        user = attributes.user
        info = attributes.info
        if user is None:
            return _NO_OPINION
        index = self.index
        errors = None
        for scope in index.scopes(info.namespace):
            if scope.errors:
                errors = (errors or []) + [e for b in scope.errors.values()
                                           for e in b.scope_errors]
            for binding in scope.bindings_for(user):
                role = index.role_of(binding)
                if role is None:
                    errors = (errors or []) + [role_error(binding.role_kind, binding.role_name)]
                    continue
                for rule in role.compiled:
                    if allows(rule, info):
                        return _allowed(binding, user)
                if binding.subject_errors:
                    errors = (errors or []) + binding.errors_for(user)
        if not errors:
            return _NO_OPINION
        text = aggregate(errors)
        self._log(errors)
        return Decision(NO_OPINION, "RBAC: " + text, text)

    def rules_for(self, user, namespace: str) -> RulesForUser:
        rules, errors = rules_for(self.index, user, namespace)
        if errors:
            self._log(errors)
        return RulesForUser(
            tuple(_resource_rule(r) for r in rules if r.get("resources")),
            tuple(_non_resource_rule(r) for r in rules if r.get("nonResourceURLs")),
            False, aggregate(errors))

    def _log(self, errors) -> None:
        for error in dict.fromkeys(errors):
            self._errors.warn(error)


def _allowed(binding, user) -> Decision:
    """Allow, ``RBAC: allowed by <binding>``: made once per binding version and subject."""
    subject = binding.first_subject(user)
    memo = binding.memo
    if memo is None:
        memo = binding.memo = {}
    decision = memo.get(subject)
    if decision is None:
        decision = memo[subject] = Decision(
            ALLOW, "RBAC: allowed by " + binding.describe(subject))
    return decision


def _resource_rule(rule: dict) -> dict:
    """upstream's ``DefaultResourceRuleInfo``: verbs, groups, resources, names."""
    return {key: list(rule.get(key) or ())
            for key in ("verbs", "apiGroups", "resources", "resourceNames")
            if key == "verbs" or rule.get(key)}


def _non_resource_rule(rule: dict) -> dict:
    return {"verbs": list(rule.get("verbs") or ()),
            "nonResourceURLs": list(rule.get("nonResourceURLs") or ())}
