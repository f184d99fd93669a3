"""``--egress-selector-config-file``: decoding and every rule of upstream's validation."""

from __future__ import annotations

import os

import yaml
from twisted.trial.unittest import SynchronousTestCase

from platformd.egress.config import (
    EgressConfigError, Selection, TCPTransport, TLSConfig, Transport, load_egress_config,
    parse_egress_config,
)

V1BETA1 = "apiserver.platform.io/v1beta1"
PREFIX = "failed to validate egress selector configuration: "


def document(*selections, api_version=V1BETA1) -> bytes:
    return yaml.safe_dump({"apiVersion": api_version, "kind": "EgressSelectorConfiguration",
                           "egressSelections": list(selections)}).encode()


def selection(name="cluster", protocol="Direct", **transport) -> dict:
    connection: dict = {"proxyProtocol": protocol}
    if transport:
        connection["transport"] = transport
    return {"name": name, "connection": connection}


class ConfigTests(SynchronousTestCase):
    def error(self, data: bytes) -> str:
        with self.assertRaises(EgressConfigError) as caught:
            parse_egress_config(data)
        return str(caught.exception)

    def files(self) -> dict:
        directory = self.mktemp()
        os.makedirs(directory)
        paths = {}
        for name in ("ca.crt", "client.crt", "client.key"):
            paths[name] = os.path.join(directory, name)
            open(paths[name], "w").close()
        return paths

    def test_every_kind_of_selection(self):
        files = self.files()
        config = parse_egress_config(document(
            selection("controlplane", "HTTPConnect", uds={"udsName": "/run/proxy.sock"}),
            selection("Cluster", "HTTPConnect", tcp={
                "url": "https://proxy:8131", "tlsConfig": {
                    "caBundle": files["ca.crt"], "clientCert": files["client.crt"],
                    "clientKey": files["client.key"], "tlsServerName": "proxy.example"}}),
            selection("etcd", "GRPC", uds={"udsName": "/run/konnectivity.sock"})))
        self.assertEqual(config.selections, (
            Selection("controlplane", "HTTPConnect", Transport(None, "/run/proxy.sock")),
            Selection("Cluster", "HTTPConnect", Transport(TCPTransport(
                "https://proxy:8131", TLSConfig(files["ca.crt"], files["client.key"],
                                                files["client.crt"], "proxy.example")))),
            Selection("etcd", "GRPC", Transport(None, "/run/konnectivity.sock"))))

    def test_master_is_controlplane(self):
        """v1beta1's conversion renames the deprecated master, before validation."""
        config = parse_egress_config(document(selection("master")))
        self.assertEqual(config.selections, (Selection("controlplane", "Direct"),))
        self.assertEqual(self.error(document(selection("master"), selection("controlplane"))),
                         PREFIX + 'service.connection[1]: Duplicate value: "controlplane"')

    def test_no_selections(self):
        """No egressSelections is accepted, as upstream's ValidateEgressSelectorConfiguration
        checks only the selections there are (every connection then direct)."""
        for data in (document(), b"apiVersion: apiserver.platform.io/v1beta1\n"
                                 b"kind: EgressSelectorConfiguration\n"):
            self.assertEqual(parse_egress_config(data).by_name(), {})

    def test_v1alpha1_accepted(self):
        config = parse_egress_config(document(selection(), api_version=
                                              "apiserver.platform.io/v1alpha1"))
        self.assertEqual(config.by_name(), {"cluster": Selection("cluster", "Direct")})

    def test_names(self):
        self.assertEqual(
            self.error(document(selection("nodes"), selection("etcd"), selection("ETCD"))),
            PREFIX + '[service.connection: Unsupported value: "nodes": supported values: '
            '"cluster", "controlplane", "etcd", service.connection[2]: Duplicate value: '
            '"etcd"]')

    def test_protocols(self):
        self.assertEqual(
            self.error(document(selection(protocol="SOCKS"))),
            PREFIX + 'service.connection.protocol: Unsupported value: "SOCKS": supported '
            'values: "Direct", "HTTPConnect", "GRPC"')
        self.assertEqual(
            self.error(document(selection(protocol="Direct", uds={"udsName": "/x"}))),
            PREFIX + 'service.connection.transport: Invalid value: "direct": config must be '
            "absent for direct connect")

    def test_http_connect_transport(self):
        cases = [
            ({}, "service.connection.transport: Required value: transport must be set for "
                 "HTTPConnect"),
            ({"uds": {"udsName": "/x"}, "tcp": {"url": "http://p:1"}},
             'service.connection.tcp: Invalid value: apiserver.TCPTransport{URL:"http://p:1", '
             "TLSConfig:(*apiserver.TLSConfig)(nil)}: TCP and UDS cannot both be set"),
            ({"uds": {}}, 'service.connection.udsName: Invalid value: "nil": must be present '
                          "for UDS connections"),
            ({"tcp": {"url": "ftp://p:1"}}, 'service.connection.url: Invalid value: '
             '"ftp://p:1": supported connection protocols are http:// and https://'),
            ({"tcp": {"url": "http://p:1", "tlsConfig": {"caBundle": "/ca"}}},
             'service.connection.tlsConfig: Invalid value: "nil": config must not be present '
             "when using HTTP"),
            ({"tcp": {"url": "https://p:1"}}, "service.connection.tlsConfig: Required value: "
             "TLSConfig must be present when using HTTPS"),
            ({"tcp": {"url": "https://p:1", "tlsConfig": {"caBundle": "/absent/ca"}}},
             '[service.connection.tlsConfig.caBundle: Invalid value: "/absent/ca": TLS config '
             'ca bundle does not exist, service.connection.tlsConfig.clientCert: Invalid '
             'value: "nil": Using TLS requires clientCert, '
             'service.connection.tlsConfig.clientKey: Invalid value: "nil": Using TLS '
             "requires requires clientKey]"),
            ({"tcp": {"url": "https://p:1", "tlsConfig": {"clientCert": "/absent/c",
                                                          "clientKey": "/absent/k"}}},
             '[service.connection.tlsConfig.clientCert: Invalid value: "/absent/c": TLS '
             'client cert does not exist, service.connection.tlsConfig.clientKey: Invalid '
             'value: "/absent/k": TLS client key does not exist]'),
        ]
        for transport, message in cases:
            with self.subTest(transport=transport):
                data = document(selection(protocol="HTTPConnect", **transport)) if transport \
                    else document({"name": "cluster", "connection": {
                        "proxyProtocol": "HTTPConnect"}})
                self.assertEqual(self.error(data), PREFIX + message)

    def test_empty_transport(self):
        self.assertEqual(
            self.error(document({"name": "etcd", "connection": {
                "proxyProtocol": "HTTPConnect", "transport": {}}})),
            PREFIX + "service.connection.tcp: Required value: One of TCP or UDS must be set")

    def test_grpc_transport(self):
        self.assertEqual(
            self.error(document({"name": "etcd", "connection": {"proxyProtocol": "GRPC"}})),
            PREFIX + "service.connection.transport: Required value: transport must be set "
            "for GRPC")
        self.assertEqual(
            self.error(document(selection("etcd", "GRPC", tcp={"url": "http://p:1"}))),
            PREFIX + "service.connection.uds: Required value: UDS must be set with GRPC")

    def test_decoding(self):
        self.assertEqual(
            self.error(document(selection(protocol=3))),
            "failed to read egress selector config: json: cannot unmarshal number into Go "
            "struct field Connection.egressSelections.connection.proxyProtocol of type "
            "v1beta1.ProtocolType")
        self.assertEqual(
            self.error(document({"name": "etcd", "connection": {"proxyProtocol": "Direct"},
                                 "via": "x"})),
            'failed to read egress selector config: strict decoding error: unknown field '
            '"egressSelections[0].via"')
        self.assertEqual(
            self.error(document(api_version="apiserver.config.platform.io/v1")),
            'failed to read egress selector config: no kind "EgressSelectorConfiguration" is '
            'registered for version "apiserver.config.platform.io/v1" in scheme')

    def test_missing_file(self):
        path = os.path.join(os.path.abspath(self.mktemp()), "egress.yaml")
        with self.assertRaises(EgressConfigError) as caught:
            load_egress_config(path)
        self.assertEqual(str(caught.exception),
                         "failed to read egress selector config: unable to read egress "
                         f'selector configuration from "{path}" [open {path}: no such file or '
                         "directory]")
