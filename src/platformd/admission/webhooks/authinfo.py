"""
Which kubeconfig user a webhook is called as: upstream's
``defaultAuthenticationInfoResolver`` (``k8s.io/apiserver/pkg/util/webhook/authentication.go``)
over the ``kubeConfigFile`` of the plugin's ``WebhookAdmissionConfiguration``
(``config.py``).  Only ``users`` are read, by name: the cluster a webhook is reached at
and trusted through is its own ``clientConfig`` (``url`` or ``service``, ``caBundle``),
never the kubeconfig's ``clusters``.

A webhook's *target* is its ``host:port``: a URL's host as written with ``:443`` added
when it has no port (Go's ``JoinHostPort``), a service's ``<name>.<namespace>.svc:<port>``.
The user chosen, first match wins:

1. the user named exactly the target (``hooks.example.com:8443``);
2. ``*.`` and the target less its first labels, shortest prefix first
   (``*.example.com:8443``, then ``*.com:8443``): the port stays;
3. for a target on port 443 only, 1 and 2 again without the port (``hooks.example.com``,
   ``*.example.com``; ``name.namespace.svc``, ``*.svc``);
4. the user named ``*``;
5. the user of the ``current-context``;
6. none: the call carries no credentials.

Upstream's two special cases for ``kubernetes.default.svc:443`` (the API server calling
itself through its loopback client, or its in-cluster configuration) have nothing to
stand for here and are left out.  The kubeconfig is read once, when the plugin is made
(at startup; upstream reads it then too, and never again); a user's credential files are
read when a webhook is first called for its host (``credentials.py``), and kept for
that host while they are in use, as upstream's client cache keeps a webhook's client.
A user setting fields not acted upon here (``exec``, impersonation) is logged once at
startup: its other credentials are used.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from twisted.logger import Logger

from platformd.files import kubeconfig
from platformd.admission.config import AdmissionConfigError
from platformd.admission.webhooks.credentials import ANONYMOUS, credentials

log = Logger()

#: Upstream's client cache holds 200 clients.
MAX_CACHED = 200


class AuthInfoResolver:
    """``credentials(hook)``: the ``credentials.Credentials`` a webhook is called with
    (raising ``credentials.CredentialsError``)."""

    def __init__(self, config: kubeconfig.Kubeconfig, clock):
        self.config = config
        self.clock = clock
        #: target -> Credentials (made without error).
        self._made: dict = {}

    @classmethod
    def load(cls, path: str, clock) -> "AuthInfoResolver":
        """Over the kubeconfig at ``path`` ("": none, every call anonymous);
        ``AdmissionConfigError`` with client-go's words when it cannot be read."""
        if not path:
            return cls(kubeconfig.Kubeconfig(), clock)
        try:
            config = kubeconfig.load(path)
        except kubeconfig.KubeconfigError as error:
            raise AdmissionConfigError(str(error)) from None
        for name, user in config.users.items():
            if user.unsupported:
                log.warn("webhook admission kubeconfig {path}: user {user!r} sets "
                         "{fields}, not supported here: its webhooks are called without "
                         "them", path=path, user=name, fields=", ".join(user.unsupported))
        return cls(config, clock)

    def credentials(self, hook):
        if not self.config.users:
            return ANONYMOUS
        key = target(hook)
        made = self._made.get(key)
        if made is None:
            made = credentials(self.user_for(key), self.clock)
            if len(self._made) >= MAX_CACHED:
                self._made.clear()
            self._made[key] = made
        return made

    def user_for(self, target: str):
        """The ``kubeconfig.User`` for ``target`` (``host:port``), or None."""
        users = self.config.users
        found = _exact_or_wildcard(users, target)
        if found is None:
            split = _split_host_port(target)
            if split is not None and split[1] == "443":
                found = _exact_or_wildcard(users, split[0])
        if found is None:
            found = users.get("*")
        if found is None:
            found = self.config.current_user()
        return found


def target(hook) -> str:
    """The ``host:port`` upstream resolves a webhook's user by."""
    if hook.service:
        name = f"{hook.service.get('name', '')}.{hook.service.get('namespace', '')}.svc"
        return _join_host_port(name, str(hook.service.get("port") or 443))
    parts = urlsplit(hook.url)
    host = parts.netloc.rpartition("@")[2]
    try:
        has_port = parts.port is not None
    except ValueError:
        has_port = False
    return host if has_port else _join_host_port(host, "443")


def _exact_or_wildcard(users: dict, name: str):
    if name in users:
        return users[name]
    labels = name.split(".")
    for start in range(1, len(labels)):
        wildcard = "*." + ".".join(labels[start:])
        if wildcard in users:
            return users[wildcard]
    return None


def _join_host_port(host: str, port: str) -> str:
    """Go's ``net.JoinHostPort``: a host with a colon is bracketed."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split_host_port(address: str):
    """Go's ``net.SplitHostPort``: (host, port), or None where it errs."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0 or address[end + 1:end + 2] != ":":
            return None
        host, port = address[1:end], address[end + 2:]
        if "[" in host or "]" in host:
            return None
    else:
        host, colon, port = address.rpartition(":")
        if not colon or ":" in host or "[" in host or "]" in host:
            return None
    if "[" in port or "]" in port:
        return None
    return host, port
