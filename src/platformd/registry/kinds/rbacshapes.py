"""
What the ``rbac.authorization.platform.io/v1`` kinds share (spec 2.2, 2.3): their
``ResourceType`` factory, PolicyRule and its validation (Role, ClusterRole), and
Subject, RoleRef, their defaulting and validation and the table of a binding
(RoleBinding, ClusterRoleBinding: ``binding_kind``).

Validation follows upstream's ``pkg/apis/rbac/validation`` rule for rule.  A
``namespace`` on a ``User`` or ``Group`` subject is stored as upstream stores it: spec 2.2
and 7.4 make it the authorizer's error to report, not validation's.
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, path_segment
from platformd.model.schema import STRING, ListOf, Prop, Struct
from platformd.registry.kinds import presence
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column

GROUP = "rbac.authorization.platform.io"
VERSION = "v1"
PREFIX = "io.platform.api.rbac.v1"
#: The package of the RBAC kinds' Protobuf messages.
PROTO = "platform.api.rbac.v1."

POLICY_RULE = Struct(f"{PREFIX}.PolicyRule", {
    "verbs": Prop(ListOf(STRING), "Verbs that apply to every resource this rule holds; '*' means all.",
                  required=True),
    "apiGroups": Prop(ListOf(STRING), "API groups of the resources; '' is the core group, '*' all."),
    "resources": Prop(ListOf(STRING), "Resources this rule applies to; '*' means all."),
    "resourceNames": Prop(ListOf(STRING), "An optional allow-list of object names."),
    "nonResourceURLs": Prop(ListOf(STRING), "Non-resource URL paths (only in ClusterRoles bound cluster-wide)."),
}, doc="Actions a subject may perform on resources or non-resource URLs.")

ROLE_REF = Struct(f"{PREFIX}.RoleRef", {
    "apiGroup": Prop(STRING, "APIGroup is the group for the resource being referenced.", required=True),
    "kind": Prop(STRING, "Kind is the type of resource being referenced.", required=True),
    "name": Prop(STRING, "Name is the name of resource being referenced.", required=True),
}, doc="RoleRef contains information that points to the role being used.", atomic=True)

SUBJECT = Struct(f"{PREFIX}.Subject", {
    "kind": Prop(STRING, 'Kind of object being referenced: "User", "Group" or "ServiceAccount".',
                 required=True),
    "apiGroup": Prop(STRING, 'APIGroup of the referenced subject; defaults to "" for ServiceAccount '
                             f'subjects and "{GROUP}" for User and Group subjects.'),
    "name": Prop(STRING, "Name of the object being referenced.", required=True),
    "namespace": Prop(STRING, "Namespace of the referenced object; must be empty for User and Group."),
}, doc="A reference to an API object or a user or group name.")

SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def rbac_kind(kind, plural, namespaced, fields, doc, own_presence, **kw) -> ResourceType:
    """An RBAC kind; ``own_presence`` as ``kinds.presence``'s ``own``."""
    return ResourceType(
        group=GROUP, version=VERSION, kind=kind, plural=plural, singular=kind.lower(),
        namespaced=namespaced, fields=fields, doc=doc, name_rule=path_segment,
        definition_prefix=PREFIX, allow_create_on_update=True, metadata_update_last=True,
        presence=presence(PROTO, kind, own_presence), **kw)


# Roles.

def rules_validator(namespaced: bool):
    def validate(obj: dict) -> list:
        causes = []
        for i, rule in enumerate(obj.get("rules") or ()):
            path = f"rules[{i}]"
            if not rule.get("verbs"):
                causes.append(fe.required(f"{path}.verbs", "verbs must contain at least one value"))
            urls = rule.get("nonResourceURLs")
            if urls:
                if namespaced:
                    causes.append(fe.invalid(f"{path}.nonResourceURLs", urls,
                                             "namespaced rules cannot apply to non-resource URLs"))
                if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                    causes.append(fe.invalid(
                        f"{path}.nonResourceURLs", urls,
                        "rules cannot apply to both regular resources and non-resource URLs"))
                continue
            if not rule.get("apiGroups"):
                causes.append(fe.required(f"{path}.apiGroups",
                                          "resource rules must supply at least one api group"))
            if not rule.get("resources"):
                causes.append(fe.required(f"{path}.resources",
                                          "resource rules must supply at least one resource"))
        return causes
    return validate


#: PolicyRule's always-written fields (none: every field is a slice).
POLICY_RULE_PRESENCE = {"PolicyRule": ""}


# Bindings.

