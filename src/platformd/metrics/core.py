"""
Metric families that cost a dict lookup to update, collected by ``prometheus_client``.

``prometheus_client``'s own ``Counter``/``Histogram`` take a lock and build a child per
``labels()`` call, walk every bucket on each observation and add ``_created`` series and
a ``_total`` suffix upstream does not have on some names (``authentication_attempts``).
The request path records about ten values per request, so the families here keep one
list or number per label tuple instead, updated on the reactor thread only (no lock:
nothing else touches them), and become ``prometheus_client`` ``Metric`` objects only
when scraped.  ``Registry`` is one server's set of families on its own
``CollectorRegistry`` (so servers in one process do not share counts), with
``prometheus_client``'s process collector beside them, and renders the text format
(version 0.0.4) exactly as upstream's Go client writes it.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Iterable, Optional

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

#: The content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

ALPHA = "ALPHA"
BETA = "BETA"
STABLE = "STABLE"


def exponential_buckets(start: float, factor: float, count: int) -> tuple:
    """Go's ``prometheus.ExponentialBuckets``."""
    return tuple(start * factor ** i for i in range(count))


class Family:
    """One named metric with label names; ``samples()`` for the collector."""

    kind = ""

    def __init__(self, name: str, help_: str, labels: Iterable[str] = (),
                 stability: str = ALPHA):
        self.name = name
        # component-base prefixes the help text with the stability level.
        self.help = f"[{stability}] {help_}"
        self.labels = tuple(labels)

    def metric(self) -> Metric:
        metric = Metric(self.name, self.help, self.kind)
        for suffix, labels, value in self.samples():
            metric.add_sample(self.name + suffix, labels, value)
        return metric

    def samples(self):
        raise NotImplementedError

    def _labels(self, values: tuple) -> dict:
        # Go's client writes label pairs sorted by name.
        return dict(sorted(zip(self.labels, values)))


class Counter(Family):
    """
    A counter by label values: ``inc(values)``; the tuple's order is ``labels``'.  Each
    series is a one-item list, so a hot path can keep it (``child``) and add to it.
    """

    kind = "counter"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.values: dict = {}

    def child(self, values: tuple = ()) -> list:
        """The series of ``values`` (``[value]``), made on first use."""
        series = self.values.get(values)
        if series is None:
            series = self.values[values] = [0]
        return series

    def inc(self, values: tuple = (), amount: float = 1) -> None:
        self.child(values)[0] += amount

    def get(self, values: tuple = ()) -> float:
        series = self.values.get(values)
        return series[0] if series else 0

    def samples(self):
        for values, series in sorted(self.values.items()):
            yield "", self._labels(values), series[0]


class Gauge(Counter):
    """A gauge by label values: ``set``, ``inc``, ``dec``."""

    kind = "gauge"

    def set(self, values: tuple, value: float) -> None:
        self.child(values)[0] = value

    def dec(self, values: tuple = (), amount: float = 1) -> None:
        self.inc(values, -amount)


class Scraped(Family):
    """
    A gauge (or a counter kept elsewhere as a plain number) read when scraped:
    ``read()`` -> ``{label values: value}``.
    """

    def __init__(self, name: str, help_: str, labels: Iterable[str],
                 read: Callable[[], dict] = dict, stability: str = ALPHA,
                 kind: str = "gauge"):
        super().__init__(name, help_, labels, stability)
        self.read = read
        self.kind = kind

    def samples(self):
        for values, value in sorted(self.read().items()):
            yield "", self._labels(values), value


class Histogram(Family):
    """
    A histogram by label values: per label tuple a list of per-bucket counts (not yet
    cumulative: one increment per observation), then the sum and the count.
    """

    kind = "histogram"

    def __init__(self, name: str, help_: str, labels: Iterable[str], buckets: Iterable[float],
                 stability: str = ALPHA):
        super().__init__(name, help_, labels, stability)
        self.buckets = tuple(buckets)
        self.values: dict = {}
        self._size = len(self.buckets) + 3  # buckets, +Inf, sum, count

    def child(self, values: tuple) -> list:
        """The series of ``values`` (for ``observe_into``), made on first use."""
        series = self.values.get(values)
        if series is None:
            series = self.values[values] = [0] * self._size
        return series

    def observe(self, values: tuple, value: float) -> None:
        self.observe_into(self.child(values), value)

    def observe_into(self, series: list, value: float) -> None:
        series[bisect_left(self.buckets, value)] += 1
        series[-2] += value
        series[-1] += 1

    def count(self, values: tuple) -> int:
        series = self.values.get(values)
        return series[-1] if series else 0

    def samples(self):
        bounds = [go_float(b) for b in self.buckets] + ["+Inf"]
        for values, series in sorted(self.values.items()):
            labels = self._labels(values)
            total = 0
            for bound, count in zip(bounds, series):
                total += count
                yield "_bucket", {**labels, "le": bound}, total
            yield "_sum", labels, series[-2]
            yield "_count", labels, series[-1]


class Attempts:
    """
    A counter and a duration histogram by one ``result`` label, updated together
    (upstream's ``authentication_attempts`` and ``..._duration_seconds``, the same for
    authorization), their series kept per result.
    """

    def __init__(self, counter: Counter, histogram: Histogram):
        self.counter = counter
        self.histogram = histogram
        self._series: dict = {}

    def record(self, result: str, elapsed: float) -> None:
        series = self._series.get(result)
        if series is None:
            series = self._series[result] = (self.counter.child((result,)),
                                             self.histogram.child((result,)))
        series[0][0] += 1
        self.histogram.observe_into(series[1], elapsed)


class _Families:
    """The ``prometheus_client`` collector of a ``Registry``'s families."""

    def __init__(self, families: list):
        self.families = families

    def collect(self):
        for family in self.families:
            yield family.metric()


class Registry:
    """One server's metrics (see module docstring)."""

    def __init__(self, process: bool = True):
        self.collectors = CollectorRegistry(auto_describe=False)
        self.families: list = []
        self.collectors.register(_Families(self.families))
        if process:
            ProcessCollector(registry=self.collectors)

    def add(self, family):
        self.families.append(family)
        return family

    def render(self) -> bytes:
        """Every family in the text format, as upstream writes it."""
        out: list = []
        for metric in sorted(self.collectors.collect(), key=lambda m: m.name):
            name = metric.name
            samples = [s for s in metric.samples if not s.name.endswith("_created")]
            if not samples:
                continue  # as Go's client: a family without series is not written
            if metric.type == "counter" and samples and samples[0].name == name + "_total":
                name += "_total"  # prometheus_client names counters without it
            out.append(f"# HELP {name} {_escape_help(metric.documentation)}\n"
                       f"# TYPE {name} {_TYPES.get(metric.type, metric.type)}\n")
            for sample in samples:
                out.append(_sample_line(sample.name, sample.labels, sample.value))
        return "".join(out).encode("utf-8")


_TYPES = {"unknown": "untyped"}


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _sample_line(name: str, labels: Optional[dict], value: float) -> str:
    if labels:
        # In the family's order (sorted names, then a histogram's "le"), as Go writes them.
        text = ",".join(f'{k}="{_escape_value(str(v))}"' for k, v in labels.items())
        return f"{name}{{{text}}} {go_float(value)}\n"
    return f"{name} {go_float(value)}\n"


def go_float(value: float) -> str:
    """A number as Go's ``strconv.FormatFloat(v, 'g', -1, 64)`` writes it (``3``, ``1e+06``)."""
    text = floatToGoString(value)
    return text[:-2] if text.endswith(".0") else text
