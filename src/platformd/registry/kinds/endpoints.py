"""
Endpoints (core ``v1``): the addresses and ports that implement a service.

Defaulting and validation are upstream's (``SetDefaults_EndpointPort``,
``ValidateEndpoints``: causes under ``subsets[i]``, no ``spec``).
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain
from platformd.model.schema import INT32, STRING, ListOf, Prop
from platformd.registry.kinds import netaddr
from platformd.registry.kinds.coreshapes import (
    OBJECT_REFERENCE, OBJECT_REFERENCE_PRESENCE, core_kind, struct,
)
from platformd.registry.tables import AGE, NAME, Column


ENDPOINT_ADDRESS = struct("EndpointAddress", {
    "ip": Prop(STRING, "The IP of this endpoint.", required=True),
    "hostname": Prop(STRING, "The Hostname of this endpoint."),
    "nodeName": Prop(STRING, "The node hosting this endpoint."),
    "targetRef": Prop(OBJECT_REFERENCE, "Reference to object providing the endpoint."),
}, "EndpointAddress is a tuple that describes single IP address.")

ENDPOINT_PORT = struct("EndpointPort", {
    "name": Prop(STRING, "The name of this port; required when there is more than one."),
    "port": Prop(INT32, "The port number of the endpoint.", required=True),
    "protocol": Prop(STRING, "TCP, UDP or SCTP; defaults to TCP."),
    "appProtocol": Prop(STRING, "The application protocol for this port."),
}, "EndpointPort is a tuple that describes a single port.")

ENDPOINT_SUBSET = struct("EndpointSubset", {
    "addresses": Prop(ListOf(ENDPOINT_ADDRESS), "IP addresses which offer the related "
                      "ports that are marked as ready."),
    "notReadyAddresses": Prop(ListOf(ENDPOINT_ADDRESS), "IP addresses which offer the "
                              "related ports but are not currently marked as ready."),
    "ports": Prop(ListOf(ENDPOINT_PORT), "Port numbers available on the related IP "
                  "addresses."),
}, "EndpointSubset is a group of addresses with a common set of ports.")


def _default(obj: dict) -> None:
    for subset in obj.get("subsets") or ():
        for port in subset.get("ports") or ():
            if not port.get("protocol"):
                port["protocol"] = "TCP"


def node_name_problems(name: str) -> list:
    """Upstream's ``ValidateNodeName`` (a DNS subdomain)."""
    return dns_subdomain(name)


def _validate_address(address: dict, path: str) -> list:
    ip = address.get("ip") or ""
    causes = netaddr.ip_causes(f"{path}.ip", ip)
    if address.get("hostname"):
        causes.extend(fe.invalid(f"{path}.hostname", address["hostname"], p)
                      for p in dns_label(address["hostname"]))
    if address.get("nodeName") is not None:
        causes.extend(fe.invalid(f"{path}.nodeName", address["nodeName"], p)
                      for p in node_name_problems(address["nodeName"]))
    causes.extend(netaddr.non_special_ip(f"{path}.ip", ip))
    return causes


def _validate_port(port: dict, require_name: bool, path: str) -> list:
    causes = []
    name = port.get("name") or ""
    if require_name and not name:
        causes.append(fe.required(f"{path}.name"))
    elif name:
        causes.extend(fe.invalid(f"{path}.name", name, p) for p in dns_label(name))
    causes.extend(netaddr.port_number_causes(f"{path}.port", port.get("port", 0)))
    causes.extend(netaddr.protocol_causes(f"{path}.protocol", port.get("protocol") or None))
    causes.extend(netaddr.app_protocol_causes(f"{path}.appProtocol", port))
    return causes


def _validate(obj: dict) -> list:
    """Upstream's ``validateEndpointSubsets``."""
    causes = []
    for i, subset in enumerate(obj.get("subsets") or ()):
        path = f"subsets[{i}]"
        addresses = subset.get("addresses") or ()
        not_ready = subset.get("notReadyAddresses") or ()
        if not addresses and not not_ready:
            causes.append(fe.required(path, "must specify `addresses` or `notReadyAddresses`"))
        for j, address in enumerate(addresses):
            causes.extend(_validate_address(address, f"{path}.addresses[{j}]"))
        for j, address in enumerate(not_ready):
            causes.extend(_validate_address(address, f"{path}.notReadyAddresses[{j}]"))
        ports = subset.get("ports") or ()
        for j, port in enumerate(ports):
            causes.extend(_validate_port(port, len(ports) > 1, f"{path}.ports[{j}]"))
    return causes


MAX_SHOWN = 3


def format_endpoints(obj: dict, now=None) -> str:
    """Upstream's ``formatEndpoints``: up to three ``ip:port`` (or ips of a port-less
    subset), then ``+ N more...``; ``<none>`` without subsets."""
    subsets = obj.get("subsets") or ()
    if not subsets:
        return "<none>"
    shown: list = []
    more = False
    count = 0
    for subset in subsets:
        addresses = subset.get("addresses") or ()
        ports = subset.get("ports") or ()
        if not ports:
            count += len(addresses)
            for address in addresses:
                if len(shown) == MAX_SHOWN:
                    more = True
                    break
                shown.append(address.get("ip", ""))
            continue
        for port in ports:
            count += len(addresses)
            for address in addresses:
                if len(shown) == MAX_SHOWN:
                    more = True
                    break
                ip = address.get("ip", "")
                host = f"[{ip}]" if ":" in ip else ip
                shown.append(f"{host}:{port.get('port', 0)}")
    text = ",".join(shown)
    return f"{text} + {count - MAX_SHOWN} more..." if more else text


COLUMNS = (
    NAME,
    Column("Endpoints", "string", format_endpoints,
           "Endpoints is the list of endpoints, IP addresses which offer the related ports."),
    AGE,
)

KIND = core_kind("Endpoints", "endpoints", True, {
    "subsets": Prop(ListOf(ENDPOINT_SUBSET), "The sets of addresses and ports that comprise "
                    "a service."),
}, "Endpoints is a collection of endpoints that implement the actual service.", {
    "Endpoints": "metadata",
    "EndpointSubset": "",
    "EndpointAddress": "ip hostname?",
    "EndpointPort": "name? port protocol?",
    **OBJECT_REFERENCE_PRESENCE,
}, short_names=("ep",), default=_default, validate=_validate, columns=COLUMNS,
    # KEP-4974: every request to v1 Endpoints warns, since 1.33.
    warning="v1 Endpoints is deprecated in v1.33+; use discovery.platform.io/v1 "
            "EndpointSlice")
