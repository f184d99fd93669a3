"""
The audit stage of the filter chain: upstream's ``WithAudit`` (right after
authentication) and ``WithFailedAuthenticationAudit`` (around it).

Per request, the policy's first matching rule (by the authenticated user and the
request info) gives the level; at None nothing is recorded.  Otherwise a ``Record``
follows the request and sends its events to the sink, with the stages the rule omits
left out:

* RequestReceived, before the rest of the chain runs (``blocking-strict``: the request
  waits until it is written; 500 "failed to store audit event" if it cannot be);
* ResponseStarted, for long-running requests (``requestinfo.long_running``: watches)
  only, when the response code is set (the twisted counterpart of upstream's ``auditResponseWriter.WriteHeader``);
* ResponseComplete, when the response has been sent or the client went away
  (``request.notifyFinish``); nothing sent at all is upstream's faked "Connection
  closed early" success;
* Panic, instead of ResponseComplete, for an unexpected exception (answered 500).

A request whose credentials are refused (401) gets one ResponseStarted event with no
user and the authentication methods tried, as upstream's failed-authentication audit.

What the request carried (``requestObject`` at Request) is what its handler decoded,
handed over as upstream's handlers hand it (``log_request_object``): never the raw body,
which nothing has bounded before the codec reads it.  What it was answered with
(``responseObject`` at RequestResponse) is read from the JSON body sent; see
docs/audit.md.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import time
from typing import Any, Callable, Optional

import attrs
import orjson
from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure

from platformd import errors, requestinfo
from platformd.audit import policy as p
from platformd.audit.event import API_VERSION, microtime, source_ips, status_json, user_agent, \
    user_json
from platformd.codecs.jsoncodec import dumps
from platformd.util.deferreds import then

_CLOSED_EARLY = {"status": "Success", "message": "Connection closed early"}
_OBJECT_REF_FIELDS = (("resource", "resource"), ("namespace", "namespace"), ("name", "name"),
                      ("uid", "uid"), ("apiGroup", "group"), ("apiVersion", "version"),
                      ("resourceVersion", "resource_version"),
                      ("subresource", "subresource"))


@attrs.define(eq=False)
class ObjectRef:
    resource: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    group: str = ""
    version: str = ""
    resource_version: str = ""
    subresource: str = ""

    def to_json(self) -> dict:
        """``ObjectReference``, every field omitempty, in the Go struct's order."""
        out = {}
        for field, attribute in _OBJECT_REF_FIELDS:
            value = getattr(self, attribute)
            if value:
                out[field] = value
        return out


class Auditor:
    """
    The two filters (``before_authentication``, then the instance itself after
    authentication) over one policy and one sink.  ``handled`` are the exception types
    the application answers itself (not a Panic).
    """

    def __init__(self, policy: p.Policy, sink, now: Callable[[], float] = time.time,
                 handled: tuple = ()):
        self.policy = policy
        self.sink = sink
        self.now = now
        self.handled = (errors.StatusError, CancelledError, *handled)

    def before_authentication(self, ctx, proceed):
        """The received time (``WithRequestReceivedTimestamp``); audits a 401."""
        ctx.received_at = self.now()
        try:
            result = proceed(ctx)
        except errors.StatusError as e:
            if e.code == 401:
                self._refused(ctx)
            raise
        if isinstance(result, Deferred):
            return result.addErrback(self._refused_later, ctx)
        return result

    def _refused_later(self, failure: Failure, ctx):
        value = failure.value
        if isinstance(value, errors.StatusError) and value.code == 401 and ctx.user is None:
            self._refused(ctx)
        return failure

    def _refused(self, ctx) -> None:
        config = self.policy.evaluate(None, ctx.info)
        if config.level == p.NONE:
            return
        record = Record(self, ctx, config, None)
        record.status = {"message": _auth_methods(ctx.request)}
        record.code = 401
        record.emit(p.RESPONSE_STARTED)

    def __call__(self, ctx, proceed):
        config = self.policy.evaluate(ctx.user, ctx.info)
        self.sink.metrics.audit_levels.inc((config.level,))
        if config.level == p.NONE:
            return proceed(ctx)
        record = Record(self, ctx, config, ctx.user)
        ctx.audit = record
        return then(record.emit(p.REQUEST_RECEIVED), self._received, record, proceed)

    def _received(self, stored, record: "Record", proceed):
        if stored is False:
            self.sink.metrics.audit_rejected.inc()
            raise errors.internal("failed to store audit event")
        ctx = record.ctx
        ctx.request.notifyFinish().addBoth(record.finished)
        if record.long_running:
            record.watch_response_code()
        try:
            result = proceed(ctx)
        except Exception as e:
            record.failed(e)
            raise
        if isinstance(result, Deferred):
            return result.addCallbacks(record.answered, self._failed_later,
                                       errbackArgs=(record,))
        return record.answered(result)

    @staticmethod
    def _failed_later(failure: Failure, record: "Record"):
        if failure.value is not None:
            record.failed(failure.value)
        return failure


