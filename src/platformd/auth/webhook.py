"""
The Webhook authorizer: asks a remote service with a SubjectAccessReview (spec 5.5).

For each request: the matchConditions first (``sar.Matcher``: any false skips the webhook
with NoOpinion; an error, none false, is the failure policy's decision); then the decision
cache, keyed on the review's spec as upstream keys it (``authorizedTTL`` for an allowed
answer, ``unauthorizedTTL`` for any other, on the injected clock; a cache switched off is a
TTL of 0); then a POST of the review to the kubeconfig's server with
``twisted.web.client.Agent``, cancelled after ``timeout`` on the clock.  A failed call or a
malformed answer is the failure policy's decision (``NoOpinion`` lets later authorizers
decide, ``Deny`` denies), with the error in ``Decision.error`` and logged as upstream logs
it.  The answer: ``status.denied`` → Deny, ``status.allowed`` → Allow, neither →
NoOpinion, both → Deny with upstream's error; ``status.reason`` is the reason and
``status.evaluationError`` the error.

A failed call is tried again as upstream's ``DefaultRetryBackoff()`` and
``DefaultShouldRetry`` say (``retry``, ``webhookerrors``): at most 5 attempts 0.5, 0.75,
1.125 and 1.6875 s apart (each up to 20 % longer), for a connection reset, 500 and
other 5xx, 504, 429, or an answer asking for a delay; the last error is the failure
policy's.  A list, watch or deletecollection's field and label selectors are sent in
``resourceAttributes`` as upstream's ``requirements`` (``selectorattributes``), and are
part of the cache key, as the spec is.

Left out from upstream: the selectors in matchConditions' ``request`` (its CEL type has
no ``fieldSelector``/``labelSelector``).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from twisted.logger import Logger
from twisted.web.client import HTTPConnectionPool, readBody
from twisted.web.http_headers import Headers
from zope.interface import implementer

from platformd.auth import sar
from platformd.auth.interfaces import ALLOW, DENY, NO_OPINION, Attributes, Decision, IAuthorizer
from platformd.auth.kubeconfig import Connection
from platformd.auth.retry import with_backoff
from platformd.auth.selectorattributes import resource_selectors
from platformd.auth.webhookerrors import WebhookError, answer_failed, call_failed
from platformd.util import httpclient, slices
from platformd.util.deferreds import then
from platformd.util.ratelog import RateLimitedLog
from platformd.egress import selector
from platformd.egress.config import CONTROLPLANE
from platformd.tracing import spans

log = Logger()

#: upstream's ``maxControlledAttrCacheSize``: larger requester-controlled attributes are
#: not cached (a cheap way to fill the cache).
MAX_CACHED_ATTRIBUTES_SIZE = 10000
CACHE_SIZE = 8192
_BOTH = "webhook subject access review returned both allow and deny response"
_HEADERS = {b"Content-Type": [b"application/json"], b"Accept": [b"application/json"],
            b"User-Agent": [b"platformd"]}


class _DecisionCache:
    """An LRU of review statuses, each with its own expiry on ``clock``."""

    def __init__(self, clock, size: int = CACHE_SIZE):
        self._clock = clock
        self._size = size
        self._entries: OrderedDict = OrderedDict()

    def get(self, key: str):
        entry = self._entries.get(key)
        if entry is None:
            return None
        status, expires = entry
        if self._clock.seconds() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return status

    def add(self, key: str, status: dict, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (status, self._clock.seconds() + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


@implementer(IAuthorizer)
class WebhookAuthorizer:
    """
    ``connection``: the kubeconfig's server and credentials; ``version``: ``v1`` or
    ``v1beta1``; ``failure_policy``: ``NoOpinion`` or ``Deny``; ``matcher``: a
    ``sar.Matcher`` or None (match everything).  ``clock`` times the cache, the timeout
    and the waits between attempts; ``reactor`` carries the connections, dialled through
    ``egress``'s controlplane selection (the server's ``EgressSelector``; None:
    directly).  ``close()`` drops idle connections.
    """

    def __init__(self, name: str, connection: Connection, *, version: str = "v1",
                 timeout: float, authorized_ttl: float, unauthorized_ttl: float,
                 failure_policy: str, matcher: sar.Matcher | None = None, clock, reactor,
                 egress=None):
        self.name = name
        self.url = connection.server
        self._version = version
        self._timeout = timeout
        self._authorized_ttl = authorized_ttl
        self._unauthorized_ttl = unauthorized_ttl
        self._on_error = DENY if failure_policy == "Deny" else NO_OPINION
        #: A webhook down fails every request it is asked about: one line a minute per
        #: distinct error.
        self._errors = RateLimitedLog(log, "Failed to make webhook authorizer request: "
                                      "{detail}", clock)
        self._matcher = matcher
        self._clock = clock
        self._cache = _DecisionCache(clock)
        headers = dict(_HEADERS)
        if connection.token:
            headers[b"Authorization"] = [b"Bearer " + connection.token.encode()]
        self._headers = headers
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        # Upstream dials authorization webhooks through the controlplane egress selection.
        self._agent = selector.agent(CONTROLPLANE, reactor, connection.tls_policy(),
                                     self._pool, selector=egress)
        #: Calls made to the remote service (tests and metrics read it).
        self.calls = 0

    def authorize(self, attributes: Attributes):
        if self._matcher is not None:
            try:
                if not self._matcher.matches(attributes):
                    return Decision(NO_OPINION)
            except sar.MatchError as error:
                return Decision(self._on_error, "", str(error))
        if attributes.info.is_resource and (attributes.field_selector
                                            or attributes.label_selector):
            return then(slices.run(resource_selectors(attributes)), self._authorize_spec,
                        attributes)
        return self._authorize_spec(None, attributes)

    def _authorize_spec(self, selectors, attributes: Attributes):
        spec = sar.spec_for(attributes, selectors)
        key = sar.cache_key(spec)
        status = self._cache.get(key)
        if status is not None:
            return _decide(status)
        body = sar.review_body(spec, self._version)
        asked = with_backoff(lambda: self._ask(body, attributes.trace),
                             lambda error: getattr(error, "retriable", False), self._clock)
        return asked.addCallback(self._remember, key, _cacheable(attributes)).addCallbacks(
            _decide, self._failed)

    def _ask(self, body: bytes, trace=None):
        """One attempt: the review's status, or a ``WebhookError``."""
        self.calls += 1
        headers = Headers(self._headers)
        span = spans.outgoing(trace, "POST", self.url, headers)
        answer: Any = httpclient.post(self._agent, self.url, headers, body, self._timeout,
                                      self._clock)
        if span is not None:
            answer.addBoth(spans.answered, span)
        return answer.addCallbacks(self._read, self._call_failed)

    def _read(self, response):
        reading = readBody(response)
        reading.addCallbacks(_status_of, self._call_failed, (response,))
        return reading

    def _call_failed(self, failure):
        if failure.check(WebhookError):
            return failure
        raise call_failed(failure, self.url)

    def _remember(self, status: dict, key: str, cacheable: bool) -> dict:
        if cacheable:
            ttl = self._authorized_ttl if status["allowed"] else self._unauthorized_ttl
            self._cache.add(key, status, ttl)
        return status

    def _failed(self, failure) -> Decision:
        failure.trap(WebhookError)
        message = str(failure.value)
        self._errors.error(message)
        return Decision(self._on_error, "", message)

    def close(self):
        """Drop idle connections (a Deferred firing once they are closed)."""
        return self._pool.closeCachedConnections()


