"""
get and list (spec 2.1.10, 4.3), served from the watch cache.

A JSON list is assembled from each object's already-encoded bytes: no object is encoded
again to answer a list.
"""

from __future__ import annotations

from platformd.api import responses
from platformd.api.selectors import parse_field_selector, parse_label_selector


def get(call, store):
    entry = store.get(call.info.namespace or None, call.info.name)
    if call.response_codec.media_type == "application/json" and not call.pretty:
        return responses.write(call.request, 200, entry.json, "application/json")
    return responses.write_value(call, 200, entry.obj)


def selectors(call):
    kind = call.kind
    labels = call.arg("labelSelector")
    fields = call.arg("fieldSelector")
    return (parse_label_selector(labels) if labels else None,
            parse_field_selector(fields, kind.group, kind.kind) if fields else None)


def list_(call, store, revision: int):
    kind = call.kind
    label_selector, field_selector = selectors(call)
    entries = store.list(call.info.namespace or None, label_selector, field_selector)
    if call.response_codec.media_type == "application/json" and not call.pretty:
        head = (b'{"kind":"%s","apiVersion":"%s","metadata":{"resourceVersion":"%d",'
                b'"continue":""},"items":[' % (kind.list_kind.encode(),
                                               kind.api_version.encode(), revision))
        body = head + b",".join(e.json for e in entries) + b"]}"
        return responses.write(call.request, 200, body, "application/json")
    return responses.write_value(call, 200, {
        "kind": kind.list_kind, "apiVersion": kind.api_version,
        "metadata": {"resourceVersion": str(revision), "continue": ""},
        "items": [e.obj for e in entries],
    })