@attrs.define(eq=False)
class Record:
    """One audited request's event, sent at each of its stages (module docstring)."""

    auditor: Auditor
    ctx: Any
    config: p.RequestAuditConfig
    #: The authenticated user (the context's user changes if it impersonates).
    user: Any
    object_ref: Optional[ObjectRef] = None
    #: The answer's Status fields (status, message, reason, details) and code, once known.
    status: Optional[dict] = None
    code: int = 0
    #: The decoded request as JSON (``log_request_object``), at Request and above.
    request_object: Optional[orjson.Fragment] = None
    response_object: Any = None
    started: bool = False
    panicked: bool = False
    #: Upstream's long-running check (watches ...): these get a ResponseStarted event.
    long_running: bool = False

    def __attrs_post_init__(self):
        info = self.ctx.info
        self.long_running = requestinfo.long_running(info)
        if info.is_resource:
            self.object_ref = ObjectRef(info.resource, info.namespace, info.name,
                                        group=info.group, version=info.version,
                                        subresource=info.subresource)

    @property
    def level(self) -> str:
        return self.config.level

    def emit(self, stage: str):
        """Send the event at ``stage`` unless the rule omits it (the sink's answer)."""
        if stage in self.config.omit_stages:
            return None
        ctx = self.ctx
        request = ctx.request
        received = ctx.received_at or self.auditor.now()
        event: dict = {"kind": "Event", "apiVersion": API_VERSION, "level": self.level,
                       "auditID": ctx.audit_id, "stage": stage,
                       "requestURI": request.uri.decode("utf-8", "replace"),
                       "verb": ctx.info.verb, "user": user_json(self.user)}
        if ctx.user is not self.user and self.user is not None:
            event["impersonatedUser"] = user_json(ctx.user)
        ips = source_ips(request)
        if ips:
            event["sourceIPs"] = ips
        agent = user_agent(request)
        if agent:
            event["userAgent"] = agent
        if self.object_ref is not None:
            event["objectRef"] = self.object_ref.to_json()
        if self.status is not None or self.code:
            event["responseStatus"] = status_json(self.status or {}, self.code)
        if self.request_object is not None:
            event["requestObject"] = self.request_object
        if self.response_object is not None and self.level == p.REQUEST_RESPONSE:
            event["responseObject"] = self.response_object
        event["requestReceivedTimestamp"] = microtime(received)
        event["stageTimestamp"] = microtime(received if stage == p.REQUEST_RECEIVED
                                            else self.auditor.now())
        annotations = getattr(ctx, "audit_annotations", None)
        if annotations:
            event["annotations"] = dict(sorted(annotations.items()))
        return self.auditor.sink.process(event)

    def log_request_object(self, value, has_object_meta: bool = True) -> None:
        """
        Upstream's ``LogRequestObject`` and ``LogRequestPatch``: ``value`` is what the
        handler's codec decoded, within the codec's limits.  An object
        (``has_object_meta``) fills the objectRef's empty namespace, name, uid and
        resourceVersion; a patch, an apply configuration or DeleteOptions fills none.  At
        Request and above it is the requestObject, encoded now: the handler goes on to
        change the object (defaults, metadata), and upstream logs it as decoded.
        """
        ref = self.object_ref
        meta = value.get("metadata") if has_object_meta and isinstance(value, dict) else None
        if isinstance(meta, dict) and ref is not None:
            for attribute, field in (("namespace", "namespace"), ("name", "name"),
                                     ("uid", "uid"), ("resource_version", "resourceVersion")):
                if not getattr(ref, attribute) and isinstance(meta.get(field), str):
                    setattr(ref, attribute, meta[field])
        if p.RANK[self.level] < p.RANK[p.REQUEST]:
            return
        if has_object_meta and isinstance(value, dict):
            value = self._without_managed_fields(value)
        self.request_object = orjson.Fragment(dumps(value))

    def watch_response_code(self) -> None:
        """ResponseStarted when the watch's code is set (``auditResponseWriter``)."""
        request = self.ctx.request
        set_code = request.setResponseCode

        def audited(code, message=None):
            if message is None:
                set_code(code)
            else:
                set_code(code, message)
            self.response_started(code)
        request.setResponseCode = audited

    def response_started(self, code: int) -> None:
        if self.started:
            return
        self.started = True
        self.code = code
        self.emit(p.RESPONSE_STARTED)

    def answered(self, body):
        """The handler's answer: a Status is the responseStatus; the body the
        responseObject at RequestResponse."""
        if isinstance(body, bytes) and body:
            value = self._response_value(body)
            if isinstance(value, dict):
                if value.get("kind") == "Status":
                    self.status = value
                if self.level == p.REQUEST_RESPONSE:
                    self.response_object = self._without_managed_fields(value)
        return body

    def failed(self, error: BaseException) -> None:
        if isinstance(error, errors.StatusError):
            status = error.to_status()
            self.status = status
            if self.level == p.REQUEST_RESPONSE:
                self.response_object = status
        elif not isinstance(error, self.auditor.handled):
            # Upstream's panic: the Panic stage instead of ResponseComplete.
            self.panicked = True
            self.code = 500
            self.status = {"status": "Failure", "reason": "InternalError",
                           "message": f"APIServer panic'd: {error}"}
            self.emit(p.PANIC)

    def finished(self, _result) -> None:
        """The response is sent (or the client went away): ResponseComplete."""
        if self.panicked:
            return None
        request = self.ctx.request
        if request.startedWriting:
            self.code = request.code
        else:
            self.status, self.code = dict(_CLOSED_EARLY), 200
        if self.long_running and not self.started:
            self.started = True
            self.emit(p.RESPONSE_STARTED)
        self.emit(p.RESPONSE_COMPLETE)
        return None

    def _response_value(self, body: bytes):
        """The body sent, decoded when JSON (a Status is looked for at any level)."""
        headers = self.ctx.request.responseHeaders
        media = (headers.getRawHeaders(b"content-type") or [b""])[0]
        if not media.startswith(b"application/json"):
            return None
        if self.level != p.REQUEST_RESPONSE and not body.startswith(b'{"kind":"Status"'):
            return None
        if headers.getRawHeaders(b"content-encoding") == [b"gzip"]:
            body = gzip.decompress(body)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None

    def _without_managed_fields(self, value: dict) -> dict:
        """``omitManagedFields``: the object's, or each list item's, managedFields
        dropped (a copy)."""
        if not self.config.omit_managed_fields:
            return value
        value = _drop_managed_fields(value)
        items = value.get("items")
        if isinstance(items, list):
            value["items"] = [_drop_managed_fields(i) if isinstance(i, dict) else i
                              for i in items]
        rows = value.get("rows")
        if value.get("kind") == "Table" and isinstance(rows, list):
            value["rows"] = [dict(r, object=_drop_managed_fields(r["object"]))
                             if isinstance(r, dict) and isinstance(r.get("object"), dict)
                             else r for r in rows]
        return value


