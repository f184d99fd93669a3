"""
The rules that apply to a user in a namespace, and the errors met finding them
(upstream's ``DefaultRuleResolver.VisitRulesFor`` / ``RulesFor`` in
``pkg/registry/rbac/validation/rule.go``), read from an ``RBACIndex``.

ClusterRoleBindings count everywhere, a namespace's RoleBindings only in it (spec 5.3);
cluster-scoped requests see ClusterRoleBindings only.  Errors are collected, never
raised: rules are purely additive, so whatever was found still counts.  The errors are a
roleRef that does not resolve (upstream's words, see ``index.role_error``), and what is
wrong with a binding's subjects (``subjects.subject_error``).
"""

from __future__ import annotations

from platformd.auth.rbac.index import RBACIndex, role_error


def rules_for(index: RBACIndex, user, namespace: str, plural: bool = False) -> tuple:
    """
    ``(rules, errors)``: every rule (as stored) of every binding that applies to
    ``user`` in ``namespace``, cluster bindings first, and every error met.
    ``plural``: the registries' words for a missing role (escalation checks).
    """
    rules: list = []
    errors: list = []
    for scope in index.scopes(namespace):
        for binding in scope.errors.values():
            errors.extend(binding.scope_errors)
        for binding in scope.bindings_for(user):
            role = index.role_of(binding)
            if role is None:
                errors.append(role_error(binding.role_kind, binding.role_name, plural))
                continue
            rules.extend(role.rules)
            if binding.subject_errors:
                errors.extend(binding.errors_for(user))
    return rules, errors
