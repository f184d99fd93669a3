"""The definitions' group, finalizer and condition vocabulary (upstream's words)."""

from __future__ import annotations

GROUP = "apiextensions.platform.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
#: Upstream's ``customresourcecleanup.apiextensions.k8s.io``, in this API's group.
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.platform.io"

ESTABLISHED = "Established"
NAMES_ACCEPTED = "NamesAccepted"
TERMINATING = "Terminating"

#: Groups whose definitions need the approval annotation (upstream: ``*.k8s.io``,
#: ``*.kubernetes.io``).
PROTECTED_SUFFIXES = ("platform.io",)
APPROVAL_ANNOTATION = "api-approved.platform.io"


def condition(crd: dict, kind: str):
    """The status condition of type ``kind``, or None."""
    for cond in (crd.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond
    return None


def condition_true(crd: dict, kind: str) -> bool:
    cond = condition(crd, kind)
    return cond is not None and cond.get("status") == "True"


def set_condition(crd: dict, new: dict, now: str) -> None:
    """Upstream's ``SetCRDCondition``: replace the condition of ``new``'s type, keeping its
    lastTransitionTime when the status did not change."""
    status = crd.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    for i, cond in enumerate(conditions):
        if cond.get("type") == new["type"]:
            if cond.get("status") == new["status"] and cond.get("lastTransitionTime"):
                new = {**new, "lastTransitionTime": cond["lastTransitionTime"]}
            else:
                new = {**new, "lastTransitionTime": now}
            conditions[i] = _ordered(new)
            return
    conditions.append(_ordered({**new, "lastTransitionTime": now}))


def _ordered(cond: dict) -> dict:
    keys = ("type", "status", "lastTransitionTime", "reason", "message")
    return {k: cond[k] for k in keys if cond.get(k) is not None}


def storage_version(crd: dict) -> str:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if version.get("storage"):
            return version.get("name") or ""
    return ""


def served_versions(crd: dict) -> list:
    return [v for v in (crd.get("spec") or {}).get("versions") or () if v.get("served")]
