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
POLICY_GROUP = "policy.platform.io"

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

COORDINATION_GROUP = "coordination.platform.io"
EVENTS_GROUP = "events.platform.io"
#: Upstream's kube-system.
SYSTEM_NAMESPACE = "platform-system"

# Upstream's eventsRule(): events written through either group.
_EVENT_WRITES = {"verbs": ["create", "patch", "update"], "apiGroups": ["", EVENTS_GROUP],
                 "resources": ["events"]}
_REVIEWS = [
    {"verbs": ["create"], "apiGroups": [AUTHENTICATION_GROUP], "resources": ["tokenreviews"]},
    {"verbs": ["create"], "apiGroups": [AUTHORIZATION_GROUP],
     "resources": ["subjectaccessreviews"]}]


def _leader_elected(component: str, rules: list) -> dict:
    """``system:kube-controller-manager``/``-scheduler``: events, its own lease, ``rules``."""
    return {"metadata": {"name": f"system:{component}"}, "rules": [
        _EVENT_WRITES,
        {"verbs": ["create"], "apiGroups": [COORDINATION_GROUP], "resources": ["leases"]},
        {"verbs": ["get", "update"], "apiGroups": [COORDINATION_GROUP],
         "resources": ["leases"], "resourceNames": [component]},
        *rules]}


