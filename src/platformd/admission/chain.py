"""
The admission chain: every mutating plugin in order, then (after the kind's own
validation, which the store runs in between) every validating plugin in order.  A
plugin may answer later with a Deferred; the chain then goes on when it fires and stays
synchronous when every plugin answers at once.

With ``metrics`` (the server's ``APIServerMetrics``) each step and each plugin that
handles the operation is timed as upstream's
``apiserver_admission_step_admission_duration_seconds`` and
``apiserver_admission_controller_admission_duration_seconds`` (type ``admit`` or
``validate``, the operation, ``rejected`` "true" when it refused).
"""

from __future__ import annotations

from time import perf_counter

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from platformd.admission.interfaces import IMutatingPlugin, IValidatingPlugin


class AdmissionChain:
    def __init__(self, plugins=(), metrics=None):
        self.metrics = metrics
        self.set_plugins(plugins)

    def set_plugins(self, plugins) -> None:
        """Use ``plugins`` from now on (a reloaded configuration replaces them)."""
        self.plugins = list(plugins)
        self._mutating = [p for p in self.plugins if IMutatingPlugin.providedBy(p)]
        self._validating = [p for p in self.plugins if IValidatingPlugin.providedBy(p)]

    def admit(self, attributes):
        """Run the mutating plugins (None, or a Deferred firing with None)."""
        return self._step(self._mutating, "admit", attributes)

    def validate(self, attributes):
        """Run the validating plugins (None, or a Deferred firing with None)."""
        return self._step(self._validating, "validate", attributes)

    def _step(self, plugins: list, method: str, attributes):
        metrics = self.metrics
        if metrics is None:
            return _run(plugins, method, attributes, 0, None)
        return _timed(lambda: _run(plugins, method, attributes, 0, metrics),
                      metrics.admission_steps, (method, attributes.operation))


def _run(plugins: list, method: str, attributes, start: int, metrics):
    for index in range(start, len(plugins)):
        plugin = plugins[index]
        if not plugin.handles(attributes.operation):
            continue
        call = getattr(plugin, method)
        if metrics is None:
            answer = call(attributes)
        else:
            answer = _timed(lambda: call(attributes), metrics.admission_controllers,
                            (plugin.name, method, attributes.operation))
        if answer is not None:
            return answer.addCallback(
                lambda _: _run(plugins, method, attributes, index + 1, metrics))
    return None


def _timed(work, histogram, labels: tuple):
    """``work()``, its duration observed in ``histogram`` with ``labels`` + rejected."""
    started = perf_counter()
    try:
        answer = work()
    except BaseException:
        histogram.observe(labels + ("true",), perf_counter() - started)
        raise
    if isinstance(answer, Deferred):
        def done(result):
            rejected = "true" if isinstance(result, Failure) else "false"
            histogram.observe(labels + (rejected,), perf_counter() - started)
            return result
        return answer.addBoth(done)
    histogram.observe(labels + ("false",), perf_counter() - started)
    return answer
