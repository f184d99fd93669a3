"""
EndpointSlice (``discovery.platform.io/v1``): a subset of the endpoints that implement a
service.

Defaulting and validation are upstream's (``SetDefaults_EndpointPort``,
``pkg/apis/discovery/validation``); the generation moves as upstream's strategy moves
it (anything but metadata changed, or the labels).  A slice names its service in the
label ``SERVICE_NAME_LABEL`` (upstream's ``kubernetes.io/service-name``, with the
platform word as every identifier here, like ``platform.io/metadata.name``).
"""

from __future__ import annotations

from platformd.errors import Cause
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain, label_value, qualified_name
from platformd.model.schema import BOOLEAN, INT32, STRING, ListOf, MapOf, Prop, Struct
from platformd.registry.kinds import netaddr, presence
from platformd.registry.kinds.coreshapes import OBJECT_REFERENCE
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column

GROUP = "discovery.platform.io"
PREFIX = "io.platform.api.discovery.v1"
PROTO = "platform.api.discovery.v1."
#: The label naming a slice's Service, and the one naming who manages it.
SERVICE_NAME_LABEL = "platform.io/service-name"
MANAGED_BY_LABEL = "endpointslice.platform.io/managed-by"
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
MAX_ADDRESSES, MAX_PORTS, MAX_ENDPOINTS = 100, 20000, 1000
MAX_TOPOLOGY_LABELS, MAX_ZONE_HINTS, MAX_NODE_HINTS = 16, 8, 8


def _struct(name, props, doc) -> Struct:
    return Struct(f"{PREFIX}.{name}", props, doc=doc)


ENDPOINT_CONDITIONS = _struct("EndpointConditions", {
    "ready": Prop(BOOLEAN, "Whether this endpoint is ready to receive traffic."),
    "serving": Prop(BOOLEAN, "Whether this endpoint is able to receive traffic."),
    "terminating": Prop(BOOLEAN, "Whether this endpoint is terminating."),
}, "EndpointConditions represents the current condition of an endpoint.")

FOR_ZONE = _struct("ForZone", {"name": Prop(STRING, "The name of the zone.", required=True)},
                   "ForZone provides information about which zones should consume this "
                   "endpoint.")
FOR_NODE = _struct("ForNode", {"name": Prop(STRING, "The name of the node.", required=True)},
                   "ForNode provides information about which nodes should consume this "
                   "endpoint.")

ENDPOINT_HINTS = _struct("EndpointHints", {
    "forZones": Prop(ListOf(FOR_ZONE), "Zones this endpoint should be consumed by."),
    "forNodes": Prop(ListOf(FOR_NODE), "Nodes this endpoint should be consumed by."),
}, "EndpointHints provides hints describing how an endpoint should be consumed.")

ENDPOINT = _struct("Endpoint", {
    "addresses": Prop(ListOf(STRING, "set"), "The addresses of this endpoint (1 to 100).",
                      required=True),
    "conditions": Prop(ENDPOINT_CONDITIONS, "The current state of the endpoint."),
    "hostname": Prop(STRING, "The hostname of this endpoint."),
    "targetRef": Prop(OBJECT_REFERENCE, "A reference to a platform object that represents "
                      "this endpoint."),
    "deprecatedTopology": Prop(MapOf(STRING), "Deprecated topology information."),
    "nodeName": Prop(STRING, "The name of the Node hosting this endpoint."),
    "zone": Prop(STRING, "The name of the Zone this endpoint exists in."),
    "hints": Prop(ENDPOINT_HINTS, "Information about how an endpoint should be consumed."),
}, "Endpoint represents a single logical backend implementing a service.")

ENDPOINT_PORT = _struct("EndpointPort", {
    "name": Prop(STRING, "The name of this port."),
    "protocol": Prop(STRING, "TCP, UDP or SCTP; defaults to TCP."),
    "port": Prop(INT32, "The port number of the endpoint."),
    "appProtocol": Prop(STRING, "The application protocol for this port."),
}, "EndpointPort represents a Port used by an EndpointSlice.")


def _default(obj: dict) -> None:
    for port in obj.get("ports") or ():
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")
    for endpoint in obj.get("endpoints") or ():
        endpoint.setdefault("conditions", {})


