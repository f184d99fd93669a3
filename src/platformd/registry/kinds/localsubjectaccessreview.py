"""
LocalSubjectAccessReview (``authorization.platform.io/v1``, namespaced): may this user
do that in this namespace?  Upstream's handler sets ``metadata.namespace`` from the path
(a different one in the body is 400); validation then wants
``spec.resourceAttributes.namespace`` to equal it (422).
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.registry.kinds.accessreviews import (
    SUBJECT_ACCESS_REVIEW_SPEC, access_review, go_object_meta, metadata_is_empty,
    non_resource_value, review_kind, user_from_spec, validate_subject_spec,
)


def _validate(obj: dict) -> list:
    """``ValidateLocalSubjectAccessReview``."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    causes = validate_subject_spec(spec)
    if not metadata_is_empty(meta, "namespace"):
        causes.append(fe.invalid("metadata", go_object_meta(meta),
                                 "must be empty except for namespace"))
    resource = spec.get("resourceAttributes")
    if resource is not None and resource.get("namespace", "") != meta.get("namespace", ""):
        causes.append(fe.invalid("spec.resourceAttributes.namespace",
                                 resource.get("namespace", ""), "must match metadata.namespace"))
    if spec.get("nonResourceAttributes") is not None:
        causes.append(fe.invalid("spec.nonResourceAttributes",
                                 non_resource_value(spec["nonResourceAttributes"]),
                                 "disallowed on this kind of request"))
    return causes


KIND = review_kind(
    "LocalSubjectAccessReview", "localsubjectaccessreviews", True, SUBJECT_ACCESS_REVIEW_SPEC,
    "LocalSubjectAccessReview checks whether or not a user or group can perform an action "
    "in a given namespace. Having a namespace scoped resource makes it much easier to grant "
    "namespace scoped policy that includes permissions checking.",
    access_review(lambda context, obj: user_from_spec(obj["spec"])), validate=_validate)
