"""
Event (core ``v1``, ``events``): a report of something that happened to an object.

Upstream's strategy (``pkg/registry/core/event``): namespaced, no status, created by a
PUT of an absent object, updates without a resourceVersion allowed, validated by
``ValidateEventCreate``/``ValidateEventUpdate`` (``pkg/apis/core/validation/events.go``)
for the version the request named: through core ``v1`` only the legacy rules (the
involved object's namespace must match; an event with an ``eventTime`` needs its
reporting controller and instance, action and reason), through
``events.platform.io/v1`` (``eventsv1.py``) the strict ones too.  Both versions are one
storage: objects are stored in this form and the other version is a view of them
(``cache/versions.py``).  Field paths in errors are the internal type's, whatever the
version (``reportingController``, ``message``, ``involvedObject``), as upstream's.

Stored events expire ``--event-ttl`` after their last write (upstream gives each an
etcd lease): ``registry/eventttl.py``.

Go's JSON always shows ``involvedObject`` and ``source`` (structs), ``firstTimestamp``,
``lastTimestamp`` and ``eventTime`` (``null`` when unset), ``reportingComponent`` and
``reportingInstance`` (no ``omitempty``); ``default`` puts them in so every encoding
shows what upstream's does.
"""

from __future__ import annotations

import datetime
import re

import attrs

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, path_segment, qualified_name
from platformd.model.schema import INT32, MICRO_TIME, STRING, TIME, Prop
from platformd.registry.kinds.coreshapes import (
    OBJECT_REFERENCE as _REFERENCE, OBJECT_REFERENCE_PRESENCE, core_kind, struct,
)
from platformd.registry.tables import Column, human_duration

#: Upstream's limits (events.go).
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024
#: ``metav1.NamespaceSystem``, renamed; ``metav1.NamespaceDefault``.
NAMESPACE_SYSTEM = "platform-system"
NAMESPACE_DEFAULT = "default"
EVENT_TYPES = ("Normal", "Warning")

#: ``ObjectReference`` is ``+structType=atomic`` upstream: an event's references are owned
#: whole by their field manager (``f:involvedObject: {}``).  ServiceAccount's
#: ``secrets`` keep the per-field form they had (``coreshapes.OBJECT_REFERENCE``).
OBJECT_REFERENCE = attrs.evolve(_REFERENCE, atomic=True)

EVENT_SOURCE = struct("EventSource", {
    "component": Prop(STRING, "Component from which the event is generated."),
    "host": Prop(STRING, "Node name on which the event is generated."),
}, "EventSource contains information for an event.")

EVENT_SERIES = struct("EventSeries", {
    "count": Prop(INT32, "Number of occurrences in this series up to the last heartbeat "
                         "time"),
    "lastObservedTime": Prop(MICRO_TIME, "Time of the last occurrence observed"),
}, "EventSeries contain information on series of events, i.e. thing that was/is happening "
   "continuously for some time.")

FIELDS = {
    "involvedObject": Prop(OBJECT_REFERENCE, "The object that this event is about.",
                           required=True),
    "reason": Prop(STRING, "This should be a short, machine understandable string that gives "
                           "the reason for the transition into the object's current status."),
    "message": Prop(STRING, "A human-readable description of the status of this operation."),
    "source": Prop(EVENT_SOURCE, "The component reporting this event. Should be a short "
                                 "machine understandable string."),
    "firstTimestamp": Prop(TIME, "The time at which the event was first recorded. (Time of "
                                 "server receipt is in TypeMeta.)"),
    "lastTimestamp": Prop(TIME, "The time at which the most recent occurrence of this event "
                                "was recorded."),
    "count": Prop(INT32, "The number of times this event has occurred."),
    "type": Prop(STRING, "Type of this event (Normal, Warning), new types could be added in "
                         "the future"),
    "eventTime": Prop(MICRO_TIME, "Time when this Event was first observed."),
    "series": Prop(EVENT_SERIES, "Data about the Event series this event represents or nil "
                                 "if it's a singleton Event."),
    "action": Prop(STRING, "What action was taken/failed regarding to the Regarding object."),
    "related": Prop(OBJECT_REFERENCE, "Optional secondary object for more complex actions."),
    "reportingComponent": Prop(STRING, "Name of the controller that emitted this Event, e.g. "
                                       "`kubernetes.io/kubelet`."),
    "reportingInstance": Prop(STRING, "ID of the controller instance, e.g. "
                                      "`kubelet-xyzf`."),
}

#: Shown even when empty (Go's JSON of the internal-to-v1 struct, see module doc).
_ALWAYS = (("involvedObject", dict), ("source", dict), ("firstTimestamp", None),
           ("lastTimestamp", None), ("eventTime", None))
#: ``omitempty`` scalars: their zero value is not shown.
_OMIT_EMPTY = ("reason", "message", "count", "type", "action")


