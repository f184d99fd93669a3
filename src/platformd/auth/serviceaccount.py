"""
Service-account tokens: the signing key, the issuer that mints bound tokens
(``TokenRequest``, upstream's ``pkg/serviceaccount/jwt.go`` and ``claims.go``) and the
authenticator that accepts them.

A token is a JWT signed with ``--service-account-signing-key-file`` (RS256 for an RSA
key, ES256/384/512 for an ECDSA key; a fresh server makes an RSA key under its data
directory, ``ensure_signing_key``), its ``kid`` upstream's (the unpadded base64url
SHA-256 of the public key's DER).  Its claims are upstream's with ``kubernetes.io``
spelled ``platform.io``::

    {"aud": [...], "exp": ..., "iat": ..., "iss": "https://platform.default.svc",
     "jti": "<uuid>", "nbf": ..., "sub": "system:serviceaccount:<ns>:<name>",
     "platform.io": {"namespace": "<ns>",
                     "serviceaccount": {"name": ..., "uid": ...},
                     "pod": {"name": ..., "uid": ...}}}      (or "secret", when bound)

``ServiceAccountAuthenticator`` answers None for anything that is not a JWT of its issuer
(another authenticator may know it) and raises ``AuthenticationError`` in upstream's
words for one of its issuer that fails: a bad signature, an audience not asked for,
expiry (one minute's leeway, as go-jose's), a service account, pod or secret that is
gone or was recreated (uid mismatch) -- looked up in the watch cache, so a token bound to
a deleted pod stops working as soon as the cache has seen the delete.

Nothing here imports the registry (a lower layer) or the cache: objects are found
through the listers of the informers handed in (``informing.IInformers``), by GVR, and
the cache's ``sync`` handed in is the live lookup of one they miss.

joserfc is imported when a token is first signed, verified or its key listed, not when
the daemon starts (~20 ms of every start otherwise), and its keys wrap the key objects
already parsed: parsing an RSA key's PEM again (as ``import_key`` would) checks the key
once more, ~30 ms.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import json
import os
import uuid
from typing import Iterable, Optional

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from zope.interface import implementer

from platformd.files import pki
from platformd.goformat import gojson
from platformd.auth.authenticators import bearer_token
from platformd.auth.interfaces import (
    AUTHENTICATED_GROUP, AuthenticationError, IAuthenticator, UserInfo,
)
from platformd.util.deferreds import then

#: The issuer when ``--service-account-issuer`` is not given: upstream's typical value
#: (``https://kubernetes.default.svc``) with the platform's name.
DEFAULT_ISSUER = "https://platform.default.svc"
#: Where ``ensure_signing_key`` keeps the key it makes, under the data directory.
SIGNING_KEY_PATH = os.path.join("pki", "service-account.key")
#: The private claims' key (upstream's ``kubernetes.io``).
PRIVATE_CLAIMS = "platform.io"
#: ``UserInfo.extra`` keys (upstream's ``authentication.kubernetes.io/...``).
POD_NAME_KEY = "authentication.platform.io/pod-name"
POD_UID_KEY = "authentication.platform.io/pod-uid"
NODE_NAME_KEY = "authentication.platform.io/node-name"
NODE_UID_KEY = "authentication.platform.io/node-uid"
CREDENTIAL_ID_KEY = "authentication.platform.io/credential-id"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
#: go-jose's ``DefaultLeeway``: how far exp/nbf may be off, and how long a deleted object
#: still counts.
LEEWAY = 60.0
#: The discovery paths (upstream's ``pkg/routes/openidmetadata.go``).
OPENID_CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"

#: The kinds a token refers to, as ``(group, version, plural)``.
SERVICE_ACCOUNTS = ("", "v1", "serviceaccounts")
PODS = ("", "v1", "pods")
SECRETS = ("", "v1", "secrets")
_CURVE_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
#: RFC 7518's names of the curves (a JWK's ``crv``).
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


class SigningKeyError(Exception):
    """A key file cannot be read, parsed or used (one line, for the command line)."""


# Keys.

class PublicKey:
    """A verification key: its joserfc key, algorithm (RS256, ES256 ...) and ``kid``."""

    def __init__(self, crypto_key):
        if isinstance(crypto_key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
            crypto_key = crypto_key.public_key()
        self.public_key = crypto_key
        self.algorithm = _algorithm(crypto_key)
        der = crypto_key.public_bytes(serialization.Encoding.DER,
                                      serialization.PublicFormat.SubjectPublicKeyInfo)
        #: Upstream's ``keyIDFromPublicKey``.
        self.kid = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()

    @functools.cached_property
    def jose(self):
        """The public key as joserfc's key."""
        return _jose_key(self.public_key)

    def jwk(self) -> dict:
        """The key as upstream's JWKS lists it: use, kty, kid, crv/alg and the numbers
        (RFC 7518's base64url integers: ``n`` and ``e`` in as few bytes as they need,
        ``x`` and ``y`` at the curve's size)."""
        key = self.public_key
        numbers = key.public_numbers()
        out = {"use": "sig", "kty": "RSA", "kid": self.kid}
        if isinstance(key, ec.EllipticCurvePublicKey):
            size = (key.key_size + 7) // 8
            out.update(kty="EC", crv=_CURVE_NAMES[key.curve.name], alg=self.algorithm,
                       x=_b64_uint(numbers.x, size), y=_b64_uint(numbers.y, size))
        else:
            out.update(alg=self.algorithm, n=_b64_uint(numbers.n), e=_b64_uint(numbers.e))
        return out


