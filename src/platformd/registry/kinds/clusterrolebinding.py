"""ClusterRoleBinding (``rbac.authorization.platform.io/v1``): a ClusterRole bound everywhere."""

from __future__ import annotations

from platformd.registry.kinds.rbacshapes import binding_kind

KIND = binding_kind(
    "ClusterRoleBinding", "clusterrolebindings", False, ("ClusterRole",),
    "ClusterRoleBinding references a ClusterRole and binds it to subjects cluster-wide.")
