"""
ClusterRole (``rbac.authorization.platform.io/v1``): cluster-wide PolicyRules, possibly
aggregated from other ClusterRoles.
"""

from __future__ import annotations

from platformd.model.schema import STRING, ListOf, MapOf, Prop, Struct
from platformd.registry.kinds.rbacshapes import (
    POLICY_RULE, POLICY_RULE_PRESENCE, PREFIX, rbac_kind, rules_validator,
)

LABEL_SELECTOR_REQUIREMENT = Struct(
    "io.platform.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", {
        "key": Prop(STRING, "The label key.", required=True),
        "operator": Prop(STRING, "In, NotIn, Exists or DoesNotExist.", required=True),
        "values": Prop(ListOf(STRING), "Values for In and NotIn."),
    }, doc="One requirement of a label selector.")

LABEL_SELECTOR = Struct("io.platform.apimachinery.pkg.apis.meta.v1.LabelSelector", {
    "matchLabels": Prop(MapOf(STRING), "Labels that must all match."),
    "matchExpressions": Prop(ListOf(LABEL_SELECTOR_REQUIREMENT), "Requirements, ANDed."),
}, doc="A label query over a set of objects.")

AGGREGATION_RULE = Struct(f"{PREFIX}.AggregationRule", {
    "clusterRoleSelectors": Prop(ListOf(LABEL_SELECTOR),
                                 "Selectors of ClusterRoles whose rules are aggregated."),
}, doc="How to build a ClusterRole's rules from other ClusterRoles.")

KIND = rbac_kind("ClusterRole", "clusterroles", False, {
    "rules": Prop(ListOf(POLICY_RULE), "Rules holds all the PolicyRules for this ClusterRole."),
    "aggregationRule": Prop(AGGREGATION_RULE, "How to build the rules from other ClusterRoles."),
}, "A cluster-level, logical grouping of PolicyRules that a RoleBinding or ClusterRoleBinding "
   "can reference.", {"ClusterRole": "metadata", "AggregationRule": "", **POLICY_RULE_PRESENCE},
    validate=rules_validator(False))
