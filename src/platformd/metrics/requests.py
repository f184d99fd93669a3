"""
From one answered request to upstream's request metrics: ``apiserver_request_total``,
``apiserver_request_duration_seconds``, ``apiserver_response_sizes`` and, for watches,
``apiserver_longrunning_requests``.

The labels are upstream's (``endpoints/metrics``): the verb as ``MonitorRequest``
reports it (``CanonicalVerb`` then ``cleanVerb``: GET of a collection is LIST, a watch
is WATCH, a PATCH with the apply content type is APPLY, POST, PUT, DELETE — a delete of
a collection too), the scope as ``CleanScope`` (``resource`` for a named object or a
create, ``namespace``, ``cluster``), ``dry_run`` as ``cleanDryRun`` reads the query and
component ``apiserver``.
"""

from __future__ import annotations

from platformd.metrics.apiserver import APIServerMetrics

COMPONENT = "apiserver"
APPLY_PATCH = b"application/apply-patch+yaml"

_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
          "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}


def reported_verb(info, request) -> str:
    """The ``verb`` label of a resource request (see module docstring)."""
    verb = _VERBS.get(info.verb, "other")
    if verb == "PATCH" and request.getHeader(b"content-type") == APPLY_PATCH:
        return "APPLY"
    return verb


def scope(info) -> str:
    """Upstream's ``CleanScope``."""
    if info.name or info.verb == "create":
        return "resource"
    if info.namespace:
        return "namespace"
    return "cluster" if info.is_resource else ""


def dry_run(request) -> str:
    """Upstream's ``cleanDryRun``: "" without the parameter, "All", or "invalid"."""
    if b"dryRun" not in request.uri:
        return ""
    values = request.args.get(b"dryRun", [])
    if not values or any(v != b"All" for v in values):
        return "invalid"
    return "All"


class RequestMetrics:
    """
    Records requests into ``metrics`` (an ``APIServerMetrics``); reactor thread only.
    The three series a (labels, code) pair updates are looked up once and kept, so a
    request costs one dict lookup and three additions.
    """

    def __init__(self, metrics: APIServerMetrics):
        self.metrics = metrics
        self._series: dict = {}

    def labels(self, request, info) -> tuple:
        """``(verb, dry_run, group, version, resource, subresource, scope, component)``."""
        return (reported_verb(info, request), dry_run(request), info.group, info.version,
                info.resource, info.subresource, scope(info), COMPONENT)

    def record(self, request, labels: tuple, elapsed: float, size: int) -> None:
        code = request.code
        series = self._series.get((labels, code))
        if series is None:
            series = self._series[(labels, code)] = self._children(labels, code)
        count, durations, sizes = series
        count[0] += 1
        metrics = self.metrics
        metrics.durations.observe_into(durations, elapsed)
        if sizes is not None:
            metrics.response_sizes.observe_into(sizes, size)

    def _children(self, labels: tuple, code: int) -> tuple:
        metrics = self.metrics
        return (metrics.requests.child(labels + (str(code),)),
                metrics.durations.child(labels),
                metrics.response_sizes.child(labels[:1] + labels[2:])
                if labels[0] in ("GET", "LIST") else None)

    def record_health(self, path: str, code: int, elapsed: float) -> None:
        """A ``/healthz``-style root check, labelled as upstream's ``InstallPathHandler``."""
        labels = ("GET", "", "", "", "", path, "", "")
        self.metrics.requests.inc(labels + (str(code),))
        self.metrics.durations.observe(labels, elapsed)

    def watch_started(self, labels: tuple) -> tuple:
        key = labels[:1] + labels[2:]
        self.metrics.longrunning.inc(key)
        return key

    def watch_ended(self, key: tuple) -> None:
        self.metrics.longrunning.dec(key)