def _drop_managed_fields(value: dict) -> dict:
    meta = value.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return dict(value)
    meta = {k: v for k, v in meta.items() if k != "managedFields"}
    return dict(value, metadata=meta)


def _basic_auth(header: str) -> bool:
    """Whether Go's ``Request.BasicAuth`` finds credentials in ``header``: ``Basic `` in
    any case, then standard base64 of text holding a colon."""
    if header[:6].lower() != "basic ":
        return False
    try:
        return b":" in base64.b64decode(header[6:], validate=True)
    except binascii.Error:
        return False


def _auth_methods(request) -> str:
    """Upstream's ``getAuthMethods``: the credentials the refused request carried."""
    methods = []
    # Go's Header.Get: the first Authorization header (Twisted's getHeader gives the last).
    raw = (request.requestHeaders.getRawHeaders(b"authorization") or [b""])[0]
    header = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    if _basic_auth(header):
        methods.append("basic")
    scheme = header.strip().split(" ")
    if len(scheme) > 1 and scheme[0].lower() == "bearer":
        methods.append("bearer")
    if (request.args.get(b"access_token") or [b""])[0].strip():
        methods.append("access_token")
    transport = getattr(request.channel, "transport", None)
    certificate = getattr(transport, "getPeerCertificate", None)
    if certificate is not None and certificate() is not None:
        methods.append("x509")
    if methods:
        return "Authentication failed, attempted: " + ", ".join(methods)
    return "Authentication failed, no credentials provided"
