"""RoleBinding (``rbac.authorization.platform.io/v1``): a role bound in one namespace."""

from __future__ import annotations

from platformd.registry.kinds.rbacshapes import binding_kind

KIND = binding_kind(
    "RoleBinding", "rolebindings", True, ("Role", "ClusterRole"),
    "RoleBinding references a role and binds it to subjects, in the binding's namespace only. "
    "It may reference a Role in the same namespace or a ClusterRole.")
