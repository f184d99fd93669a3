"""
The bootstrap RBAC policy as data: the default ClusterRoles and ClusterRoleBindings
(upstream's ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``, as its
``testdata/cluster-roles.yaml`` and ``cluster-role-bindings.yaml`` ship them), cut to
the groups, resources and endpoints this server serves.  Where and why each deviates
from upstream's list is in docs/rbac-bootstrap.md.

Lists are sorted as upstream's rule builder sorts them (``verbs``, ``apiGroups``,
``resources`` are sets there), so a stored object reads as upstream's does.
``cluster_roles()`` and ``cluster_role_bindings()`` add the bootstrap label and the
autoupdate annotation to every object (upstream's ``addDefaultMetadata``) and return
fresh copies each call.
"""

from __future__ import annotations

import copy

from platformd.registry.kinds.rbacshapes import GROUP as RBAC_GROUP

AUTHORIZATION_GROUP = "authorization.platform.io"
AUTHENTICATION_GROUP = "authentication.platform.io"
DISCOVERY_GROUP = "discovery.platform.io"

#: ``rbac.authorization.platform.io/autoupdate``: "false" protects an object from
#: reconciliation (a user's edits are kept).
AUTOUPDATE_ANNOTATION = f"{RBAC_GROUP}/autoupdate"
BOOTSTRAP_LABELS = {"platform.io/bootstrapping": "rbac-defaults"}
BOOTSTRAP_ANNOTATIONS = {AUTOUPDATE_ANNOTATION: "true"}

AGGREGATE_TO_ADMIN = f"{RBAC_GROUP}/aggregate-to-admin"
AGGREGATE_TO_EDIT = f"{RBAC_GROUP}/aggregate-to-edit"
AGGREGATE_TO_VIEW = f"{RBAC_GROUP}/aggregate-to-view"

# Upstream's verb sets (bootstrappolicy.Read, Write, ReadWrite), sorted.
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

_CLUSTER_ROLES: list[dict] = [
    {
        # A "root" role which can do absolutely anything.
        "metadata": {"name": "cluster-admin"},
        "rules": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]},
        ],
    },
    {
        # Just enough to tell whether the server is ready and to discover the API.
        "metadata": {"name": "system:discovery"},
        "rules": [
            {"verbs": ["get"], "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/"]},
        ],
    },
    {
        # Health and metrics endpoints, for monitoring agents.
        "metadata": {"name": "system:monitoring"},
        "rules": [
            {"verbs": ["get"], "nonResourceURLs": [
                "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
                "/readyz", "/readyz/*"]},
        ],
    },
    {
        # Lets a user learn about themselves.
        "metadata": {"name": "system:basic-user"},
        "rules": [
            {"verbs": ["create"], "apiGroups": [AUTHORIZATION_GROUP],
             "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
            {"verbs": ["create"], "apiGroups": [AUTHENTICATION_GROUP],
             "resources": ["selfsubjectreviews"]},
        ],
    },
    {
        # Insensitive cluster information, for everyone.
        "metadata": {"name": "system:public-info-viewer"},
        "rules": [
            {"verbs": ["get"], "nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"]},
        ],
    },
    {
        # A namespace admin: edit, plus granting permissions to others (aggregated).
        "metadata": {"name": "admin"},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_TO_ADMIN: "true"}}]},
    },
    {
        # Every user-level action in a namespace (aggregated).
        "metadata": {"name": "edit", "labels": {AGGREGATE_TO_ADMIN: "true"}},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_TO_EDIT: "true"}}]},
    },
    {
        # Read-only access to non-escalating resources in a namespace (aggregated).
        "metadata": {"name": "view", "labels": {AGGREGATE_TO_EDIT: "true"}},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_TO_VIEW: "true"}}]},
    },
    {
        "metadata": {"name": "system:aggregate-to-admin",
                     "labels": {AGGREGATE_TO_ADMIN: "true"}},
        "rules": [
            {"verbs": ["create"], "apiGroups": [AUTHORIZATION_GROUP],
             "resources": ["localsubjectaccessreviews"]},
            {"verbs": READ_WRITE, "apiGroups": [RBAC_GROUP],
             "resources": ["rolebindings", "roles"]},
        ],
    },
    {
        "metadata": {"name": "system:aggregate-to-edit",
                     "labels": {AGGREGATE_TO_EDIT: "true"}},
        "rules": [
            # Read on escalating resources.
            {"verbs": READ, "apiGroups": [""], "resources": ["secrets"]},
            {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]},
            {"verbs": WRITE, "apiGroups": [""], "resources": ["pods"]},
            {"verbs": WRITE, "apiGroups": [""],
             "resources": ["configmaps", "secrets", "serviceaccounts", "services"]},
        ],
    },
    {
        "metadata": {"name": "system:aggregate-to-view",
                     "labels": {AGGREGATE_TO_VIEW: "true"}},
        "rules": [
            {"verbs": READ, "apiGroups": [""],
             "resources": ["configmaps", "endpoints", "pods", "serviceaccounts", "services",
                           "services/status"]},
            {"verbs": READ, "apiGroups": [""], "resources": ["namespaces/status", "pods/status"]},
            # Reading namespaces at the namespace scope reads *this* namespace: a sign of
            # which namespaces one has access to.
            {"verbs": READ, "apiGroups": [""], "resources": ["namespaces"]},
            {"verbs": READ, "apiGroups": [DISCOVERY_GROUP], "resources": ["endpointslices"]},
        ],
    },
]


def _group(name: str) -> dict:
    return {"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}


def _binding(name: str, *groups: str) -> dict:
    """A ClusterRoleBinding of the ClusterRole ``name`` to ``groups``, named after it."""
    return {
        "metadata": {"name": name},
        "subjects": [_group(g) for g in groups],
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
    }


_CLUSTER_ROLE_BINDINGS = [
    _binding("cluster-admin", "system:masters"),
    _binding("system:monitoring", "system:monitoring"),
    _binding("system:discovery", "system:authenticated"),
    _binding("system:basic-user", "system:authenticated"),
    _binding("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
]


def _with_defaults(obj: dict) -> dict:
    """A copy of ``obj`` with the bootstrap label and annotation (addDefaultMetadata)."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta["labels"] = {**meta.get("labels", {}), **BOOTSTRAP_LABELS}
    meta["annotations"] = {**meta.get("annotations", {}), **BOOTSTRAP_ANNOTATIONS}
    return obj


def cluster_roles() -> list:
    """The bootstrap ClusterRoles (new dicts each call)."""
    return [_with_defaults(r) for r in _CLUSTER_ROLES]


def cluster_role_bindings() -> list:
    """The bootstrap ClusterRoleBindings (new dicts each call)."""
    return [_with_defaults(b) for b in _CLUSTER_ROLE_BINDINGS]
