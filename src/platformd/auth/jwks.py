"""
An OIDC issuer's signing keys: discovery, then its JWKS, over HTTPS, never blocking.

``KeySource(issuer, clock, reactor, egress=selector)`` fetches
``<url>/.well-known/openid-configuration`` (or ``discoveryURL`` exactly as given),
requires its ``issuer`` to equal the configured URL (go-oidc's check), then fetches
``jwks_uri``.  TLS trusts ``certificateAuthority`` (PEM in the configuration) else the
system roots (``kubeconfig.ClientTLSPolicy``).  The fetches go through the selection the
issuer's ``egressSelectorType`` names in ``egress`` (the server's ``EgressSelector``;
None: directly), directly when it names none.

At most one fetch is in flight: callers arriving meanwhile share it.  A fetch is started
by the first request, again when a token names an unknown ``kid`` (at most once every
``min_refetch`` seconds), and in the background once the keys are older than ``refresh``
seconds (the request in hand is verified with the keys held).  A failed fetch keeps the
keys held before it.
"""

from __future__ import annotations

import json

from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from twisted.internet.defer import Deferred
from twisted.web.client import readBody
from twisted.web.http_headers import Headers

from platformd.auth import kubeconfig
from platformd.egress import selector
from platformd.auth.authnconfig import Issuer

WELL_KNOWN = "/.well-known/openid-configuration"
#: upstream's client timeout for the issuer.
TIMEOUT = 30.0
DEFAULT_REFRESH = 3600.0
DEFAULT_MIN_REFETCH = 10.0


class FetchError(Exception):
    """Discovery or the JWKS could not be fetched or used; ``str`` says why."""


class KeySource:
    def __init__(self, issuer: Issuer, clock, reactor, *, agent=None, egress=None,
                 refresh: float = DEFAULT_REFRESH, min_refetch: float = DEFAULT_MIN_REFETCH):
        self.issuer = issuer
        self.clock = clock
        self.refresh = refresh
        self.min_refetch = min_refetch
        if agent is None:
            connection = kubeconfig.Connection(issuer.url,
                                               issuer.certificate_authority.encode())
            # Through the egress selection egressSelectorType names; none: directly.
            agent = selector.agent(issuer.egress_selector_type or None, reactor,
                                   connection.tls_policy(), selector=egress)
        self.agent = agent
        self.discovery_url = issuer.discovery_url or issuer.url.rstrip("/") + WELL_KNOWN
        #: kid -> [key]; keys without a kid under "".
        self.keys: dict = {}
        self.all_keys: list = []
        self.fetched_at: float | None = None
        self.attempted_at: float | None = None
        self.last_error = ""
        self.fetches = 0
        self._waiters: list | None = None

    @property
    def ready(self) -> bool:
        return self.fetched_at is not None

    def candidates(self, kid: str) -> list:
        """The keys a token naming ``kid`` may be signed with ("" = no kid: all)."""
        return list(self.keys.get(kid, ())) if kid else list(self.all_keys)

    def may_refetch(self) -> bool:
        return (self._waiters is not None or self.attempted_at is None
                or self.clock.seconds() - self.attempted_at >= self.min_refetch)

    def stale(self) -> bool:
        return self.fetched_at is not None and self.clock.seconds() - self.fetched_at >= self.refresh

    def fetch(self) -> Deferred:
        """Fires with None once a fetch (this one or the one in flight) ends; fails with
        ``FetchError``."""
        waiter: Deferred = Deferred()
        if self._waiters is not None:
            self._waiters.append(waiter)
            return waiter
        self._waiters = [waiter]
        self.attempted_at = self.clock.seconds()
        self.fetches += 1
        d = self._discover()
        d.addBoth(self._done)
        return waiter

    def _done(self, result) -> None:
        waiters, self._waiters = self._waiters or [], None
        if isinstance(result, BaseException) or hasattr(result, "value"):
            error = getattr(result, "value", result)
            text = str(error) if isinstance(error, FetchError) else f"{type(error).__name__}: {error}"
            self.last_error = text
            for w in waiters:
                w.errback(FetchError(text))
            return None
        self.last_error = ""
        for w in waiters:
            w.callback(None)
        return None

    def _get(self, url: str) -> Deferred:
        d = self.agent.request(b"GET", url.encode("ascii"),
                               Headers({b"accept": [b"application/json"]}))
        d.addTimeout(TIMEOUT, self.clock)

        def body(response):
            read = readBody(response)
            if not 200 <= response.code < 300:
                return read.addCallback(lambda data: _raise(FetchError(
                    f"{response.code} {response.phrase.decode('latin-1')}: "
                    f"{data[:200].decode('utf-8', 'replace')}")))
            return read

        d.addCallback(body)
        d.addCallback(_json)
        return d

    def _discover(self) -> Deferred:
        d = self._get(self.discovery_url)

        def discovered(document):
            if not isinstance(document, dict):
                raise FetchError("oidc: failed to decode provider discovery object")
            issuer = document.get("issuer")
            if issuer != self.issuer.url:
                raise FetchError("oidc: issuer did not match the issuer returned by provider, "
                                 f"expected {json.dumps(self.issuer.url)} got "
                                 f"{json.dumps(issuer)}")
            uri = document.get("jwks_uri")
            if not isinstance(uri, str) or not uri:
                raise FetchError("oidc: provider discovery object has no jwks_uri")
            return self._get(uri).addCallback(self._keys)

        return d.addCallback(discovered)

    def _keys(self, document) -> None:
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise FetchError("oidc: failed to decode keys: no keys")
        keys: dict = {}
        every = []
        for raw in document["keys"]:
            if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
                continue
            try:
                key = KeySet.import_key_set({"keys": [raw]}).keys[0]
            except (JoseError, ValueError, TypeError, KeyError):
                continue  # keys of unknown types are skipped, as go-jose skips them
            keys.setdefault(raw.get("kid") or "", []).append(key)
            every.append(key)
        self.keys, self.all_keys = keys, every
        self.fetched_at = self.clock.seconds()


def _raise(error):
    raise error


def _json(data: bytes):
    try:
        return json.loads(data)
    except ValueError as error:
        raise FetchError(f"failed to decode response: {error}") from None


