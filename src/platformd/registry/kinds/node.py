"""
Node (core ``v1``, cluster-scoped): a worker node, with a ``status`` subresource.

Upstream's ``pkg/registry/core/node`` strategies and ``ValidateNode``/``ValidateNodeUpdate``
(v1.36): a create keeps the status it is given (a kubelet registers its node with it); an
update of the main resource keeps the stored status, a write to ``status`` keeps the
stored spec.  ``spec.podCIDRs`` and ``spec.providerID`` may only be set once,
``spec.externalID`` never changes; taints are unique by key and effect.  Go's JSON always
shows ``status.daemonEndpoints`` and ``status.nodeInfo`` (structs), so they are filled
with their zero values here too.

Table columns are ``kubectl get nodes``' (upstream's ``printNode``): STATUS is ``Ready``,
``NotReady`` or ``Unknown`` from the Ready condition, plus ``SchedulingDisabled`` for a
cordoned node; ROLES come from the ``node-role.platform.io/<role>`` labels and a
``platform.io/role`` label (upstream's ``node-role.kubernetes.io/`` and
``kubernetes.io/role``, spelled the platform's way as every ``kubernetes.io`` label is).
Field selectors: ``metadata.name`` and ``spec.unschedulable`` (``"true"``/``"false"``).
"""

from __future__ import annotations

import ipaddress
import re

from platformd.errors import Cause
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain, label_value, qualified_name
from platformd.model.schema import (
    BOOLEAN, INT32, INT64, STRING, TIME, ListOf, MapOf, Prop,
)
from platformd.registry.kinds.coreshapes import core_kind, struct
from platformd.registry.tables import AGE, NAME, Column

#: Upstream's ``node-role.kubernetes.io/`` role label prefix and ``kubernetes.io/role``.
ROLE_LABEL_PREFIX = "node-role.platform.io/"
ROLE_LABEL = "platform.io/role"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

TAINT = struct("Taint", {
    "key": Prop(STRING, "Required. The taint key to be applied to a node.", required=True),
    "value": Prop(STRING, "The taint value corresponding to the taint key."),
    "effect": Prop(STRING, "Required. The effect of the taint on pods that do not tolerate "
                           "the taint. Valid effects are NoSchedule, PreferNoSchedule and "
                           "NoExecute.", required=True),
    "timeAdded": Prop(TIME, "TimeAdded represents the time at which the taint was added."),
}, "The node this Taint is attached to has the \"effect\" on any pod that does not tolerate "
   "the Taint.")

CONFIG_MAP_NODE_CONFIG_SOURCE = struct("ConfigMapNodeConfigSource", {
    "namespace": Prop(STRING, "Namespace is the metadata.namespace of the referenced "
                              "ConfigMap.", required=True),
    "name": Prop(STRING, "Name is the metadata.name of the referenced ConfigMap.",
                 required=True),
    "uid": Prop(STRING, "UID is the metadata.UID of the referenced ConfigMap."),
    "resourceVersion": Prop(STRING, "ResourceVersion is the metadata.ResourceVersion of the "
                                    "referenced ConfigMap."),
    "kubeletConfigKey": Prop(STRING, "KubeletConfigKey declares which key of the referenced "
                                     "ConfigMap corresponds to the KubeletConfiguration "
                                     "structure", required=True),
}, "ConfigMapNodeConfigSource contains the information to reference a ConfigMap as a "
   "config source for the Node.")

NODE_CONFIG_SOURCE = struct("NodeConfigSource", {
    "configMap": Prop(CONFIG_MAP_NODE_CONFIG_SOURCE, "ConfigMap is a reference to a Node's "
                                                     "ConfigMap"),
}, "NodeConfigSource specifies a source of node configuration.")

NODE_SPEC = struct("NodeSpec", {
    "podCIDR": Prop(STRING, "PodCIDR represents the pod IP range assigned to the node."),
    "podCIDRs": Prop(ListOf(STRING, "set", (), "merge"),
                     "podCIDRs represents the IP ranges assigned to the node for usage by "
                     "Pods on that node."),
    "providerID": Prop(STRING, "ID of the node assigned by the cloud provider."),
    "unschedulable": Prop(BOOLEAN, "Unschedulable controls node schedulability of new pods. "
                                   "By default, node is schedulable."),
    "taints": Prop(ListOf(TAINT), "If specified, the node's taints."),
    "configSource": Prop(NODE_CONFIG_SOURCE, "Deprecated: Previously used to specify the "
                                             "source of the node's configuration."),
    "externalID": Prop(STRING, "Deprecated. Not all kubelets will set this field."),
}, "NodeSpec describes the attributes that a node is created with.")

