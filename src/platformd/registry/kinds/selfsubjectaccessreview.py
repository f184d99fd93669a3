"""SelfSubjectAccessReview (``authorization.platform.io/v1``): may I do that?"""

from __future__ import annotations

from platformd.registry.kinds.accessreviews import (
    SELF_SUBJECT_ACCESS_REVIEW_SPEC, access_review, review_kind, validate_attributes,
    validate_empty_metadata,
)


def _validate(obj: dict) -> list:
    """``ValidateSelfSubjectAccessReview``."""
    return validate_attributes(obj.get("spec") or {}) + validate_empty_metadata(obj)


KIND = review_kind(
    "SelfSubjectAccessReview", "selfsubjectaccessreviews", False,
    SELF_SUBJECT_ACCESS_REVIEW_SPEC,
    'SelfSubjectAccessReview checks whether or the current user can perform an action.  Not '
    'filling in a spec.namespace means "in all namespaces".  Self is a special case, because '
    "users should always be able to check whether they can perform an action",
    access_review(lambda context, obj: context.user), validate=_validate)