def _cacheable(attributes: Attributes) -> bool:
    info = attributes.info
    size = sum(len(v) for v in (info.namespace, info.verb, info.group, info.version,
                                info.resource, info.subresource, info.name, info.path))
    return size < MAX_CACHED_ATTRIBUTES_SIZE


def _status_of(body: bytes, response) -> dict:
    """The review's status from the answer; ``WebhookError`` when there is none."""
    if not 200 <= response.code < 300:
        raise answer_failed(response.code, response.headers, body)
    try:
        document = json.loads(body)
    except ValueError as error:
        raise WebhookError(f"invalid SubjectAccessReview response: {error}") from None
    if not isinstance(document, dict):
        raise WebhookError("invalid SubjectAccessReview response: not a JSON object")
    kind = document.get("kind")
    if kind not in (None, "SubjectAccessReview"):
        raise WebhookError(f"invalid SubjectAccessReview response: kind {kind!r}")
    status = document.get("status")
    if status is None:
        status = {}
    if not isinstance(status, dict):
        raise WebhookError("invalid SubjectAccessReview response: status is not an object")
    out = {}
    for field, kind_of, default in (("allowed", bool, False), ("denied", bool, False),
                                    ("reason", str, ""), ("evaluationError", str, "")):
        value = status.get(field)
        if value is None:
            value = default
        if not isinstance(value, kind_of):
            raise WebhookError(f"invalid SubjectAccessReview response: status.{field} is not "
                               f"a {'boolean' if kind_of is bool else 'string'}")
        out[field] = value
    return out


def _decide(status: dict) -> Decision:
    reason, error = status["reason"], status["evaluationError"]
    if status["allowed"] and status["denied"]:
        return Decision(DENY, reason, _BOTH)
    if status["denied"]:
        return Decision(DENY, reason, error)
    if status["allowed"]:
        return Decision(ALLOW, reason, error)
    return Decision(NO_OPINION, reason, error)
