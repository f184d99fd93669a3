"""SubjectAccessReview (``authorization.platform.io/v1``): may this user do that?"""

from __future__ import annotations

from platformd.registry.kinds.accessreviews import (
    SUBJECT_ACCESS_REVIEW_SPEC, access_review, review_kind, user_from_spec,
    validate_empty_metadata, validate_subject_spec,
)


def _validate(obj: dict) -> list:
    """``ValidateSubjectAccessReview``."""
    return validate_subject_spec(obj.get("spec") or {}) + validate_empty_metadata(obj)


KIND = review_kind(
    "SubjectAccessReview", "subjectaccessreviews", False, SUBJECT_ACCESS_REVIEW_SPEC,
    "SubjectAccessReview checks whether or not a user or group can perform an action.",
    access_review(lambda context, obj: user_from_spec(obj["spec"])), validate=_validate)
