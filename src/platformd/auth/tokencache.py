"""
A cache in front of token authenticators (upstream's ``token/cache``
``cachedTokenAuthenticator``, as kube-apiserver puts it in front of its token
authenticators: successes kept ``--authentication-token-success-cache-ttl``, 10s;
failures ``--authentication-token-failure-cache-ttl``, 0s, that is not at all).

``CachedTokenAuthenticator(inner, clock)`` keys each bearer token by its SHA-256 (the
token itself is never held), answers a held user until ``ttl`` seconds on ``clock`` have
passed, and holds at most ``max_size`` entries (the oldest go first).  A token ``inner``
has nothing to say about (``None``) and an ``AuthenticationError`` are "not
authenticated" results: held for ``failure_ttl`` (0: not held).  Concurrent lookups of
one token that must wait share the inner authenticator's one answer.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from twisted.internet.defer import Deferred
from zope.interface import implementer

from platformd.auth.interfaces import AuthenticationError, IAuthenticator
from platformd.auth.authenticators import bearer_token

DEFAULT_TTL = 10.0
DEFAULT_FAILURE_TTL = 0.0
DEFAULT_MAX_SIZE = 4096

_MISS = object()


@implementer(IAuthenticator)
class CachedTokenAuthenticator:
    def __init__(self, inner, clock, *, ttl: float = DEFAULT_TTL,
                 failure_ttl: float = DEFAULT_FAILURE_TTL, max_size: int = DEFAULT_MAX_SIZE):
        self.inner = inner
        self.clock = clock
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self.max_size = max_size
        self._entries: OrderedDict = OrderedDict()  # key -> (expires, result)
        self._waiting: dict = {}  # key -> [Deferred]
        self.hits = self.misses = 0

    def __repr__(self):
        return f"<CachedTokenAuthenticator {self.inner!r}>"

    def authenticate(self, request):
        token = bearer_token(request)
        if token is None:
            return self.inner.authenticate(request)
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        cached = self._lookup(key)
        if cached is not _MISS:
            self.hits += 1
            if isinstance(cached, AuthenticationError):
                raise cached
            return cached
        self.misses += 1
        waiters = self._waiting.get(key)
        if waiters is not None:
            waiter: Deferred = Deferred()
            waiters.append(waiter)
            return waiter
        try:
            result = self.inner.authenticate(request)
        except AuthenticationError as error:
            self._store(key, error)
            raise
        if not isinstance(result, Deferred):
            self._store(key, result)
            return result
        self._waiting[key] = []
        first: Deferred = Deferred()

        def answered(outcome):
            waiters = self._waiting.pop(key, [])
            if hasattr(outcome, "check") and outcome.check(AuthenticationError):
                self._store(key, outcome.value)
            elif not hasattr(outcome, "check"):
                self._store(key, outcome)
            for w in [first, *waiters]:
                w.callback(outcome) if not hasattr(outcome, "check") else w.errback(outcome)
            return None

        result.addBoth(answered)
        return first

    def _lookup(self, key):
        entry = self._entries.get(key)
        if entry is None:
            return _MISS
        expires, result = entry
        if self.clock.seconds() >= expires:
            del self._entries[key]
            return _MISS
        return result

    def _store(self, key, result) -> None:
        ttl = self.ttl if result is not None and not isinstance(result, Exception) \
            else self.failure_ttl
        if ttl <= 0:
            return
        self._entries[key] = (self.clock.seconds() + ttl, result)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
