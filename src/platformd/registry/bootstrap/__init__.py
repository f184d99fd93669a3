"""
The default RBAC policy and the controllers that keep it (issue 13):

- ``policy``: the bootstrap ClusterRoles and ClusterRoleBindings, as data;
- ``reconcile``: ``reconcile_bootstrap_policy(stores, ctx=None)``, run once at start,
  creates what is missing and adds what an autoupdating object lacks;
- ``aggregation``: ``ClusterRoleAggregator(clock, cache, stores)``, which keeps the
  rules of aggregating ClusterRoles (``admin``, ``edit``, ``view``) the union of the
  roles their selectors match;
- ``rules``: comparing PolicyRules (LabelSelectors: ``platformd/labelselectors.py``).

See docs/rbac-bootstrap.md.
"""

from platformd.registry.bootstrap.aggregation import ClusterRoleAggregator
from platformd.registry.bootstrap.reconcile import reconcile_bootstrap_policy

__all__ = ["ClusterRoleAggregator", "reconcile_bootstrap_policy"]