def _prepare_for_create(obj: dict) -> None:
    obj.setdefault("metadata", {})["generation"] = 1


def _prepare_for_update(new: dict, old: dict) -> None:
    meta, old_meta = new.setdefault("metadata", {}), old.get("metadata") or {}
    generation = old_meta.get("generation") or 0
    _default(new)  # defaulting comes after this: compare like with like
    body = {k: v for k, v in new.items() if k not in ("metadata", "kind", "apiVersion")}
    old_body = {k: v for k, v in old.items() if k not in ("metadata", "kind", "apiVersion")}
    if body != old_body or (meta.get("labels") or {}) != (old_meta.get("labels") or {}):
        generation += 1
    meta["generation"] = generation


def _too_many(path: str, count: int, limit: int) -> Cause:
    return Cause("FieldValueTooMany", f"Too many: {count}: must have at most {limit} items",
                 path)


def _fqdn(path: str, name: str) -> list:
    """Upstream's ``IsFullyQualifiedDomainName``."""
    if not name:
        return [fe.required(path)]
    name = name.removesuffix(".")
    problems = dns_subdomain(name)
    if problems:
        return [fe.invalid(path, name, ",".join(problems))]
    labels = name.split(".")
    if len(labels) < 2:
        return [fe.invalid(path, name, "should be a domain with at least two segments "
                                       "separated by dots")]
    for label in labels:
        problems = dns_label(label)
        if problems:
            return [fe.invalid(path, label, ",".join(problems))]
    return []


def _validate_address(address_type: str, path: str, address: str) -> list:
    if address_type == "FQDN":
        return _fqdn(path, address)
    if address_type not in ("IPv4", "IPv6"):
        return []
    causes = netaddr.ip_causes(path, address)
    if causes:
        return causes
    ipv6 = netaddr.is_ipv6_string(address)
    if address_type == "IPv4" and ipv6:
        causes.append(fe.invalid(path.rsplit("[", 1)[0], address, "must be an IPv4 address"))
    if address_type == "IPv6" and not ipv6:
        causes.append(fe.invalid(path.rsplit("[", 1)[0], address, "must be an IPv6 address"))
    return causes + netaddr.non_special_ip(path, address)


