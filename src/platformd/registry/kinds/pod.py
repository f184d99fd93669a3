"""
Pod (core ``v1``): a collection of containers that can run on a host.

Only the fields this server acts on or clients commonly send are modelled; the rest of
upstream's Pod is out of scope for now.  Defaults and validation follow upstream's for
the fields that are here.
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_label, dns_subdomain
from platformd.model.schema import (
    BOOLEAN, INT32, INT64, STRING, TIME, ListOf, MapOf, Prop,
)
from platformd.registry.kinds import binding, eviction, netaddr
from platformd.registry.kinds.coreshapes import (
    LOCAL_OBJECT_REFERENCE, LOCAL_OBJECT_REFERENCE_PRESENCE, core_kind, struct,
)
from platformd.registry.tables import AGE, NAME, Column

ENV_VAR = struct("EnvVar", {
    "name": Prop(STRING, "Name of the environment variable.", required=True),
    "value": Prop(STRING, "Value of the variable."),
}, "An environment variable of a container.")

CONTAINER_PORT = struct("ContainerPort", {
    "name": Prop(STRING, "An IANA_SVC_NAME for the port."),
    "hostPort": Prop(INT32, "Port number on the host."),
    "containerPort": Prop(INT32, "Port number on the pod's IP address.", required=True),
    "protocol": Prop(STRING, "UDP, TCP or SCTP; defaults to TCP."),
    "hostIP": Prop(STRING, "Host IP to bind the external port to."),
}, "A network port in a single container.")

RESOURCE_REQUIREMENTS = struct("ResourceRequirements", {
    "limits": Prop(MapOf(STRING), "Maximum compute resources allowed."),
    "requests": Prop(MapOf(STRING), "Minimum compute resources required."),
}, "Compute resource requirements.")

CONTAINER = struct("Container", {
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

POD_SPEC = struct("PodSpec", {
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

POD_CONDITION = struct("PodCondition", {
    "type": Prop(STRING, "Type of the condition.", required=True),
    "observedGeneration": Prop(INT64, "The metadata.generation the condition was set for."),
    "status": Prop(STRING, "True, False or Unknown.", required=True),
    "lastProbeTime": Prop(TIME, "Last time the condition was probed."),
    "lastTransitionTime": Prop(TIME, "Last time the condition changed."),
    "reason": Prop(STRING, "One-word reason for the last transition."),
    "message": Prop(STRING, "Human-readable details of the last transition."),
}, "A condition of a pod.")

POD_IP = struct("PodIP", {
    "ip": Prop(STRING, "An IP address allocated to the pod.", required=True),
}, "An IP address of a pod.")

FREE_FORM_STATE = struct("ContainerState", {}, "Details of a container's state.",
                         preserve_unknown=True)

CONTAINER_STATUS = struct("ContainerStatus", {
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

POD_STATUS = struct("PodStatus", {
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

def _default(obj: dict) -> None:
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


def _prepare_for_create(obj: dict) -> None:
    obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
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
            if port.get("protocol") not in netaddr.PROTOCOLS:
                causes.append(fe.not_supported(f"{cpath}.ports[{j}].protocol",
                                               port.get("protocol", ""), netaddr.PROTOCOLS))
        for j, env in enumerate(container.get("env") or ()):
            if not env.get("name"):
                causes.append(fe.required(f"{cpath}.env[{j}].name"))
    return causes


def _validate(obj: dict) -> list:
    spec = obj.get("spec")
    if spec is None:
        return [fe.required("spec")]
    causes = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append(fe.required("spec.containers"))
    names: set = set()
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


def _validate_update(new: dict, old: dict) -> list:
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


def _ready(obj, now):
    statuses = (obj.get("status") or {}).get("containerStatuses") or ()
    total = len((obj.get("spec") or {}).get("containers") or ())
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _status(obj, now):
    status = obj.get("status") or {}
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    return status.get("reason") or status.get("phase") or ""


def _restarts(obj, now):
    return sum(s.get("restartCount", 0)
               for s in (obj.get("status") or {}).get("containerStatuses") or ())


COLUMNS = (
    NAME,
    Column("Ready", "string", _ready, "The aggregate readiness state of this pod for "
           "accepting traffic."),
    Column("Status", "string", _status, "The aggregate status of the containers in this "
           "pod."),
    Column("Restarts", "integer", _restarts, "The number of times the containers in this "
           "pod have been restarted and when the last container in this pod has restarted."),
    AGE,
    Column("IP", "string", lambda obj, now: (obj.get("status") or {}).get("podIP") or "<none>",
           "IP address allocated to the pod. Routable at least within the cluster.",
           priority=1),
    Column("Node", "string",
           lambda obj, now: (obj.get("spec") or {}).get("nodeName") or "<none>",
           "Name of the Node this pod is bound to.", priority=1),
)

KIND = core_kind("Pod", "pods", True, {
    "spec": Prop(POD_SPEC, "Specification of the desired behaviour of the pod."),
    "status": Prop(POD_STATUS, "Most recently observed status of the pod (read-only here)."),
}, "Pod is a collection of containers that can run on a host.", {
    "Pod": "metadata spec status",
    "Container": "name image? workingDir? resources terminationMessagePath? "
                 "imagePullPolicy? stdin? stdinOnce? tty? terminationMessagePolicy?",
    "ContainerPort": "name? hostPort? containerPort protocol? hostIP?",
    "ContainerState": "",
    "ContainerStateRunning": "startedAt?",
    "ContainerStateTerminated": "exitCode signal? reason? message? startedAt? finishedAt? "
                                "containerID?",
    "ContainerStateWaiting": "reason? message?",
    "ContainerStatus": "name state lastState ready restartCount image imageID containerID?",
    "EnvVar": "name value?",
    "PodCondition": "type status lastProbeTime? lastTransitionTime? reason? message? "
                    "observedGeneration?",
    "PodIP": "ip",
    "PodSpec": "restartPolicy? dnsPolicy? serviceAccountName? serviceAccount? nodeName? "
               "hostNetwork? hostPID? hostIPC? hostname? subdomain? schedulerName? "
               "priorityClassName?",
    "PodStatus": "phase? message? reason? hostIP? podIP? qosClass? nominatedNodeName? "
                 "resize? observedGeneration?",
    "ResourceRequirements": "",
    **LOCAL_OBJECT_REFERENCE_PRESENCE,
}, short_names=("po",), categories=("all",), has_status=True, default=_default,
    validate=_validate, validate_update=_validate_update,
    prepare_for_create=_prepare_for_create, returns_deleted_object=True, columns=COLUMNS,
    # Create-only subresources: a scheduler's binding, a drain's eviction (issue 32).
    subresources={"binding": binding.SUBRESOURCE, "eviction": eviction.SUBRESOURCE},
    field_labels=("metadata.name", "metadata.namespace", "spec.nodeName",
                  "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                  "status.phase", "status.podIP"))