class SigningKey(PublicKey):
    """The private key tokens are signed with, and its public half."""

    def __init__(self, crypto_key):
        super().__init__(crypto_key)
        self.private_key = crypto_key

    @functools.cached_property
    def private(self):
        """The private key as joserfc's key."""
        return _jose_key(self.private_key)


def _b64_uint(value: int, size: int = 0) -> str:
    """RFC 7518's Base64urlUInt: big-endian in ``size`` bytes (default: as few as
    ``value`` needs), base64url without padding."""
    raw = value.to_bytes(size or (value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jose_key(crypto_key):
    """joserfc's ``RSAKey``/``ECKey`` around a ``cryptography`` key (its constructor takes
    the parsed key, as ``import_key`` makes it after parsing)."""
    from joserfc.jwk import ECKey, RSAKey
    rsa_key = isinstance(crypto_key, (rsa.RSAPrivateKey, rsa.RSAPublicKey))
    return (RSAKey if rsa_key else ECKey)(crypto_key, crypto_key)


def _algorithm(public_key) -> str:
    if isinstance(public_key, rsa.RSAPublicKey):
        return "RS256"
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        algorithm = _CURVE_ALGORITHMS.get(public_key.curve.name)
        if algorithm is not None:
            return algorithm
        raise SigningKeyError(f"unsupported elliptic curve {public_key.curve.name}")
    raise SigningKeyError("unsupported key type: only RSA and ECDSA keys sign tokens")


def ensure_signing_key(data_dir: str) -> str:
    """
    The path of the signing key under ``data_dir`` (``pki/service-account.key``), made
    on first start (RSA 2048, PKCS#8 PEM, 0600) and kept afterwards: tokens stay valid
    across restarts.  ``pki.PKIError`` when it cannot be written.
    """
    path = os.path.join(data_dir, SIGNING_KEY_PATH)
    if os.path.exists(path):
        return path
    pki._make_private_dir(os.path.dirname(path))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pki._write_atomic(path, key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()), 0o600)
    return path


def load_signing_key(path: str, own: bool = False) -> SigningKey:
    """
    The private key in ``path`` (PEM: PKCS#8, PKCS#1 or SEC1), RSA or ECDSA.  ``own``:
    the key ``ensure_signing_key`` made, whose RSA consistency (OpenSSL's primality
    checks, ~40 ms of every start here) is not checked again.
    """
    data = _read(path)
    try:
        key = serialization.load_pem_private_key(data, password=None,
                                                 unsafe_skip_rsa_key_validation=own)
    except (ValueError, TypeError) as e:
        raise SigningKeyError(f"{path}: not a PEM private key ({e})") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise SigningKeyError(f"{path}: only RSA and ECDSA keys sign tokens")
    try:
        return SigningKey(key)
    except SigningKeyError as e:
        raise SigningKeyError(f"{path}: {e}") from None


def load_public_keys(paths: Iterable[str]) -> list:
    """
    Every verification key in ``paths`` (``--service-account-key-file``, repeatable), as
    upstream's ``keyutil.ParsePublicKeysPEM``: each PEM block a public key, an RSA or
    ECDSA private key (its public half) or a certificate (its key).  A file without one
    is an error.
    """
    keys = []
    for path in paths:
        found = [PublicKey(k) for k in _pem_public_keys(_read(path), path)]
        if not found:
            raise SigningKeyError(f"{path}: data does not contain any valid RSA or ECDSA "
                                  "public keys")
        keys.extend(found)
    return keys


def _pem_public_keys(data: bytes, path: str) -> list:
    keys = []
    for block in _pem_blocks(data):
        label = block.split(b"\n", 1)[0].decode("ascii", "replace")
        key: object
        try:
            if "CERTIFICATE" in label:
                key = x509.load_pem_x509_certificate(block).public_key()
            elif "PRIVATE KEY" in label:
                key = serialization.load_pem_private_key(block, password=None)
            elif "PUBLIC KEY" in label:
                key = serialization.load_pem_public_key(block)
            else:
                continue
        except (ValueError, TypeError) as e:
            raise SigningKeyError(f"{path}: {label.strip('-').strip()}: {e}") from None
        if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey, ec.EllipticCurvePrivateKey,
                            ec.EllipticCurvePublicKey)):
            keys.append(key)
    return keys


