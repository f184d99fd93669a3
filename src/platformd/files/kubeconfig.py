"""
A kubeconfig file's users and contexts, read as client-go reads one named file
(``clientcmd.ClientConfigLoadingRules.Load`` with ``ExplicitPath``, then ``RawConfig``),
for a reader that picks a user itself: the admission webhooks' authentication info
resolver (``admission/webhooks/authinfo.py``) chooses one per webhook host.
``auth/kubeconfig.py``, which connects to the ``current-context``'s cluster, resolves
its paths and finds its named entries with ``local_path`` and ``named`` below.

Nothing is validated beyond decoding, as ``RawConfig`` validates nothing: no context,
no cluster and no ``current-context`` are all fine.  The errors are client-go's: a file
that does not exist is ``stat PATH: no such file or directory``; one that cannot be
read or decoded is ``error loading config file "PATH": <why>``, the decoding errors in
Go's words through ``configfile`` (a field of the wrong type, ``illegal base64 data at
input byte N`` for a ``-data`` field).  Unknown fields are skipped: client-go's
kubeconfig codec is not strict.  Credential files are not read here: client-go reads
them when a client is made, so their errors belong to that moment.
"""

from __future__ import annotations

import os

import attrs

from platformd.files import configfile
from platformd.goformat import gotext
_STRING_LIST = ["string"]
_AUTH_INFO = configfile.Struct("AuthInfo", "v1.AuthInfo", {
    "client-certificate": "string", "client-certificate-data": configfile.BYTES,
    "client-key": "string", "client-key-data": configfile.BYTES,
    "token": "string", "tokenFile": "string", "username": "string", "password": "string",
    "as": "string", "as-uid": "string", "as-groups": _STRING_LIST,
    "as-user-extra": configfile.RAW, "auth-provider": configfile.RAW,
    "exec": configfile.RAW})
_CONFIG = configfile.Struct("Config", "v1.Config", {
    "current-context": "string",
    "users": [configfile.Struct("NamedAuthInfo", "v1.NamedAuthInfo",
                                {"name": "string", "user": _AUTH_INFO})],
    "contexts": [configfile.Struct("NamedContext", "v1.NamedContext", {
        "name": "string",
        "context": configfile.Struct("Context", "v1.Context", {"user": "string"})})]})

#: ``users[].user`` fields this server does not act on (see ``User.unsupported``).
UNSUPPORTED = ("exec", "as", "as-uid", "as-groups", "as-user-extra")


class KubeconfigError(Exception):
    """The file cannot be used; ``str`` is client-go's error."""


@attrs.frozen
class User:
    """
    One ``users[].user`` (client-go's ``AuthInfo``): file paths absolute (against the
    kubeconfig's directory, as ``ResolveLocalPaths`` makes them), ``-data`` fields
    decoded.
    """

    client_certificate: str = ""
    client_certificate_data: bytes = b""
    client_key: str = ""
    client_key_data: bytes = b""
    token: str = ""
    token_file: str = ""
    username: str = ""
    password: str = ""
    auth_provider: bool = False
    #: The ``UNSUPPORTED`` fields this user sets.
    unsupported: tuple = ()


@attrs.frozen
class Kubeconfig:
    #: name -> ``User``.
    users: dict = attrs.field(factory=dict)
    #: context name -> the name of its user.
    context_users: dict = attrs.field(factory=dict)
    current_context: str = ""

    def current_user(self):
        """The user of the ``current-context`` (upstream's last resort), or None."""
        return self.users.get(self.context_users.get(self.current_context) or "")


def load(path: str) -> Kubeconfig:
    """The file at ``path`` (absolute), decoded; ``KubeconfigError`` in client-go's words."""
    try:
        os.stat(path)
    except FileNotFoundError as error:
        raise KubeconfigError(gotext.path_error("stat", path, error)) from None
    except OSError:
        pass  # not IsNotExist: client-go goes on and fails reading it
    try:
        with open(path, "rb") as f:
            data = f.read()
        return _decode(data, os.path.dirname(os.path.abspath(path)))
    except IsADirectoryError as error:  # Go opens a directory, then fails reading it
        why = gotext.path_error("read", path, error)
    except OSError as error:
        why = gotext.path_error("open", path, error)
    except configfile.DecodeError as error:
        why = str(error)
    raise KubeconfigError(f'error loading config file "{path}": {why}')


def _decode(data: bytes, base: str) -> Kubeconfig:
    if not data:  # clientcmd.Load: an empty file is an empty config
        return Kubeconfig()
    document = configfile.load_yaml(data)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise configfile.not_an_object(document)
    config = configfile.decode_object(document, _CONFIG, strict=False)
    users: dict = {}
    for entry in config.get("users", ()):
        users.setdefault(entry.get("name", ""), _user(entry.get("user", {}), base))
    contexts: dict = {}
    for entry in config.get("contexts", ()):
        contexts.setdefault(entry.get("name", ""), entry.get("context", {}).get("user", ""))
    return Kubeconfig(users, contexts, config.get("current-context", ""))


def _user(raw: dict, base: str) -> User:
    return User(
        client_certificate=local_path(base, raw.get("client-certificate", "")),
        client_certificate_data=raw.get("client-certificate-data", b""),
        client_key=local_path(base, raw.get("client-key", "")),
        client_key_data=raw.get("client-key-data", b""),
        token=raw.get("token", ""), token_file=local_path(base, raw.get("tokenFile", "")),
        username=raw.get("username", ""), password=raw.get("password", ""),
        auth_provider="auth-provider" in raw,
        unsupported=tuple(name for name in UNSUPPORTED if raw.get(name)))


def local_path(base: str, path: str) -> str:
    """``path`` as client-go resolves a kubeconfig's file reference: a relative one
    against the kubeconfig's directory ``base``; "" stays ""."""
    if not path or os.path.isabs(path):
        return path
    return os.path.join(base, path)


def named(document: dict, plural: str, singular: str, name: str):
    """The ``singular`` of the first ``plural`` entry called ``name`` ({} when it is not
    an object), or None when there is none."""
    for entry in document.get(plural) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(singular)
            return value if isinstance(value, dict) else {}
    return None
