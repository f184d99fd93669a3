"""
``--egress-selector-config-file``: the EgressSelectorConfiguration file (spec 2.5), read,
decoded and validated as upstream's ``egressselector.ReadEgressSelectorConfiguration``
and ``ValidateEgressSelectorConfiguration`` do it.

``load_egress_config(path)`` answers an ``EgressSelectorConfiguration`` whose selections
are keyed by their canonical name (``controlplane``, ``etcd``, ``cluster``); anything
wrong raises ``EgressConfigError`` with upstream's message: ``failed to read egress
selector config: ...`` (the file, strict decoding) or ``failed to validate egress
selector configuration: <field errors>``.  Upstream's v1beta1 conversion turns the
deprecated name ``master`` into ``controlplane`` before validation, so ``master`` and
``controlplane`` together are a duplicate.  Every field path is upstream's, which
reports each selection's problems under ``service.connection``.
"""

from __future__ import annotations

import os
from typing import Optional

import attrs
from twisted.logger import Logger

from platformd.files import configfile
from platformd.goformat import gotext
from platformd.model import fielderrors

log = Logger()

DIRECT, HTTP_CONNECT, GRPC = "Direct", "HTTPConnect", "GRPC"
CONTROLPLANE, ETCD, CLUSTER = "controlplane", "etcd", "cluster"
#: Sorted, as ``sets.String.List`` prints them.
NAMES = (CLUSTER, CONTROLPLANE, ETCD)

_TLS = configfile.Struct("TLSConfig", "v1beta1.TLSConfig", {
    "caBundle": "string", "clientKey": "string", "clientCert": "string",
    "tlsServerName": "string"})
_TRANSPORT = configfile.Struct("Transport", "v1beta1.Transport", {
    "tcp": configfile.Struct("TCPTransport", "v1beta1.TCPTransport",
                             {"url": "string", "tlsConfig": _TLS}),
    "uds": configfile.Struct("UDSTransport", "v1beta1.UDSTransport", {"udsName": "string"}),
})
_SELECTION = configfile.Struct("EgressSelection", "v1beta1.EgressSelection", {
    "name": "string",
    "connection": configfile.Struct("Connection", "v1beta1.Connection", {
        "proxyProtocol": "v1beta1.ProtocolType", "transport": _TRANSPORT}),
})
#: Upstream serves the kind as apiserver.k8s.io v1alpha1 and v1beta1; spec 2.5 names
#: apiserver.platform.io/v1beta1.
KIND = configfile.Kind("EgressSelectorConfiguration", frozenset({
    "apiserver.platform.io/v1beta1", "apiserver.platform.io/v1alpha1"}),
    configfile.Struct("EgressSelectorConfiguration", "v1beta1.EgressSelectorConfiguration",
                      {"egressSelections": [_SELECTION]}))


class EgressConfigError(Exception):
    """The file cannot be used; ``str`` says why in upstream's words."""


@attrs.frozen
class TLSConfig:
    ca_bundle: str = ""
    client_key: str = ""
    client_cert: str = ""
    tls_server_name: str = ""


@attrs.frozen
class TCPTransport:
    url: str
    tls: Optional[TLSConfig] = None


@attrs.frozen
class Transport:
    tcp: Optional[TCPTransport] = None
    uds: Optional[str] = None


@attrs.frozen
class Selection:
    name: str
    protocol: str
    transport: Optional[Transport] = None


@attrs.frozen
class EgressSelectorConfiguration:
    #: In the file's order, names canonical (lower case, ``master`` → ``controlplane``).
    selections: tuple

    def by_name(self) -> dict:
        return {s.name: s for s in self.selections}


def load_egress_config(path: str) -> EgressSelectorConfiguration:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise EgressConfigError(
            "failed to read egress selector config: unable to read egress selector "
            f"configuration from {gotext.go_quote(path)} "
            f"[{gotext.path_error('open', path, error)}]") from None
    return parse_egress_config(data)


def parse_egress_config(data: bytes) -> EgressSelectorConfiguration:
    try:
        _, document = configfile.decode(data, KIND)
    except configfile.DecodeError as error:
        raise EgressConfigError(f"failed to read egress selector config: {error}") from None
    config = EgressSelectorConfiguration(tuple(
        _selection(raw) for raw in document.get("egressSelections", ())))
    causes = validate(config)
    if causes:
        raise EgressConfigError("failed to validate egress selector configuration: "
                                + gotext.aggregate(f"{c.field}: {c.message}" for c in causes))
    return config


def _selection(raw: dict) -> Selection:
    name = raw.get("name", "")
    if name == "master":
        # v1beta1's conversion (Convert_v1beta1_EgressSelection_To_apiserver_...).
        log.warn('egress selection "master" is deprecated, use "controlplane"')
        name = CONTROLPLANE
    connection = raw.get("connection", {})
    transport = None
    if "transport" in connection:
        given = connection["transport"]
        tcp = None
        if "tcp" in given:
            tls = given["tcp"].get("tlsConfig")
            tcp = TCPTransport(given["tcp"].get("url", ""), None if tls is None else TLSConfig(
                tls.get("caBundle", ""), tls.get("clientKey", ""), tls.get("clientCert", ""),
                tls.get("tlsServerName", "")))
        uds = given["uds"].get("udsName", "") if "uds" in given else None
        transport = Transport(tcp, uds)
    return Selection(name, connection.get("proxyProtocol", ""), transport)