#: A time already as ``go_time`` writes it, or one it would leave (an impossible day):
#: four-digit years from 1000 (``strftime`` writes no leading zeros), hours to 23 and
#: no leap second (``fromisoformat`` would move those), ASCII digits.
_WRITTEN = re.compile(r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z")


def go_time(text):
    """A ``metav1.Time`` as upstream writes it back: UTC, whole seconds (None stays)."""
    if not isinstance(text, str) or _WRITTEN.fullmatch(text):
        return text  # what the schema's decoding left: nothing to parse again
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if stamp.tzinfo is None:
        return text
    return stamp.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default(obj: dict) -> None:
    for name, zero in _ALWAYS:
        if obj.get(name) is None:
            obj[name] = zero() if zero else None
    for name in ("firstTimestamp", "lastTimestamp"):
        obj[name] = go_time(obj[name])
    for name in _OMIT_EMPTY:
        if name in obj and not obj[name]:
            del obj[name]
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")


# -- validation (pkg/apis/core/validation/events.go, on the stored form) -----------------


def _namespace_of(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def legacy_validate(obj: dict) -> list:
    """``legacyValidateEvent``: every event, whatever the version it came through."""
    causes = []
    namespace = _namespace_of(obj)
    involved = (obj.get("involvedObject") or {}).get("namespace") or ""
    if not obj.get("eventTime"):
        # An old-style event: its namespace and the involved object's must agree.
        if not involved:
            if namespace not in ("", NAMESPACE_DEFAULT):
                causes.append(fe.invalid("involvedObject.namespace", involved,
                                         "does not match event.namespace"))
        elif namespace != involved:
            causes.append(fe.invalid("involvedObject.namespace", involved,
                                     "does not match event.namespace"))
    else:
        if not involved and namespace not in (NAMESPACE_DEFAULT, NAMESPACE_SYSTEM):
            causes.append(fe.invalid("involvedObject.namespace", involved,
                                     "does not match event.namespace"))
        controller = obj.get("reportingComponent") or ""
        if not controller:
            causes.append(fe.required("reportingController"))
        causes.extend(fe.invalid("reportingController", controller, problem)
                      for problem in qualified_name(controller))
        causes.extend(_length("reportingInstance", obj.get("reportingInstance") or "",
                              REPORTING_INSTANCE_LENGTH_LIMIT))
        causes.extend(_length("action", obj.get("action") or "", ACTION_LENGTH_LIMIT))
        causes.extend(_length("reason", obj.get("reason") or "", REASON_LENGTH_LIMIT))
        if len(obj.get("message") or "") > NOTE_LENGTH_LIMIT:
            causes.append(fe.invalid("message", "",
                                     f"can have at most {NOTE_LENGTH_LIMIT} characters"))
    causes.extend(fe.invalid("namespace", namespace, problem)
                  for problem in dns_subdomain(namespace))
    return causes


def _length(field: str, value: str, limit: int) -> list:
    """Required, then at most ``limit`` characters (the value shown as ``""``)."""
    if not value:
        return [fe.required(field)]
    if len(value) > limit:
        return [fe.invalid(field, "", f"can have at most {limit} characters")]
    return []


def _validate_series(obj: dict) -> list:
    """``validateV1EventSeries``."""
    series = obj.get("series")
    if series is None:
        return []
    causes = []
    if (series.get("count") or 0) < 2:
        causes.append(fe.invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(fe.required("series.lastObservedTime"))
    return causes


def strict_validate(obj: dict) -> list:
    """What ``ValidateEventCreate`` adds for ``events.platform.io/v1`` (metadata is
    checked by the kind's name rule)."""
    causes = _validate_series(obj)
    if not obj.get("eventTime"):
        causes.append(fe.required("eventTime"))
    kind = obj.get("type") or ""
    if kind not in EVENT_TYPES:
        causes.append(fe.invalid("type", "", f"has invalid value: {kind}"))
    if obj.get("firstTimestamp"):
        causes.append(fe.invalid("firstTimestamp", "", "needs to be unset"))
    if obj.get("lastTimestamp"):
        causes.append(fe.invalid("lastTimestamp", "", "needs to be unset"))
    if obj.get("count"):
        causes.append(fe.invalid("count", "", "needs to be unset"))
    source = obj.get("source") or {}
    if source.get("component") or source.get("host"):
        causes.append(fe.invalid("source", "", "needs to be unset"))
    return causes


#: The internal type's fields a strict update may not change, in upstream's order
#: (``reason`` checked twice, as there), with their Go field names for the value shown.
_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp",
              "lastTimestamp", "count", "reason", "type", "eventTime", "action", "related",
              "reportingComponent", "reportingInstance")
_GO_NAMES = {"kind": "Kind", "namespace": "Namespace", "name": "Name", "uid": "UID",
             "apiVersion": "APIVersion", "resourceVersion": "ResourceVersion",
             "fieldPath": "FieldPath", "component": "Component", "host": "Host"}
_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath")


def _shown(field: str, value):
    """A value as ``field.Invalid`` shows it for the internal type's field."""
    if field in ("involvedObject", "related"):
        if value is None:
            return fe.GoValue("null")
        return fe.go_json({_GO_NAMES[k]: value.get(k) or "" for k in _REFERENCE_FIELDS})
    if field == "source":
        value = value or {}
        return fe.go_json({"Component": value.get("component") or "",
                           "Host": value.get("host") or ""})
    if field == "count":
        return value or 0
    if value is None:
        return fe.GoValue("null")
    return value


def strict_validate_update(new: dict, old: dict) -> list:
    """What ``ValidateEventUpdate`` adds for ``events.platform.io/v1``."""
    causes = []
    if new.get("series") != old.get("series"):
        causes.extend(_validate_series(new))
    for name in _IMMUTABLE:
        # Compared as the internal type holds them: absent and empty are one value.
        a, b = new.get(name) or None, old.get(name) or None
        if a != b:
            path = "reportingController" if name == "reportingComponent" else name
            causes.append(fe.invalid(path, _shown(name, new.get(name)), "field is immutable"))
    return causes


# -- table (printers.go printEvent) ------------------------------------------------------


def _since(stamp, now) -> str:
    """``translateTimestampSince``/``translateMicroTimestampSince``."""
    if not stamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "<unknown>"
    return human_duration(now - then)


def _first_seen(obj, now):
    if obj.get("firstTimestamp"):
        return _since(obj["firstTimestamp"], now)
    return _since(obj.get("eventTime"), now)


def _last_seen(obj, now):
    series = obj.get("series")
    if series is not None:
        return _since(series.get("lastObservedTime"), now)
    if obj.get("lastTimestamp"):
        return _since(obj["lastTimestamp"], now)
    return _first_seen(obj, now)


def _count(obj, now):
    series = obj.get("series")
    if series is not None:
        return series.get("count") or 0
    return obj.get("count") or 1  # singleton events have no count in the new API


def _object(obj, now):
    involved = obj.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def _source(obj, now):
    """``formatEventSource``: component (or reporting controller), then instance."""
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


COLUMNS = (
    Column("Last Seen", "string", _last_seen,
           "The time at which the most recent occurrence of this event was recorded."),
    Column("Type", "string", lambda obj, now: obj.get("type") or "",
           "Type of this event (Normal, Warning), new types could be added in the future"),
    Column("Reason", "string", lambda obj, now: obj.get("reason") or "",
           "This should be a short, machine understandable string that gives the reason for "
           "the transition into the object's current status."),
    Column("Object", "string", _object, "The object that this event is about."),
    Column("Subobject", "string",
           lambda obj, now: (obj.get("involvedObject") or {}).get("fieldPath") or "",
           "If referring to a piece of an object instead of an entire object, this string "
           "should contain a valid JSON/Go field access statement, such as "
           "desiredState.manifest.containers[2]. For example, if the object reference is to "
           "a container within a pod, this would take on a value like: "
           "\"spec.containers{name}\" (where \"name\" refers to the name of the container "
           "that triggered the event) or if no container name is specified "
           "\"spec.containers[2]\" (container with index 2 in this pod). This syntax is "
           "chosen only to have some well-defined way of referencing a part of an object.",
           priority=1),
    Column("Source", "string", _source, "The component reporting this event. Should be a "
           "short machine understandable string.", priority=1),
    Column("Message", "string", lambda obj, now: (obj.get("message") or "").strip(),
           "A human-readable description of the status of this operation."),
    Column("First Seen", "string", _first_seen,
           "The time at which the event was first recorded. (Time of server receipt is in "
           "TypeMeta.)", priority=1),
    Column("Count", "string", _count, "The number of times this event has occurred.",
           priority=1),
    Column("Name", "string", lambda obj, now: obj.get("metadata", {}).get("name", ""),
           "Name must be unique within a namespace. Is required when creating resources, "
           "although some resources may allow a client to request the generation of an "
           "appropriate name automatically. Name is primarily intended for creation "
           "idempotence and configuration definition. Cannot be updated.", priority=1,
           format="name"),
)

#: ``EventToSelectableFields`` (the object's metadata.name and metadata.namespace, the
#: involved object's fields, reason, reportingComponent, source, type).
FIELD_LABELS = ("metadata.name", "metadata.namespace", "involvedObject.kind",
                "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion",
                "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")

PRESENCE = {
    "Event": "metadata involvedObject reason? message? source firstTimestamp? "
             "lastTimestamp? count? type? eventTime? action? reportingComponent "
             "reportingInstance",
    "EventSeries": "count? lastObservedTime?",
    "EventSource": "component? host?",
    **OBJECT_REFERENCE_PRESENCE,
}


def _validate(obj: dict) -> list:
    return legacy_validate(obj)


KIND = core_kind(
    "Event", "events", True, FIELDS,
    "Event is a report of an event somewhere in the cluster.", PRESENCE,
    name_rule=path_segment, short_names=("ev",), default=default, validate=_validate,
    allow_create_on_update=True, columns=COLUMNS, field_labels=FIELD_LABELS,
    field_paths={"source": "source.component"})
