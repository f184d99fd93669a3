"""
Upstream kube-apiserver's metric families, with its names, help texts, labels and
buckets (``k8s.io/apiserver/pkg/endpoints/metrics/metrics.go``,
``pkg/endpoints/filters/metrics.go``, ``pkg/admission/metrics/metrics.go``,
``pkg/storage/cacher/metrics/metrics.go``, ``pkg/audit/metrics.go``).  One ``APIServerMetrics`` per server;
the values read only when scraped (objects stored, cache state, in-flight counts,
database size) are ``Scraped`` families whose ``read`` ``compose`` sets.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, gatherResults, maybeDeferred

from platformd.metrics.core import (
    STABLE, Attempts, Counter, Gauge, Histogram, Registry, Scraped, exponential_buckets,
)

REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
                  "component")
#: Labels of the gauges and histograms without ``dry_run`` (and without ``code``).
ROUTE_LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "component")
REQUEST_DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
                            4, 5, 6, 8, 10, 15, 20, 30, 45, 60)
AUTH_BUCKETS = exponential_buckets(0.001, 2, 15)
ADMISSION_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5)
WEBHOOK_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25)
GROUP_RESOURCE = ("group", "resource")


class APIServerMetrics:
    """Every family this server exposes (see module docstring)."""

    def __init__(self, process: bool = True):
        self.registry = registry = Registry(process)
        #: Called before each scrape (each may return a Deferred: a file read in a
        #: thread), so the scraped families read fresh values.
        self.probes: list = []
        add = registry.add
        # -- requests (endpoints/metrics) ---------------------------------------------
        self.requests = add(Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            REQUEST_LABELS + ("code",), STABLE))
        self.durations = add(Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            REQUEST_LABELS, REQUEST_DURATION_BUCKETS, STABLE))
        self.response_sizes = add(Histogram(
            "apiserver_response_sizes",
            "Response size distribution in bytes for each group, version, verb, resource, "
            "subresource, scope and component.",
            ROUTE_LABELS, exponential_buckets(1000, 10.0, 7), STABLE))
        self.longrunning = add(Gauge(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, "
            "version, resource, scope and component. Not all requests are tracked this way.",
            ROUTE_LABELS, STABLE))
        self.inflight = add(Scraped(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per "
            "request kind in last second.",
            ("request_kind",), stability=STABLE))
        self.watch_events = add(Counter(
            "apiserver_watch_events_total", "Number of events sent in watch clients",
            ("group", "version", "kind")))
        self.watch_event_sizes = add(Histogram(
            "apiserver_watch_events_sizes", "Watch event size distribution in bytes",
            ("group", "version", "kind"), exponential_buckets(1024, 2.0, 8)))
        # -- authentication and authorization (endpoints/filters) -----------------------
        self.authenticated_users = add(Counter(
            "authenticated_user_requests",
            "Counter of authenticated requests broken out by username.", ("username",)))
        self.authentication_attempts = add(Counter(
            "authentication_attempts", "Counter of authenticated attempts.", ("result",)))
        self.authentication_durations = add(Histogram(
            "authentication_duration_seconds",
            "Authentication duration in seconds broken out by result.", ("result",),
            AUTH_BUCKETS))
        self.authorization_attempts = add(Counter(
            "authorization_attempts_total",
            "Counter of authorization attempts broken down by result. It can be either "
            "'allowed', 'denied', 'no-opinion' or 'error'.", ("result",)))
        self.authorization_durations = add(Histogram(
            "authorization_duration_seconds",
            "Authorization duration in seconds broken out by result.", ("result",),
            AUTH_BUCKETS))
        self.authentication = Attempts(self.authentication_attempts,
                                       self.authentication_durations)
        self.authorization = Attempts(self.authorization_attempts,
                                      self.authorization_durations)
        # -- audit (audit/metrics.go) -----------------------------------------------------
        self.audit_events = add(Counter(
            "apiserver_audit_event_total",
            "Counter of audit events generated and sent to the audit backend."))
        self.audit_errors = add(Counter(
            "apiserver_audit_error_total",
            "Counter of audit events that failed to be audited properly. Plugin identifies "
            "the plugin affected by the error.", ("plugin",)))
        self.audit_levels = add(Counter(
            "apiserver_audit_level_total",
            "Counter of policy levels for audit events (1 per request).", ("level",)))
        self.audit_rejected = add(Counter(
            "apiserver_audit_requests_rejected_total",
            "Counter of apiserver requests rejected due to an error in audit logging "
            "backend."))
        for unlabelled in (self.audit_events, self.audit_rejected):
            unlabelled.inc((), 0)  # Go's plain counters are exposed from the start
        # -- admission (admission/metrics) ---------------------------------------------
        self.admission_steps = add(Histogram(
            "apiserver_admission_step_admission_duration_seconds",
            "Admission sub-step latency histogram in seconds, broken out for each operation "
            "and API resource and step type (validate or admit).",
            ("type", "operation", "rejected"), ADMISSION_BUCKETS, STABLE))
        self.admission_controllers = add(Histogram(
            "apiserver_admission_controller_admission_duration_seconds",
            "Admission controller latency histogram in seconds, identified by name and "
            "broken out for each operation and API resource and type (validate or admit).",
            ("name", "type", "operation", "rejected"), ADMISSION_BUCKETS, STABLE))
        self.admission_webhooks = add(Histogram(
            "apiserver_admission_webhook_admission_duration_seconds",
            "Admission webhook latency histogram in seconds, identified by name and broken "
            "out for each operation and API resource and type (validate or admit).",
            ("name", "type", "operation", "rejected"), WEBHOOK_BUCKETS, STABLE))
        # -- storage and the watch cache (read when scraped) -----------------------------
        self.storage_objects = add(Scraped(
            "apiserver_storage_objects",
            "[DEPRECATED, consider using apiserver_resource_objects instead] Number of "
            "stored objects at the time of last check split by kind. In case of a fetching "
            "error, the value will be -1.", ("resource",), stability=STABLE))
        self.resource_objects = add(Scraped(
            "apiserver_resource_objects",
            "Number of stored objects at the time of last check split by kind. In case of a "
            "fetching error, the value will be -1.", GROUP_RESOURCE))
        self.storage_size = add(Scraped(
            "apiserver_storage_size_bytes",
            "Size of the storage database file physically allocated in bytes.",
            ("storage_cluster_id",), stability=STABLE))
        self.storage_db_size = add(Scraped(
            "apiserver_storage_db_total_size_in_bytes",
            "Total size of the storage database file physically allocated in bytes.",
            ("endpoint",)))
        self.cache_events_received = add(Scraped(
            "apiserver_watch_cache_events_received_total",
            "Counter of events received in watch cache broken by resource type.",
            GROUP_RESOURCE, kind="counter"))
        self.cache_events_dispatched = add(Scraped(
            "apiserver_watch_cache_events_dispatched_total",
            "Counter of events dispatched in watch cache broken by resource type.",
            GROUP_RESOURCE, kind="counter"))
        self.cache_initializations = add(Scraped(
            "apiserver_watch_cache_initializations_total",
            "Counter of watch cache initializations broken by resource type.",
            GROUP_RESOURCE, kind="counter"))
        self.cache_resource_version = add(Scraped(
            "apiserver_watch_cache_resource_version",
            "Current resource version of watch cache broken by resource type. This is "
            "truncated to the 15 least significant digits.", GROUP_RESOURCE))
        self.init_events = add(Scraped(
            "apiserver_init_events_total",
            "Counter of init events processed in watch cache broken by resource type.",
            GROUP_RESOURCE, kind="counter"))


    def scrape(self) -> Deferred:
        """The text exposition once every probe has run (a Deferred of bytes)."""
        probes = gatherResults([maybeDeferred(probe) for probe in self.probes])
        return probes.addCallback(lambda _: self.registry.render())
