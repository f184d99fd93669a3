"""
What the ``authorization.platform.io/v1`` access reviews share (upstream's
``pkg/registry/authorization``): their ``ResourceType`` factory, the shapes of their
specs and statuses, upstream's validation (``pkg/apis/authorization/validation``), the
attributes a spec asks about (``util.AuthorizationAttributesFrom``), the status a
``Decision`` gives, and the rules a chain of authorizers knows (upstream's union
``RulesFor``).

A review is created and answered, never stored (``ResourceType.review``): the kind
modules (``subjectaccessreview``, ``selfsubjectaccessreview``,
``localsubjectaccessreview``, ``selfsubjectrulesreview``) give the hook that fills
``status``; ``api/reviews.py`` serves them.
"""

from __future__ import annotations

from platformd.auth import authorizers
from platformd.auth.interfaces import (
    ALLOW, DENY, Attributes, IRuleResolver, RulesForUser, UserInfo,
)
from platformd.util.deferreds import then
from platformd.model import fielderrors as fe
from platformd.model.schema import BOOLEAN, STRING, ListOf, MapOf, Prop, Struct
from platformd.registry.resource import ResourceType
from platformd.requestinfo import RequestInfo

GROUP = "authorization.platform.io"
VERSION = "v1"
PREFIX = "io.platform.api.authorization.v1"
#: The package of the reviews' Protobuf messages.
PROTO = "platform.api.authorization.v1."


def struct(name, props, doc) -> Struct:
    return Struct(f"{PREFIX}.{name}", props, doc=doc)


RESOURCE_ATTRIBUTES = struct("ResourceAttributes", {
    "namespace": Prop(STRING, 'Namespace is the namespace of the action being requested. "" '
                              "(empty) is defaulted for LocalSubjectAccessReviews, is empty "
                              'for cluster-scoped resources and means "all" for namespace '
                              "scoped resources from a SubjectAccessReview or "
                              "SelfSubjectAccessReview."),
    "verb": Prop(STRING, "Verb is a platform resource API verb, like: get, list, watch, "
                         'create, update, delete, proxy.  "*" means all.'),
    "group": Prop(STRING, 'Group is the API Group of the Resource.  "*" means all.'),
    "version": Prop(STRING, 'Version is the API Version of the Resource.  "*" means all.'),
    "resource": Prop(STRING, 'Resource is one of the existing resource types.  "*" means all.'),
    "subresource": Prop(STRING, 'Subresource is one of the existing resource types.  "" '
                                "means none."),
    "name": Prop(STRING, 'Name is the name of the resource being requested for a "get" or '
                         'deleted for a "delete". "" (empty) means all.'),
}, "ResourceAttributes includes the authorization attributes available for resource "
   "requests to the Authorizer interface")

NON_RESOURCE_ATTRIBUTES = struct("NonResourceAttributes", {
    "path": Prop(STRING, "Path is the URL path of the request"),
    "verb": Prop(STRING, "Verb is the standard HTTP verb"),
}, "NonResourceAttributes includes the authorization attributes available for "
   "non-resource requests to the Authorizer interface")

_ATTRIBUTES = {
    "resourceAttributes": Prop(RESOURCE_ATTRIBUTES, "ResourceAuthorizationAttributes "
                                                    "describes information for a resource "
                                                    "access request"),
    "nonResourceAttributes": Prop(NON_RESOURCE_ATTRIBUTES, "NonResourceAttributes describes "
                                                           "information for a non-resource "
                                                           "access request"),
}