def _pem_blocks(data: bytes) -> list:
    blocks: list = []
    start = 0
    while True:
        begin = data.find(b"-----BEGIN ", start)
        if begin < 0:
            return blocks
        end = data.find(b"-----END ", begin)
        if end < 0:
            return blocks
        stop = data.find(b"-----", end + 9)
        stop = len(data) if stop < 0 else stop + 5
        blocks.append(data[begin:stop] + b"\n")
        start = stop


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SigningKeyError(f"cannot read {path}: {e.strerror}") from None


# Minting.

def username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def _ref(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    return {"name": meta.get("name", ""), "uid": meta.get("uid", "")}


class TokenIssuer:
    """
    Mints service-account tokens (upstream's ``TokenGenerator`` with ``Claims``) and
    serves what other systems need to verify them (the OpenID documents); the
    TokenRequest handler (``registry/kinds/tokenrequest.py``) finds its service account,
    pod and secret through ``get``.

    ``informers``: the served kinds' informers (``informing.IInformers``); ``sync``:
    ``WatchCache.sync``; ``issuer``: ``--service-account-issuer``;
    ``signing_key``: a ``SigningKey``; ``clock``: ``seconds()``; ``api_audiences``: the
    audiences a token gets when none are asked for and a TokenReview checks when it
    names none (``--api-audiences``; default ``(issuer,)``); ``public_keys``: the extra
    verification keys published in the JWKS; ``jwks_uri``: what the discovery document
    names (default ``issuer + "/openid/v1/jwks"``).
    """

    def __init__(self, informers, sync, issuer: str, signing_key: SigningKey, clock,
                 api_audiences: Optional[Iterable[str]] = None, public_keys=(),
                 jwks_uri: Optional[str] = None):
        self.informers = informers
        self.sync = sync
        self.issuer = issuer
        self.signing_key = signing_key
        self.clock = clock
        self.api_audiences = tuple(api_audiences) if api_audiences else (issuer,)
        self.public_keys = tuple(public_keys)
        self.jwks_uri = jwks_uri or issuer.rstrip("/") + JWKS_PATH

    def get(self, gvr: tuple, namespace: str, name: str) -> Optional[dict]:
        """The object ``namespace/name`` of the kind ``gvr`` (its lister's), or None."""
        return lookup(self.informers, gvr, namespace, name)

    def generate(self, service_account: dict, expiration_seconds: int, audiences,
                 pod: Optional[dict] = None, secret: Optional[dict] = None,
                 now: Optional[float] = None) -> str:
        """A token for ``service_account`` (bound to ``pod`` or ``secret``), signed."""
        now = int(self.clock.seconds() if now is None else now)
        meta = service_account["metadata"]
        private = {"namespace": meta["namespace"], "serviceaccount": _ref(service_account)}
        if pod is not None:
            private["pod"] = _ref(pod)
        elif secret is not None:
            private["secret"] = _ref(secret)
        claims = {
            "aud": list(audiences), "exp": now + int(expiration_seconds), "iat": now,
            "iss": self.issuer, "jti": str(uuid.uuid4()), "nbf": now,
            PRIVATE_CLAIMS: private, "sub": username(meta["namespace"], meta["name"]),
        }
        from joserfc import jwt
        key = self.signing_key
        return jwt.encode({"alg": key.algorithm, "kid": key.kid}, claims, key.private,
                          algorithms=[key.algorithm])

    def verification_keys(self) -> list:
        """The signing key's public half, then the extra keys (distinct ``kid``s)."""
        keys, seen = [], set()
        for key in (self.signing_key, *self.public_keys):
            if key.kid not in seen:
                seen.add(key.kid)
                keys.append(key)
        return keys

    def openid_configuration(self) -> dict:
        """``/.well-known/openid-configuration`` (upstream's ``openIDMetadata``)."""
        algorithms = sorted({key.algorithm for key in self.verification_keys()})
        return {
            "issuer": self.issuer,
            "jwks_uri": self.jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algorithms,
        }

    def jwks(self) -> dict:
        """``/openid/v1/jwks``: every verification key."""
        return {"keys": [key.jwk() for key in self.verification_keys()]}

    def documents(self) -> dict:
        """The discovery documents by path, for ``Documents.add``."""
        return {OPENID_CONFIGURATION_PATH: self.openid_configuration(),
                JWKS_PATH: self.jwks()}


def lookup(informers, gvr: tuple, namespace: str, name: str) -> Optional[dict]:
    entry = informers.informer(gvr).lister.get(namespace, name)
    return None if entry is None else entry.obj


# Verifying.

def _segment(part: str) -> dict:
    padded = part + "=" * (-len(part) % 4)
    value = gojson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _go_quote_list(values) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


@implementer(IAuthenticator)
class ServiceAccountAuthenticator:
    """
    Bearer tokens minted by a ``TokenIssuer`` of ``issuer`` (see module docstring).
    ``public_keys``: every key a token may be signed with (``PublicKey``/``SigningKey``:
    the signing key and ``--service-account-key-file``'s); ``api_audiences``: what a
    token must be meant for when the request names no audiences (default
    ``(issuer,)``); ``informers`` and ``sync`` as ``TokenIssuer``'s.

    The audiences a token was accepted for are left on the request as
    ``request.platformd_audiences`` when it allows attributes (a TokenReview reads them);
    a request may ask for others with ``request.platformd_requested_audiences``.
    """

    def __init__(self, informers, sync, issuer: str, public_keys, clock,
                 api_audiences: Optional[Iterable[str]] = None):
        self.informers = informers
        self.sync = sync
        self.issuer = issuer
        self.public_keys = list(public_keys)
        self.clock = clock
        self.api_audiences = tuple(api_audiences) if api_audiences else (issuer,)

    def authenticate(self, request):
        token = bearer_token(request)
        if token is None:
            return None
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header, claims = _segment(parts[0]), _segment(parts[1])
        except (ValueError, UnicodeError):
            return None
        if claims.get("iss") != self.issuer:
            return None  # upstream's hasCorrectIssuer: someone else's token
        claims = self._verified(token, header)
        audiences = self._audiences(claims, request)
        try:
            user = self._validate(claims)
        except _NotCached:
            # Upstream's token getter reads an object its informer lacks from the API
            # (a live GET): over etcd another server may have just created it.  So: the
            # cache brought up to date (``WatchCache.sync``), then once more.
            return then(self.sync(), lambda _: self._for(
                request, audiences, self._validate(claims, live=True)))
        return self._for(request, audiences, user)

    def _for(self, request, audiences: tuple, user: UserInfo) -> UserInfo:
        """``user``, the token's audiences noted on ``request`` for the filters."""
        try:
            request.platformd_audiences = audiences
        except AttributeError:
            pass
        return user

    def _verified(self, token: str, header: dict) -> dict:
        from joserfc import jwt
        from joserfc.errors import JoseError
        errors = []
        for key in self.public_keys:
            try:
                return dict(jwt.decode(token, key.jose, algorithms=[key.algorithm]).claims)
            except (JoseError, ValueError) as e:
                errors.append(_jose_error(e))
        if not errors:
            raise AuthenticationError("no keys to verify service account tokens with")
        errors = list(dict.fromkeys(errors))
        raise AuthenticationError(errors[0] if len(errors) == 1
                                  else "[" + ", ".join(errors) + "]")

    def _audiences(self, claims: dict, request) -> tuple:
        token_audiences = claims.get("aud")
        if isinstance(token_audiences, str):
            token_audiences = [token_audiences]
        token_audiences = [a for a in token_audiences or () if isinstance(a, str)]
        requested = getattr(request, "platformd_requested_audiences", None) or self.api_audiences
        audiences = tuple(a for a in requested if a in token_audiences)
        if not audiences:
            raise AuthenticationError(
                f"token audiences {_go_quote_list(token_audiences)} is invalid for the "
                f"target audiences {_go_quote_list(requested)}")
        return audiences

    def _validate(self, claims: dict, live: bool = False) -> UserInfo:
        """
        Upstream's ``validator.Validate``: times, then the bound objects, read from the
        cache; one missing from it raises ``_NotCached`` unless the cache is ``live``
        (up to date), where it is missing indeed.
        """
        now = self.clock.seconds()
        expiry, not_before = claims.get("exp"), claims.get("nbf")
        if isinstance(expiry, (int, float)) and now - LEEWAY > expiry:
            raise AuthenticationError("service account token has expired")
        if isinstance(not_before, (int, float)) and now + LEEWAY < not_before:
            raise AuthenticationError("service account token is not valid yet")
        private = claims.get(PRIVATE_CLAIMS)
        if not isinstance(private, dict):
            raise AuthenticationError("service account token claims could not be validated "
                                      "due to unexpected private claim")
        namespace = private.get("namespace") or ""
        sa_ref = _claim_ref(private.get("serviceaccount")) or {}
        name, uid = sa_ref.get("name", ""), sa_ref.get("uid", "")
        deleted_before = now - LEEWAY
        account = self._find(SERVICE_ACCOUNTS, namespace, name, live)
        if account is None:
            raise AuthenticationError(f'serviceaccounts "{name}" not found')
        if _deleted_before(account, deleted_before):
            raise AuthenticationError(f"service account {namespace}/{name} has been deleted")
        account_uid = account["metadata"].get("uid", "")
        if account_uid != uid:
            raise AuthenticationError(
                f"service account UID ({account_uid}) does not match claim ({uid})")
        extra = {}
        secret_ref = _claim_ref(private.get("secret"))
        if secret_ref is not None:
            self._check_bound(SECRETS, "secret", "service account secret ref claim",
                              namespace, secret_ref, deleted_before, live)
        pod_ref = _claim_ref(private.get("pod"))
        if pod_ref is not None:
            self._check_bound(PODS, "pod", "service account pod ref claim",
                              namespace, pod_ref, deleted_before, live)
            if pod_ref.get("name") and pod_ref.get("uid"):
                extra[POD_NAME_KEY] = (pod_ref["name"],)
                extra[POD_UID_KEY] = (pod_ref["uid"],)
        node_ref = _claim_ref(private.get("node"))
        if node_ref is not None and node_ref.get("name"):
            extra[NODE_NAME_KEY] = (node_ref["name"],)
            if node_ref.get("uid"):
                extra[NODE_UID_KEY] = (node_ref["uid"],)
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra[CREDENTIAL_ID_KEY] = (f"JTI={jti}",)
        return UserInfo(username(namespace, name), uid,
                        (ALL_SERVICE_ACCOUNTS_GROUP, f"{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}",
                         AUTHENTICATED_GROUP),
                        tuple(sorted(extra.items())))

    def _find(self, gvr: tuple, namespace: str, name: str, live: bool) -> Optional[dict]:
        obj = lookup(self.informers, gvr, namespace, name)
        if obj is None and not live:
            raise _NotCached()
        return obj

    def _check_bound(self, gvr, what, claim, namespace, ref, deleted_before,
                     live: bool) -> None:
        obj = self._find(gvr, namespace, ref.get("name", ""), live)
        if obj is None or _deleted_before(obj, deleted_before):
            raise AuthenticationError("service account token has been invalidated")
        current = obj["metadata"].get("uid", "")
        if current != ref.get("uid", ""):
            raise AuthenticationError(
                f"{what} UID ({current}) does not match {claim} ({ref.get('uid', '')})")


class _NotCached(Exception):
    """An object a token is bound to is not in the cache, which may be behind."""


def _claim_ref(value) -> Optional[dict]:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if k in ("name", "uid") and isinstance(v, str)}


