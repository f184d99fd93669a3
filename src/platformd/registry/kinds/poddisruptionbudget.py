"""
PodDisruptionBudget (``policy.platform.io/v1``, namespaced, ``status`` subresource): the
most pods of a set a voluntary disruption (an eviction) may take down at once.

Upstream's ``pkg/registry/policy/poddisruptionbudget`` strategies and
``pkg/apis/policy/validation`` (v1.36): a create starts with an empty status and
generation 1, a spec change moves the generation, the main resource keeps the stored
status and ``status`` keeps the stored spec.  ``minAvailable`` and ``maxUnavailable``
(an integer or a percentage, at most 100%) exclude each other; the selector is validated
as every label selector.  The status is the disruption controller's
(``controllers/disruption.py``); the eviction subresource (``kinds/eviction.py``)
decrements ``disruptionsAllowed`` and records the pod in ``disruptedPods``.

The helpers at the bottom (``selects``, ``set_disruption_allowed_condition``, ...) are
upstream's ``component-helpers/apps/poddisruptionbudget`` and are shared by both.
"""

from __future__ import annotations

import re
from typing import Optional

from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain, qualified_name
from platformd.model.schema import (
    INT32, INT64, INT_OR_STRING, STRING, TIME, ListOf, MapOf, Prop, Struct,
)
from platformd.registry.kinds import presence
from platformd.registry.kinds.clusterrole import LABEL_SELECTOR
from platformd.registry.kinds.validatingadmissionpolicyshapes import CONDITION
from platformd.registry.kinds.webhookshapes import validate_label_selector
from platformd.registry.resource import ResourceType
from platformd.registry.tables import AGE, NAME, Column
from platformd.util import labelselectors

GROUP = "policy.platform.io"
VERSION = "v1"
PREFIX = "io.platform.api.policy.v1"
PROTO = "platform.api.policy.v1."

#: ``policy.DisruptionAllowedCondition`` and its reasons.
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")

SPEC = Struct(
    f"{PREFIX}.PodDisruptionBudgetSpec", {
        "minAvailable": Prop(INT_OR_STRING, "An eviction is allowed if at least "
                                            "\"minAvailable\" pods selected by \"selector\" "
                                            "will still be available after the eviction, "
                                            "i.e. even in the absence of the evicted pod.  "
                                            "So for example you can prevent all voluntary "
                                            "evictions by specifying \"100%\"."),
        "selector": Prop(LABEL_SELECTOR, "Label query over pods whose evictions are managed "
                                         "by the disruption budget. A null selector will "
                                         "match no pods, while an empty ({}) selector will "
                                         "select all pods within the namespace.",
                         patch_strategy="replace"),
        "maxUnavailable": Prop(INT_OR_STRING, "An eviction is allowed if at most "
                                              "\"maxUnavailable\" pods selected by "
                                              "\"selector\" are unavailable after the "
                                              "eviction, i.e. even in absence of the evicted "
                                              "pod. For example, one can prevent all "
                                              "voluntary evictions by specifying 0. This is "
                                              "a mutually exclusive setting with "
                                              "\"minAvailable\"."),
        "unhealthyPodEvictionPolicy": Prop(STRING, "UnhealthyPodEvictionPolicy defines the "
                                                   "criteria for when unhealthy pods should "
                                                   "be considered for eviction: "
                                                   "IfHealthyBudget or AlwaysAllow."),
    }, doc="PodDisruptionBudgetSpec is a description of a PodDisruptionBudget.")

STATUS = Struct(
    f"{PREFIX}.PodDisruptionBudgetStatus", {
        "observedGeneration": Prop(INT64, "Most recent generation observed when updating "
                                          "this PDB status."),
        "disruptedPods": Prop(MapOf(TIME), "DisruptedPods contains information about pods "
                                           "whose eviction was processed by the API server "
                                           "eviction subresource handler but has not yet "
                                           "been observed by the PodDisruptionBudget "
                                           "controller."),
        "disruptionsAllowed": Prop(INT32, "Number of pod disruptions that are currently "
                                          "allowed.", required=True),
        "currentHealthy": Prop(INT32, "current number of healthy pods", required=True),
        "desiredHealthy": Prop(INT32, "minimum desired number of healthy pods",
                               required=True),
        "expectedPods": Prop(INT32, "total number of pods counted by this disruption budget",
                             required=True),
        "conditions": Prop(ListOf(CONDITION, "map", ("type",), "merge", "type"),
                           "Conditions contain conditions for PDB. The disruption controller "
                           "sets the DisruptionAllowed condition."),
    }, doc="PodDisruptionBudgetStatus represents information about the status of a "
           "PodDisruptionBudget. Status may trail the actual state of a system.")

