"""Role (``rbac.authorization.platform.io/v1``): namespaced PolicyRules."""

from __future__ import annotations

from platformd.model.schema import ListOf, Prop
from platformd.registry.kinds.rbacshapes import (
    POLICY_RULE, POLICY_RULE_PRESENCE, rbac_kind, rules_validator,
)

KIND = rbac_kind("Role", "roles", True, {
    "rules": Prop(ListOf(POLICY_RULE), "Rules holds all the PolicyRules for this Role."),
}, "A namespaced, logical grouping of PolicyRules that a RoleBinding can reference.",
    {"Role": "metadata", **POLICY_RULE_PRESENCE}, validate=rules_validator(True))
