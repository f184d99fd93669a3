"""
Which names of a definition are accepted, and its ``NamesAccepted`` and ``Established``
conditions: upstream's naming controller (``calculateNamesAndConditions``) and
establishing controller, as pure functions.  A name is in use when another definition
of the same group has accepted it, or a built-in resource of the group has it.
"""

from __future__ import annotations

from platformd.apiextensions.names import ESTABLISHED, NAMES_ACCEPTED, condition


def used_names(group: str, others, builtin=()) -> tuple:
    """``(resources, kinds)`` taken in ``group``: the accepted names of ``others`` (the
    other definitions) and of ``builtin`` (``(plural, singular, short_names, kind)``)."""
    resources: set = set()
    kinds: set = set()
    for crd in others:
        if (crd.get("spec") or {}).get("group") != group:
            continue
        accepted = (crd.get("status") or {}).get("acceptedNames") or {}
        resources.update(n for n in (accepted.get("plural"), accepted.get("singular")) if n)
        resources.update(accepted.get("shortNames") or ())
        kinds.update(n for n in (accepted.get("kind"), accepted.get("listKind")) if n)
    for plural, singular, shorts, kind in builtin:
        resources.update(n for n in (plural, singular) if n)
        resources.update(shorts)
        kinds.update((kind, kind + "List"))
    return resources, kinds


def _fresh(requested, accepted, used) -> str:
    """Upstream's ``equalToAcceptedOrFresh``: '' when fine, else the error."""
    if requested == accepted or requested not in used:
        return ""
    return f'"{requested}" is already in use'


def names_and_conditions(crd: dict, resources: set, kinds: set) -> tuple:
    """``(acceptedNames, NamesAccepted condition, Established condition)`` (conditions
    without lastTransitionTime)."""
    requested = (crd.get("spec") or {}).get("names") or {}
    accepted = (crd.get("status") or {}).get("acceptedNames") or {}
    new = dict(accepted)
    cond = {"type": NAMES_ACCEPTED, "status": "Unknown"}

    def conflict(reason: str, message: str) -> None:
        cond.update(status="False", reason=reason, message=message)

    for field, reason, used in (("plural", "PluralConflict", resources),
                                ("singular", "SingularConflict", resources)):
        error = _fresh(requested.get(field), accepted.get(field), used)
        if error:
            conflict(reason, error)
        elif requested.get(field) is not None:
            new[field] = requested.get(field)
    shorts = list(requested.get("shortNames") or ())
    if shorts != list(accepted.get("shortNames") or ()):
        mine = set(accepted.get("shortNames") or ())
        errors = [f'"{s}" is already in use' for s in shorts if s not in mine and s in resources]
        if errors:
            conflict("ShortNamesConflict",
                     errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        elif shorts:
            new["shortNames"] = shorts
        else:
            new.pop("shortNames", None)
    for field, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        error = _fresh(requested.get(field), accepted.get(field), kinds)
        if error:
            conflict(reason, error)
        elif requested.get(field) is not None:
            new[field] = requested.get(field)
    if requested.get("categories"):
        new["categories"] = list(requested["categories"])
    else:
        new.pop("categories", None)
    if cond["status"] == "Unknown":
        cond.update(status="True", reason="NoConflicts", message="no conflicts found")
    established = condition(crd, ESTABLISHED)
    established = dict(established) if established is not None else {
        "type": ESTABLISHED, "status": "False", "reason": "NotAccepted",
        "message": "not all names are accepted"}
    if established.get("status") != "True" and cond["status"] == "True":
        established = {"type": ESTABLISHED, "status": "False", "reason": "Installing",
                       "message": "the initial names have been accepted"}
    established.pop("lastTransitionTime", None)
    order = ("plural", "singular", "shortNames", "kind", "listKind", "categories")
    new = {k: new[k] for k in order if new.get(k)}
    return new, cond, established


ESTABLISHED_TRUE = {"type": ESTABLISHED, "status": "True", "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted"}