# -- validation: upstream's ValidateEgressSelectorConfiguration -------------------------

_PATH = "service.connection"


def validate(config: EgressSelectorConfiguration) -> list:
    causes: list = []
    for selection in config.selections:
        protocol = selection.protocol
        if protocol == DIRECT:
            if selection.transport is not None:
                causes.append(fielderrors.invalid(f"{_PATH}.transport", "direct",
                                                  "config must be absent for direct connect"))
        elif protocol == HTTP_CONNECT:
            causes.extend(_http_connect(selection.transport))
        elif protocol == GRPC:
            causes.extend(_grpc(selection.transport))
        else:
            causes.append(fielderrors.not_supported(f"{_PATH}.protocol", protocol,
                                                    (DIRECT, HTTP_CONNECT, GRPC)))
    seen: set = set()
    for index, selection in enumerate(config.selections):
        name = selection.name.lower()
        if name in seen:
            causes.append(fielderrors.duplicate(f"{_PATH}[{index}]", name))
            continue
        seen.add(name)
        if name not in NAMES:
            causes.append(fielderrors.not_supported(_PATH, name, NAMES))
    return causes


def _http_connect(transport: Optional[Transport]) -> list:
    if transport is None:
        return [fielderrors.required(f"{_PATH}.transport", "transport must be set for HTTPConnect")]
    if transport.tcp is not None and transport.uds is not None:
        return [fielderrors.invalid(f"{_PATH}.tcp", _go_tcp(transport.tcp),
                                    "TCP and UDS cannot both be set")]
    if transport.tcp is None and transport.uds is None:
        return [fielderrors.required(f"{_PATH}.tcp", "One of TCP or UDS must be set")]
    if transport.tcp is not None:
        return _tcp(transport.tcp)
    return _uds(transport.uds or "")


def _grpc(transport: Optional[Transport]) -> list:
    if transport is None:
        return [fielderrors.required(f"{_PATH}.transport", "transport must be set for GRPC")]
    if transport.uds is not None:
        return _uds(transport.uds)
    return [fielderrors.required(f"{_PATH}.uds", "UDS must be set with GRPC")]


def _uds(name: str) -> list:
    if not name:
        return [fielderrors.invalid(f"{_PATH}.udsName", "nil",
                                    "must be present for UDS connections")]
    return []


def _tcp(tcp: TCPTransport) -> list:
    if tcp.url.startswith("http://"):
        if tcp.tls is not None:
            return [fielderrors.invalid(f"{_PATH}.tlsConfig", "nil",
                                        "config must not be present when using HTTP")]
        return []
    if tcp.url.startswith("https://"):
        return _tls(tcp.tls)
    return [fielderrors.invalid(f"{_PATH}.url", tcp.url,
                                "supported connection protocols are http:// and https://")]


def _tls(tls: Optional[TLSConfig]) -> list:
    if tls is None:
        return [fielderrors.required(f"{_PATH}.tlsConfig",
                                     "TLSConfig must be present when using HTTPS")]
    causes = []
    if tls.ca_bundle and not os.path.exists(tls.ca_bundle):
        causes.append(fielderrors.invalid(f"{_PATH}.tlsConfig.caBundle", tls.ca_bundle,
                                          "TLS config ca bundle does not exist"))
    if not tls.client_cert:
        causes.append(fielderrors.invalid(f"{_PATH}.tlsConfig.clientCert", "nil",
                                          "Using TLS requires clientCert"))
    elif not os.path.exists(tls.client_cert):
        causes.append(fielderrors.invalid(f"{_PATH}.tlsConfig.clientCert", tls.client_cert,
                                          "TLS client cert does not exist"))
    if not tls.client_key:
        # "requires requires": upstream's words.
        causes.append(fielderrors.invalid(f"{_PATH}.tlsConfig.clientKey", "nil",
                                          "Using TLS requires requires clientKey"))
    elif not os.path.exists(tls.client_key):
        causes.append(fielderrors.invalid(f"{_PATH}.tlsConfig.clientKey", tls.client_key,
                                          "TLS client key does not exist"))
    return causes


def _go_tcp(tcp: TCPTransport) -> fielderrors.GoValue:
    """The TCP transport as Go's ``%#v`` prints the dereferenced struct (a set TLSConfig
    pointer's address, which Go prints, is left out)."""
    tls = "(*apiserver.TLSConfig)(nil)" if tcp.tls is None else "(*apiserver.TLSConfig)(...)"
    return fielderrors.GoValue(f"apiserver.TCPTransport{{URL:{gotext.go_quote(tcp.url)}, TLSConfig:{tls}}}")