_EMPTY_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                 "expectedPods": 0}


def _prepare_for_create(obj: dict) -> None:
    """Create cannot set the status; generation starts at 1."""
    obj["status"] = dict(_EMPTY_STATUS)
    obj.setdefault("metadata", {})["generation"] = 1


def _prepare_for_update(new: dict, old: dict) -> None:
    """Any change of the spec moves the generation (the status is the store's)."""
    generation = (old.get("metadata") or {}).get("generation") or 0
    if (new.get("spec") or {}) != (old.get("spec") or {}):
        generation += 1
    new.setdefault("metadata", {})["generation"] = generation


def _default(obj: dict) -> None:
    """Go's JSON always shows the spec, and the status's four counts."""
    obj.setdefault("spec", {})
    status = obj.get("status")
    if isinstance(status, dict):
        for key, zero in _EMPTY_STATUS.items():
            status.setdefault(key, zero)


_PERCENT = re.compile(r"^[0-9]+%$")


def _int_or_percent(value, path: str) -> list:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, str):
        shown = fe.go_json(value)
        if not _PERCENT.match(value):
            return [fe.invalid(path, shown, "a valid percent string must be a numeric string "
                                            "followed by an ending '%' (e.g. '1%',  or '93%', "
                                            "regex used for validation is '[0-9]+%')")]
        if int(value[:-1]) > 100:
            return [fe.invalid(path, shown, "must not be greater than 100%")]
        return []
    if value < 0:
        return [fe.invalid(path, value, "must be greater than or equal to 0")]
    return []


def _go_spec(spec: dict) -> dict:
    """The internal ``PodDisruptionBudgetSpec`` as Go's JSON shows it (Go field names)."""
    return {"MinAvailable": spec.get("minAvailable"), "Selector": spec.get("selector"),
            "MaxUnavailable": spec.get("maxUnavailable"),
            "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy")}


def _validate(obj: dict) -> list:
    """``ValidatePodDisruptionBudget``."""
    spec = obj.get("spec") or {}
    causes = []
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None and high is not None:
        causes.append(fe.invalid("spec", fe.go_json(_go_spec(spec)),
                                 "minAvailable and maxUnavailable cannot be both set"))
    if low is not None:
        causes.extend(_int_or_percent(low, "spec.minAvailable"))
    if high is not None:
        causes.extend(_int_or_percent(high, "spec.maxUnavailable"))
    if spec.get("selector") is not None:
        causes.extend(validate_label_selector(spec["selector"], "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        causes.append(fe.not_supported("spec.unhealthyPodEvictionPolicy", policy,
                                       UNHEALTHY_POD_EVICTION_POLICIES))
    return causes


_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_CONDITION_STATUSES = ("True", "False", "Unknown")


def validate_conditions(conditions, path: str) -> list:
    """``metav1validation.ValidateConditions``."""
    causes = []
    seen = set()
    for i, condition in enumerate(conditions or ()):
        at = f"{path}[{i}]"
        kind = condition.get("type", "")
        if kind in seen:
            causes.append(fe.duplicate(f"{at}.type", kind))
        seen.add(kind)
        causes.extend(fe.invalid(f"{at}.type", kind, p) for p in qualified_name(kind))
        status = condition.get("status", "")
        if status not in _CONDITION_STATUSES:
            causes.append(fe.not_supported(f"{at}.status", status, _CONDITION_STATUSES))
        if (condition.get("observedGeneration") or 0) < 0:
            causes.append(fe.invalid(f"{at}.observedGeneration",
                                     condition["observedGeneration"],
                                     "must be greater than or equal to zero"))
        if not condition.get("lastTransitionTime"):
            causes.append(fe.required(f"{at}.lastTransitionTime", "must be set"))
        reason = condition.get("reason", "")
        if not reason:
            causes.append(fe.required(f"{at}.reason", "must be set"))
        else:
            if not _REASON.match(reason):
                causes.append(fe.invalid(f"{at}.reason", reason,
                                         "a condition reason must start with alphabetic "
                                         "character, optionally followed by a string of "
                                         "alphanumeric characters or '_,:', and must end "
                                         "with an alphanumeric character or '_' (e.g. "
                                         "'my_name',  or 'MY_NAME',  or 'MyName',  or "
                                         "'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex "
                                         "used for validation is "
                                         "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"))
            if len(reason) > 1024:
                causes.append(fe.too_long(f"{at}.reason", 1024))
        if len(condition.get("message", "")) > 32768:
            causes.append(fe.too_long(f"{at}.message", 32768))
    return causes


