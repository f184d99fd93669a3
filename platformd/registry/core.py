"""
The core ``v1`` kinds: Namespace, Pod, ConfigMap, Secret, ServiceAccount.

Only the fields this server acts on or clients commonly send are modelled; the rest of
upstream's Pod is out of scope for now.  Defaults and validation follow upstream's for
the fields that are here.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain
from platformd.registry import deletion
from platformd.registry.resource import ResourceType
from platformd.model.schema import (
    BOOLEAN, BYTES, INT32, INT64, STRING, TIME, ListOf, MapOf, Prop, Struct,
)

PREFIX = "io.platform.api.core.v1"

#: The finalizer the namespace controller clears once a namespace is empty.
NAMESPACE_FINALIZER = "platform"
#: The label every namespace carries with its own name (upstream's
#: ``kubernetes.io/metadata.name``), so selectors can pick namespaces by name.
NAMESPACE_NAME_LABEL = "platform.io/metadata.name"


def _struct(name, props, doc, **kw):
    return Struct(f"{PREFIX}.{name}", props, doc=doc, **kw)


LOCAL_OBJECT_REFERENCE = _struct("LocalObjectReference", {
    "name": Prop(STRING, "Name of the referent."),
}, "A reference to an object in the same namespace.")

OBJECT_REFERENCE = _struct("ObjectReference", {
    "kind": Prop(STRING, "Kind of the referent."),
    "namespace": Prop(STRING, "Namespace of the referent."),
    "name": Prop(STRING, "Name of the referent."),
    "uid": Prop(STRING, "UID of the referent."),
    "apiVersion": Prop(STRING, "API version of the referent."),
    "resourceVersion": Prop(STRING, "Specific resourceVersion of the referent."),
    "fieldPath": Prop(STRING, "A piece of the referent, if any."),
}, "A reference to an object.")

ENV_VAR = _struct("EnvVar", {
    "name": Prop(STRING, "Name of the environment variable.", required=True),
    "value": Prop(STRING, "Value of the variable."),
}, "An environment variable of a container.")

CONTAINER_PORT = _struct("ContainerPort", {
    "name": Prop(STRING, "An IANA_SVC_NAME for the port."),
    "hostPort": Prop(INT32, "Port number on the host."),
    "containerPort": Prop(INT32, "Port number on the pod's IP address.", required=True),
    "protocol": Prop(STRING, "UDP, TCP or SCTP; defaults to TCP."),
    "hostIP": Prop(STRING, "Host IP to bind the external port to."),
}, "A network port in a single container.")

RESOURCE_REQUIREMENTS = _struct("ResourceRequirements", {
    "limits": Prop(MapOf(STRING), "Maximum compute resources allowed."),
    "requests": Prop(MapOf(STRING), "Minimum compute resources required."),
}, "Compute resource requirements.")

CONTAINER = _struct("Container", {
    "name": Prop(STRING, "Name of the container, a DNS label unique within the pod.", required=True),
    "image": Prop(STRING, "Container image name."),
    "command": Prop(ListOf(STRING), "Entrypoint array."),
    "args": Prop(ListOf(STRING), "Arguments to the entrypoint."),
    "workingDir": Prop(STRING, "The container's working directory."),
    "ports": Prop(ListOf(CONTAINER_PORT, "map", ("containerPort", "protocol"), "merge",
                         "containerPort"), "Ports to expose from the container."),
    "env": Prop(ListOf(ENV_VAR, "map", ("name",), "merge", "name"),
                "Environment variables to set in the container."),
    "resources": Prop(RESOURCE_REQUIREMENTS, "Compute resources required by this container."),
    "terminationMessagePath": Prop(STRING, "Path of the container's termination message."),
    "terminationMessagePolicy": Prop(STRING, "File or FallbackToLogsOnError."),
    "imagePullPolicy": Prop(STRING, "Always, Never or IfNotPresent."),
    "stdin": Prop(BOOLEAN, "Whether the container allocates a buffer for stdin."),
    "stdinOnce": Prop(BOOLEAN, "Whether stdin is closed after the first attach ends."),
    "tty": Prop(BOOLEAN, "Whether the container allocates a TTY; needs stdin."),
}, "A single application container to run within a pod.")

POD_SPEC = _struct("PodSpec", {
    "initContainers": Prop(ListOf(CONTAINER, "map", ("name",), "merge", "name"),
                           "Containers run to completion before the app containers start."),
    "containers": Prop(ListOf(CONTAINER, "map", ("name",), "merge", "name"),
                       "Containers of the pod; at least one.", required=True),
    "restartPolicy": Prop(STRING, "Always, OnFailure or Never; defaults to Always."),
    "terminationGracePeriodSeconds": Prop(INT64, "Grace period for termination; defaults to 30."),
    "activeDeadlineSeconds": Prop(INT64, "Maximum run time of the pod."),
    "dnsPolicy": Prop(STRING, "DNS policy; defaults to ClusterFirst."),
    "nodeSelector": Prop(MapOf(STRING), "Labels a node must have to run this pod."),
    "serviceAccountName": Prop(STRING, "The ServiceAccount the pod runs as."),
    "serviceAccount": Prop(STRING, "Deprecated alias of serviceAccountName."),
    "automountServiceAccountToken": Prop(BOOLEAN, "Whether a token is mounted automatically."),
    "nodeName": Prop(STRING, "The node this pod is bound to."),
    "hostNetwork": Prop(BOOLEAN, "Use the host's network namespace."),
    "hostPID": Prop(BOOLEAN, "Use the host's pid namespace."),
    "hostIPC": Prop(BOOLEAN, "Use the host's ipc namespace."),
    "imagePullSecrets": Prop(ListOf(LOCAL_OBJECT_REFERENCE, "map", ("name",), "merge", "name"),
                             "Secrets for pulling images."),
    "hostname": Prop(STRING, "The pod's hostname."),
    "subdomain": Prop(STRING, "The pod's subdomain, a DNS label."),
    "schedulerName": Prop(STRING, "The scheduler that dispatches the pod."),
    "priorityClassName": Prop(STRING, "The PriorityClass giving the pod's priority."),
    "priority": Prop(INT32, "The priority value."),
}, "The desired state of a pod.")

POD_CONDITION = _struct("PodCondition", {
    "type": Prop(STRING, "Type of the condition.", required=True),
    "observedGeneration": Prop(INT64, "The metadata.generation the condition was set for."),
    "status": Prop(STRING, "True, False or Unknown.", required=True),
    "lastProbeTime": Prop(TIME, "Last time the condition was probed."),
    "lastTransitionTime": Prop(TIME, "Last time the condition changed."),
    "reason": Prop(STRING, "One-word reason for the last transition."),
    "message": Prop(STRING, "Human-readable details of the last transition."),
}, "A condition of a pod.")

POD_IP = _struct("PodIP", {
    "ip": Prop(STRING, "An IP address allocated to the pod.", required=True),
}, "An IP address of a pod.")

FREE_FORM_STATE = _struct("ContainerState", {}, "Details of a container's state.",
                          preserve_unknown=True)

CONTAINER_STATUS = _struct("ContainerStatus", {
    "name": Prop(STRING, "Name of the container.", required=True),
    "state": Prop(FREE_FORM_STATE, "The container's current state."),
    "lastState": Prop(FREE_FORM_STATE, "The container's last termination state."),
    "ready": Prop(BOOLEAN, "Whether the container passes its readiness check.", required=True),
    "restartCount": Prop(INT32, "Times the container has restarted.", required=True),
    "image": Prop(STRING, "The image the container runs.", required=True),
    "imageID": Prop(STRING, "The image's ID.", required=True),
    "containerID": Prop(STRING, "The container's ID in the runtime."),
    "started": Prop(BOOLEAN, "Whether the container has started."),
}, "The state of one container of a pod.")

POD_STATUS = _struct("PodStatus", {
    "observedGeneration": Prop(INT64, "The metadata.generation the status was set for."),
    "phase": Prop(STRING, "Pending, Running, Succeeded, Failed or Unknown."),
    "conditions": Prop(ListOf(POD_CONDITION, "map", ("type",), "merge", "type"),
                       "Current service state of the pod."),
    "message": Prop(STRING, "Why the pod is in this condition."),
    "reason": Prop(STRING, "A brief CamelCase reason."),
    "nominatedNodeName": Prop(STRING, "The node this pod preempts pods on, if any."),
    "hostIP": Prop(STRING, "IP address of the host the pod runs on."),
    "podIP": Prop(STRING, "IP address allocated to the pod."),
    "podIPs": Prop(ListOf(POD_IP, "map", ("ip",), "merge", "ip"), "IP addresses allocated to the pod."),
    "startTime": Prop(TIME, "When the pod was acknowledged by its node."),
    "initContainerStatuses": Prop(ListOf(CONTAINER_STATUS), "Status of each init container."),
    "containerStatuses": Prop(ListOf(CONTAINER_STATUS), "Status of each container."),
    "qosClass": Prop(STRING, "The quality-of-service class."),
    "resize": Prop(STRING, "Deprecated status of a pending resize."),
}, "The most recently observed status of a pod.")

NAMESPACE_SPEC = _struct("NamespaceSpec", {
    "finalizers": Prop(ListOf(STRING), "Finalizers that must be empty before the namespace is removed."),
}, "The desired state of a namespace.")

NAMESPACE_CONDITION = _struct("NamespaceCondition", {
    "type": Prop(STRING, "Type of the condition.", required=True),
    "status": Prop(STRING, "True, False or Unknown.", required=True),
    "lastTransitionTime": Prop(TIME, "Last time the condition changed."),
    "reason": Prop(STRING, "One-word reason."),
    "message": Prop(STRING, "Human-readable details."),
}, "A condition of a namespace.")

NAMESPACE_STATUS = _struct("NamespaceStatus", {
    "phase": Prop(STRING, "Active or Terminating."),
    "conditions": Prop(ListOf(NAMESPACE_CONDITION, "map", ("type",), "merge", "type"),
                       "The latest observations of the namespace's state."),
}, "The observed state of a namespace.")


def _default_namespace(obj: dict) -> None:
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        meta.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = name


def _create_namespace(obj: dict) -> None:
    obj["spec"] = {"finalizers": [NAMESPACE_FINALIZER]}
    obj["status"] = {"phase": "Active"}


def _update_namespace(new: dict, old: dict) -> None:
    """A namespace's spec (its finalizers) changes only through /finalize."""
    new["spec"] = copy.deepcopy(old.get("spec") or {})


