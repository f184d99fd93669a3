"""
Lease (``coordination.platform.io/v1``): a lease held by one holder at a time, the
object leader election and node heartbeats renew (upstream's ``coordination.k8s.io/v1``
Lease, ``pkg/registry/coordination/lease``).

Upstream's strategy: namespaced, no status, created by a PUT of an absent object
(``AllowCreateOnUpdate``), validated by ``ValidateLease``/``ValidateLeaseUpdate``
(``pkg/apis/coordination/validation``).  ``acquireTime`` and ``renewTime`` are
``metav1.MicroTime``: RFC 3339 with exactly six fractional digits, written back in UTC.
"""

from __future__ import annotations

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, qualified_name
from platformd.model.schema import INT32, MICRO_TIME, STRING, Prop, Struct
from platformd.registry.kinds import presence
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column

GROUP = "coordination.platform.io"
PREFIX = "io.platform.api.coordination.v1"
PROTO = "platform.api.coordination.v1."

#: ``validLeaseStrategies``: the strategies named without a prefix.
STRATEGIES = ("OldestEmulationVersion",)

LEASE_SPEC = Struct(f"{PREFIX}.LeaseSpec", {
    "holderIdentity": Prop(STRING, "holderIdentity contains the identity of the holder of a "
                                   "current lease."),
    "leaseDurationSeconds": Prop(INT32, "leaseDurationSeconds is a duration that candidates "
                                        "for a lease need to wait to force acquire it. This "
                                        "is measured against the time of last observed "
                                        "renewTime."),
    "acquireTime": Prop(MICRO_TIME, "acquireTime is a time when the current lease was "
                                    "acquired."),
    "renewTime": Prop(MICRO_TIME, "renewTime is a time when the current holder of a lease "
                                  "has last updated the lease."),
    "leaseTransitions": Prop(INT32, "leaseTransitions is the number of transitions of a "
                                    "lease between holders."),
    "strategy": Prop(STRING, "strategy indicates the strategy for picking the leader for "
                             "coordinated leader election."),
    "preferredHolder": Prop(STRING, "preferredHolder signals to a lease holder that the lease "
                                    "has a more optimal holder and should be given up."),
}, "LeaseSpec is a specification of a Lease.")


def _default(obj: dict) -> None:
    # ``Spec LeaseSpec`` is a struct: Go's JSON always shows it, ``{}`` when empty.
    if obj.get("spec") is None:
        obj["spec"] = {}


def _validate_strategy(strategy: str, path: str) -> list:
    """``ValidateCoordinatedLeaseStrategy`` (``fldPath`` is already ``spec.strategy``, and
    upstream adds ``strategy`` once more)."""
    if len(strategy.split("/")) == 1:
        if strategy not in STRATEGIES:
            return [fe.not_supported(f"{path}.strategy", strategy, STRATEGIES)]
        return []
    return [fe.invalid(f"{path}.strategy", strategy, problem)
            for problem in qualified_name(strategy)]


def _validate_spec(obj: dict) -> list:
    """``ValidateLeaseSpec``."""
    spec = obj.get("spec") or {}
    causes = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        causes.append(fe.invalid("spec.leaseDurationSeconds", duration,
                                 "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        causes.append(fe.invalid("spec.leaseTransitions", transitions,
                                 "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None:
        causes.extend(_validate_strategy(strategy, "spec.strategy"))
    if spec.get("preferredHolder") and not strategy:
        causes.append(fe.forbidden("spec.preferredHolder",
                                   "may only be specified if `strategy` is defined"))
    return causes


def _holder(obj, now):
    return (obj.get("spec") or {}).get("holderIdentity") or ""


COLUMNS = (
    NAME,
    Column("Holder", "string", _holder,
           "holderIdentity contains the identity of the holder of a current lease. If "
           "Coordinated Leader Election is used, the holder identity must be equal to the "
           "elected LeaseCandidate.metadata.name field."),
    AGE,
)

KIND = ResourceType(
    group=GROUP, version="v1", kind="Lease", plural="leases", singular="lease",
    namespaced=True, fields={
        "spec": Prop(LEASE_SPEC, "spec contains the specification of the Lease."),
    }, doc="Lease defines a lease concept.", name_rule=dns_subdomain,
    definition_prefix=PREFIX,
    presence=presence(PROTO, "Lease", {"Lease": "metadata spec", "LeaseSpec": ""}),
    default=_default, validate=_validate_spec, allow_create_on_update=True,
    allow_unconditional_update=False,
    columns=COLUMNS)
