"""
The admission chain: every mutating plugin in order, then (after the kind's own
validation, which the store runs in between) every validating plugin in order.  A
plugin may answer later with a Deferred; the chain then goes on when it fires and stays
synchronous when every plugin answers at once.
"""

from __future__ import annotations

from platformd.admission.interfaces import IMutatingPlugin, IValidatingPlugin


class AdmissionChain:
    def __init__(self, plugins=()):
        self.set_plugins(plugins)

    def set_plugins(self, plugins) -> None:
        """Use ``plugins`` from now on (a reloaded configuration replaces them)."""
        self.plugins = list(plugins)
        self._mutating = [p for p in self.plugins if IMutatingPlugin.providedBy(p)]
        self._validating = [p for p in self.plugins if IValidatingPlugin.providedBy(p)]

    def admit(self, attributes):
        """Run the mutating plugins (None, or a Deferred firing with None)."""
        return _run(self._mutating, "admit", attributes, 0)

    def validate(self, attributes):
        """Run the validating plugins (None, or a Deferred firing with None)."""
        return _run(self._validating, "validate", attributes, 0)


def _run(plugins: list, method: str, attributes, start: int):
    for index in range(start, len(plugins)):
        plugin = plugins[index]
        if not plugin.handles(attributes.operation):
            continue
        answer = getattr(plugin, method)(attributes)
        if answer is not None:
            return answer.addCallback(
                lambda _: _run(plugins, method, attributes, index + 1))
    return None
