"""
The HTTP front: one Klein route that takes every request through the filter chain
(``filters.py``: audit ID → request info → readiness → request deadline
(``deadline.py``) → [audit] → authentication → [audit] → impersonation →
max-in-flight → authorization) to the handler of its verb, with every failure rendered
as a Status in one place (``handle`` and ``_failed``: upstream's panic recovery).

Routing inside ``/api`` and ``/apis`` is done by ``requestinfo`` and a dict lookup rather
than by one route per path shape: it is what upstream does, it keeps the per-request
path short, and it gives authorization and the handlers the same reading of the URL.
"""

from __future__ import annotations

from time import perf_counter

from klein import Klein
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from platformd import errors
from platformd.api import (
    aggregateddiscovery, deadline, deletes, filters, responses, reviews, scale, views, writes,
)
from platformd.api.health import HealthChecks
from platformd.api.site import DirectResource
from platformd.api.watch import STREAM, WATCH_MEDIA
from platformd.api.call import Call
from platformd.cache.watchcache import CorruptObjectError
from platformd.codecs.jsoncodec import JSON
from platformd.context import RequestContext
from platformd.metrics.apiserver import APIServerMetrics
from platformd.metrics.core import CONTENT_TYPE
from platformd.metrics.requests import RequestMetrics
from platformd.util.ratelog import RateLimitedLog, origin
from platformd.storage.interface import TransformError

log = Logger()

HEALTH_PREFIXES = (b"/healthz", b"/livez", b"/readyz")
METRICS_PATH = "/metrics"

_HANDLERS = {
    "get": lambda call, api: api.reader.get(call, api.store_for(call.kind)),
    "list": lambda call, api: api.reader.list(call, api.store_for(call.kind)),
    "watch": lambda call, api: api.watcher.watch(call, api.store_for(call.kind)),
    "create": lambda call, api: writes.create(call, api.store_for(call.kind)),
    "update": lambda call, api: writes.update(call, api.store_for(call.kind)),
    "patch": lambda call, api: writes.patch(call, api.store_for(call.kind)),
    "delete": lambda call, api: deletes.delete(call, api.store_for(call.kind)),
    "deletecollection": lambda call, api: deletes.delete_collection(
        call, api.store_for(call.kind), api.reader),
}
_STATUS_VERBS = frozenset({"get", "update", "patch"})
_BODILESS_VERBS = frozenset({"get", "list", "watch"})
#: The views a write's or delete's answer may take (checked before the work is done).
_ANSWER_VIEWS = {"create": views.GET_VIEWS, "update": views.GET_VIEWS,
                 "patch": views.GET_VIEWS, "delete": views.GET_VIEWS,
                 "deletecollection": views.LIST_VIEWS}


