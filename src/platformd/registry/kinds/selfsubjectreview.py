"""
SelfSubjectReview (``authentication.platform.io/v1``): who am I?  The answer's
``status.userInfo`` is the requester as authenticated (after impersonation), what
``kubectl auth whoami`` prints.
"""

from __future__ import annotations

import time

from platformd.model.schema import STRING, ListOf, MapOf, Prop, Struct
from platformd.model.times import rfc3339
from platformd.registry.resource import ResourceType

GROUP = "authentication.platform.io"
PREFIX = "io.platform.api.authentication.v1"
PROTO = "platform.api.authentication.v1."

USER_INFO = Struct(f"{PREFIX}.UserInfo", {
    "username": Prop(STRING, "The name that uniquely identifies this user among all active "
                             "users."),
    "uid": Prop(STRING, "A unique value that identifies this user across time. If this user "
                        "is deleted and another user by the same name is added, they will "
                        "have different UIDs."),
    "groups": Prop(ListOf(STRING), "The names of groups this user is a part of."),
    "extra": Prop(MapOf(ListOf(STRING)), "Any additional information provided by the "
                                         "authenticator."),
}, doc="UserInfo holds the information about the user needed to implement the user.Info "
       "interface.")

STATUS = Struct(f"{PREFIX}.SelfSubjectReviewStatus", {
    "userInfo": Prop(USER_INFO, "User attributes of the user making this request."),
}, doc="SelfSubjectReviewStatus is filled by the API server and sent back to a user.")


def user_info(user) -> dict:
    """``UserInfo`` of ``user``, its empty fields left out as upstream's JSON leaves them."""
    info = {"username": user.name} if user.name else {}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra}
    return info


def _review(context, obj: dict) -> dict:
    """Upstream's ``selfsubjectreview.REST.Create``: a new object, created now."""
    return {"kind": obj["kind"], "apiVersion": obj["apiVersion"],
            "metadata": {"creationTimestamp": rfc3339(time.time())},
            "status": {"userInfo": user_info(context.user)}}


KIND = ResourceType(
    group=GROUP, version="v1", kind="SelfSubjectReview", plural="selfsubjectreviews",
    singular="selfsubjectreview", namespaced=False, fields={
        "status": Prop(STATUS, "Status is filled in by the server with the user attributes."),
    }, doc="SelfSubjectReview contains the user information that the API server has "
           "about the user making this request. When using impersonation, users will "
           "receive the user info of the user being impersonated.  If impersonation or "
           "request header authentication is used, any extra keys will have their case "
           "ignored and returned as lowercase.",
    definition_prefix=PREFIX, review=_review, presence={
        PROTO + "ExtraValue": "", PROTO + "SelfSubjectReview": "metadata status",
        PROTO + "SelfSubjectReviewStatus": "userInfo", PROTO + "UserInfo": "username? uid?"})