SUBJECT_ACCESS_REVIEW_SPEC = struct("SubjectAccessReviewSpec", {
    **_ATTRIBUTES,
    "user": Prop(STRING, 'User is the user you\'re testing for. If you specify "User" but '
                         'not "Groups", then is it interpreted as "What if User were not a '
                         'member of any groups'),
    "groups": Prop(ListOf(STRING), "Groups is the groups you're testing for."),
    "extra": Prop(MapOf(ListOf(STRING)), "Extra corresponds to the user.Info.GetExtra() "
                                         "method from the authenticator.  Since that is "
                                         "input to the authorizer it needs a reflection "
                                         "here."),
    "uid": Prop(STRING, "UID information about the requesting user."),
}, "SubjectAccessReviewSpec is a description of the access request.  Exactly one of "
   "ResourceAuthorizationAttributes and NonResourceAuthorizationAttributes must be set")

SELF_SUBJECT_ACCESS_REVIEW_SPEC = struct(
    "SelfSubjectAccessReviewSpec", dict(_ATTRIBUTES),
    "SelfSubjectAccessReviewSpec is a description of the access request.  Exactly one of "
    "ResourceAuthorizationAttributes and NonResourceAuthorizationAttributes must be set")

SUBJECT_ACCESS_REVIEW_STATUS = struct("SubjectAccessReviewStatus", {
    "allowed": Prop(BOOLEAN, "Allowed is required. True if the action would be allowed, "
                             "false otherwise.", required=True),
    "denied": Prop(BOOLEAN, "Denied is optional. True if the action would be denied, "
                            "otherwise false. If both allowed is false and denied is false, "
                            "then the authorizer has no opinion on whether to authorize the "
                            "action. Denied may not be true if Allowed is true."),
    "reason": Prop(STRING, "Reason is optional.  It indicates why a request was allowed or "
                           "denied."),
    "evaluationError": Prop(STRING, "EvaluationError is an indication that some error "
                                    "occurred during the authorization check. It is entirely "
                                    "possible to get an error and be able to continue "
                                    "determine authorization status in spite of it. For "
                                    "instance, RBAC can be missing a role, but enough roles "
                                    "are still present and bound to reason about the "
                                    "request."),
}, "SubjectAccessReviewStatus")

#: The always-written fields of the messages the access reviews share (``presence``'s
#: short names), read off upstream's Go types.
SHARED_PRESENCE = {
    "ExtraValue": "",
    "NonResourceAttributes": "path? verb?",
    "ResourceAttributes": "namespace? verb? group? version? resource? subresource? name?",
    "SelfSubjectAccessReviewSpec": "",
    "SubjectAccessReviewSpec": "user? uid?",
    "SubjectAccessReviewStatus": "allowed denied? reason? evaluationError?",
}


def review_kind(kind, plural, namespaced, spec, doc, review, status=None,
                own_presence=None, **kw) -> ResourceType:
    """
    An access review: ``spec`` and ``status`` (default ``SubjectAccessReviewStatus``) are
    the schemas of its ``spec`` and ``status``; answered by ``review``; ``own_presence``
    as ``kinds.presence``'s ``own``, besides the shared messages'.
    """
    presence = {**SHARED_PRESENCE, **(own_presence or {}), kind: "metadata spec status"}
    return ResourceType(
        group=GROUP, version=VERSION, kind=kind, plural=plural, singular=kind.lower(),
        namespaced=namespaced, fields=access_review_fields(spec, status), doc=doc,
        definition_prefix=PREFIX, review=review,
        presence={PROTO + name: words for name, words in presence.items()}, **kw)


def access_review_fields(spec: Struct, status: Struct | None = None) -> dict:
    return {
        "spec": Prop(spec, "Spec holds information about the request being evaluated",
                     required=True),
        "status": Prop(status or SUBJECT_ACCESS_REVIEW_STATUS,
                       "Status is filled in by the server and indicates whether the request "
                       "is allowed or not"),
    }


# Validation (upstream's pkg/apis/authorization/validation).

def _go_struct(type_name: str, fields: dict) -> fe.GoValue:
    inner = ", ".join(f"{name}:{fe.go_quote(value)}" for name, value in fields.items())
    return fe.GoValue(f"{type_name}{{{inner}}}")


