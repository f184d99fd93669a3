"""
SelfSubjectRulesReview (``authorization.platform.io/v1``): what may I do in this
namespace?  Answered from the rules the chain's authorizers know
(``accessreviews.rules_for``); like upstream's, the answer holds ``status`` only (its
``spec`` comes back empty).
"""

from __future__ import annotations

from platformd import errors
from platformd.util.deferreds import then
from platformd.model.schema import BOOLEAN, STRING, ListOf, Prop
from platformd.registry.kinds.accessreviews import (
    review_kind, rules_for, rules_status, struct,
)

SPEC = struct("SelfSubjectRulesReviewSpec", {
    "namespace": Prop(STRING, "Namespace to evaluate rules for. Required."),
}, "SelfSubjectRulesReviewSpec defines the specification for SelfSubjectRulesReview.")

RESOURCE_RULE = struct("ResourceRule", {
    "verbs": Prop(ListOf(STRING), "Verb is a list of platform resource API verbs, like: get, "
                                  'list, watch, create, update, delete, proxy.  "*" means all.',
                  required=True),
    "apiGroups": Prop(ListOf(STRING), "APIGroups is the name of the APIGroup that contains "
                                      "the resources.  If multiple API groups are specified, "
                                      "any action requested against one of the enumerated "
                                      "resources in any API group will be allowed.  \"*\" "
                                      "means all."),
    "resources": Prop(ListOf(STRING), 'Resources is a list of resources this rule applies to. '
                                      ' "*" means all in the specified apiGroups.  "*/foo" '
                                      "represents the subresource 'foo' for all resources in "
                                      "the specified apiGroups."),
    "resourceNames": Prop(ListOf(STRING), "ResourceNames is an optional white list of names "
                                          "that the rule applies to.  An empty set means that "
                                          'everything is allowed.  "*" means all.'),
}, "ResourceRule is the list of actions the subject is allowed to perform on resources. "
   "The list ordering isn't significant, may contain duplicates, and possibly be incomplete.")

NON_RESOURCE_RULE = struct("NonResourceRule", {
    "verbs": Prop(ListOf(STRING), "Verb is a list of platform non-resource API verbs, like: "
                                  'get, post, put, delete, patch, head, options.  "*" means '
                                  "all.", required=True),
    "nonResourceURLs": Prop(ListOf(STRING), "NonResourceURLs is a set of partial urls that a "
                                            "user should have access to.  *s are allowed, but "
                                            "only as the full, final step in the path.  \"*\" "
                                            "means all."),
}, "NonResourceRule holds information that describes a rule for the non-resource")

STATUS = struct("SubjectRulesReviewStatus", {
    "resourceRules": Prop(ListOf(RESOURCE_RULE), "ResourceRules is the list of actions the "
                                                 "subject is allowed to perform on resources. "
                                                 "The list ordering isn't significant, may "
                                                 "contain duplicates, and possibly be "
                                                 "incomplete.", required=True),
    "nonResourceRules": Prop(ListOf(NON_RESOURCE_RULE), "NonResourceRules is the list of "
                                                        "actions the subject is allowed to "
                                                        "perform on non-resources. The list "
                                                        "ordering isn't significant, may "
                                                        "contain duplicates, and possibly be "
                                                        "incomplete.", required=True),
    "incomplete": Prop(BOOLEAN, "Incomplete is true when the rules returned by this call are "
                                "incomplete. This is most commonly encountered when an "
                                "authorizer, such as an external authorizer, doesn't support "
                                "rules evaluation.", required=True),
    "evaluationError": Prop(STRING, "EvaluationError can appear in combination with Rules. It "
                                    "indicates an error occurred during rule evaluation, such "
                                    "as an authorizer that doesn't support rule evaluation, "
                                    "and that ResourceRules and/or NonResourceRules may be "
                                    "incomplete."),
}, "SubjectRulesReviewStatus contains the result of a rules check. This check can be "
   "incomplete depending on the set of authorizers the server is configured with and any "
   "errors experienced during evaluation. Because authorization rules are additive, if a "
   "rule appears in a list it's safe to assume the subject has that permission, even if "
   "that list is incomplete.")


def _review(context, obj: dict):
    """Upstream's ``selfsubjectrulesreview.REST.Create``."""
    namespace = (obj.get("spec") or {}).get("namespace")
    if not namespace:
        raise errors.bad_request("no namespace on request")
    return then(rules_for(context.authorizer, context.user, namespace), _answer, obj)


def _answer(rules, obj: dict) -> dict:
    return {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "metadata": {}, "spec": {},
            "status": rules_status(rules)}


KIND = review_kind(
    "SelfSubjectRulesReview", "selfsubjectrulesreviews", False, SPEC,
    "SelfSubjectRulesReview enumerates the set of actions the current user can perform "
    "within a namespace. The returned list of actions may be incomplete depending on the "
    "server's authorization mode, and any errors experienced during the evaluation. "
    "SelfSubjectRulesReview should be used by UIs to show/hide actions, or to quickly let "
    "an end user reason about their permissions. It should NOT Be used by external systems "
    "to drive authorization decisions as this raises confused deputy, cache "
    "lifetime/revocation, and correctness concerns. SubjectAccessReview, and "
    "LocalAccessReview are the correct way to defer authorization decisions to the API "
    "server.",
    _review, status=STATUS, own_presence={
        "NonResourceRule": "", "ResourceRule": "", "SelfSubjectRulesReviewSpec": "namespace?",
        "SubjectRulesReviewStatus": "incomplete evaluationError?"})