def _namespace_finalizers(obj: dict):
    """A namespace also waits for its ``spec.finalizers`` (its contents to go)."""
    return (obj.get("spec") or {}).get("finalizers") or ()


def _default_pod(obj: dict) -> None:
    spec = obj.get("spec")
    if spec is None:
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    # Upstream's v1 conversion keeps the deprecated alias in step: an old client's
    # serviceAccount fills an empty serviceAccountName, and every pod shows both.
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    else:
        spec.pop("serviceAccount", None)
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        image = container.get("image", "")
        if "imagePullPolicy" not in container:
            tag = image.rsplit("/", 1)[-1]
            latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
            container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        for port in container.get("ports") or ():
            port.setdefault("protocol", "TCP")


def _create_pod(obj: dict) -> None:
    obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def _validate_containers(containers, path: str, names: set) -> list:
    causes = []
    for i, container in enumerate(containers):
        cpath = f"{path}[{i}]"
        name = container.get("name", "")
        if not name:
            causes.append(fe.required(f"{cpath}.name"))
        else:
            causes.extend(fe.invalid(f"{cpath}.name", name, p) for p in dns_label(name))
            if name in names:
                causes.append(fe.duplicate(f"{cpath}.name", name))
            names.add(name)
        if not container.get("image"):
            causes.append(fe.required(f"{cpath}.image"))
        policy = container.get("imagePullPolicy")
        if policy not in _PULL_POLICIES:
            causes.append(fe.not_supported(f"{cpath}.imagePullPolicy", policy or "", _PULL_POLICIES))
        for j, port in enumerate(container.get("ports") or ()):
            number = port.get("containerPort", 0)
            if not 0 < number < 65536:
                causes.append(fe.invalid(f"{cpath}.ports[{j}].containerPort", number,
                                         "must be between 1 and 65535, inclusive"))
            if port.get("protocol") not in _PROTOCOLS:
                causes.append(fe.not_supported(f"{cpath}.ports[{j}].protocol",
                                               port.get("protocol", ""), _PROTOCOLS))
        for j, env in enumerate(container.get("env") or ()):
            if not env.get("name"):
                causes.append(fe.required(f"{cpath}.env[{j}].name"))
    return causes