def _deleted_before(obj: dict, cutoff: float) -> bool:
    stamp = (obj.get("metadata") or {}).get("deletionTimestamp")
    if not stamp:
        return False
    try:
        when = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return when.replace(tzinfo=datetime.timezone.utc).timestamp() < cutoff


def _jose_error(error: Exception) -> str:
    """go-jose's words for what went wrong, as upstream's verifier reports them."""
    return "go-jose/go-jose: error in cryptographic primitive"


def build(informers, sync, clock, data_dir: str, signing_key_file: Optional[str] = None,
          key_files: Iterable[str] = (), issuer: str = DEFAULT_ISSUER,
          api_audiences: Optional[Iterable[str]] = None):
    """
    ``(TokenIssuer, ServiceAccountAuthenticator)`` from the flags: the signing key from
    ``signing_key_file`` (default: ``ensure_signing_key(data_dir)``), verification by it
    and ``key_files``' keys.  ``SigningKeyError`` or ``pki.PKIError`` for a key that cannot
    be read or made.
    """
    signing_key = (load_signing_key(signing_key_file) if signing_key_file
                   else load_signing_key(ensure_signing_key(data_dir), own=True))
    extra = load_public_keys(key_files)
    token_issuer = TokenIssuer(informers, sync, issuer, signing_key, clock, api_audiences,
                               extra)
    authenticator = ServiceAccountAuthenticator(informers, sync, issuer, [signing_key, *extra],
                                                clock,
                                                api_audiences)
    return token_issuer, authenticator
