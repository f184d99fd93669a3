"""
Table columns per kind (``as=Table``, spec 4.2.7), as upstream's printers print them.

Priority 0 columns are what ``kubectl get`` shows; priority 1 columns appear with
``-o wide``.  Kinds without their own table get upstream's default: Name and Created At.
"""

from __future__ import annotations

import calendar
import time
from typing import Callable

import attrs

NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, "
            "although some resources may allow a client to request the generation of an "
            "appropriate name automatically. Name is primarily intended for creation "
            "idempotence and configuration definition. Cannot be updated.")
AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object "
           "was created. It is not guaranteed to be set in happens-before order across "
           "separate operations. Clients may not set this value. It is represented in "
           "RFC3339 form and is in UTC.")


@attrs.frozen
class Column:
    name: str
    type: str
    cell: Callable
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def human_duration(seconds: float) -> str:
    """Upstream's ``duration.HumanDuration``: 5s, 3m20s, 7h5m, 4d2h, 1y30d."""
    seconds = int(seconds)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _age(obj, now):
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    try:
        created = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<unknown>"
    return human_duration(now - created)


def _name(obj, now):
    return obj.get("metadata", {}).get("name", "")


NAME = Column("Name", "string", _name, NAME_DOC, format="name")
AGE = Column("Age", "string", _age, AGE_DOC)
CREATED_AT = Column("Created At", "date",
                    lambda obj, now: obj.get("metadata", {}).get("creationTimestamp", ""),
                    AGE_DOC)
DEFAULT = (NAME, CREATED_AT)


def _subjects(kind_name: str, with_namespace: bool = False):
    def cell(obj, now):
        names = []
        for subject in obj.get("subjects") or ():
            if subject.get("kind") != kind_name:
                continue
            name = subject.get("name", "")
            if with_namespace:
                name = f"{subject.get('namespace', '')}/{name}"
            names.append(name)
        return ", ".join(names)
    return cell


def _role(obj, now):
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


BINDING = (
    NAME,
    Column("Role", "string", _role, "Role references a role."),
    AGE,
    Column("Users", "string", _subjects("User"), "Users in the binding.", priority=1),
    Column("Groups", "string", _subjects("Group"), "Groups in the binding.", priority=1),
    Column("ServiceAccounts", "string", _subjects("ServiceAccount", True),
           "ServiceAccounts in the binding.", priority=1),
)


def _pod_ready(obj, now):
    statuses = (obj.get("status") or {}).get("containerStatuses") or ()
    total = len((obj.get("spec") or {}).get("containers") or ())
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(obj, now):
    status = obj.get("status") or {}
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    return status.get("reason") or status.get("phase") or ""


def _pod_restarts(obj, now):
    return sum(s.get("restartCount", 0)
               for s in (obj.get("status") or {}).get("containerStatuses") or ())


POD = (
    NAME,
    Column("Ready", "string", _pod_ready, "The aggregate readiness state of this pod for "
           "accepting traffic."),
    Column("Status", "string", _pod_status, "The aggregate status of the containers in this "
           "pod."),
    Column("Restarts", "integer", _pod_restarts, "The number of times the containers in this "
           "pod have been restarted and when the last container in this pod has restarted."),
    AGE,
    Column("IP", "string", lambda obj, now: (obj.get("status") or {}).get("podIP") or "<none>",
           "IP address allocated to the pod. Routable at least within the cluster.",
           priority=1),
    Column("Node", "string",
           lambda obj, now: (obj.get("spec") or {}).get("nodeName") or "<none>",
           "Name of the Node this pod is bound to.", priority=1),
)

NAMESPACE = (
    NAME,
    Column("Status", "string", lambda obj, now: (obj.get("status") or {}).get("phase", ""),
           "The status of the namespace"),
    AGE,
)

CONFIG_MAP = (
    NAME,
    Column("Data", "integer", lambda obj, now: len(obj.get("data") or {})
           + len(obj.get("binaryData") or {}), "Data contains the configuration data."),
    AGE,
)

SECRET = (
    NAME,
    Column("Type", "string", lambda obj, now: obj.get("type", ""),
           "The type of data stored in the secret"),
    Column("Data", "integer", lambda obj, now: len(obj.get("data") or {}),
           "The number of entries in the secret"),
    AGE,
)

SERVICE_ACCOUNT = (
    NAME,
    Column("Secrets", "string", lambda obj, now: len(obj.get("secrets") or ()),
           "Secrets is a list of the secrets in the same namespace that pods running using "
           "this ServiceAccount are allowed to use."),
    AGE,
)

COLUMNS = {
    ("rbac.authorization.platform.io", "RoleBinding"): BINDING,
    ("rbac.authorization.platform.io", "ClusterRoleBinding"): BINDING,
    ("", "Pod"): POD,
    ("", "Namespace"): NAMESPACE,
    ("", "ConfigMap"): CONFIG_MAP,
    ("", "Secret"): SECRET,
    ("", "ServiceAccount"): SERVICE_ACCOUNT,
}


def columns_for(kind) -> tuple:
    return COLUMNS.get((kind.group, kind.kind), DEFAULT)