# In upstream's order (policy.go's ClusterRoles()).
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
            {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]},
            {"verbs": WRITE, "apiGroups": [""],
             "resources": ["configmaps", "events", "secrets", "serviceaccounts", "services"]},
            {"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]},
            {"verbs": WRITE, "apiGroups": [POLICY_GROUP], "resources": ["poddisruptionbudgets"]},
            {"verbs": READ_WRITE, "apiGroups": [COORDINATION_GROUP], "resources": ["leases"]},
        ],
    },
    {
        "metadata": {"name": "system:aggregate-to-view",
                     "labels": {AGGREGATE_TO_VIEW: "true"}},
        "rules": [
            {"verbs": READ, "apiGroups": [""],
             "resources": ["configmaps", "endpoints", "pods", "serviceaccounts", "services",
                           "services/status"]},
            {"verbs": READ, "apiGroups": [""],
             "resources": ["bindings", "events", "namespaces/status", "pods/status"]},
            # Reading namespaces at the namespace scope reads *this* namespace: a sign of
            # which namespaces one has access to.
            {"verbs": READ, "apiGroups": [""], "resources": ["namespaces"]},
            {"verbs": READ, "apiGroups": [DISCOVERY_GROUP], "resources": ["endpointslices"]},
            {"verbs": READ, "apiGroups": [POLICY_GROUP],
             "resources": ["poddisruptionbudgets", "poddisruptionbudgets/status"]},
        ],
    },
    {
        "metadata": {"name": "system:heapster"},
        "rules": [
            {"verbs": READ, "apiGroups": [""],
             "resources": ["events", "namespaces", "nodes", "pods"]},
        ],
    },
    {
        # What a node's agent may do (the Node authorizer's static part); bound to no one.
        "metadata": {"name": "system:node"},
        "rules": [
            {"verbs": ["create"], "apiGroups": [AUTHENTICATION_GROUP],
             "resources": ["tokenreviews"]},
            {"verbs": ["create"], "apiGroups": [AUTHORIZATION_GROUP],
             "resources": ["localsubjectaccessreviews", "subjectaccessreviews"]},
            {"verbs": READ, "apiGroups": [""], "resources": ["services"]},
            {"verbs": ["create", "get", "list", "watch"], "apiGroups": [""],
             "resources": ["nodes"]},
            {"verbs": ["patch", "update"], "apiGroups": [""], "resources": ["nodes/status"]},
            {"verbs": ["patch", "update"], "apiGroups": [""], "resources": ["nodes"]},
            {"verbs": ["create", "patch", "update"], "apiGroups": [""],
             "resources": ["events"]},
            {"verbs": READ, "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["create", "delete"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["patch", "update"], "apiGroups": [""], "resources": ["pods/status"]},
            {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]},
            {"verbs": READ, "apiGroups": [""], "resources": ["configmaps", "secrets"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["endpoints"]},
            {"verbs": ["create", "delete", "get", "patch", "update"],
             "apiGroups": [COORDINATION_GROUP], "resources": ["leases"]},
            {"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]},
        ],
    },
    {
        "metadata": {"name": "system:node-problem-detector"},
        "rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]},
            {"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes/status"]},
            _EVENT_WRITES,
        ],
    },
    {
        # For a server that delegates authentication and authorization to this one.
        "metadata": {"name": "system:auth-delegator"},
        "rules": _REVIEWS,
    },
    {
        "metadata": {"name": "system:kube-aggregator"},
        "rules": [
            {"verbs": READ, "apiGroups": [""], "resources": ["endpoints", "services"]},
        ],
    },
    _leader_elected("kube-controller-manager", [
        {"verbs": ["create"], "apiGroups": [""], "resources": ["secrets", "serviceaccounts"]},
        {"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]},
        {"verbs": ["get"], "apiGroups": [""],
         "resources": ["configmaps", "namespaces", "secrets", "serviceaccounts"]},
        {"verbs": ["update"], "apiGroups": [""], "resources": ["secrets", "serviceaccounts"]},
        *_REVIEWS,
        {"verbs": ["list", "watch"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]}]),
    {
        "metadata": {"name": "system:kube-dns"},
        "rules": [
            {"verbs": ["list", "watch"], "apiGroups": [""],
             "resources": ["endpoints", "services"]},
        ],
    },
    {
        "metadata": {"name": "system:node-proxier"},
        "rules": [
            {"verbs": ["list", "watch"], "apiGroups": [""],
             "resources": ["endpoints", "services"]},
            {"verbs": READ, "apiGroups": [""], "resources": ["nodes"]},
            _EVENT_WRITES,
            {"verbs": ["list", "watch"], "apiGroups": [DISCOVERY_GROUP],
             "resources": ["endpointslices"]},
        ],
    },
    _leader_elected("kube-scheduler", [
        {"verbs": READ, "apiGroups": [""], "resources": ["nodes"]},
        {"verbs": ["delete", "get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["bindings", "pods/binding"]},
        {"verbs": ["patch", "update"], "apiGroups": [""], "resources": ["pods/status"]},
        {"verbs": READ, "apiGroups": [""], "resources": ["services"]},
        {"verbs": READ, "apiGroups": [POLICY_GROUP], "resources": ["poddisruptionbudgets"]},
        *_REVIEWS,
        {"verbs": READ, "apiGroups": [""], "resources": ["namespaces"]}]),
    {
        # The service account issuer's discovery documents, for in-cluster workloads.
        "metadata": {"name": "system:service-account-issuer-discovery"},
        "rules": [
            {"verbs": ["get"], "nonResourceURLs": [
                "/.well-known/openid-configuration", "/openid/v1/jwks"]},
        ],
    },
]


def _group(name: str) -> dict:
    return {"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}


def _user(name: str) -> dict:
    return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}


def _service_account(name: str) -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": SYSTEM_NAMESPACE}


def _binding(name: str, *subjects: dict) -> dict:
    """A ClusterRoleBinding of the ClusterRole ``name`` to ``subjects``, named after it."""
    binding: dict = {"metadata": {"name": name}}
    if subjects:
        binding["subjects"] = list(subjects)
    binding["roleRef"] = {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}
    return binding


# Upstream's order (ClusterRoleBindings()).
_CLUSTER_ROLE_BINDINGS = [
    _binding("cluster-admin", _group("system:masters")),
    _binding("system:monitoring", _group("system:monitoring")),
    _binding("system:discovery", _group("system:authenticated")),
    _binding("system:basic-user", _group("system:authenticated")),
    _binding("system:public-info-viewer", _group("system:authenticated"),
             _group("system:unauthenticated")),
    _binding("system:node-proxier", _user("system:kube-proxy")),
    _binding("system:kube-controller-manager", _user("system:kube-controller-manager")),
    _binding("system:kube-dns", _service_account("kube-dns")),
    _binding("system:kube-scheduler", _user("system:kube-scheduler")),
    # Kept, with no subjects, since the Node authorizer replaced it (upstream, 1.7).
    _binding("system:node"),
    _binding("system:service-account-issuer-discovery", _group("system:serviceaccounts")),
]

# namespace_policy.go: the leader-locking Roles in kube-system.
_LEADER_LOCKING = [{"verbs": ["create", "get", "list", "update", "watch"],
                    "apiGroups": [COORDINATION_GROUP], "resources": ["leases"]}]
_NAMESPACE_ROLES = [
    {"metadata": {"name": f"system::leader-locking-{c}", "namespace": SYSTEM_NAMESPACE},
     "rules": _LEADER_LOCKING}
    for c in ("kube-controller-manager", "kube-scheduler")]

_NAMESPACE_ROLE_BINDINGS = [
    {"metadata": {"name": "system::leader-locking-kube-controller-manager",
                  "namespace": SYSTEM_NAMESPACE},
     "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role",
                 "name": "system::leader-locking-kube-controller-manager"},
     "subjects": [_user("system:kube-controller-manager"),
                  _service_account("kube-controller-manager"),
                  _service_account("leader-election-controller")]},
    {"metadata": {"name": "system::leader-locking-kube-scheduler",
                  "namespace": SYSTEM_NAMESPACE},
     "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role",
                 "name": "system::leader-locking-kube-scheduler"},
     "subjects": [_user("system:kube-scheduler"), _service_account("kube-scheduler")]},
]


def namespace_roles() -> list:
    """The bootstrap Roles (new dicts each call), each in its namespace."""
    return [_with_defaults(r) for r in _NAMESPACE_ROLES]


def namespace_role_bindings() -> list:
    """The bootstrap RoleBindings (new dicts each call), each in its namespace."""
    return [_with_defaults(b) for b in _NAMESPACE_ROLE_BINDINGS]


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