def _validate_endpoints(obj: dict) -> list:
    endpoints = obj.get("endpoints") or ()
    if len(endpoints) > MAX_ENDPOINTS:
        return [_too_many("endpoints", len(endpoints), MAX_ENDPOINTS)]
    address_type = obj.get("addressType") or ""
    causes = []
    for i, endpoint in enumerate(endpoints):
        path = f"endpoints[{i}]"
        addresses = endpoint.get("addresses") or ()
        if not addresses:
            causes.append(fe.required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            causes.append(_too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            causes.extend(_validate_address(address_type, f"{path}.addresses[{j}]", address))
        if endpoint.get("nodeName") is not None:
            causes.extend(fe.invalid(f"{path}.nodeName", endpoint["nodeName"], p)
                          for p in dns_subdomain(endpoint["nodeName"]))
        topology = endpoint.get("deprecatedTopology") or {}
        if len(topology) > MAX_TOPOLOGY_LABELS:
            causes.append(_too_many(f"{path}.deprecatedTopology", len(topology),
                                    MAX_TOPOLOGY_LABELS))
        for key, value in topology.items():
            causes.extend(fe.invalid(f"{path}.deprecatedTopology", key, p)
                          for p in qualified_name(key))
            causes.extend(fe.invalid(f"{path}.deprecatedTopology", value, p)
                          for p in label_value(value))
        if endpoint.get("hostname") is not None:
            causes.extend(fe.invalid(f"{path}.hostname", endpoint["hostname"], p)
                          for p in dns_label(endpoint["hostname"]))
        if endpoint.get("hints") is not None:
            causes.extend(_validate_hints(endpoint["hints"], f"{path}.hints"))
    return causes


def _validate_hints(hints: dict, path: str) -> list:
    causes: list = []
    for field, limit, rule in (("forZones", MAX_ZONE_HINTS, label_value),
                               ("forNodes", MAX_NODE_HINTS, dns_subdomain)):
        entries = hints.get(field) or ()
        if len(entries) > limit:
            causes.append(_too_many(f"{path}.{field}", len(entries), limit))
            continue
        seen: set = set()
        for i, entry in enumerate(entries):
            name = entry.get("name") or ""
            name_path = f"{path}.{field}[{i}].name"
            if name in seen:
                causes.append(fe.duplicate(name_path, name))
            seen.add(name)
            causes.extend(fe.invalid(name_path, name, p) for p in rule(name))
    return causes


def _validate_ports(obj: dict) -> list:
    ports = obj.get("ports") or ()
    if len(ports) > MAX_PORTS:
        return [_too_many("ports", len(ports), MAX_PORTS)]
    causes: list = []
    names: set = set()
    for i, port in enumerate(ports):
        path = f"ports[{i}]"
        name = port.get("name") or ""
        if name:
            causes.extend(fe.invalid(f"{path}.name", name, p) for p in dns_label(name))
        if name in names:
            causes.append(fe.duplicate(f"{path}.name", name))
        names.add(name)
        causes.extend(netaddr.protocol_causes(f"{path}.protocol", port.get("protocol")))
        causes.extend(netaddr.app_protocol_causes(f"{path}.appProtocol", port))
    return causes


def _validate(obj: dict) -> list:
    """Upstream's ``ValidateEndpointSlice`` beyond metadata."""
    causes = []
    address_type = obj.get("addressType") or ""
    if not address_type:
        causes.append(fe.required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        causes.append(fe.not_supported("addressType", address_type, ADDRESS_TYPES))
    return causes + _validate_endpoints(obj) + _validate_ports(obj)


def _validate_update(new: dict, old: dict) -> list:
    if new.get("addressType") != old.get("addressType"):
        return [fe.invalid("addressType", new.get("addressType") or "", "field is immutable")]
    return []


def _listed(values: list, count: int) -> str:
    """Upstream's ``listWithMoreString``."""
    text = ",".join(values[:MAX_SHOWN])
    if count > MAX_SHOWN:
        return f"{text} + {count - MAX_SHOWN} more..."
    return text or "<unset>"


MAX_SHOWN = 3


def _ports(obj: dict, now) -> str:
    shown = []
    for port in obj.get("ports") or ():
        if port.get("port") is not None:
            shown.append(str(port["port"]))
        elif port.get("name") is not None:
            shown.append(port["name"])
        else:
            shown.append("*")
    return _listed(shown, len(shown))


def _endpoints(obj: dict, now) -> str:
    shown = [a for e in obj.get("endpoints") or () for a in e.get("addresses") or ()]
    return _listed(shown, len(shown))


COLUMNS = (
    NAME,
    Column("AddressType", "string", lambda obj, now: obj.get("addressType", ""),
           "addressType specifies the type of address carried by this EndpointSlice. All "
           "addresses in this slice must be the same type."),
    Column("Ports", "string", _ports, "ports specifies the list of network ports exposed "
           "by each endpoint in this slice."),
    Column("Endpoints", "string", _endpoints, "endpoints is a list of unique endpoints in "
           "this slice."),
    AGE,
)

KIND = ResourceType(
    group=GROUP, version="v1", kind="EndpointSlice", plural="endpointslices",
    singular="endpointslice", namespaced=True, fields={
        "addressType": Prop(STRING, "IPv4, IPv6 or FQDN: the type of every address of "
                            "the slice (immutable).", required=True),
        "endpoints": Prop(ListOf(ENDPOINT), "A list of unique endpoints in this slice.",
                          required=True),
        "ports": Prop(ListOf(ENDPOINT_PORT), "The network ports exposed by each endpoint."),
    }, doc="EndpointSlice represents a set of service endpoints.",
    name_rule=dns_subdomain, definition_prefix=PREFIX,
    # targetRef's ObjectReference is core's: its presence comes with the core kinds.
    presence=presence(PROTO, "EndpointSlice", {
        "EndpointSlice": "metadata addressType",
        "Endpoint": "conditions",
        "EndpointConditions": "",
        "EndpointHints": "",
        "EndpointPort": "",
        "ForZone": "name",
        "ForNode": "name",
    }),
    default=_default, validate=_validate, validate_update=_validate_update,
    prepare_for_create=_prepare_for_create, prepare_for_update=_prepare_for_update,
    columns=COLUMNS)
