"""
TokenReview (``authentication.platform.io/v1``): is this bearer token good, and whose is
it?  Upstream's ``pkg/registry/authentication/tokenreview/storage.go``: ``spec.token`` is
run through the server's own authenticator chain as a request carrying nothing but
``Authorization: Bearer <token>``, checked against ``spec.audiences`` (default: the API
server's audiences); the answer's ``status`` holds ``authenticated``, ``user``,
``audiences`` and the authenticator's ``error``.  Created and answered, never stored.
"""

from __future__ import annotations

from twisted.web.http_headers import Headers

from platformd import errors
from platformd.auth.interfaces import AuthenticationError
from platformd.util.deferreds import then
from platformd.model.schema import BOOLEAN, STRING, ListOf, Prop, Struct
from platformd.registry.kinds.selfsubjectreview import (
    GROUP, PREFIX, PROTO, USER_INFO, user_info,
)
from platformd.registry.resource import ResourceType

SPEC = Struct(f"{PREFIX}.TokenReviewSpec", {
    "token": Prop(STRING, "Token is the opaque bearer token."),
    "audiences": Prop(ListOf(STRING), "Audiences is a list of the identifiers that the "
                                      "resource server presented with the token identifies "
                                      "as. Audience-aware token authenticators will verify "
                                      "that the token was intended for at least one of the "
                                      "audiences in this list. If no audiences are provided, "
                                      "the audience will default to the audience of the "
                                      "Platform apiserver."),
}, doc="TokenReviewSpec is a description of the token authentication request.")

STATUS = Struct(f"{PREFIX}.TokenReviewStatus", {
    "authenticated": Prop(BOOLEAN, "Authenticated indicates that the token was associated "
                                   "with a known user."),
    "user": Prop(USER_INFO, "User is the UserInfo associated with the provided token."),
    "audiences": Prop(ListOf(STRING), "Audiences are audience identifiers chosen by the "
                                      "authenticator that are compatible with both the "
                                      "TokenReview and token. An identifier is any "
                                      "identifier in the intersection of the TokenReviewSpec "
                                      "audiences and the token's audiences. A client of the "
                                      "TokenReview API that sets the spec.audiences field "
                                      "should validate that a compatible audience identifier "
                                      "is returned in the status.audiences field to ensure "
                                      "that the TokenReview server is audience aware. If a "
                                      "TokenReview returns an empty status.audience field "
                                      "where status.authenticated is \"true\", the token is "
                                      "valid against the audience of the Platform API "
                                      "server."),
    "error": Prop(STRING, "Error indicates that the token couldn't be checked"),
}, doc="TokenReviewStatus is the result of the token authentication request.")


class _NoConnection:
    """A connection with no TLS peer: the x509 authenticator finds nobody."""

    transport = None


class TokenOnlyRequest:
    """
    The request a TokenReview authenticates: nothing but ``Authorization: Bearer
    <token>`` (upstream's fake ``http.Request``), the audiences asked for, and the
    audiences an audience-aware authenticator accepted (``platformd_audiences``).
    """

    channel = _NoConnection()

    def __init__(self, token: str, audiences):
        self.requestHeaders = Headers({b"authorization": [b"Bearer " + token.encode()]})
        self.platformd_requested_audiences = tuple(audiences)
        self.platformd_audiences = None

    def getHeader(self, name):
        values = self.requestHeaders.getRawHeaders(name)
        return values[-1] if values else None


def _review(context, obj: dict, server, validate) -> object:
    """Upstream's ``tokenreview.REST.Create`` (``validate``: the validating admission,
    once the token is known to be there)."""
    spec = obj.get("spec") or {}
    if not spec.get("token"):
        raise errors.bad_request("token is required for TokenReview in authentication")
    return then(validate(), lambda _: _authenticate(obj, spec, server))


def _authenticate(obj: dict, spec: dict, server) -> object:
    issuer = getattr(server, "token_issuer", None)
    api_audiences = tuple(issuer.api_audiences) if issuer is not None else ()
    audiences = tuple(spec.get("audiences") or ()) or api_audiences
    request = TokenOnlyRequest(spec["token"], audiences)
    try:
        answer = server.authenticator.authenticate(request)
    except AuthenticationError as e:
        return _status(None, obj, str(e), request, audiences, api_audiences)
    if hasattr(answer, "addCallbacks"):
        answer.addCallbacks(
            lambda user: _status(user, obj, "", request, audiences, api_audiences),
            lambda failure: _failed(failure, obj, request, audiences, api_audiences))
        return answer
    return then(answer, _status, obj, "", request, audiences, api_audiences)


def _failed(failure, obj, request, audiences, api_audiences):
    failure.trap(AuthenticationError)
    return _status(None, obj, str(failure.value), request, audiences, api_audiences)


def _status(user, obj: dict, error: str, request, audiences, api_audiences) -> dict:
    status: dict = {}
    if user is not None:
        accepted = request.platformd_audiences
        if accepted is None:
            # An audience-agnostic authenticator (static tokens, x509): upstream's
            # WrapAudienceAgnosticToken answers the API server's audiences asked for.
            accepted = tuple(a for a in audiences if a in api_audiences) if audiences else ()
            if audiences and not accepted:
                user = None
        elif audiences and not set(accepted) & set(audiences):
            raise errors.internal("error validating audiences")
    if user is not None:
        status["authenticated"] = True
        status["user"] = user_info(user)
        if accepted:
            status["audiences"] = list(accepted)
    else:
        status["user"] = {}
    if error:
        status["error"] = error
    obj["status"] = status
    return obj


KIND = ResourceType(
    group=GROUP, version="v1", kind="TokenReview", plural="tokenreviews",
    singular="tokenreview", namespaced=False, fields={
        "spec": Prop(SPEC, "Spec holds information about the request being evaluated",
                     required=True),
        "status": Prop(STATUS, "Status is filled in by the server and indicates whether the "
                               "request can be authenticated."),
    }, doc="TokenReview attempts to authenticate a token to a known user. Note: TokenReview "
           "requests may be cached by the webhook token authenticator plugin in the "
           "platform-apiserver.",
    definition_prefix=PREFIX, review=_review, review_takes_server=True, presence={
        PROTO + "ExtraValue": "", PROTO + "UserInfo": "username? uid?",
        PROTO + "TokenReview": "metadata spec status",
        PROTO + "TokenReviewSpec": "token?",
        PROTO + "TokenReviewStatus": "authenticated? user error?"})