def _validate_status_update(new: dict, old: dict) -> list:
    """``ValidatePodDisruptionBudgetStatusUpdate`` (v1)."""
    status = new.get("status") or {}
    causes = validate_conditions(status.get("conditions"), "status.conditions")
    for field in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        value = status.get(field) or 0
        if value < 0:
            causes.append(fe.invalid(f"status.{field}", value,
                                     "must be greater than or equal to 0"))
    return causes


def _shown(value) -> str:
    """``intstr.IntOrString.String()``; N/A when unset."""
    return "N/A" if value is None else str(value)


COLUMNS = (
    NAME,
    Column("Min Available", "string",
           lambda obj, now: _shown((obj.get("spec") or {}).get("minAvailable")),
           "The minimum number of pods that must be available."),
    Column("Max Unavailable", "string",
           lambda obj, now: _shown((obj.get("spec") or {}).get("maxUnavailable")),
           "The maximum number of pods that may be unavailable."),
    Column("Allowed Disruptions", "integer",
           lambda obj, now: (obj.get("status") or {}).get("disruptionsAllowed", 0),
           "Calculated number of pods that may be disrupted at this time."),
    AGE,
)

KIND = ResourceType(
    group=GROUP, version=VERSION, kind="PodDisruptionBudget", plural="poddisruptionbudgets",
    singular="poddisruptionbudget", namespaced=True, fields={
        "spec": Prop(SPEC, "Specification of the desired behavior of the "
                           "PodDisruptionBudget."),
        "status": Prop(STATUS, "Most recently observed status of the PodDisruptionBudget."),
    }, doc="PodDisruptionBudget is an object to define the max disruption that can be caused "
           "to a collection of pods", name_rule=dns_subdomain, definition_prefix=PREFIX,
    presence=presence(PROTO, "PodDisruptionBudget", {
        "PodDisruptionBudget": "metadata spec status",
        "PodDisruptionBudgetSpec": "",
        "PodDisruptionBudgetStatus": "observedGeneration? disruptionsAllowed currentHealthy "
                                     "desiredHealthy expectedPods",
    }), short_names=("pdb",), has_status=True, default=_default, validate=_validate,
    validate_status_update=_validate_status_update, prepare_for_create=_prepare_for_create,
    prepare_for_update=_prepare_for_update, columns=COLUMNS)


# -- what the eviction subresource and the disruption controller share ---------------------

def selector_of(pdb: dict):
    """
    ``(matches, ok)``: the PDB's selector compiled (``labels -> bool``).  A null selector
    matches no pod, an empty one every pod (``LabelSelectorAsSelector``); an invalid one
    is not ok.
    """
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return (lambda labels: False), True
    try:
        compiled = labelselectors.compile_selector(selector)
    except ValueError:
        return (lambda labels: False), False
    return (lambda labels: labelselectors.matches(compiled, labels)), True


def selects(pdb: dict, pod: dict) -> bool:
    matches, ok = selector_of(pdb)
    return ok and matches(labelselectors.labels_of(pod))


def pod_ready(pod: dict) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def find_condition(conditions, kind: str) -> Optional[dict]:
    for condition in conditions or ():
        if condition.get("type") == kind:
            return condition
    return None


def set_condition(conditions: list, new: dict, now: str) -> None:
    """``apimeta.SetStatusCondition``: the transition time moves only with the status."""
    existing = find_condition(conditions, new["type"])
    if existing is None:
        conditions.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or now})
        return
    if existing.get("status") != new["status"]:
        existing["status"] = new["status"]
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or now
    existing["reason"] = new.get("reason", "")
    existing["message"] = new.get("message", "")
    existing["observedGeneration"] = new.get("observedGeneration", 0)


def set_disruption_allowed_condition(status: dict, now: str) -> None:
    """``pdbhelper.UpdateDisruptionAllowedCondition``."""
    conditions = status.setdefault("conditions", [])
    allowed = (status.get("disruptionsAllowed") or 0) > 0
    set_condition(conditions, {
        "type": DISRUPTION_ALLOWED, "status": "True" if allowed else "False",
        "observedGeneration": status.get("observedGeneration", 0),
        "reason": SUFFICIENT_PODS if allowed else INSUFFICIENT_PODS, "message": ""}, now)


def conditions_up_to_date(pdb: dict) -> bool:
    """``pdbhelper.ConditionsAreUpToDate``."""
    status = pdb.get("status") or {}
    condition = find_condition(status.get("conditions"), DISRUPTION_ALLOWED)
    if condition is None:
        return False
    if status.get("observedGeneration", 0) != pdb["metadata"].get("generation", 0):
        return False
    if (status.get("disruptionsAllowed") or 0) > 0:
        return condition.get("status") == "True" and condition.get("reason") == SUFFICIENT_PODS
    return condition.get("status") == "False" and condition.get("reason") == INSUFFICIENT_PODS