NODE_CONDITION = struct("NodeCondition", {
    "type": Prop(STRING, "Type of node condition.", required=True),
    "status": Prop(STRING, "Status of the condition, one of True, False, Unknown.",
                   required=True),
    "lastHeartbeatTime": Prop(TIME, "Last time we got an update on a given condition."),
    "lastTransitionTime": Prop(TIME, "Last time the condition transit from one status to "
                                     "another."),
    "reason": Prop(STRING, "(brief) reason for the condition's last transition."),
    "message": Prop(STRING, "Human readable message indicating details about last "
                            "transition."),
}, "NodeCondition contains condition information for a node.")

NODE_ADDRESS = struct("NodeAddress", {
    "type": Prop(STRING, "Node address type, one of Hostname, ExternalIP or InternalIP.",
                 required=True),
    "address": Prop(STRING, "The node address.", required=True),
}, "NodeAddress contains information for the node's address.")

DAEMON_ENDPOINT = struct("DaemonEndpoint", {
    "Port": Prop(INT32, "Port number of the given endpoint.", required=True),
}, "DaemonEndpoint contains information about a single Daemon endpoint.")

NODE_DAEMON_ENDPOINTS = struct("NodeDaemonEndpoints", {
    "kubeletEndpoint": Prop(DAEMON_ENDPOINT, "Endpoint on which Kubelet is listening."),
}, "NodeDaemonEndpoints lists ports opened by daemons running on the Node.")

NODE_SWAP_STATUS = struct("NodeSwapStatus", {
    "capacity": Prop(INT64, "Total amount of swap memory in bytes."),
}, "NodeSwapStatus represents swap memory information.")

_SYSTEM_INFO = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                "operatingSystem", "architecture")

NODE_SYSTEM_INFO = struct("NodeSystemInfo", {
    **{name: Prop(STRING, f"{name} reported by the node.", required=True)
       for name in _SYSTEM_INFO},
    "swap": Prop(NODE_SWAP_STATUS, "Swap Info reported by the node."),
}, "NodeSystemInfo is a set of ids/uuids to uniquely identify the node.")

CONTAINER_IMAGE = struct("ContainerImage", {
    "names": Prop(ListOf(STRING), "Names by which this image is known."),
    "sizeBytes": Prop(INT64, "The size of the image in bytes."),
}, "Describe a container image")

ATTACHED_VOLUME = struct("AttachedVolume", {
    "name": Prop(STRING, "Name of the attached volume", required=True),
    "devicePath": Prop(STRING, "DevicePath represents the device path where the volume "
                               "should be available", required=True),
}, "AttachedVolume describes a volume attached to a node")

NODE_CONFIG_STATUS = struct("NodeConfigStatus", {
    "assigned": Prop(NODE_CONFIG_SOURCE, "Assigned reports the checkpointed config the node "
                                         "will try to use."),
    "active": Prop(NODE_CONFIG_SOURCE, "Active reports the checkpointed config the node is "
                                       "actively using."),
    "lastKnownGood": Prop(NODE_CONFIG_SOURCE, "LastKnownGood reports the checkpointed config "
                                              "the node will fall back to."),
    "error": Prop(STRING, "Error describes any problems reconciling the "
                          "Spec.ConfigSource to the Active config."),
}, "NodeConfigStatus describes the status of the config assigned by "
   "Node.Spec.ConfigSource.")

NODE_RUNTIME_HANDLER_FEATURES = struct("NodeRuntimeHandlerFeatures", {
    "recursiveReadOnlyMounts": Prop(BOOLEAN, "RecursiveReadOnlyMounts is set to true if the "
                                             "runtime handler supports them."),
    "userNamespaces": Prop(BOOLEAN, "UserNamespaces is set to true if the runtime handler "
                                    "supports UserNamespaces."),
}, "NodeRuntimeHandlerFeatures is a set of features implemented by the runtime handler.")

NODE_RUNTIME_HANDLER = struct("NodeRuntimeHandler", {
    "name": Prop(STRING, "Runtime handler name. Empty for the default runtime handler."),
    "features": Prop(NODE_RUNTIME_HANDLER_FEATURES, "Supported features."),
}, "NodeRuntimeHandler is a set of runtime handler information.")