def _go_map(value) -> str:
    if not value:
        return "map[string]string(nil)"
    inner = ", ".join(f"{fe.go_quote(k)}:{fe.go_quote(v)}" for k, v in sorted(value.items()))
    return f"map[string]string{{{inner}}}"


def go_object_meta(meta: dict) -> fe.GoValue:
    """``%#v`` of an ObjectMeta holding only names, labels and annotations (the rest nil)."""
    strings = ", ".join(f"{go}:{fe.go_quote(meta.get(json) or '')}" for go, json in (
        ("Name", "name"), ("GenerateName", "generateName"), ("Namespace", "namespace"),
        ("SelfLink", "selfLink"), ("UID", "uid"), ("ResourceVersion", "resourceVersion")))
    return fe.GoValue(
        f"v1.ObjectMeta{{{strings}, Generation:{meta.get('generation') or 0}, "
        "CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), "
        "DeletionTimestamp:<nil>, DeletionGracePeriodSeconds:(*int64)(nil), "
        f"Labels:{_go_map(meta.get('labels'))}, Annotations:{_go_map(meta.get('annotations'))}, "
        "OwnerReferences:[]v1.OwnerReference(nil), Finalizers:[]string(nil), "
        "ManagedFields:[]v1.ManagedFieldsEntry(nil)}")


def non_resource_value(attributes: dict) -> fe.GoValue:
    return _go_struct("authorization.NonResourceAttributes",
                      {"Path": attributes.get("path", ""), "Verb": attributes.get("verb", "")})


def validate_attributes(spec: dict) -> list:
    """``ValidateSelfSubjectAccessReviewSpec``: exactly one kind of attributes."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        return [fe.invalid("spec.nonResourceAttributes", non_resource_value(non_resource),
                           "cannot be specified in combination with resourceAttributes")]
    if resource is None and non_resource is None:
        return [fe.invalid("spec.resourceAttributes", "null",
                           "exactly one of nonResourceAttributes or resourceAttributes must "
                           "be specified")]
    return []


def validate_subject_spec(spec: dict) -> list:
    """``ValidateSubjectAccessReviewSpec``: the attributes, and a user or a group."""
    causes = validate_attributes(spec)
    if not spec.get("user") and not spec.get("groups"):
        causes.append(fe.invalid("spec.user", spec.get("user", ""),
                                 "at least one of user or group must be specified"))
    return causes


def metadata_is_empty(meta: dict, *ignored: str) -> bool:
    """Whether ObjectMeta equals its zero value, ``managedFields`` and ``ignored`` aside."""
    return not any(value not in (None, "", 0, {}, []) for key, value in meta.items()
                   if key != "managedFields" and key not in ignored)


def validate_empty_metadata(obj: dict) -> list:
    meta = obj.get("metadata") or {}
    if metadata_is_empty(meta):
        return []
    return [fe.invalid("metadata", go_object_meta(meta), "must be empty")]


# Asking the authorizer chain.

def user_from_spec(spec: dict) -> UserInfo:
    """The user a SubjectAccessReview asks about (``AuthorizationAttributesFrom``)."""
    extra = spec.get("extra") or {}
    return UserInfo(spec.get("user", ""), spec.get("uid", ""), tuple(spec.get("groups") or ()),
                    tuple((key, tuple(values or ())) for key, values in extra.items()))


def attributes_from(user: UserInfo, spec: dict) -> Attributes:
    """What ``spec`` asks for ``user``: resource (version "" is "*") or non-resource."""
    resource = spec.get("resourceAttributes")
    if resource is not None:
        get = resource.get
        return Attributes(user, RequestInfo(
            True, "", get("verb", ""), "", get("group", ""), get("version") or "*",
            get("resource", ""), get("subresource", ""), get("namespace", ""),
            get("name", ""), not get("name")))
    non_resource = spec["nonResourceAttributes"]
    return Attributes(user, RequestInfo(False, non_resource.get("path", ""),
                                        non_resource.get("verb", "")))


def status_of(decision) -> dict:
    """``SubjectAccessReviewStatus`` from a ``Decision``; zero fields JSON omits left out."""
    status = {"allowed": decision.verdict == ALLOW}
    if decision.verdict == DENY:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    if decision.error:
        status["evaluationError"] = decision.error
    return status


def access_review(user_of):
    """
    The ``review`` hook of a SubjectAccessReview-like kind: the chain's ``Decision`` for
    ``user_of(context, obj)`` doing what ``spec`` asks, as ``status`` (upstream answers
    the object it was given, status filled).
    """
    def review(context, obj: dict):
        attributes = attributes_from(user_of(context, obj), obj["spec"])
        return then(context.authorizer.authorize(attributes), _with_status, obj)
    return review


def _with_status(decision, obj: dict) -> dict:
    obj["status"] = status_of(decision)
    return obj


# What the chain knows a user may do (upstream's unionAuthzRulesHandler.RulesFor).

#: Upstream's AlwaysAllow RulesFor: everything, resource and non-resource.
_EVERYTHING = RulesForUser(
    ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},),
    ({"verbs": ["*"], "nonResourceURLs": ["*"]},))
_NOTHING = RulesForUser()


def _rules_of(authorizer, user: UserInfo, namespace: str):
    """One authorizer's ``RulesForUser`` (or a Deferred firing with it)."""
    if IRuleResolver.providedBy(authorizer):
        return authorizer.rules_for(user, namespace)
    if isinstance(authorizer, authorizers.AlwaysAllow):
        return _EVERYTHING
    privileged = getattr(authorizers, "PrivilegedGroups", None)
    if privileged is not None and isinstance(authorizer, privileged):
        # Upstream does not ask the privileged-group authorizer for rules at all.
        return _NOTHING
    # An authorizer that cannot list rules (upstream: a webhook, the node authorizer).
    return RulesForUser(incomplete=True)


