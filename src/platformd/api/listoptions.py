"""
List and watch options (spec 4.3): parsed once, validated as upstream's
``ValidateListOptions`` validates them (422 Invalid on ``ListOptions``), and turned into
the read plan of spec 4.9's tables.
"""

from __future__ import annotations

import random
from typing import Optional

import attrs

from platformd import errors
from platformd.goformat import gonumbers
from platformd.util import slices
from platformd.api import shards
from platformd.api.selectors import FieldSelector, LabelSelector, field_selector, label_selector
from platformd.cache.reads import ANY, CONTINUATION, EXACTLY, MOST_RECENT, NOT_OLDER
from platformd.model import fielderrors as fe

EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"


#: Upstream's --min-request-timeout: a watch without timeoutSeconds lasts between one and
#: two of these.
MIN_REQUEST_TIMEOUT = 1800


@attrs.frozen
class ListOptions:
    watch: bool
    resource_version: Optional[int]  # None: unset or empty
    resource_version_text: str
    match: str
    limit: Optional[int]
    continue_token: str
    send_initial_events: Optional[bool]
    allow_bookmarks: bool
    timeout: Optional[int]
    labels: Optional[LabelSelector]
    fields: Optional[FieldSelector]
    shard: Optional[shards.ShardSelector]

    #: Whether items are filtered (then remainingItemCount is omitted); computed once,
    #: since watch fan-out asks for every event and every watcher.
    filtered: bool = attrs.field(init=False)

    def __attrs_post_init__(self):
        object.__setattr__(self, "filtered", any(
            s is not None and not getattr(s, "empty", False)
            for s in (self.labels, self.fields)) or self.shard is not None)

    def matches(self, obj: dict) -> bool:
        return ((self.labels is None or self.labels.matches(obj))
                and (self.fields is None or self.fields.matches(obj))
                and (self.shard is None or self.shard.matches(obj)))

    def watch_timeout(self) -> float:
        """timeoutSeconds, or upstream's default when it is unset or 0."""
        if self.timeout:
            return float(self.timeout)
        return MIN_REQUEST_TIMEOUT * (1 + random.random())

    def list_plan(self) -> str:
        """The row and column of spec 4.9's list table this request falls in."""
        rv = self.resource_version_text
        if self.continue_token:
            if rv not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue")
            return CONTINUATION
        if self.match == EXACT:
            return EXACTLY
        if self.match == NOT_OLDER_THAN:
            return ANY if rv == "0" else NOT_OLDER
        if rv == "":
            return MOST_RECENT
        if rv == "0":
            return ANY
        return EXACTLY if self.limit else NOT_OLDER


def _invalid(causes):
    return errors.invalid("ListOptions", "meta.platform.io", "", causes)


def parse(call, gates, watch: bool):
    """
    Every list/watch option of the request, validated: a ``ListOptions``, or a Deferred
    of one when its selectors are long enough to be parsed in slices (``slices.run``).
    """
    return slices.run(_parse(call, gates, watch))


def _parse(call, gates, watch: bool) -> slices.Work[ListOptions]:
    kind = call.kind
    rv_text = call.arg("resourceVersion") or ""
    resource_version = None
    if rv_text:
        try:
            resource_version = gonumbers.parse_uint(rv_text)  # as upstream's versioner
        except gonumbers.NumError:
            raise errors.bad_request(f'invalid resource version "{rv_text}": must be a '
                                     "non-negative decimal integer") from None
    limit = call.int_arg("limit")
    if limit is not None and limit < 0:
        raise _invalid([fe.invalid("limit", limit, "must be greater than or equal to 0")])
    timeout = call.int_arg("timeoutSeconds")
    if timeout is not None and timeout < 0:
        raise _invalid([fe.invalid("timeoutSeconds", timeout, "must be non-negative")])
    send_initial = call.bool_arg("sendInitialEvents") if call.has_arg("sendInitialEvents") \
        else None
    labels_text = call.arg("labelSelector")
    labels = (yield from label_selector(labels_text)) if labels_text else None
    fields = yield from _fields(call, kind)
    options = ListOptions(
        watch=watch,
        resource_version=resource_version,
        resource_version_text=rv_text,
        match=call.arg("resourceVersionMatch") or "",
        limit=limit or None,
        continue_token=call.arg("continue") or "",
        send_initial_events=send_initial,
        allow_bookmarks=call.bool_arg("allowWatchBookmarks"),
        timeout=timeout,
        labels=labels,
        fields=fields,
        shard=_shard(call, gates),
    )
    causes = (_watch_causes if watch else _list_causes)(options, gates)
    if causes:
        raise _invalid(causes)
    return options


def _fields(call, kind):
    text = call.arg("fieldSelector") or ""
    if call.info.name:
        # A watch on one object's path watches it by name (upstream's legacy form).
        text = ",".join(filter(None, [text, f"metadata.name={call.info.name}"]))
    return (yield from field_selector(text, kind)) if text else None


def _shard(call, gates):
    text = call.arg("shardSelector")
    if text is None or not gates["ShardedListAndWatch"]:
        return None  # spec 4.6: ignored when the feature is off
    return shards.parse(text)


def _list_causes(options: ListOptions, gates) -> list:
    causes = []
    match = options.match
    if match:
        if not options.resource_version_text:
            causes.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                       "forbidden unless resourceVersion is provided"))
        if options.continue_token:
            causes.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                       "forbidden when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(fe.not_supported("resourceVersionMatch", match,
                                           [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and options.resource_version_text == "0":
            causes.append(fe.forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" '
                                       'is forbidden for resourceVersion "0"'))
    if options.send_initial_events is not None:
        causes.append(fe.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(options: ListOptions, gates) -> list:
    causes = []
    match = options.match
    if options.send_initial_events is not None:
        if match != NOT_OLDER_THAN:
            causes.append(fe.forbidden("resourceVersionMatch", "sendInitialEvents requires "
                                       f"setting resourceVersionMatch to {NOT_OLDER_THAN}"))
        if not gates["WatchList"]:
            causes.append(fe.forbidden("sendInitialEvents", "sendInitialEvents is forbidden "
                                       "for watch unless the WatchList feature gate is enabled"))
    if match:
        if options.send_initial_events is None:
            causes.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                       "forbidden for watch unless sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            causes.append(fe.not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if options.continue_token:
            causes.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                       "forbidden when continue is provided"))
    return causes