NODE_FEATURES = struct("NodeFeatures", {
    "supplementalGroupsPolicy": Prop(BOOLEAN, "SupplementalGroupsPolicy is set to true if the "
                                              "runtime supports SupplementalGroupsPolicy."),
}, "NodeFeatures describes the set of features implemented by the CRI implementation.")

NODE_STATUS = struct("NodeStatus", {
    "capacity": Prop(MapOf(STRING), "Capacity represents the total resources of a node."),
    "allocatable": Prop(MapOf(STRING), "Allocatable represents the resources of a node that "
                                       "are available for scheduling."),
    "phase": Prop(STRING, "NodePhase is the recently observed lifecycle phase of the node. "
                          "Deprecated."),
    "conditions": Prop(ListOf(NODE_CONDITION, "map", ("type",), "merge", "type"),
                       "Conditions is an array of current observed node conditions."),
    "addresses": Prop(ListOf(NODE_ADDRESS, "atomic", (), "merge", "type"),
                      "List of addresses reachable to the node."),
    "daemonEndpoints": Prop(NODE_DAEMON_ENDPOINTS, "Endpoints of daemons running on the "
                                                   "Node."),
    "nodeInfo": Prop(NODE_SYSTEM_INFO, "Set of ids/uuids to uniquely identify the node."),
    "images": Prop(ListOf(CONTAINER_IMAGE), "List of container images on this node"),
    "volumesInUse": Prop(ListOf(STRING), "List of attachable volumes in use (mounted) by "
                                         "the node."),
    "volumesAttached": Prop(ListOf(ATTACHED_VOLUME), "List of volumes that are attached to "
                                                     "the node."),
    "config": Prop(NODE_CONFIG_STATUS, "Status of the config assigned to the node via the "
                                       "dynamic Kubelet config feature."),
    "runtimeHandlers": Prop(ListOf(NODE_RUNTIME_HANDLER), "The available runtime handlers."),
    "features": Prop(NODE_FEATURES, "Features describes the set of features implemented by "
                                    "the CRI implementation."),
    "declaredFeatures": Prop(ListOf(STRING), "DeclaredFeatures represents the features "
                                             "related to feature gates that are declared by "
                                             "the node."),
}, "NodeStatus is information about the current status of a node.")


def _default(obj: dict) -> None:
    """Go's JSON always shows a Node's spec and status and a NodeStatus's two struct
    fields, empty or zero."""
    obj.setdefault("spec", {})
    status = obj.get("status")
    if status is None:
        status = obj["status"] = {}
    endpoints = status.setdefault("daemonEndpoints", {})
    endpoints.setdefault("kubeletEndpoint", {}).setdefault("Port", 0)
    info = status.setdefault("nodeInfo", {})
    for name in _SYSTEM_INFO:
        info.setdefault(name, "")


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


