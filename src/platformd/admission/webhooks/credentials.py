"""
What a webhook call carries as the kubeconfig user chosen for its host
(``authinfo.py``), made as upstream makes its webhook client: ``restConfigFromKubeconfig``
(``k8s.io/apiserver/pkg/util/webhook/authentication.go``) then client-go's transport.

- ``token`` is sent as ``Authorization: Bearer <token>``.  ``tokenFile`` is read when
  the credentials are made (unreadable: an error), then again at most once a minute
  (client-go's cached file token source: a minute, less its 10 s leeway), trimmed, so a
  rotated token is picked up; a failed re-read keeps the last token.  With both,
  ``token`` is sent until the file has been read, then the file's, as client-go does.
- ``username`` (``password`` beside it) is sent as ``Authorization: Basic``; a username
  with a token is client-go's ``username/password or bearer token may be set, but not
  both``.
- ``client-certificate`` and ``client-key`` (or their ``-data``), both or neither (one
  alone is nothing, as client-go's ``HasCertAuth``), are checked as Go's
  ``tls.X509KeyPair`` (``platformd.files.keypair``) and presented during the handshake.
- ``auth-provider`` is upstream's ``auth provider not supported``.

A failure is raised as ``CredentialsError`` with client-go's words, in client-go's order
(the token file, the auth provider, the certificate files, the pair, the header
conflict); the caller makes it upstream's ``could not get REST client: ...``.
"""

from __future__ import annotations

import base64
from typing import Optional

import attrs

from platformd.goformat import gotext
from platformd.files.keypair import KeyPairError, x509_key_pair

#: client-go's file token source's period less its cache's leeway.
TOKEN_FILE_PERIOD = 60.0 - 10.0


class CredentialsError(Exception):
    """The user's credentials cannot be used; ``str`` is client-go's error."""


class TokenFile:
    """A ``tokenFile``'s token, read again once ``TOKEN_FILE_PERIOD`` has passed."""

    def __init__(self, path: str, first: str, clock):
        self.path = path
        #: Sent until the file has been read here (client-go's ``rt.bearer``).
        self.first = first
        self.clock = clock
        self._token: Optional[str] = None
        self._read_at = 0.0

    def token(self) -> str:
        now = self.clock.seconds()
        if self._token is None or now >= self._read_at + TOKEN_FILE_PERIOD:
            try:
                with open(self.path, "rb") as f:
                    self._token = f.read().decode("utf-8", "replace").strip()
                self._read_at = now
            except OSError:
                pass
        return self._token if self._token is not None else self.first


@attrs.frozen
class Credentials:
    #: The checked certificate and key, one PEM (b"": none).
    client_pem: bytes = b""
    #: A fixed ``Authorization`` value ("": none, or the token file's).
    authorization: str = ""
    token_file: Optional[TokenFile] = None

    def headers(self) -> dict:
        """The request headers these credentials add (bytes → [bytes])."""
        value = self.authorization
        if self.token_file is not None:
            value = "Bearer " + self.token_file.token()
        return {b"Authorization": [value.encode("utf-8")]} if value else {}


ANONYMOUS = Credentials()


def credentials(user, clock) -> Credentials:
    """The ``Credentials`` of ``user`` (a ``platformd.files.kubeconfig.User``; None:
    anonymous), files read now."""
    if user is None:
        return ANONYMOUS
    bearer, token_file = user.token, ""
    if user.token:
        token_file = user.token_file
    elif user.token_file:
        bearer, token_file = _read(user.token_file).decode("utf-8", "replace"), user.token_file
    if user.auth_provider:
        raise CredentialsError("auth provider not supported")
    client_pem = b""
    if user.client_certificate or user.client_certificate_data:
        cert = user.client_certificate_data or _read(user.client_certificate)
        key = user.client_key_data or _read(user.client_key)
        if (cert or user.client_certificate) and (key or user.client_key):
            try:
                client_pem = x509_key_pair(cert, key)
            except KeyPairError as error:
                raise CredentialsError(str(error)) from None
    if user.username and (bearer or token_file):
        raise CredentialsError("username/password or bearer token may be set, but not both")
    if token_file:
        return Credentials(client_pem, token_file=TokenFile(token_file, bearer, clock))
    if bearer:
        return Credentials(client_pem, "Bearer " + bearer)
    if user.username:
        basic = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
        return Credentials(client_pem, "Basic " + basic)
    return Credentials(client_pem)


def _read(path: str) -> bytes:
    """A file client-go reads with ``os.ReadFile`` ("" reads nothing)."""
    if not path:
        return b""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise CredentialsError(gotext.path_error("open", path, error)) from None
