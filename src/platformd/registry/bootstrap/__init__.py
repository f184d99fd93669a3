"""
The default RBAC policy (issue 13; the controller that keeps aggregated roles is
``controllers/aggregation.py``):

- ``policy``: the bootstrap ClusterRoles and ClusterRoleBindings, as data;
- ``reconcile``: ``reconcile_bootstrap_policy(stores, ctx=None)``, run once at start,
  creates what is missing and adds what an autoupdating object lacks;
- ``rules``: comparing PolicyRules (LabelSelectors: ``platformd/util/labelselectors.py``).

See docs/rbac-bootstrap.md.
"""

from platformd.registry.bootstrap.reconcile import reconcile_bootstrap_policy

__all__ = ["reconcile_bootstrap_policy"]
