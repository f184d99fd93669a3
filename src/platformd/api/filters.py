"""
The request filter chain, in the order of upstream's ``DefaultBuildHandlerChain``
(``k8s.io/apiserver/pkg/server/config.go``):

    audit ID → (panic recovery: ``app.py``) → request info → readiness →
    [audit: received time, failed authentication] → authentication → [audit] →
    impersonation → max-in-flight → authorization → [bulk lane: writes to Events,
    ``bulklane.BulkRequests``] → handler (admission happens in the write handlers); the
    audit stages (``platformd/audit/record.py``) only with a policy

A filter is a callable ``filter(ctx, proceed)``: it reads or fills the request's
``RequestContext``, then returns ``proceed(ctx)``, or raises a ``StatusError`` to answer
instead.  Any step may answer later with a Deferred (an authenticator fetching a JWKS, an
authorizer calling a webhook): ``deferreds.then`` continues the chain when it fires, and
costs nothing when the answer comes at once, which keeps the hot path synchronous.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable, Optional
from urllib.parse import unquote

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from platformd import errors
from platformd import requestinfo
from platformd.api import query
from platformd.auth import authorizers
from platformd.auth.interfaces import (
    ALLOW, AUTHENTICATED_GROUP, DENY, NO_OPINION, Attributes, AuthenticationError, Decision,
    IAuthenticator, IAuthorizer, UserInfo,
)
from platformd.util.deferreds import then
from platformd.util.ids import random_uuid
from platformd.model.meta import dns_label, dns_subdomain
from platformd.util.ratelog import RateLimitedLog
from platformd.registry.catalog import UPSTREAM_REVIEW_GROUPS

log = Logger()

SYSTEM_MASTERS = "system:masters"
UNAUTHENTICATED_GROUP = "system:unauthenticated"

#: The authorization filter's audit annotations: upstream's ``authorization.k8s.io/decision``
#: and ``/reason`` (its filters/authorization.go), with this server's ``platform.io``
#: domain (as ``platform.io/initial-events-end``).
DECISION_ANNOTATION = "authorization.platform.io/decision"
REASON_ANNOTATION = "authorization.platform.io/reason"

ANONYMOUS = "system:anonymous"


class FilterChain:
    """The filters around an endpoint, built once; calling it runs one request."""

    def __init__(self, filters, endpoint: Callable):
        handler = endpoint
        for filter_ in reversed(filters):
            handler = _bind(filter_, handler)
        self._run = handler

    def __call__(self, ctx):
        return self._run(ctx)


def _bind(filter_, proceed):
    return lambda ctx: filter_(ctx, proceed)


def audit_id(ctx, proceed):
    """
    Upstream's ``WithAuditInit``: the client's ``Audit-ID`` or a new UUID, echoed on the
    response so a request can be found in the audit log and the server's logs.
    """
    request = ctx.request
    given = request.getHeader(b"audit-id")
    ctx.audit_id = given.decode("latin-1") if given else random_uuid()
    request.responseHeaders.setRawHeaders(b"Audit-Id", [ctx.audit_id.encode("latin-1")])
    return proceed(ctx)


#: How many answers ``RequestInfo`` keeps, and for paths up to what length.
_INFOS_KEPT = 4096
_INFO_PATH_KEPT = 256


@attrs.define
class RequestInfo:
    """
    What is asked: verb, group, resource, namespace, name (``requestinfo``).  Clients
    ask the same paths over and over, so the (frozen) answers for short paths are kept,
    up to ``_INFOS_KEPT`` of them (then forgotten all at once and gathered again): pure
    functions of (method, raw path, watch), kept per server, not per process.
    """

    _infos: dict = attrs.field(factory=dict)

    def __call__(self, ctx, proceed):
        request = ctx.request
        key = (request.method, request.path, query.flag(query.values(request, b"watch")))
        infos = self._infos
        info = infos.get(key)
        if info is None:
            info = requestinfo.parse(key[0], unquote(key[1].decode("utf-8", "replace")),
                                     key[2])
            if len(key[1]) <= _INFO_PATH_KEPT:
                if len(infos) >= _INFOS_KEPT:
                    infos.clear()
                infos[key] = info
        ctx.info = info
        return proceed(ctx)


@attrs.define
class Readiness:
    """503 with ``Retry-After: 1`` until the server serves (cache loaded)."""

    ready: Callable[[], bool]

    def __call__(self, ctx, proceed):
        if not self.ready():
            raise errors.StatusError(503, "ServiceUnavailable",
                                     "the server is starting; try again shortly", retry_after=1)
        return proceed(ctx)


@attrs.define
class Authentication:
    """
    Who asks.  No credentials, or wrong ones, are 401 (anonymous access is off: a
    deliberate difference from upstream's default).  Each attempt is counted as
    upstream's ``authentication_attempts`` / ``authentication_duration_seconds``
    (``success``, ``failure``: no user, ``error``: credentials refused) and each success
    in ``authenticated_user_requests``.
    """

    authenticator: IAuthenticator
    #: The server's ``APIServerMetrics`` (None: not measured).
    metrics: Any = None
    #: Why credentials were refused goes here, never to the client (rate limited).
    refusals: RateLimitedLog = attrs.field(factory=lambda: RateLimitedLog(
        log, "authentication failed: {detail}"))

    def __call__(self, ctx, proceed):
        started = perf_counter()
        try:
            user = self.authenticator.authenticate(ctx.request)
        except AuthenticationError as e:
            self._measure("error", started)
            self.refusals.warn(str(e))
            raise _unauthorized(ctx.request) from None
        if isinstance(user, Deferred):
            return user.addCallbacks(self._authenticated, self._refused, (ctx, proceed, started),
                                     errbackArgs=(ctx, started))
        return self._authenticated(user, ctx, proceed, started)

    def _refused(self, failure, ctx, started: float):
        failure.trap(AuthenticationError)
        self._measure("error", started)
        self.refusals.warn(str(failure.value))
        raise _unauthorized(ctx.request)

    def _authenticated(self, user, ctx, proceed, started: float):
        if user is None:
            self._measure("failure", started)
            raise _unauthorized(ctx.request)
        self._measure("success", started)
        if self.metrics is not None:
            self.metrics.authenticated_users.inc((_compress_username(user.name),))
        ctx.user = user
        return proceed(ctx)

    def _measure(self, result: str, started: float) -> None:
        if self.metrics is not None:
            self.metrics.authentication.record(result, perf_counter() - started)


def _unauthorized(request) -> errors.StatusError:
    """
    Upstream's ``Unauthorized`` handler: 401, and over HTTP/2 ``Connection: close``, which
    Go's server turns into a ``GOAWAY``, closing the connection once idle (``http2.py``),
    so that a client without credentials cannot keep an HTTP/2 connection, an expensive
    one to serve (``UnauthenticatedHTTP2DOSMitigation``, on by default since 1.29;
    CVE-2023-44487 and CVE-2023-39325).
    """
    if request.clientproto == b"HTTP/2":
        request.setHeader(b"Connection", b"close")
    return errors.unauthorized()


def _compress_username(name: str) -> str:
    """Upstream's ``compressUsername``: a few known names, ``email_id`` or ``other``."""
    if name in ("admin", "client", "kube_proxy", "kubelet",
                "system:serviceaccount:kube-system:default"):
        return name
    return "email_id" if "@" in name else "other"


#: The impersonation headers (upstream's ``authenticationv1.Impersonate*Header``).
IMPERSONATE_USER = b"impersonate-user"
IMPERSONATE_GROUP = b"impersonate-group"
IMPERSONATE_UID = b"impersonate-uid"
IMPERSONATE_EXTRA = b"impersonate-extra-"
#: The group of the ``uids`` and ``userextras`` impersonation resources.
AUTHENTICATION_GROUP = "authentication.platform.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@attrs.define
class Impersonation:
    """
    Upstream's ``WithImpersonation``: ``Impersonate-User`` (a service account's name
    impersonates that service account), ``Impersonate-Group``, ``Impersonate-Uid`` and
    ``Impersonate-Extra-<key>`` headers; the requester must be allowed the
    ``impersonate`` verb on each; the request then runs as the impersonated user.
    """

    authorizer: IAuthorizer

    def __call__(self, ctx, proceed):
        headers = ctx.request.requestHeaders
        if not (headers.hasHeader(IMPERSONATE_USER) or headers.hasHeader(IMPERSONATE_GROUP)
                or headers.hasHeader(IMPERSONATE_UID)):
            # The common case, three lookups.  (Impersonate-Extra-* headers alone, which
            # upstream refuses, grant nothing and are ignored.)
            return proceed(ctx)
        asked = _impersonation_requests(headers, ctx.info.path)
        result = self._check(ctx, asked, 0)
        return then(result, self._become, ctx, asked, proceed)

    def _check(self, ctx, asked: list, start: int):
        for index in range(start, len(asked)):
            answer = authorizers.check(self.authorizer, Attributes(ctx.user, asked[index]))
            if isinstance(answer, Deferred):
                return answer.addCallback(lambda _: self._check(ctx, asked, index + 1))
        return None

    @staticmethod
    def _become(_, ctx, asked: list, proceed):
        groups_given = ctx.request.requestHeaders.hasHeader(IMPERSONATE_GROUP)
        name, uid = "", ""
        groups: list = []
        extra: dict = {}
        for item in asked:
            if item.resource == "serviceaccounts":
                name = f"{SERVICE_ACCOUNT_PREFIX}{item.namespace}:{item.name}"
                if not groups_given:
                    groups = ["system:serviceaccounts", f"system:serviceaccounts:{item.namespace}"]
            elif item.resource == "users":
                name = item.name
            elif item.resource == "groups":
                groups.append(item.name)
            elif item.resource == "userextras":
                extra.setdefault(item.subresource, []).append(item.name)
            else:
                uid = item.name
        if name != ANONYMOUS:
            if not {AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP} & set(groups):
                groups.append(AUTHENTICATED_GROUP)
        elif UNAUTHENTICATED_GROUP not in groups:
            groups.append(UNAUTHENTICATED_GROUP)
        ctx.user = UserInfo(name, uid, tuple(groups),
                            tuple((key, tuple(values)) for key, values in extra.items()))
        return proceed(ctx)


def _impersonation_requests(headers, path: str) -> list:
    """
    Upstream's ``buildImpersonationRequests``: what the headers ask to impersonate, each
    as the ``impersonate`` request the authorizer is asked about.
    """
    def asking(resource, name, group="", namespace="", subresource=""):
        return requestinfo.RequestInfo(True, path, "impersonate", "", group, "v1", resource,
                                       subresource, namespace, name)

    asked = []
    user = (headers.getRawHeaders(IMPERSONATE_USER) or [b""])[0].decode("utf-8", "replace")
    if user:
        account = _service_account(user)
        asked.append(asking("serviceaccounts", account[1], namespace=account[0])
                     if account else asking("users", user))
    for group in headers.getRawHeaders(IMPERSONATE_GROUP) or ():
        asked.append(asking("groups", group.decode("utf-8", "replace")))
    for header, values in headers.getAllRawHeaders():
        lowered = header.lower()
        if lowered.startswith(IMPERSONATE_EXTRA):
            key = unquote(lowered[len(IMPERSONATE_EXTRA):].decode("utf-8", "replace"))
            for value in values:
                asked.append(asking("userextras", value.decode("utf-8", "replace"),
                                    AUTHENTICATION_GROUP, subresource=key))
    uid = (headers.getRawHeaders(IMPERSONATE_UID) or [b""])[0].decode("utf-8", "replace")
    if uid:
        asked.append(asking("uids", uid, AUTHENTICATION_GROUP))
    if asked and not user:
        # Upstream answers this with a 500 InternalError; a request's bad headers are
        # the client's fault, so it is a 400 here (docs/errors.md).
        raise errors.bad_request("requested impersonation of groups, extra or a uid "
                                 "without impersonating a user")
    return asked


def _service_account(username: str) -> Optional[tuple]:
    """(namespace, name) when ``username`` is a service account's (``SplitUsername``)."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_PREFIX):].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    namespace, name = parts
    if dns_label(namespace) or dns_subdomain(name):
        return None
    return namespace, name


#: Upstream's ``--max-requests-inflight`` and ``--max-mutating-requests-inflight``.
MAX_READONLY_IN_FLIGHT = 400
MAX_MUTATING_IN_FLIGHT = 200
_READONLY_VERBS = frozenset({"get", "list", "watch"})


@attrs.define
class MaxInFlight:
    """
    Upstream's ``WithMaxInFlightLimit``: at most ``readonly`` reads and ``mutating``
    writes in flight (0: that kind is not limited); long-running requests (watches,
    ``requestinfo.long_running``) are not counted; when full, ``system:masters`` still
    gets an answer and everyone else a 429 with ``Retry-After: 1`` (upstream writes it as
    plain text, so does this).  ``in_flight`` counts what is in flight, limited or not.
    """

    readonly: int = MAX_READONLY_IN_FLIGHT
    mutating: int = MAX_MUTATING_IN_FLIGHT
    in_flight: dict = attrs.field(factory=lambda: {True: 0, False: 0})

    def __call__(self, ctx, proceed):
        info = ctx.info
        if requestinfo.long_running(info):
            return proceed(ctx)
        mutating = info.verb not in _READONLY_VERBS
        limit = self.mutating if mutating else self.readonly
        if 0 < limit <= self.in_flight[mutating] and SYSTEM_MASTERS not in ctx.user.groups:
            raise TooManyRequests()
        self.in_flight[mutating] += 1
        try:
            result = proceed(ctx)
        except BaseException:
            self.in_flight[mutating] -= 1
            raise
        if isinstance(result, Deferred):
            return result.addBoth(self._done, mutating)
        self.in_flight[mutating] -= 1
        return result

    def _done(self, result, mutating: bool):
        self.in_flight[mutating] -= 1
        return result


class TooManyRequests(Exception):
    """The in-flight limit is reached (answered as upstream's plain-text 429)."""


@attrs.define
class Authorization:
    """
    May this user do this?  403 Forbidden with upstream's message otherwise.  Each
    decision is counted as upstream's ``authorization_attempts_total`` /
    ``authorization_duration_seconds`` (``allowed``, ``denied``, ``no-opinion``,
    ``error``).
    """

    authorizer: IAuthorizer
    #: The server's ``APIServerMetrics`` (None: not measured).
    metrics: Any = None

    def __call__(self, ctx, proceed):
        ctx.authorizer = self.authorizer
        info = ctx.info
        platform_group = _PLATFORM_GROUP_OF.get(info.group)
        if platform_group is not None:
            # The access reviews at upstream's group names (kubectl auth's typed paths)
            # are the platform's reviews: authorized as such.
            info = attrs.evolve(info, group=platform_group)
        if info.collection and info.verb in ("list", "watch"):
            # Upstream's request info names the object a list or watch selects with
            # fieldSelector=metadata.name=<x>, so resourceNames rules can allow it.
            name = _selected_name(ctx.request)
            if name:
                info = attrs.evolve(info, name=name)
        attributes = Attributes(ctx.user, info, ctx.span, *_selectors(ctx.request, info))
        if self.metrics is None:
            return then(self.authorizer.authorize(attributes), _allow_or_refuse, attributes,
                        ctx, proceed)
        started = perf_counter()
        try:
            decision = self.authorizer.authorize(attributes)
        except Exception:
            self._measure("error", started)
            raise
        if isinstance(decision, Deferred):
            return decision.addCallbacks(
                self._decided, self._failed, (attributes, ctx, proceed, started),
                errbackArgs=(started,))
        return self._decided(decision, attributes, ctx, proceed, started)

    def _decided(self, decision, attributes, ctx, proceed, started: float):
        self._measure(_AUTHORIZATION_RESULTS.get(decision.verdict, "error"), started)
        return _allow_or_refuse(decision, attributes, ctx, proceed)

    def _failed(self, failure, started: float):
        self._measure("error", started)
        return failure

    def _measure(self, result: str, started: float) -> None:
        self.metrics.authorization.record(result, perf_counter() - started)


_AUTHORIZATION_RESULTS = {ALLOW: "allowed", DENY: "denied", NO_OPINION: "no-opinion"}


def _allow_or_refuse(decision: Decision, attributes: Attributes, ctx, proceed):
    """
    Upstream's ``WithAuthorization``: the decision and the authorizer's reason go in the
    audit annotations (allowed or not); anything but Allow is 403 Forbidden.
    """
    allowed = decision.verdict == ALLOW
    ctx.audit_annotations[DECISION_ANNOTATION] = "allow" if allowed else "forbid"
    ctx.audit_annotations[REASON_ANNOTATION] = decision.reason
    authorizers.enforce(decision, attributes)
    return proceed(ctx)


_PLATFORM_GROUP_OF = {upstream: platform for platform, upstream in UPSTREAM_REVIEW_GROUPS.items()}


#: upstream's ``verbsWithSelectors``: the verbs whose selectors authorization is given.
_VERBS_WITH_SELECTORS = frozenset(("list", "watch", "deletecollection"))


def _selectors(request, info) -> tuple:
    """``(fieldSelector, labelSelector)`` as upstream's request info takes them: the first
    of each query value, for the verbs with selectors; else empty."""
    if not info.is_resource or info.verb not in _VERBS_WITH_SELECTORS:
        return "", ""
    return tuple((query.values(request, key) or [b""])[0].decode("utf-8", "replace")
                 for key in (b"fieldSelector", b"labelSelector"))


def _selected_name(request) -> str:
    """``fieldSelector``'s exact ``metadata.name`` (``RequiresExactMatch``), if a valid
    path segment."""
    text = query.values(request, b"fieldSelector")
    if not text:
        return ""
    for term in text[0].decode("utf-8", "replace").split(","):
        field, op, value = term.partition("=")
        if op and field.strip() == "metadata.name":
            name = value[1:] if value.startswith("=") else value
            name = name.strip()
            if name and name not in (".", "..") and "/" not in name and "%" not in name:
                return name
            return ""
    return ""
