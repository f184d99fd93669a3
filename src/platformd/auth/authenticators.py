"""
The built-in authenticators: x509 client certificates and static bearer tokens.

Both are cheap on the hot path: a client certificate was verified by OpenSSL during the
handshake and its identity is read once per connection and kept on it; a token is one
dict lookup.
"""

from __future__ import annotations

import csv
import io
from urllib.parse import unquote

import attrs
from twisted.internet.defer import Deferred
from zope.interface import implementer

from platformd.util import warningheaders
from platformd.auth.interfaces import (
    AUTHENTICATED_GROUP, AuthenticationError, IAuthenticator, UserInfo,
)
from platformd.edge.tlscontext import peer_identity
from platformd.edge.tlstransport import connection_transport

_CONNECTION_ATTR = "_platformd_x509_user"
_NO_CERT = object()


@implementer(IAuthenticator)
class X509Authenticator:
    """CN is the user name, each O a group (as upstream)."""

    def authenticate(self, request):
        transport = connection_transport(request.channel)
        user = getattr(transport, _CONNECTION_ATTR, None)
        if user is None:
            identity = peer_identity(transport)
            if identity is None:
                user = _NO_CERT
            else:
                name, groups = identity
                user = UserInfo(name, "", tuple(groups) + (AUTHENTICATED_GROUP,))
            try:
                setattr(transport, _CONNECTION_ATTR, user)
            except AttributeError:
                pass
        return None if user is _NO_CERT else user


class TokenFileError(Exception):
    """The token file cannot be read or parsed."""


@implementer(IAuthenticator)
@attrs.define
class TokenAuthenticator:
    """Static bearer tokens from ``--token-auth-file`` (``token,user,uid,"g1,g2"``)."""

    tokens: dict

    @classmethod
    def from_file(cls, path: str) -> "TokenAuthenticator":
        try:
            with open(path, newline="", encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise TokenFileError(f"cannot read token file {path}: {e.strerror}") from None
        return cls(parse_token_csv(text, path))

    def authenticate(self, request):
        token = bearer_token(request)
        # An unknown token may be another token authenticator's (a service account's, an
        # issuer's); ``UnknownBearerToken`` refuses it once none has recognized it.
        return None if token is None else self.tokens.get(token)


#: What Go's strings.TrimSpace removes from a header's bytes (the ASCII spaces: a
#: non-ASCII byte alone is no UTF-8 space).
_GO_SPACE = " \t\n\v\f\r"


#: What upstream's bearertoken authenticator warns of ``Bearer  token`` (two spaces).
EXTRA_SPACE_WARNING = ("the provided Authorization header contains extra space before the "
                       "bearer token, and is ignored")


def bearer_token(request) -> str | None:
    """
    The request's bearer token, or None, read as upstream's bearertoken authenticator
    reads it: from the first Authorization header (Go's ``Header.Get``; Twisted's
    ``getHeader`` gives the last), trimmed, split on single spaces into at most three
    parts: the scheme ``bearer`` in any case, then the token, which ends at the next
    space.  ``Bearer  token`` (two spaces) carries an empty token and so none at all,
    with upstream's warning on the answer.
    """
    values = request.requestHeaders.getRawHeaders(b"authorization")
    if not values:
        return None
    header = values[0]
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    parts = header.strip(_GO_SPACE).split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    if not parts[1] and len(parts) == 3:
        warningheaders.add(request.responseHeaders, EXTRA_SPACE_WARNING)
    return parts[1] or None


def parse_token_csv(text: str, source: str = "token file") -> dict:
    tokens = {}
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].startswith("#"):
            continue
        if len(row) < 3:
            raise TokenFileError(f"{source}, line {lineno}: need at least 3 columns "
                                 f"(token,user,uid), found {len(row)}")
        token, name, uid = (c.strip() for c in row[:3])
        if not token or not name:
            raise TokenFileError(f"{source}, line {lineno}: token and user name must not be empty")
        if token in tokens:
            raise TokenFileError(f"{source}, line {lineno}: duplicate token")
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        tokens[token] = UserInfo(name, uid, groups + (AUTHENTICATED_GROUP,))
    return tokens


@implementer(IAuthenticator)
class UnknownBearerToken:
    """
    After every token authenticator: a bearer token none of them recognized is refused
    (401), as upstream's ``bearertoken`` authenticator refuses it with "invalid bearer
    token" -- so a bad token is never taken for anonymous access.
    """

    def authenticate(self, request):
        if bearer_token(request) is not None:
            raise AuthenticationError("invalid bearer token")
        return None


ANONYMOUS_USER = UserInfo("system:anonymous", "", ("system:unauthenticated",))


@implementer(IAuthenticator)
@attrs.frozen
class AnonymousAuthenticator:
    """
    Last in the chain when anonymous access is on (``--anonymous-auth=true``, or
    ``anonymous.enabled`` in ``--authentication-config``): a request with no credentials
    at all is ``system:anonymous`` in ``system:unauthenticated`` (then authorized as any
    user); with ``paths`` (the file's ``conditions``) only on those exact paths.  Wrong
    credentials are still 401: the chain stops at the first authenticator that refuses,
    as upstream's ``union.NewFailOnError`` in front of its anonymous authenticator.
    """

    paths: frozenset = frozenset()

    def authenticate(self, request):
        if self.paths and unquote(request.path.decode("utf-8", "replace")) not in self.paths:
            return None
        return ANONYMOUS_USER


@implementer(IAuthenticator)
@attrs.define
class AuthenticatorChain:
    """
    Tries each authenticator in order; the first user found wins.  An authenticator may
    answer later (a Deferred): the chain then goes on once it has answered.
    """

    authenticators: list

    def authenticate(self, request):
        return self._try(0, request)

    def _try(self, start: int, request):
        for index in range(start, len(self.authenticators)):
            user = self.authenticators[index].authenticate(request)
            if isinstance(user, Deferred):
                return user.addCallback(self._answered, index, request)
            if user is not None:
                return user
        return None

    def _answered(self, user, index: int, request):
        return user if user is not None else self._try(index + 1, request)
