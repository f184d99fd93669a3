"""
The server's OpenTelemetry tracer, as component-base's ``tracing.NewProvider`` makes it
for kube-apiserver (``TracingOptions.ApplyTo``):

- the sampler respects the parent span's decision, and for a new trace samples
  ``samplingRatePerMillion`` / 10^6 of them (``TraceIdRatioBased``), or none when the
  rate is unset or 0;
- spans go through a ``BatchSpanProcessor`` to the OTLP gRPC exporter, insecure, at the
  configured endpoint (``localhost:4317`` by default).  Ending a span only appends it to
  the processor's bounded queue (2048 spans; beyond that spans are dropped, as the
  SDK and Go's processor drop them); the export runs on the processor's own thread, so
  the reactor never waits on the collector;
- the resource is ``service.name=apiserver`` and ``service.instance.id`` the server's
  identity, ``apiserver-<hash of the host name>`` as upstream's APIServerIdentity names
  it;
- W3C ``traceparent``/``tracestate`` and ``baggage`` are the propagated headers
  (upstream's ``tracing.Propagators()``).

Without ``--tracing-config-file`` no ``Tracing`` exists at all: no filter, no spans.
"""

from __future__ import annotations

from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from twisted.internet.threads import deferToThreadPool

from platformd.util.ids import apiserver_id
from platformd.tracing.config import TracingConfiguration

SERVICE_NAME = "apiserver"
#: The instrumentation scope of the spans this server makes.
SCOPE = "platformd"
MAX_QUEUE_SIZE = 2048
#: Seconds between exports (the SDK's and Go's default).
SCHEDULE_DELAY = 5.0

PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def sampler_for(config: TracingConfiguration):
    rate = config.sampling_rate_per_million
    root = TraceIdRatioBased(rate / 1_000_000) if rate else ALWAYS_OFF
    return ParentBased(root)


class Tracing:
    """
    The tracer provider and its export pipeline.  ``exporter`` defaults to the OTLP gRPC
    exporter at the configuration's endpoint (tests may pass another), with grpcio's
    ``channel_options`` (the egress selection's proxy).  ``shutdown()``
    flushes what is queued and stops the export thread, off the reactor.
    """

    def __init__(self, config: TracingConfiguration, reactor, *, exporter=None,
                 schedule_delay: float = SCHEDULE_DELAY, instance_id: str | None = None,
                 channel_options: tuple = ()):
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            exporter = OTLPSpanExporter(endpoint=config.collector, insecure=True,
                                        channel_options=channel_options or None)
        self.config = config
        #: The SDK's flush and shutdown block: they run in this reactor's thread pool.
        self.reactor = reactor
        resource = Resource.create({"service.name": SERVICE_NAME,
                                    "service.instance.id": instance_id or apiserver_id()})
        self.provider = TracerProvider(sampler=sampler_for(config), resource=resource)
        self.processor = BatchSpanProcessor(exporter, max_queue_size=MAX_QUEUE_SIZE,
                                            schedule_delay_millis=schedule_delay * 1000)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer(SCOPE)

    def flush(self):
        """A Deferred firing once every ended span has been exported (in a thread)."""
        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(),
                                 self.provider.force_flush)

    def shutdown(self):
        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(),
                                 self.provider.shutdown)
