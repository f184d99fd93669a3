"""
The ``rbac.authorization.platform.io/v1`` kinds, by name, for callers that want one: each
is defined in its own module under ``registry/kinds/``.
"""

from __future__ import annotations

from platformd.registry.kinds import clusterrole, clusterrolebinding, role, rolebinding

ROLE = role.KIND
CLUSTER_ROLE = clusterrole.KIND
ROLE_BINDING = rolebinding.KIND
CLUSTER_ROLE_BINDING = clusterrolebinding.KIND