def rules_for(chain, user: UserInfo, namespace: str):
    """
    Every authorizer's rules for ``user`` in ``namespace``, merged in chain order:
    ``incomplete`` if any answer is, errors joined as upstream's ``NewAggregate`` joins
    them (one: itself; several: ``[a, b]``).  A ``RulesForUser``, or a Deferred when an
    authorizer answers later.
    """
    members = list(getattr(chain, "authorizers", (chain,)))
    return _merge(members, 0, user, namespace, [])


def _merge(members, index, user, namespace, answers):
    while index < len(members):
        answer = _rules_of(members[index], user, namespace)
        index += 1
        if not isinstance(answer, RulesForUser):
            return answer.addCallback(
                lambda got, at: _merge(members, at, user, namespace, answers + [got]), index)
        answers = answers + [answer]
    errors = [a.error for a in answers if a.error]
    return RulesForUser(
        tuple(rule for a in answers for rule in a.resource_rules),
        tuple(rule for a in answers for rule in a.non_resource_rules),
        any(a.incomplete for a in answers),
        errors[0] if len(errors) == 1 else ("[" + ", ".join(errors) + "]" if errors else ""))


def _rule(rule: dict, fields) -> dict:
    """A ResourceRule or NonResourceRule: ``verbs`` always, the rest when not empty."""
    out = {"verbs": list(rule.get("verbs") or ())}
    out.update((field, list(rule[field])) for field in fields if rule.get(field))
    return out


def rules_status(rules: RulesForUser) -> dict:
    """``SubjectRulesReviewStatus`` from a ``RulesForUser``."""
    status = {
        "resourceRules": [_rule(r, ("apiGroups", "resources", "resourceNames"))
                          for r in rules.resource_rules],
        "nonResourceRules": [_rule(r, ("nonResourceURLs",)) for r in rules.non_resource_rules],
        "incomplete": rules.incomplete,
    }
    if rules.error:
        status["evaluationError"] = rules.error
    return status