def _validate_pod(obj: dict) -> list:
    spec = obj.get("spec")
    if spec is None:
        return [fe.required("spec")]
    causes = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append(fe.required("spec.containers"))
    names = set()
    causes.extend(_validate_containers(containers, "spec.containers", names))
    causes.extend(_validate_containers(spec.get("initContainers") or [], "spec.initContainers", names))
    if spec.get("restartPolicy") not in _RESTART_POLICIES:
        causes.append(fe.not_supported("spec.restartPolicy", spec.get("restartPolicy", ""),
                                       _RESTART_POLICIES))
    if spec.get("terminationGracePeriodSeconds", 0) < 0:
        causes.append(fe.invalid("spec.terminationGracePeriodSeconds",
                                 spec["terminationGracePeriodSeconds"],
                                 "must be greater than or equal to 0"))
    node = spec.get("nodeName")
    if node:
        causes.extend(fe.invalid("spec.nodeName", node, p) for p in dns_subdomain(node))
    subdomain = spec.get("subdomain")
    if subdomain:
        causes.extend(fe.invalid("spec.subdomain", subdomain, p) for p in dns_label(subdomain))
    phase = (obj.get("status") or {}).get("phase")
    if phase is not None and phase not in _PHASES:
        causes.append(fe.not_supported("status.phase", phase, _PHASES))
    return causes


