"""
Event (``events.platform.io/v1``): the core Events (``event.py``) served in the newer
shape, from the same storage (upstream's ``events.k8s.io/v1``, one storage with core
``v1``; spec 2.1.3).  Objects are stored as core ``v1`` Events: ``to_storage`` and
``from_storage`` are upstream's conversion (``pkg/apis/events/v1/conversion.go``):

====================  ==========================
events.platform.io/v1  core v1
====================  ==========================
regarding             involvedObject
note                  message
reportingController   reportingComponent
deprecatedSource      source
deprecatedFirstTimestamp  firstTimestamp
deprecatedLastTimestamp   lastTimestamp
deprecatedCount       count
====================  ==========================

the rest (eventTime, series, reportingInstance, action, reason, related, type) by name.
An event created through either version reads through both; a name is one name in both.
Validation is ``ValidateEventCreate``/``Update`` for this version (the legacy rules and
the strict ones, on the stored form, with the internal type's field paths), metadata
names DNS subdomains.
"""

from __future__ import annotations

from platformd.model.meta import dns_subdomain
from platformd.model.schema import INT32, MICRO_TIME, STRING, TIME, Prop, Struct
from platformd.registry.kinds import event, presence
from platformd.registry.kinds.event import OBJECT_REFERENCE
from platformd.registry.resource import ResourceType

GROUP = "events.platform.io"
PREFIX = "io.platform.api.events.v1"
PROTO = "platform.api.events.v1."

EVENT_SERIES = Struct(f"{PREFIX}.EventSeries", {
    "count": Prop(INT32, "count is the number of occurrences in this series up to the last "
                         "heartbeat time.", required=True),
    "lastObservedTime": Prop(MICRO_TIME, "lastObservedTime is the time when last Event from "
                                         "the series was seen before last heartbeat.",
                             required=True),
}, "EventSeries contain information on series of events, i.e. thing that was/is happening "
   "continuously for some time.")

FIELDS = {
    "eventTime": Prop(MICRO_TIME, "eventTime is the time when this Event was first observed. "
                                  "It is required.", required=True),
    "series": Prop(EVENT_SERIES, "series is data about the Event series this event "
                                 "represents or nil if it's a singleton Event."),
    "reportingController": Prop(STRING, "reportingController is the name of the controller "
                                        "that emitted this Event."),
    "reportingInstance": Prop(STRING, "reportingInstance is the ID of the controller "
                                      "instance."),
    "action": Prop(STRING, "action is what action was taken/failed regarding to the regarding "
                           "object."),
    "reason": Prop(STRING, "reason is why the action was taken."),
    "regarding": Prop(OBJECT_REFERENCE, "regarding contains the object this Event is about."),
    "related": Prop(OBJECT_REFERENCE, "related is the optional secondary object for more "
                                      "complex actions."),
    "note": Prop(STRING, "note is a human-readable description of the status of this "
                         "operation."),
    "type": Prop(STRING, "type is the type of this event (Normal, Warning), new types could "
                         "be added in the future."),
    "deprecatedSource": Prop(event.EVENT_SOURCE, "deprecatedSource is the deprecated field "
                                                 "assuring backward compatibility with core.v1 "
                                                 "Event type."),
    "deprecatedFirstTimestamp": Prop(TIME, "deprecatedFirstTimestamp is the deprecated field "
                                           "assuring backward compatibility with core.v1 "
                                           "Event type."),
    "deprecatedLastTimestamp": Prop(TIME, "deprecatedLastTimestamp is the deprecated field "
                                          "assuring backward compatibility with core.v1 Event "
                                          "type."),
    "deprecatedCount": Prop(INT32, "deprecatedCount is the deprecated field assuring backward "
                                   "compatibility with core.v1 Event type."),
}

#: events.platform.io/v1 name -> core v1 name, where they differ.
RENAMED = {"regarding": "involvedObject", "note": "message",
           "reportingController": "reportingComponent", "deprecatedSource": "source",
           "deprecatedFirstTimestamp": "firstTimestamp",
           "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_BACK = {core: served for served, core in RENAMED.items()}


def to_storage(obj: dict) -> dict:
    """This version's object as the core ``v1`` Event it is stored as."""
    out: dict = {"kind": "Event", "apiVersion": "v1"}
    for key, value in obj.items():
        if key not in ("kind", "apiVersion"):
            out[RENAMED.get(key, key)] = value
    event.default(out)
    event.KIND.schema.order(out)
    return out


def from_storage(obj: dict) -> dict:
    """A stored core ``v1`` Event as this version shows it (Go's JSON of ``v1.Event``:
    ``eventTime`` null when unset, ``regarding`` and ``deprecatedSource`` always, the
    rest only when set)."""
    out: dict = {"kind": "Event", "apiVersion": f"{GROUP}/v1"}
    for key, value in obj.items():
        if key in ("kind", "apiVersion"):
            continue
        name = _BACK.get(key, key)
        if value in (None, "", 0) and name not in ("eventTime", "deprecatedFirstTimestamp",
                                                   "deprecatedLastTimestamp"):
            continue
        out[name] = value
    out.setdefault("eventTime", None)
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    out.setdefault("deprecatedFirstTimestamp", None)
    out.setdefault("deprecatedLastTimestamp", None)
    return out


def _default(obj: dict) -> None:
    """As ``from_storage`` shows an object: what a PUT or patch body lacks is filled."""
    shown = from_storage(to_storage(obj))
    obj.clear()
    obj.update(shown)


def _validate(obj: dict) -> list:
    stored = to_storage(obj)
    return event.legacy_validate(stored) + event.strict_validate(stored)


def _validate_update(new: dict, old: dict) -> list:
    return event.strict_validate_update(to_storage(new), to_storage(old))


def _stored_view(column):
    """A core Event column read off this version's object."""
    def cell(obj, now):
        return column.cell(to_storage(obj), now)
    return cell


COLUMNS = tuple(type(c)(c.name, c.type, _stored_view(c), c.description, c.priority, c.format)
                for c in event.COLUMNS)

PRESENCE = {
    "Event": "metadata eventTime? reportingController? reportingInstance? action? reason? "
             "regarding note? type? deprecatedSource deprecatedFirstTimestamp? "
             "deprecatedLastTimestamp? deprecatedCount?",
    "EventSeries": "count lastObservedTime?",
}

KIND = ResourceType(
    group=GROUP, version="v1", kind="Event", plural="events", singular="event",
    namespaced=True, fields=FIELDS, doc="Event is a report of an event somewhere in the "
    "cluster. It generally denotes some state change in the system.",
    short_names=("ev",), name_rule=dns_subdomain, definition_prefix=PREFIX,
    presence=presence(PROTO, "Event", PRESENCE), default=_default, validate=_validate,
    validate_update=_validate_update, allow_create_on_update=True, columns=COLUMNS,
    field_labels=("metadata.name", "metadata.namespace", "regarding.kind",
                  "regarding.namespace", "regarding.name", "regarding.uid",
                  "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
                  "reason", "reportingController", "source", "type"),
    field_paths={"source": "deprecatedSource.component"},
    storage_kind=event.KIND, to_storage=to_storage, from_storage=from_storage)