def _default_binding(obj: dict) -> None:
    """
    Upstream's ``SetDefaults_RoleBinding``: the roleRef's apiGroup (the struct is always
    there in Go, so a binding without one gets ``{apiGroup}`` and is then refused for
    its kind and name), and each User and Group subject's.
    """
    role_ref = obj.setdefault("roleRef", {})
    if not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = GROUP
    for subject in obj.get("subjects") or ():
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


def _validate_subject(subject: dict, path: str, namespaced: bool) -> list:
    causes = []
    name = subject.get("name", "")
    kind = subject.get("kind", "")
    if not name:
        causes.append(fe.required(f"{path}.name"))
    if kind == "ServiceAccount":
        if name:
            causes.extend(fe.invalid(f"{path}.name", name, p) for p in dns_subdomain(name))
        if subject.get("apiGroup"):
            causes.append(fe.not_supported(f"{path}.apiGroup", subject["apiGroup"], [""]))
        if not namespaced and not subject.get("namespace"):
            causes.append(fe.required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if subject.get("apiGroup") != GROUP:
            causes.append(fe.not_supported(f"{path}.apiGroup", subject.get("apiGroup", ""), [GROUP]))
    else:
        causes.append(fe.not_supported(f"{path}.kind", kind, SUBJECT_KINDS))
    return causes


def _binding_validator(role_kinds: tuple, namespaced: bool):
    """Upstream's ``ValidateRoleBinding`` / ``ValidateClusterRoleBinding`` past metadata:
    the roleRef's apiGroup, kind and name, then each subject."""
    def validate(obj: dict) -> list:
        role_ref = obj["roleRef"]
        causes = []
        if role_ref.get("apiGroup") != GROUP:
            causes.append(fe.not_supported("roleRef.apiGroup", role_ref.get("apiGroup", ""), [GROUP]))
        if role_ref.get("kind", "") not in role_kinds:
            causes.append(fe.not_supported("roleRef.kind", role_ref.get("kind", ""), role_kinds))
        name = role_ref.get("name", "")
        if not name:
            causes.append(fe.required("roleRef.name"))
        else:
            causes.extend(fe.invalid("roleRef.name", name, p) for p in path_segment(name))
        for i, subject in enumerate(obj.get("subjects") or ()):
            causes.extend(_validate_subject(subject, f"subjects[{i}]", namespaced))
        return causes
    return validate


def _validate_binding_update(new: dict, old: dict) -> list:
    """The roleRef is immutable; the new one is shown as the internal ``rbac.RoleRef``."""
    ref = new["roleRef"]
    if ref != old.get("roleRef"):
        shown = fe.go_json({"APIGroup": ref.get("apiGroup", ""), "Kind": ref.get("kind", ""),
                            "Name": ref.get("name", "")})
        return [fe.invalid("roleRef", shown, "cannot change roleRef")]
    return []


def _subjects(kind_name: str, with_namespace: bool = False):
    def cell(obj, now):
        names = []
        for subject in obj.get("subjects") or ():
            if subject.get("kind") != kind_name:
                continue
            name = subject.get("name", "")
            if with_namespace:
                name = f"{subject.get('namespace', '')}/{name}"
            names.append(name)
        return ", ".join(names)
    return cell


def _role(obj, now):
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


BINDING_COLUMNS = (
    NAME,
    Column("Role", "string", _role, "Role references a role."),
    AGE,
    Column("Users", "string", _subjects("User"), "Users in the binding.", priority=1),
    Column("Groups", "string", _subjects("Group"), "Groups in the binding.", priority=1),
    Column("ServiceAccounts", "string", _subjects("ServiceAccount", True),
           "ServiceAccounts in the binding.", priority=1),
)


def binding_kind(kind, plural, namespaced, role_kinds: tuple, doc) -> ResourceType:
    """A binding of one of ``role_kinds`` to subjects (RoleBinding, ClusterRoleBinding)."""
    return rbac_kind(kind, plural, namespaced, {
        "subjects": Prop(ListOf(SUBJECT), "Subjects holds references to the objects the role "
                                          "applies to. Atomic: replaced, not merged."),
        "roleRef": Prop(ROLE_REF, "RoleRef can reference a Role in the current namespace or a "
                                  "ClusterRole in the global namespace. Immutable.",
                        required=True),
    }, doc, {
        kind: "metadata roleRef",
        "RoleRef": "apiGroup kind name",
        "Subject": "kind apiGroup? name namespace?",
    }, default=_default_binding, validate=_binding_validator(role_kinds, namespaced),
        validate_update=_validate_binding_update, columns=BINDING_COLUMNS)