class APIServer:
    """The resource API over HTTP (see module docstring)."""

    app = Klein()

    def __init__(self, catalog, stores, reader, watcher, negotiator, authenticator,
                 authorizer, documents, readiness, gates, max_in_flight=None, clock=None,
                 metrics=None, health=None, request_timeout: float = deadline.REQUEST_TIMEOUT,
                 auditor=None, request_tracing=None, token_issuer=None, admission=None,
                 bulk=None):
        self.catalog = catalog
        #: The admission chain the create-only kinds and subresources go through (the
        #: stores run it for every other write); None: none.
        self.admission = admission
        self.gates = gates
        self.stores = stores
        self.reader = reader
        self.watcher = watcher
        self.negotiator = negotiator
        #: The authenticator and authorizer chains; their members may be replaced at run
        #: time (a reloaded configuration file), the chains themselves stay.
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.documents = documents
        #: Service-account tokens (``auth/serviceaccount.TokenIssuer``) when they are
        #: configured; None: ``serviceaccounts/<name>/token`` is 404.
        self.token_issuer = token_issuer
        #: ``readiness()`` -> True once the server serves (cache loaded).
        self.readiness = readiness
        self.max_in_flight = max_in_flight or filters.MaxInFlight()
        #: ``--request-timeout``; no clock: no timeouts.
        self.request_deadline = deadline.RequestDeadline(clock, request_timeout
                                                         if clock is not None else 0)
        #: This server's metrics (``/metrics``); each server has its own.
        self.metrics = metrics if metrics is not None else APIServerMetrics()
        self.request_metrics = RequestMetrics(self.metrics)
        #: The checks of /healthz, /livez and /readyz (``health.HealthChecks``).
        self.health = health if health is not None else HealthChecks()
        #: The audit stages (``audit.record.Auditor``) when a policy is given: they join
        #: the chain around authentication, as upstream's
        #: ``WithFailedAuthenticationAudit`` and ``WithAudit``.
        self.auditor = auditor
        if auditor is not None:
            auditor.handled += (filters.TooManyRequests, CorruptObjectError, TransformError)
            auditor.sink.metrics = self.metrics
        #: Tracebacks of unexpected errors, each bug's once a minute: a client can reach
        #: one on every request.
        self.failures = RateLimitedLog(log, clock=clock)
        #: The filter sending writes to Events through the bulk lane, or None.
        self.bulk = bulk
        self.chain = filters.FilterChain([
            filters.audit_id,
            filters.RequestInfo(),
            filters.Readiness(self.readiness),
            self.request_deadline,
            *([auditor.before_authentication] if auditor else []),
            filters.Authentication(self.authenticator, self.metrics),
            *([auditor] if auditor else []),
            # Request tracing (``tracing.requests.RequestTracing``) after authentication,
            # as upstream's ``WithTracing``; without it requests make no span.
            *([request_tracing] if request_tracing else []),
            filters.Impersonation(self.authorizer),
            self.max_in_flight,
            filters.Authorization(self.authorizer, self.metrics),
            # Writes to Events wait in the bulk lane (``bulklane.BulkRequests``), if any.
            *([bulk] if bulk is not None else []),
        ], self._serve)

    def store_for(self, kind):
        return self.stores[kind.gvr]

    def resource(self):
        """The Klein resource, its one route taken directly for plain paths."""
        return DirectResource(self.app.resource(), self.handle)

    @app.route("/", branch=True, strict_slashes=False)
    def handle(self, request):
        started = perf_counter()
        if request.path.startswith(HEALTH_PREFIXES):
            named = self.health.path(request.path.decode("utf-8", "replace"))
            if named is not None:
                return self._health(request, named, started)
        errors_in = self.negotiator.error_choice(request.getHeader(b"accept"))
        ctx = RequestContext(request)
        try:
            result = self.chain(ctx)
        except Exception:
            result = self._failed(Failure(), ctx, errors_in)
        if isinstance(result, Deferred):
            watch = None
            if ctx.routed and ctx.info.verb == "watch":
                watch = self.request_metrics.watch_started(
                    self.request_metrics.labels(request, ctx.info))
            return result.addErrback(self._failed, ctx, errors_in).addBoth(
                self._measured, ctx, started, watch)
        if ctx.routed or request.code == 429:
            self.request_metrics.record(request, self.request_metrics.labels(request, ctx.info),
                                        perf_counter() - started, _size(result, request))
        return result

    def _measured(self, result, ctx, started: float, watch):
        """Record a request answered later (upstream counts when the handler returns)."""
        if watch is not None:
            self.request_metrics.watch_ended(watch)
        request = ctx.request
        if ctx.routed or request.code == 429:
            self.request_metrics.record(request, self.request_metrics.labels(request, ctx.info),
                                        perf_counter() - started, _size(result, request))
        return result

    def _failed(self, failure: Failure, ctx, errors_in):
        if failure.check(CancelledError):
            return None  # the client went away; nothing to answer
        request = ctx.request
        responses.add_warnings(ctx)
        if isinstance(failure.value, errors.StatusError):
            return responses.write_error(request, failure.value, errors_in)
        if isinstance(failure.value, CorruptObjectError):
            return responses.write_error(request, _read_error(request, failure.value), errors_in)
        if failure.check(TransformError):
            # A value that could not be encrypted for storage (a KMS plugin down):
            # upstream's storage.NewInternalError, answered as errors.NewInternalError.
            return responses.write_error(request, errors.internal(str(failure.value)),
                                         errors_in)
        if failure.check(filters.TooManyRequests):
            request.responseHeaders.setRawHeaders(b"Retry-After", [b"1"])
            return responses.write(request, 429,
                                   b"Too many requests, please try again later.\n",
                                   "text/plain; charset=utf-8")
        self.failures.failure(f"request failed: {request.method.decode('latin-1')} "
                              f"{request.path.decode('latin-1')}", failure, key=origin(failure))
        return responses.write_error(request, errors.internal("unexpected error"), errors_in)

    def _health(self, request, named, started: float):
        """
        Health checks answer before the filters, whoever asks and whatever the method
        (as upstream, where the bootstrap policy lets everyone read them); the roots are
        counted as upstream instruments them.
        """
        root, check = named
        answer = self.health.answer(request, root, check)
        if check is None:
            answer.addCallback(self._health_measured, request, f"/{root}", started)
        return answer

    def _health_measured(self, body, request, path: str, started: float):
        self.request_metrics.record_health(path, request.code, perf_counter() - started)
        return body

    def _serve(self, ctx):
        """The endpoint behind the filters: route by resource and verb."""
        info = ctx.info
        call = Call(ctx, self.negotiator, self.gates)
        if not info.is_resource:
            return self._non_resource(call)
        kind = self.catalog.lookup(info.group, info.version, info.resource)
        if kind is None or (info.namespace and not kind.namespaced
                            and info.name != info.namespace):
            raise errors.not_found_path()
        subresource = kind.subresources.get(info.subresource) if info.name else None
        scaled = info.subresource == "scale" and bool(info.name) and kind.scale is not None
        if info.subresource and subresource is None and not scaled and (
                info.subresource != "status" or not kind.has_status):
            raise errors.not_found_path()
        if call.request.method == b"HEAD":
            # Upstream's installer registers GET, PUT, PATCH, POST and DELETE routes (HEAD
            # only for connect subresources, none here): go-restful's 405.
            raise errors.method_not_allowed()
        if subresource is not None:
            call.kind = subresource
            ctx.routed = True
            return _with_body(call, reviews.serve_subresource, call, self._check_route_accepts,
                              self, kind)
        if info.subresource and info.verb not in _STATUS_VERBS:
            raise errors.method_not_allowed()
        if scaled:
            self._check_route_accepts(call)
            call.kind = scale.SCALE
            if info.verb != "get":
                call.pick(views.GET_VIEWS)
            ctx.routed = True
            return _with_body(call, scale.serve, call, self.store_for(kind), kind)
        call.kind = kind
        if kind.warning:
            call.warn(kind.warning)
        if kind.review is not None:
            ctx.routed = True
            return _with_body(call, reviews.serve, call, self._check_route_accepts, self)
        handler = _HANDLERS.get(info.verb)
        if handler is None:
            raise errors.method_not_allowed()
        if info.verb in ("create",) and info.name:
            raise errors.method_not_allowed()
        self._check_route_accepts(call)
        answer_views = _ANSWER_VIEWS.get(info.verb)
        if answer_views is not None:
            # As upstream's write handlers: the answer's encoding is settled before any
            # work, so a 406 never follows a write that was made.
            call.pick(answer_views)
        ctx.routed = True
        return _with_body(call, handler, call, self)

    def _check_route_accepts(self, call) -> None:
        """
        go-restful's route selection: path (404), method (405), then Accept (406, naming
        what the route produces: the served media types, and for a list or watch route
        also their watch forms, as upstream's installer declares them).
        """
        if not self.negotiator.route_accepts(call.accept):
            types = self.negotiator.media_types
            if call.info.verb in ("list", "watch"):
                types = types + [t + STREAM for t in types if t in WATCH_MEDIA]
            raise errors.no_route_accepts(types)

    def _non_resource(self, call):
        request = call.request
        if request.method not in (b"GET", b"HEAD"):
            raise errors.method_not_allowed()
        if call.info.path == METRICS_PATH:
            return self.metrics.scrape().addCallback(
                lambda text: responses.write(request, 200, text, CONTENT_TYPE))
        document = self.documents.lookup(call.info.path)
        if document is None:
            raise errors.not_found_path()
        if document.value is None:
            return responses.write(request, 200, document.json, JSON)
        aggregated = aggregateddiscovery.root(call.info.path) in aggregateddiscovery.ROOTS
        choice = call.negotiator.pick(
            call.accept, aggregateddiscovery.VIEWS if aggregated else (), document)
        if choice.view is not None:
            return aggregateddiscovery.serve(
                call, self.documents.aggregated(call.info.path), choice)
        codec = choice.codec
        if call.indented(choice):
            body = codec.encode(document.value, True)
        else:
            body = document.encoded(codec)
        return responses.write(request, 200, body, choice.media_type)


def _with_body(call, handler, *args):
    """
    ``handler(*args)``, for a verb that reads a body once that body is in: the request was
    served before it (``request.py``), and it is let in only now, past the filters (as
    upstream's handlers read it); get, list and watch read none.
    """
    if call.info.verb in _BODILESS_VERBS:
        return handler(*args)
    waiting = call.request.receive_body()
    if waiting is None:
        return handler(*args)
    return waiting.addCallback(lambda _: handler(*args))


def _size(result, request) -> int:
    """The response body's size: the bytes Klein will write, or what was streamed."""
    return len(result) if isinstance(result, bytes) else request.sentLength


def _read_error(request, error: CorruptObjectError) -> errors.StatusError:
    """500 StorageReadError for a read that met an object the store cannot decode."""
    key = str(error).split(":", 1)[0]
    parts = key.split("/")
    resource, _, group = parts[2].partition(".") if len(parts) > 2 else ("", "", "")
    return errors.store_read_error(resource, group, parts[-1], str(error))