def _validate_resources(status: dict) -> list:
    """``ValidateNodeResources``: non-negative quantities (upstream refuses a malformed
    one when it decodes the body; here it is one more cause)."""
    causes: list = []
    for field in ("capacity", "allocatable"):
        for name, value in (status.get(field) or {}).items():
            path = f"status.{field}.{name}"
            if not isinstance(value, str) or not _QUANTITY.match(value):
                causes.append(fe.invalid(path, value, "quantities must match the regular "
                                                      "expression '^([+-]?[0-9.]+)"
                                                      "([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
            elif value.startswith("-"):
                causes.append(fe.invalid(path, value, "must be greater than or equal to 0"))
    return causes


def _validate_taints(taints, path: str) -> list:
    """``validateNodeTaints``."""
    causes: list = []
    seen: dict = {}
    for i, taint in enumerate(taints):
        at = f"{path}[{i}]"
        key = taint.get("key", "")
        causes.extend(fe.invalid(f"{at}.key", key, p) for p in qualified_name(key))
        value = taint.get("value", "")
        problems = label_value(value)
        if problems:
            causes.append(fe.invalid(f"{at}.value", value, ";".join(problems)))
        effect = taint.get("effect", "")
        if not effect:
            causes.append(fe.required(f"{at}.effect"))
        elif effect not in TAINT_EFFECTS:
            causes.append(fe.not_supported(f"{at}.effect", effect, TAINT_EFFECTS))
        keys = seen.setdefault(effect, set())
        if key in keys:
            duplicate = fe.duplicate(at, fe.go_json(_go_taint(taint)))
            causes.append(Cause(duplicate.reason, duplicate.message + ": taints must be "
                                "unique by key and effect pair", duplicate.field))
            continue
        keys.add(key)
    return causes


def _go_taint(taint: dict) -> dict:
    """The internal ``core.Taint`` as Go's JSON shows it (its Go field names)."""
    return {"Key": taint.get("key", ""), "Value": taint.get("value", ""),
            "Effect": taint.get("effect", ""), "TimeAdded": taint.get("timeAdded")}


def _cidr_problems(value: str) -> list:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
    return []


def _validate(obj: dict) -> list:
    """``ValidateNode`` beyond metadata."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    causes = []
    taints = spec.get("taints") or []
    if taints:
        # Upstream names these under metadata (``fldPath`` is metadata's there).
        causes.extend(_validate_taints(taints, "metadata.taints"))
    causes.extend(_validate_resources(status))
    cidrs = spec.get("podCIDRs") or []
    for i, value in enumerate(cidrs):
        causes.extend(fe.invalid(f"spec.podCIDRs[{i}]", value, p) for p in _cidr_problems(value))
    if len(cidrs) > 1:
        families = set()
        for value in cidrs:
            try:
                families.add(ipaddress.ip_network(value, strict=False).version)
            except ValueError:
                pass
        if len(cidrs) > 2 or len(families) != 2:
            causes.append(fe.invalid("spec.podCIDRs", fe.GoValue(
                "[]string{" + ", ".join(f'"{c}"' for c in cidrs) + "}"),
                "may specify no more than one CIDR for each IP family"))
    return causes


def _validate_update(new: dict, old: dict) -> list:
    """``ValidateNodeUpdate`` (its metadata checks are the store's)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    status = new.get("status") or {}
    causes = list(_validate_resources(status))
    seen = set()
    for i, address in enumerate(status.get("addresses") or ()):
        pair = (address.get("type", ""), address.get("address", ""))
        if pair in seen:
            causes.append(fe.duplicate(f"status.addresses[{i}]", fe.go_json(
                {"Type": pair[0], "Address": pair[1]})))
        seen.add(pair)
    old_cidrs, cidrs = old_spec.get("podCIDRs") or [], spec.get("podCIDRs") or []
    message = 'node updates may not change podCIDR except from "" to valid'
    if old_cidrs:
        if len(old_cidrs) != len(cidrs):
            causes.append(fe.forbidden("spec.podCIDRs", message))
        else:
            causes.extend(fe.forbidden(f"spec.podCIDRs[{i}]", message)
                          for i, value in enumerate(old_cidrs) if value != cidrs[i])
    old_provider = old_spec.get("providerID", "")
    if old_provider and old_provider != spec.get("providerID", ""):
        causes.append(fe.forbidden("spec.providerID", 'node updates may not change '
                                                      'providerID except from "" to valid'))
    if spec.get("configSource") is not None:
        causes.extend(_validate_config_source(spec["configSource"], "spec.configSource"))
    if spec.get("externalID", "") != old_spec.get("externalID", ""):
        causes.append(fe.forbidden("spec.externalID", "may not be updated"))
    return causes


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")


def _config_key_problems(key: str) -> list:
    """``validation.IsConfigMapKey``."""
    problems = []
    if len(key) > 253:
        problems.append("must be no more than 253 characters")
    if not _CONFIG_KEY.match(key):
        problems.append("a valid config key must consist of alphanumeric characters, '-', "
                        "'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex "
                        "used for validation is '[-._a-zA-Z0-9]+')")
    if key in (".", ".."):
        problems.append(f"must not be '{key}'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def _validate_config_source(source: dict, path: str) -> list:
    """``validateNodeConfigSourceSpec`` (on update only, as upstream)."""
    causes: list = []
    config_map = source.get("configMap")
    if config_map is None:
        return [fe.invalid(path, fe.go_json({"ConfigMap": None}),
                           "exactly one reference subfield must be non-nil")]
    at = f"{path}.configMap"
    if config_map.get("uid"):
        causes.append(fe.forbidden(f"{at}.uid", "uid must not be set in spec"))
    if config_map.get("resourceVersion"):
        causes.append(fe.forbidden(f"{at}.resourceVersion",
                                   "resourceVersion must not be set in spec"))
    for field, rule in (("namespace", dns_label), ("name", dns_subdomain),
                        ("kubeletConfigKey", _config_key_problems)):
        value = config_map.get(field, "")
        if not value:
            causes.append(fe.required(f"{at}.{field}", f"{field} must be set"))
        else:
            causes.extend(fe.invalid(f"{at}.{field}", value, p) for p in rule(value))
    return causes


def _status(obj, now):
    """``printNode``'s STATUS: the Ready condition, then SchedulingDisabled."""
    words = []
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            words = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not words:
        words = ["Unknown"]
    if (obj.get("spec") or {}).get("unschedulable"):
        words.append("SchedulingDisabled")
    return ",".join(words)


def roles(obj) -> list:
    """``findNodeRoles``: the sorted roles named by the node's labels."""
    found = set()
    for key, value in ((obj.get("metadata") or {}).get("labels") or {}).items():
        if key.startswith(ROLE_LABEL_PREFIX):
            role = key[len(ROLE_LABEL_PREFIX):]
            if role:
                found.add(role)
        elif key == ROLE_LABEL and value:
            found.add(value)
    return sorted(found)


def _address(kind: str):
    def cell(obj, now):
        for address in (obj.get("status") or {}).get("addresses") or ():
            if address.get("type") == kind:
                return address.get("address", "")
        return "<none>"
    return cell


def _info(name: str):
    def cell(obj, now):
        return ((obj.get("status") or {}).get("nodeInfo") or {}).get(name) or "<unknown>"
    return cell


_ADDRESSES_DOC = ("List of addresses reachable to the node. Queried from cloud provider, if "
                  "available.")

COLUMNS = (
    NAME,
    Column("Status", "string", _status, "The status of the node"),
    Column("Roles", "string", lambda obj, now: ",".join(roles(obj)) or "<none>",
           "The roles of the node"),
    AGE,
    Column("Version", "string",
           lambda obj, now: ((obj.get("status") or {}).get("nodeInfo") or {}).get(
               "kubeletVersion", ""), "Kubelet Version reported by the node."),
    Column("Internal-IP", "string", _address("InternalIP"), _ADDRESSES_DOC, priority=1),
    Column("External-IP", "string", _address("ExternalIP"), _ADDRESSES_DOC, priority=1),
    Column("OS-Image", "string", _info("osImage"),
           "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
           "(wheezy)).", priority=1),
    Column("Kernel-Version", "string", _info("kernelVersion"),
           "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
           priority=1),
    Column("Container-Runtime", "string", _info("containerRuntimeVersion"),
           "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
           "containerd://1.4.2).", priority=1),
)

KIND = core_kind("Node", "nodes", False, {
    "spec": Prop(NODE_SPEC, "Spec defines the behavior of a node."),
    "status": Prop(NODE_STATUS, "Most recently observed status of the node."),
}, "Node is a worker node in Kubernetes. Each node will have a unique identifier in the "
   "cache (i.e. in etcd).", {
    "Node": "metadata spec status",
    "NodeSpec": "podCIDR? externalID? providerID? unschedulable?",
    "Taint": "key value? effect",
    "NodeConfigSource": "",
    "ConfigMapNodeConfigSource": "namespace name uid? resourceVersion? kubeletConfigKey",
    "NodeStatus": "phase? daemonEndpoints nodeInfo",
    "NodeCondition": "type status lastHeartbeatTime? lastTransitionTime? reason? message?",
    "NodeAddress": "type address",
    "NodeDaemonEndpoints": "kubeletEndpoint",
    "DaemonEndpoint": "Port",
    "NodeSystemInfo": " ".join(_SYSTEM_INFO),
    "NodeSwapStatus": "",
    "ContainerImage": "sizeBytes?",
    "AttachedVolume": "name devicePath",
    "NodeConfigStatus": "error?",
    "NodeRuntimeHandler": "name",
    "NodeRuntimeHandlerFeatures": "",
    "NodeFeatures": "",
}, name_rule=dns_subdomain, short_names=("no",), has_status=True, default=_default,
    validate=_validate, validate_update=_validate_update, columns=COLUMNS,
    field_labels=("metadata.name", "spec.unschedulable"),
    field_zeros={"spec.unschedulable": "false"})
