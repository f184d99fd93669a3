"""
Service (core ``v1``): a named set of ports in front of the pods a selector picks, with
an address from the cluster's service range.

Defaulting is upstream's ``SetDefaults_Service``, the create/update preparation its
strategy's (``NormalizeClusterIPs``, ``dropTypeDependentFields``), validation its
``ValidateService``/``ValidateServiceUpdate``/``ValidateServiceStatusUpdate``.  What
depends on the server's flags (IP families, cluster IPs, node ports) is decided by the
allocator the services' store holds (``registry/serviceallocation.py``), between
defaulting and validation, as upstream's ``beginCreate``/``beginUpdate`` hooks.
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain, label_value, qualified_name
import re

from platformd.model.schema import BOOLEAN, INT32, INT_OR_STRING, STRING, ListOf, MapOf, Prop
from platformd.registry.kinds import netaddr
from platformd.registry.kinds.coreshapes import core_kind, struct
from platformd.registry.kinds.validatingadmissionpolicyshapes import CONDITION
from platformd.registry.tables import AGE, NAME, NAME_DOC, AGE_DOC, Column

CLUSTER_IP = "ClusterIP"
NODE_PORT = "NodePort"
LOAD_BALANCER = "LoadBalancer"
EXTERNAL_NAME = "ExternalName"
NONE = "None"
SINGLE_STACK, PREFER_DUAL_STACK, REQUIRE_DUAL_STACK = (
    "SingleStack", "PreferDualStack", "RequireDualStack")
#: Upstream's ``sets.List`` of each supported set (sorted).
SERVICE_TYPES = (CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT)
AFFINITIES = ("ClientIP", "None")
FAMILIES = ("IPv4", "IPv6")
FAMILY_POLICIES = (PREFER_DUAL_STACK, REQUIRE_DUAL_STACK, SINGLE_STACK)
TRAFFIC_POLICIES = ("Cluster", "Local")
#: ``core.DefaultClientIPServiceAffinitySeconds`` and the most allowed.
DEFAULT_AFFINITY_SECONDS = 10800
MAX_AFFINITY_SECONDS = 86400

SERVICE_PORT = struct("ServicePort", {
    "name": Prop(STRING, "The name of this port within the service (a DNS label); "
                 "required when there is more than one port."),
    "protocol": Prop(STRING, "TCP, UDP or SCTP; defaults to TCP."),
    "appProtocol": Prop(STRING, "The application protocol of this port."),
    "port": Prop(INT32, "The port exposed by this service.", required=True),
    "targetPort": Prop(INT_OR_STRING, "Number or name of the port on the pods; defaults "
                       "to port."),
    "nodePort": Prop(INT32, "The port on each node for NodePort and LoadBalancer "
                     "services; allocated unless given."),
}, "ServicePort contains information on service's port.")

CLIENT_IP_CONFIG = struct("ClientIPConfig", {
    "timeoutSeconds": Prop(INT32, "Seconds of ClientIP affinity (0 < value <= 86400; "
                           "default 10800)."),
}, "ClientIPConfig represents the configurations of Client IP based session affinity.")

SESSION_AFFINITY_CONFIG = struct("SessionAffinityConfig", {
    "clientIP": Prop(CLIENT_IP_CONFIG, "The configurations of ClientIP based session "
                     "affinity."),
}, "SessionAffinityConfig represents the configurations of session affinity.")

SERVICE_SPEC = struct("ServiceSpec", {
    "ports": Prop(ListOf(SERVICE_PORT, "map", ("port", "protocol"), "merge", "port"),
                  "The list of ports that are exposed by this service."),
    "selector": Prop(MapOf(STRING, atomic=True), "Route service traffic to pods with "
                     "label keys and values matching this selector."),
    "clusterIP": Prop(STRING, "The IP address of the service, allocated from the "
                      "service range unless given; None: headless."),
    "clusterIPs": Prop(ListOf(STRING), "The IP addresses of the service, one per IP "
                       "family; clusterIPs[0] is clusterIP."),
    "type": Prop(STRING, "ClusterIP (default), NodePort, LoadBalancer or ExternalName."),
    "externalIPs": Prop(ListOf(STRING), "IP addresses for which nodes also accept "
                        "traffic for this service."),
    "sessionAffinity": Prop(STRING, "ClientIP or None (default)."),
    "loadBalancerIP": Prop(STRING, "Deprecated: the load balancer's IP."),
    "loadBalancerSourceRanges": Prop(ListOf(STRING), "Client CIDRs a load balancer "
                                     "admits."),
    "externalName": Prop(STRING, "The DNS name an ExternalName service aliases."),
    "externalTrafficPolicy": Prop(STRING, "Cluster or Local: how external traffic is "
                                  "routed."),
    "healthCheckNodePort": Prop(INT32, "The health check node port of a Local "
                                "LoadBalancer service."),
    "publishNotReadyAddresses": Prop(BOOLEAN, "Whether endpoints of unready pods are "
                                     "published."),
    "sessionAffinityConfig": Prop(SESSION_AFFINITY_CONFIG, "The configurations of "
                                  "session affinity."),
    "ipFamilies": Prop(ListOf(STRING), "IPv4 and/or IPv6: the families of clusterIPs."),
    "ipFamilyPolicy": Prop(STRING, "SingleStack (default), PreferDualStack or "
                           "RequireDualStack."),
    "allocateLoadBalancerNodePorts": Prop(BOOLEAN, "Whether a LoadBalancer service gets "
                                          "node ports (default true)."),
    "loadBalancerClass": Prop(STRING, "The class of load balancer implementation."),
    "internalTrafficPolicy": Prop(STRING, "Cluster or Local: how in-cluster traffic is "
                                  "routed."),
    "trafficDistribution": Prop(STRING, "How traffic is distributed to endpoints."),
}, "ServiceSpec describes the attributes that a user creates on a service.")

PORT_STATUS = struct("PortStatus", {
    "port": Prop(INT32, "The port number of the service port.", required=True),
    "protocol": Prop(STRING, "TCP, UDP or SCTP.", required=True),
    "error": Prop(STRING, "Why the port is in error, CamelCase."),
}, "PortStatus represents the error condition of a service port.")

LOAD_BALANCER_INGRESS = struct("LoadBalancerIngress", {
    "ip": Prop(STRING, "IP-based load-balancer ingress point."),
    "hostname": Prop(STRING, "DNS-based load-balancer ingress point."),
    "ipMode": Prop(STRING, "VIP or Proxy."),
    "ports": Prop(ListOf(PORT_STATUS), "The service ports' status."),
}, "LoadBalancerIngress represents the status of a load-balancer ingress point.")

LOAD_BALANCER_STATUS = struct("LoadBalancerStatus", {
    "ingress": Prop(ListOf(LOAD_BALANCER_INGRESS), "The load-balancer's ingress points."),
}, "LoadBalancerStatus represents the status of a load-balancer.")

SERVICE_STATUS = struct("ServiceStatus", {
    "loadBalancer": Prop(LOAD_BALANCER_STATUS, "The current status of the load-balancer, "
                         "if one is present."),
    "conditions": Prop(ListOf(CONDITION, "map", ("type",), "merge", "type"),
                       "Current service state."),
}, "ServiceStatus represents the current status of a service.")


_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_RE = re.compile(_DNS1035 + r"\Z")


def dns1035_label(name: str) -> list:
    """Upstream's ``NameIsDNS1035Label`` (``ValidateServiceName``)."""
    problems = []
    if len(name) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1035_RE.match(name):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character "
            f"(e.g. 'my-name',  or 'abc-123', regex used for validation is '{_DNS1035}')")
    return problems


