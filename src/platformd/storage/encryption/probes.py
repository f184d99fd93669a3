"""
The KMS providers' health checks on ``/healthz`` and ``/readyz`` (upstream
``encryptionconfig``: ``kmsPluginProbe``, ``kmsv2PluginProbe``, ``kmsHealthChecker``).

Each KMS provider of the configuration, in its order, is a check named
``kms-provider-<i>``: KMS v1 seals and unseals ``ping`` (``kmsv1.KMSv1Probe``), KMS v2
asks ``Status`` (``KMSv2Envelope.check``), each call within the provider's ``timeout``.
A check's answer is kept ``POSITIVE_TTL`` seconds when healthy and ``NEGATIVE_TTL``
when not (``LastAnswer``), so a load balancer polling ``/readyz`` does not poll the
plugin.  Which checks are served is upstream's ``LoadEncryptionConfig``: one per
provider when a KMS v1 provider is among them; a single ``kms-providers`` running them
all (``ProviderChecks.group``) when they are all KMS v2, and always with automatic reload (then
healthy with no KMS provider, and following the configuration in use).

Not on ``/livez``: upstream took them off in 1.29 (``addHealthChecksWithoutLivez``),
since restarting the API server does not heal its plugin.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import attrs

from twisted.internet.defer import Deferred, gatherResults

from platformd.storage.encryption.fielderrors import aggregate

#: upstream's ``kmsPluginHealthzPositiveTTL`` and ``kmsPluginHealthzNegativeTTL``.
POSITIVE_TTL = 20.0
NEGATIVE_TTL = 3.0
#: upstream's ``kmsReloadHealthCheckName``.
GROUP_NAME = "kms-providers"


class LastAnswer:
    """A probe's last answer (None: healthy, else the reason) and when it came."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self.reason: Optional[str] = None
        self._at: Optional[float] = None

    def record(self, reason: Optional[str]) -> Optional[str]:
        self.reason, self._at = reason, self._clock()
        return reason

    def fresh(self) -> bool:
        """Still the answer (upstream starts with no answer: the first check asks)."""
        if self._at is None:
            return False
        ttl = POSITIVE_TTL if self.reason is None else NEGATIVE_TTL
        return self._clock() - self._at < ttl


@attrs.frozen
class ProviderChecks:
    """A configuration's KMS checks: ``(kms-provider-<i>, check)`` in its order."""

    checks: list
    #: A KMS v1 provider is among them (each is then served under its own name).
    v1: bool

    @classmethod
    def of(cls, envelopes: Iterable, reactor) -> "ProviderChecks":
        envelopes = list(envelopes)
        return cls([(f"kms-provider-{index}", envelope.health_check(reactor))
                    for index, envelope in enumerate(envelopes)],
                   any(envelope.api_version == "v1" for envelope in envelopes))

    def group(self) -> Deferred:
        """
        upstream's ``kmsHealthChecker``: healthy when every check is, else each failure
        as ``<name>: <reason>`` (``[a, b]`` when several).  The checks run at once, where
        upstream runs them in turn: the answer is the same, and one hung plugin does not
        hold back the others' probes.
        """
        answers = gatherResults([run() for _, run in self.checks], consumeErrors=True)
        return answers.addCallback(self._reasons)

    def _reasons(self, reasons: list) -> Optional[str]:
        failed = [f"{name}: {reason}" for (name, _), reason in zip(self.checks, reasons)
                  if reason is not None]
        return aggregate(failed) if failed else None

    def served(self, reload: bool, dynamic: Callable[[], Deferred]) -> list:
        """
        The ``(name, check)`` pairs to serve (upstream's ``LoadEncryptionConfig``);
        ``dynamic``: the check of whichever configuration is in use, for automatic reload.
        """
        if reload:
            return [(GROUP_NAME, dynamic)]
        if self.v1:
            return list(self.checks)
        return [(GROUP_NAME, self.group)] if self.checks else []
