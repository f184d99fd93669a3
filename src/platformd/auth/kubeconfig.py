"""
The connection a webhook's kubeconfig file describes, and the TLS client it makes.

Only what a webhook client needs is read (client-go's meaning of each field): the
``current-context``'s cluster (``server``, ``certificate-authority`` or
``certificate-authority-data``, ``tls-server-name``) and user (``client-certificate`` /
``client-key`` or their ``-data`` forms, ``token`` or ``tokenFile``).  Relative file paths
are relative to the kubeconfig's directory, as client-go resolves them
(``platformd.files.kubeconfig.local_path``, shared with the admission webhooks' reader of every
user).  Every file is read here, once: a connection holds bytes, and making requests
touches no disk.
"""

from __future__ import annotations

import base64
import binascii
import os
from urllib.parse import urlsplit

import attrs
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.internet import ssl
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from platformd.goformat.gotext import os_error
from platformd.files.kubeconfig import local_path, named

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KubeconfigError(Exception):
    """The kubeconfig cannot be used; ``str`` says why in one line."""


@attrs.frozen
class Connection:
    server: str
    ca_pem: bytes = b""
    client_cert_pem: bytes = b""
    client_key_pem: bytes = b""
    token: str = ""
    server_name: str = ""

    def tls_policy(self) -> "ClientTLSPolicy":
        return ClientTLSPolicy(self)


def load_kubeconfig(path: str) -> Connection:
    """The connection of ``path``'s current context; ``KubeconfigError`` naming the problem."""
    try:
        with open(path, "rb") as f:
            document = yaml.load(f.read(), Loader=_Loader)
    except OSError as error:
        raise KubeconfigError(f"error loading {path}: {os_error(error)}") from None
    except yaml.YAMLError as error:
        raise KubeconfigError(f"error loading {path}: {_one_line(error)}") from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"error loading {path}: not a kubeconfig (a mapping)")
    base = os.path.dirname(os.path.abspath(path))
    problems: list = []
    context_name = document.get("current-context") or ""
    if not context_name:
        raise KubeconfigError(f"invalid configuration in {path}: no configuration has been "
                              "provided (current-context is not set)")
    context = named(document, "contexts", "context", context_name)
    if context is None:
        raise KubeconfigError(f"invalid configuration in {path}: context was not found for "
                              f"specified context: {context_name}")
    cluster = named(document, "clusters", "cluster", context.get("cluster") or "")
    if cluster is None:
        problems.append(f"cluster {context.get('cluster')!r} not found for context "
                        f"{context_name!r}")
        cluster = {}
    user = named(document, "users", "user", context.get("user") or "") or {}
    server = cluster.get("server") or ""
    if not server:
        problems.append("cluster has no server defined")
    elif urlsplit(server).scheme not in ("https", "http"):
        problems.append(f"server {server!r} is not an http(s) URL")
    read = _Reader(base, problems)
    ca = read.pem(cluster, "certificate-authority", "certificate-authority-data")
    if ca:
        try:
            x509.load_pem_x509_certificates(ca)
        except ValueError:
            problems.append("certificate-authority holds no PEM certificate")
    cert = read.pem(user, "client-certificate", "client-certificate-data")
    key = read.pem(user, "client-key", "client-key-data")
    if bool(cert) != bool(key):
        problems.append("client-certificate and client-key must be given together")
    token = user.get("token") or ""
    if not token and user.get("tokenFile"):
        token = read.file(user["tokenFile"], "tokenFile").decode("utf-8", "replace").strip()
    if problems:
        raise KubeconfigError(f"invalid configuration in {path}: " + ", ".join(problems))
    return Connection(server, ca, cert, key, token, cluster.get("tls-server-name") or "")


@attrs.define
class _Reader:
    base: str
    problems: list

    def file(self, path: str, what: str) -> bytes:
        full = local_path(self.base, path)
        try:
            with open(full, "rb") as f:
                return f.read()
        except OSError as error:
            self.problems.append(f"unable to read {what} {full!r}: {os_error(error)}")
            return b""

    def pem(self, section: dict, file_key: str, data_key: str) -> bytes:
        if section.get(data_key):
            try:
                return base64.b64decode(section[data_key], validate=True)
            except (binascii.Error, ValueError):
                self.problems.append(f"{data_key} is not valid base64")
                return b""
        if section.get(file_key):
            return self.file(section[file_key], file_key)
        return b""


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


@implementer(IPolicyForHTTPS)
class ClientTLSPolicy:
    """TLS for ``twisted.web.client.Agent``: the kubeconfig's CA (else the system's), its
    client certificate, and ``tls-server-name`` when set."""

    def __init__(self, connection: Connection):
        if connection.ca_pem:
            roots = [ssl.Certificate.loadPEM(c.public_bytes(Encoding.PEM))
                     for c in x509.load_pem_x509_certificates(connection.ca_pem)]
            self._trust = ssl.trustRootFromCertificates(roots)
        else:
            self._trust = ssl.platformTrust()
        self._client = None
        if connection.client_cert_pem:
            self._client = ssl.PrivateCertificate.loadPEM(
                connection.client_cert_pem + b"\n" + connection.client_key_pem)
        self._server_name = connection.server_name

    def creatorForNetloc(self, hostname: bytes, port: int):
        name = self._server_name or hostname.decode("ascii")
        return ssl.optionsForClientTLS(name, trustRoot=self._trust,
                                       clientCertificate=self._client)