def _validate_pod_update(new: dict, old: dict) -> list:
    """Upstream lets few pod spec fields change; nodeName may be set once (binding)."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes = []
    if old_spec.get("nodeName") and new_spec.get("nodeName") != old_spec.get("nodeName"):
        causes.append(fe.invalid("spec.nodeName", new_spec.get("nodeName", ""),
                                 "field is immutable once set"))
    old_names = [c.get("name") for c in old_spec.get("containers") or ()]
    new_names = [c.get("name") for c in new_spec.get("containers") or ()]
    if old_names != new_names:
        causes.append(fe.forbidden("spec.containers",
                                   "pod updates may not add or remove containers"))
    return causes


_KEY_RE = re.compile(r"[-._a-zA-Z0-9]+\Z")
_KEY_MESSAGE = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                "is '[-._a-zA-Z0-9]+')")


def _validate_keys(obj: dict, fields) -> list:
    causes, seen = [], set()
    for field in fields:
        for key in obj.get(field) or {}:
            if not _KEY_RE.match(key) or key in (".", ".."):
                causes.append(fe.invalid(f"{field}[{key}]", key, _KEY_MESSAGE))
            if key in seen:
                causes.append(fe.invalid(f"{field}[{key}]", key, "duplicate of key present in "
                                         + ("binaryData" if field == "data" else "data")))
            seen.add(key)
    return causes


def _validate_binary(obj: dict, field: str) -> list:
    causes = []
    for key, value in (obj.get(field) or {}).items():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            causes.append(fe.invalid(f"{field}[{key}]", "<value omitted>",
                                     "must be base64-encoded"))
    return causes


def _validate_immutable_data(fields):
    def validate(new: dict, old: dict) -> list:
        if not old.get("immutable"):
            return []
        if any(new.get(f) != old.get(f) for f in fields):
            return [fe.forbidden("data", "field is immutable when `immutable` is set")]
        if not new.get("immutable"):
            return [fe.forbidden("immutable", "field is immutable when `immutable` is set")]
        return []
    return validate


def _validate_configmap(obj: dict) -> list:
    return _validate_keys(obj, ("data", "binaryData")) + _validate_binary(obj, "binaryData")


def _default_secret(obj: dict) -> None:
    """Fold write-only ``stringData`` into ``data``, as upstream does on every write."""
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()


def _validate_secret(obj: dict) -> list:
    return _validate_keys(obj, ("data",)) + _validate_binary(obj, "data")


def _core(kind, plural, namespaced, fields, doc, name_rule=dns_subdomain, **kw) -> ResourceType:
    return ResourceType(
        group="", version="v1", kind=kind, plural=plural, singular=kind.lower(),
        namespaced=namespaced, fields=fields, doc=doc, name_rule=name_rule,
        definition_prefix=PREFIX, **kw)


NAMESPACE = _core("Namespace", "namespaces", False, {
    "spec": Prop(NAMESPACE_SPEC, "The behaviour of the namespace."),
    "status": Prop(NAMESPACE_STATUS, "The current status of the namespace (read-only here)."),
}, "Namespace provides a scope for names.", name_rule=dns_label, short_names=("ns",),
    has_status=True, default=_default_namespace, prepare_for_create=_create_namespace,
    prepare_for_update=_update_namespace, extra_finalizers=_namespace_finalizers,
    decide_delete=deletion.decide_namespace)

POD = _core("Pod", "pods", True, {
    "spec": Prop(POD_SPEC, "Specification of the desired behaviour of the pod."),
    "status": Prop(POD_STATUS, "Most recently observed status of the pod (read-only here)."),
}, "Pod is a collection of containers that can run on a host.", short_names=("po",),
    categories=("all",), has_status=True, default=_default_pod, validate=_validate_pod,
    validate_update=_validate_pod_update, prepare_for_create=_create_pod,
    returns_deleted_object=True)

CONFIG_MAP = _core("ConfigMap", "configmaps", True, {
    "immutable": Prop(BOOLEAN, "If true, data cannot be updated."),
    "data": Prop(MapOf(STRING), "Configuration data (UTF-8 strings)."),
    "binaryData": Prop(MapOf(BYTES), "Binary configuration data, base64-encoded."),
}, "ConfigMap holds configuration data for pods to consume.", short_names=("cm",),
    validate=_validate_configmap, validate_update=_validate_immutable_data(("data", "binaryData")))

SECRET = _core("Secret", "secrets", True, {
    "immutable": Prop(BOOLEAN, "If true, data cannot be updated."),
    "data": Prop(MapOf(BYTES), "Secret data, base64-encoded."),
    "stringData": Prop(MapOf(STRING), "Write-only convenience: merged into data on write."),
    "type": Prop(STRING, "Used to facilitate programmatic handling of secret data."),
}, "Secret holds secret data of a certain type.", default=_default_secret,
    validate=_validate_secret, validate_update=_validate_immutable_data(("data",)))

SERVICE_ACCOUNT = _core("ServiceAccount", "serviceaccounts", True, {
    "secrets": Prop(ListOf(OBJECT_REFERENCE, "map", ("name",), "merge", "name"),
                    "Secrets pods running as this account may use."),
    "imagePullSecrets": Prop(ListOf(LOCAL_OBJECT_REFERENCE), "Secrets for pulling images."),
    "automountServiceAccountToken": Prop(BOOLEAN, "Whether pods mount a token automatically."),
}, "ServiceAccount binds together a name, a principal, and a set of secrets.",
    short_names=("sa",), returns_deleted_object=True)

KINDS = (NAMESPACE, POD, CONFIG_MAP, SECRET, SERVICE_ACCOUNT)
