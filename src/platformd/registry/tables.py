"""
Table columns (``as=Table``, spec 4.2.7), as upstream's printers print them: the column
machinery and the columns every kind uses.  Each kind's own columns are its
``ResourceType.columns`` (``registry/kinds/``).

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