# -- defaulting ---------------------------------------------------------------------------

def externally_accessible(spec: dict) -> bool:
    """Upstream's ``service.ExternallyAccessible``."""
    kind = spec.get("type")
    return kind in (LOAD_BALANCER, NODE_PORT) or (
        kind == CLUSTER_IP and bool(spec.get("externalIPs")))


def _default(obj: dict) -> None:
    """Upstream's ``SetDefaults_Service``."""
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    if spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig") or {}
        if (config.get("clientIP") or {}).get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {
                "clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_SECONDS}}
    if not spec.get("type"):
        spec["type"] = CLUSTER_IP
    for port in spec.get("ports") or ():
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and spec["type"] in (
            NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == LOAD_BALANCER:
        spec.setdefault("allocateLoadBalancerNodePorts", True)
        for ingress in ((obj.get("status") or {}).get("loadBalancer") or {}).get(
                "ingress") or ():
            if ingress.get("ip") and ingress.get("ipMode") is None:
                ingress["ipMode"] = "VIP"


# -- create and update preparation ---------------------------------------------------------

def _same(old: dict, new: dict, field: str) -> bool:
    return (old.get(field) or None) == (new.get(field) or None)


def normalize_cluster_ips(new: dict, old) -> None:
    """Upstream's ``NormalizeClusterIPs``: keep clusterIP and clusterIPs in step."""
    spec = new.setdefault("spec", {})
    cluster_ip = spec.get("clusterIP") or ""
    if old is None:
        if cluster_ip and not spec.get("clusterIPs"):
            spec["clusterIPs"] = [cluster_ip]
        return
    old_spec = old.get("spec") or {}
    if old_spec.get("clusterIPs") and not spec.get("clusterIPs"):
        if (old_spec.get("clusterIP") or "") == cluster_ip:
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    if (old_spec.get("clusterIP") or "") != cluster_ip:
        if old_spec.get("clusterIP") and not cluster_ip:
            if _same(old_spec, spec, "clusterIPs"):
                spec.pop("clusterIPs", None)
        elif _same(old_spec, spec, "clusterIPs"):
            spec["clusterIPs"] = [cluster_ip]


def needs_cluster_ip(spec: dict) -> bool:
    return spec.get("type") != EXTERNAL_NAME


def needs_node_port(spec: dict) -> bool:
    return spec.get("type") in (NODE_PORT, LOAD_BALANCER)


def needs_health_check(spec: dict) -> bool:
    """Upstream's ``NeedsHealthCheck``: a LoadBalancer with policy Local."""
    return spec.get("type") == LOAD_BALANCER and spec.get("externalTrafficPolicy") == "Local"


def node_ports(spec: dict) -> list:
    """Upstream's ``collectServiceNodePorts``: every node port of the ports, and the
    health check node port."""
    out = [p["nodePort"] for p in spec.get("ports") or () if p.get("nodePort")]
    if spec.get("healthCheckNodePort"):
        out.append(spec["healthCheckNodePort"])
    return out


def _drop_type_dependent_fields(spec: dict, old_spec: dict, status: dict) -> None:
    """Upstream's ``dropTypeDependentFields``."""
    if needs_cluster_ip(old_spec) and not needs_cluster_ip(spec):
        if _same(old_spec, spec, "clusterIPs") and _same(old_spec, spec, "clusterIP"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        if _same(old_spec, spec, "ipFamilies"):
            spec.pop("ipFamilies", None)
        if _same(old_spec, spec, "ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    if needs_node_port(old_spec) and not needs_node_port(spec) and \
            [p.get("nodePort", 0) for p in old_spec.get("ports") or ()] == \
            [p.get("nodePort", 0) for p in spec.get("ports") or ()]:
        for port in spec.get("ports") or ():
            port.pop("nodePort", None)
    if needs_health_check(old_spec) and not needs_health_check(spec) and \
            _same(old_spec, spec, "healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if old_spec.get("type") == LOAD_BALANCER and spec.get("type") != LOAD_BALANCER:
        if spec.get("allocateLoadBalancerNodePorts") is not None and \
                spec.get("allocateLoadBalancerNodePorts") == \
                old_spec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
        if _same(old_spec, spec, "loadBalancerClass"):
            spec.pop("loadBalancerClass", None)
    if externally_accessible(old_spec) and not externally_accessible(spec) and \
            _same(old_spec, spec, "externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)
    if spec.get("type") != LOAD_BALANCER:
        status["loadBalancer"] = {}


def _prepare_for_create(obj: dict) -> None:
    obj["status"] = {"loadBalancer": {}}
    normalize_cluster_ips(obj, None)


def _prepare_for_update(new: dict, old: dict) -> None:
    normalize_cluster_ips(new, old)
    status = new.setdefault("status", {"loadBalancer": {}})
    _drop_type_dependent_fields(new.setdefault("spec", {}), old.get("spec") or {}, status)


# -- validation ---------------------------------------------------------------------------

def is_headless(spec: dict) -> bool:
    ips = spec.get("clusterIPs") or []
    return bool(ips) and ips[0] == NONE


def _validate_port(port: dict, require_name: bool, names: set, path: str) -> list:
    causes = []
    name = port.get("name") or ""
    if require_name and not name:
        causes.append(fe.required(f"{path}.name"))
    elif name:
        causes.extend(fe.invalid(f"{path}.name", name, p) for p in dns_label(name))
        if name in names:
            causes.append(fe.duplicate(f"{path}.name", name))
        else:
            names.add(name)
    causes.extend(netaddr.port_number_causes(f"{path}.port", port.get("port", 0)))
    causes.extend(netaddr.protocol_causes(f"{path}.protocol", port.get("protocol") or None))
    causes.extend(netaddr.port_num_or_name(f"{path}.targetPort", port.get("targetPort", 0)))
    causes.extend(netaddr.app_protocol_causes(f"{path}.appProtocol", port))
    return causes


def validate_cluster_ips_related_fields(spec: dict) -> list:
    """Upstream's ``ValidateServiceClusterIPsRelatedFields``."""
    if spec.get("type") == EXTERNAL_NAME:
        return []
    causes = []
    cluster_ip = spec.get("clusterIP") or ""
    cluster_ips = list(spec.get("clusterIPs") or ())
    shown = fe.go_json(cluster_ips)
    if cluster_ip:
        if not cluster_ips:
            causes.append(fe.required("spec.clusterIPs"))
        elif cluster_ips[0] != cluster_ip:
            causes.append(fe.invalid("spec.clusterIPs", shown,
                                     "first value must match `clusterIP`"))
    elif cluster_ips:
        causes.append(fe.invalid("spec.clusterIPs", shown,
                                 "must be empty when `clusterIP` is not specified"))
    seen: set = set()
    for i, name in enumerate(spec.get("ipFamilies") or ()):
        if name not in FAMILIES:
            causes.append(fe.not_supported(f"spec.ipFamilies[{i}]", name, FAMILIES))
        if name in seen:
            causes.append(fe.duplicate(f"spec.ipFamilies[{i}]", name))
        seen.add(name)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in FAMILY_POLICIES:
        causes.append(fe.not_supported("spec.ipFamilyPolicy", policy, FAMILY_POLICIES))
    invalid = False
    for i, ip in enumerate(cluster_ips):
        if i == 0 and ip == NONE:
            if len(cluster_ips) > 1:
                invalid = True
                causes.append(fe.invalid("spec.clusterIPs", shown,
                                         "'None' must be the first and only value"))
            continue
        problems = netaddr.ip_causes(f"spec.clusterIPs[{i}]", ip)
        if problems:
            invalid = True
            causes.extend(problems)
    if len(cluster_ips) > 2:
        causes.append(fe.invalid("spec.clusterIPs", shown, "may only hold up to 2 values"))
    if invalid:
        return causes
    if len(cluster_ips) > 1:
        families = {netaddr.is_ipv6_string(ip) for ip in cluster_ips}
        if len(families) != len(cluster_ips):
            causes.append(fe.invalid("spec.clusterIPs", shown,
                                     "may specify no more than one IP for each IP family"))
    families_given = spec.get("ipFamilies") or ()
    if not is_headless(spec) and cluster_ips and families_given:
        for i, ip in enumerate(cluster_ips):
            if i > len(families_given) - 1:
                break
            if families_given[i] == "IPv4" and netaddr.is_ipv6_string(ip):
                causes.append(fe.invalid(f"spec.clusterIPs[{i}]", ip, "expected an IPv4 value "
                                         f"as indicated by `ipFamilies[{i}]`"))
            if families_given[i] == "IPv6" and not netaddr.is_ipv6_string(ip):
                causes.append(fe.invalid(f"spec.clusterIPs[{i}]", ip, "expected an IPv6 value "
                                         f"as indicated by `ipFamilies[{i}]`"))
    return causes


def _validate_affinity(spec: dict) -> list:
    affinity = spec.get("sessionAffinity") or ""
    causes = []
    if not affinity:
        causes.append(fe.required("spec.sessionAffinity"))
    elif affinity not in AFFINITIES:
        causes.append(fe.not_supported("spec.sessionAffinity", affinity, AFFINITIES))
    path = "spec.sessionAffinityConfig"
    if affinity == "ClientIP":
        why = "when session affinity type is ClientIP"
        config = spec.get("sessionAffinityConfig")
        if config is None:
            causes.append(fe.required(path, why))
        elif config.get("clientIP") is None:
            causes.append(fe.required(f"{path}.clientIP", why))
        elif config["clientIP"].get("timeoutSeconds") is None:
            causes.append(fe.required(f"{path}.clientIP.timeoutSeconds", why))
        else:
            timeout = config["clientIP"]["timeoutSeconds"]
            if not 0 < timeout <= MAX_AFFINITY_SECONDS:
                causes.append(fe.invalid(
                    f"{path}.clientIP.timeoutSeconds", timeout,
                    f"must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"))
    elif affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        causes.append(fe.forbidden(path, "must not be set when session affinity is None"))
    return causes


def _validate_cidr(path: str, value: str) -> list:
    import ipaddress
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return [fe.invalid(path, value, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                        "2001:db8::/64)")]
    return []


def _validate(obj: dict) -> list:
    """Upstream's ``ValidateService`` beyond metadata."""
    spec = obj.get("spec") or {}
    causes = []
    kind = spec.get("type") or ""
    headless = is_headless(spec)
    ports = spec.get("ports") or []
    if not ports and not headless and kind != EXTERNAL_NAME:
        causes.append(fe.required("spec.ports"))
    if kind == LOAD_BALANCER and headless:
        causes.append(fe.invalid("spec.clusterIPs[0]", NONE,
                                 "may not be set to 'None' for LoadBalancer services"))
    elif kind == NODE_PORT and headless:
        causes.append(fe.invalid("spec.clusterIPs[0]", NONE,
                                 "may not be set to 'None' for NodePort services"))
    elif kind == EXTERNAL_NAME:
        if spec.get("clusterIPs"):
            causes.append(fe.forbidden("spec.clusterIPs",
                                       "may not be set for ExternalName services"))
        if spec.get("ipFamilies"):
            causes.append(fe.forbidden("spec.ipFamilies",
                                       "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            causes.append(fe.forbidden("spec.ipFamilyPolicy",
                                       "may not be set for ExternalName services"))
        cname = (spec.get("externalName") or "").removesuffix(".")
        if cname:
            causes.extend(fe.invalid("spec.externalName", cname, p) for p in dns_subdomain(cname))
        else:
            causes.append(fe.required("spec.externalName"))
    names: set = set()
    for i, port in enumerate(ports):
        causes.extend(_validate_port(port, len(ports) > 1, names, f"spec.ports[{i}]"))
    for key, value in (spec.get("selector") or {}).items():
        causes.extend(fe.invalid("spec.selector", key, p) for p in qualified_name(key))
        causes.extend(fe.invalid("spec.selector", value, p) for p in label_value(value))
    causes.extend(_validate_affinity(spec))
    causes.extend(validate_cluster_ips_related_fields(spec))
    for i, ip in enumerate(spec.get("externalIPs") or ()):
        path = f"spec.externalIPs[{i}]"
        problems = netaddr.ip_causes(path, ip)
        causes.extend(problems or netaddr.non_special_ip(path, ip))
    if not kind:
        causes.append(fe.required("spec.type"))
    elif kind not in SERVICE_TYPES:
        causes.append(fe.not_supported("spec.type", kind, SERVICE_TYPES))
    if kind == CLUSTER_IP:
        for i, port in enumerate(ports):
            if port.get("nodePort"):
                causes.append(fe.forbidden(f"spec.ports[{i}].nodePort",
                                           "may not be used when `type` is 'ClusterIP'"))
    seen_node_ports: set = set()
    for i, port in enumerate(ports):
        if not port.get("nodePort"):
            continue
        key = (port.get("protocol"), port["nodePort"])
        if key in seen_node_ports:
            causes.append(fe.duplicate(f"spec.ports[{i}].nodePort", port["nodePort"]))
        seen_node_ports.add(key)
    seen_ports: set = set()
    for i, port in enumerate(ports):
        key = (port.get("protocol") or "", port.get("port", 0))
        if key in seen_ports:
            # field.Duplicate of a core.ServicePort holding only Protocol and Port.
            causes.append(fe.duplicate(f"spec.ports[{i}]", fe.go_json({
                "Name": "", "Protocol": key[0], "AppProtocol": None, "Port": key[1],
                "TargetPort": 0, "NodePort": 0})))
        seen_ports.add(key)
    ranges = spec.get("loadBalancerSourceRanges") or ()
    if ranges:
        path = "spec.LoadBalancerSourceRanges"
        if kind != LOAD_BALANCER:
            causes.append(fe.forbidden(path, "may only be used when `type` is 'LoadBalancer'"))
        for i, value in enumerate(ranges):
            causes.extend(_validate_cidr(f"{path}[{i}]", value.strip()))
    if spec.get("allocateLoadBalancerNodePorts") is not None and kind != LOAD_BALANCER:
        causes.append(fe.forbidden("spec.allocateLoadBalancerNodePorts",
                                   "may only be used when `type` is 'LoadBalancer'"))
    if kind == LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts") is None:
        causes.append(fe.required("allocateLoadBalancerNodePorts"))
    if spec.get("loadBalancerClass") is not None:
        if kind != LOAD_BALANCER:
            causes.append(fe.forbidden("spec.loadBalancerClass",
                                       "may only be used when service type is 'LoadBalancer'"))
        else:
            causes.extend(fe.invalid("spec.loadBalancerClass", spec["loadBalancerClass"], p)
                          for p in qualified_name(spec["loadBalancerClass"]))
    causes.extend(_validate_traffic_policies(spec))
    return causes


def _validate_traffic_policies(spec: dict) -> list:
    """Upstream's ``validateServiceExternalTrafficPolicy`` and
    ``validateServiceInternalTrafficFieldsValue``."""
    causes = []
    policy = spec.get("externalTrafficPolicy") or ""
    path = "spec.externalTrafficPolicy"
    if externally_accessible(spec):
        if not policy:
            causes.append(fe.required(path))
        elif policy not in TRAFFIC_POLICIES:
            causes.append(fe.not_supported(path, policy, TRAFFIC_POLICIES))
    elif policy:
        causes.append(fe.invalid(path, policy, "may only be set for externally-accessible "
                                 "services"))
    health = spec.get("healthCheckNodePort") or 0
    if needs_health_check(spec):
        if not health:
            causes.append(fe.required("spec.healthCheckNodePort"))
        else:
            causes.extend(fe.invalid("spec.healthCheckNodePort", health, p)
                          for p in netaddr.port_number_problems(health))
    elif health:
        causes.append(fe.invalid("spec.healthCheckNodePort", health,
                                 "may only be set when `type` is 'LoadBalancer' and "
                                 "`externalTrafficPolicy` is 'Local'"))
    internal = spec.get("internalTrafficPolicy")
    if internal is None:
        if spec.get("type") in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
            causes.append(fe.required("spec.internalTrafficPolicy"))
    elif internal not in TRAFFIC_POLICIES:
        causes.append(fe.not_supported("spec.internalTrafficPolicy", internal,
                                       TRAFFIC_POLICIES))
    distribution = spec.get("trafficDistribution")
    if distribution is not None and distribution not in (
            "PreferClose", "PreferSameZone", "PreferSameNode"):
        causes.append(fe.not_supported("spec.trafficDistribution", distribution,
                                       ("PreferClose", "PreferSameNode", "PreferSameZone")))
    return causes


def _validate_update(new: dict, old: dict) -> list:
    """Upstream's ``validateUpgradeDowngradeClusterIPs`` and ``…IPFamilies``."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes: list = []
    if EXTERNAL_NAME in (spec.get("type"), old_spec.get("type")):
        return causes
    if not (is_headless(spec) and is_headless(old_spec)):
        causes.extend(_upgrade_downgrade(spec, old_spec, "clusterIPs", "clusterIP"))
    causes.extend(_upgrade_downgrade(spec, old_spec, "ipFamilies", "IP family"))
    return causes


def _upgrade_downgrade(spec: dict, old_spec: dict, field: str, word: str) -> list:
    new_values = list(spec.get(field) or ())
    old_values = list(old_spec.get(field) or ())
    shown = fe.go_json(new_values)
    path = f"spec.{field}"
    causes = []
    if len(old_values) == len(new_values):
        for i, value in enumerate(old_values):
            if value != new_values[i]:
                causes.append(fe.invalid(f"{path}[{i}]", shown, "may not change once set"))
    elif len(old_values) > len(new_values):
        if not new_values:
            primary = "primary clusterIP" if field == "clusterIPs" else "primary ipFamily"
            causes.append(fe.invalid(f"{path}[0]", shown, f"{primary} can not be unset"))
        if old_values and new_values and new_values[0] != old_values[0]:
            causes.append(fe.invalid(f"{path}[0]", shown, "may not change once set"))
        if len(new_values) == 1 and spec.get("ipFamilyPolicy") != SINGLE_STACK:
            causes.append(fe.invalid(
                f"{path}[0]", shown, "`ipFamilyPolicy` must be set to 'SingleStack' when "
                f"releasing the secondary {word}"))
    elif old_values and new_values[0] != old_values[0]:
        causes.append(fe.invalid(f"{path}[0]", shown, "may not change once set"))
    return causes


def _validate_status_update(new: dict, old: dict) -> list:
    """Upstream's ``ValidateLoadBalancerStatus`` for a Service's status."""
    causes = []
    spec = new.get("spec") or {}
    ingress = ((new.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    for i, point in enumerate(ingress):
        path = f"status.loadBalancer.ingress[{i}]"
        if point.get("ip"):
            causes.extend(netaddr.ip_causes(f"{path}.ip", point["ip"]))
        if point.get("ipMode") is not None:
            if not point.get("ip"):
                causes.append(fe.required(f"{path}.ipMode",
                                          "must be specified when `ip` is set"))
            elif point["ipMode"] not in ("Proxy", "VIP"):
                causes.append(fe.not_supported(f"{path}.ipMode", point["ipMode"],
                                               ("Proxy", "VIP")))
        if point.get("hostname"):
            causes.extend(fe.invalid(f"{path}.hostname", point["hostname"], p)
                          for p in dns_subdomain(point["hostname"]))
            if netaddr.parse_ip(point["hostname"]) is not None:
                causes.append(fe.invalid(f"{path}.hostname", point["hostname"],
                                         "must be a DNS name, not an IP address"))
    if ingress and spec.get("type") != LOAD_BALANCER:
        causes.append(fe.forbidden("status.loadBalancer.ingress",
                                   "may only be used when `spec.type` is 'LoadBalancer'"))
    return causes


# -- table --------------------------------------------------------------------------------

def _external_ip(obj: dict, now) -> str:
    """Upstream's ``getServiceExternalIP`` (server-side tables print wide)."""
    spec = obj.get("spec") or {}
    external = list(spec.get("externalIPs") or ())
    kind = spec.get("type")
    if kind in (CLUSTER_IP, NODE_PORT):
        return ",".join(external) if external else "<none>"
    if kind == LOAD_BALANCER:
        points = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
        found = sorted({p.get("ip") or p.get("hostname") for p in points
                        if p.get("ip") or p.get("hostname")})
        results = found + external
        return ",".join(results) if results else "<pending>"
    if kind == EXTERNAL_NAME:
        return spec.get("externalName") or ""
    return "<unknown>"


def _ports(obj: dict, now) -> str:
    pieces = []
    for port in (obj.get("spec") or {}).get("ports") or ():
        protocol = port.get("protocol", "")
        if port.get("nodePort", 0) > 0:
            pieces.append(f"{port.get('port', 0)}:{port['nodePort']}/{protocol}")
        else:
            pieces.append(f"{port.get('port', 0)}/{protocol}")
    return ",".join(pieces) or "<none>"


def format_labels(labels) -> str:
    """Upstream's ``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


COLUMNS = (
    Column("Name", "string", NAME.cell, NAME_DOC, format="name"),
    Column("Type", "string", lambda obj, now: (obj.get("spec") or {}).get("type", ""),
           "type determines how the Service is exposed. Defaults to ClusterIP. Valid "
           "options are ExternalName, ClusterIP, NodePort, and LoadBalancer."),
    Column("Cluster-IP", "string",
           lambda obj, now: ((obj.get("spec") or {}).get("clusterIPs") or ["<none>"])[0],
           "clusterIP is the IP address of the service and is usually assigned randomly."),
    Column("External-IP", "string", _external_ip,
           "externalIPs is a list of IP addresses for which nodes in the cluster will also "
           "accept traffic for this service."),
    Column("Port(s)", "string", _ports, "The list of ports that are exposed by this service."),
    Column("Age", "string", AGE.cell, AGE_DOC),
    Column("Selector", "string",
           lambda obj, now: format_labels((obj.get("spec") or {}).get("selector")),
           "Route service traffic to pods with label keys and values matching this "
           "selector.", priority=1),
)

KIND = core_kind("Service", "services", True, {
    "spec": Prop(SERVICE_SPEC, "Spec defines the behavior of a service."),
    "status": Prop(SERVICE_STATUS, "Most recently observed status of the service."),
}, "Service is a named abstraction of software service (for example, mysql) consisting "
   "of local port (for example 3306) that the proxy listens on, and the selector that "
   "determines which pods will answer requests sent through the proxy.", {
    "Service": "metadata spec status",
    "ServiceSpec": "clusterIP? type? sessionAffinity? loadBalancerIP? externalName? "
                   "externalTrafficPolicy? healthCheckNodePort? publishNotReadyAddresses?",
    "ServicePort": "name? protocol? port targetPort nodePort?",
    "ServiceStatus": "loadBalancer",
    "LoadBalancerStatus": "",
    "LoadBalancerIngress": "ip? hostname?",
    "PortStatus": "port protocol",
    "SessionAffinityConfig": "",
    "ClientIPConfig": "",
}, name_rule=dns1035_label, short_names=("svc",), categories=("all",), has_status=True,
    default=_default, validate=_validate, validate_update=_validate_update,
    validate_status_update=_validate_status_update,
    prepare_for_create=_prepare_for_create, prepare_for_update=_prepare_for_update,
    columns=COLUMNS,
    field_labels=("metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"))
