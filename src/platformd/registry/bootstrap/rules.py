"""
Comparing PolicyRules: whether some rules allow everything others do (upstream's
``pkg/registry/rbac/validation`` ``Covers``), and rule equality as upstream's
``equality.Semantic`` sees it (an absent list and an empty one are the same).
"""

from __future__ import annotations

#: PolicyRule's fields, in upstream's order.
FIELDS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")


def rule_key(rule: dict) -> tuple:
    """A hashable form of ``rule``: two rules are equal when their keys are."""
    return tuple(tuple(rule.get(f) or ()) for f in FIELDS)


def rules_equal(a, b) -> bool:
    """Whether two rule lists are the same rules in the same order (None is [])."""
    return [rule_key(r) for r in a or ()] == [rule_key(r) for r in b or ()]


def breakdown(rule: dict) -> list:
    """
    ``rule`` as rules of one verb and one group, resource and resource name each (or one
    verb and one non-resource URL), in upstream's order.
    """
    out: list[dict] = []
    verbs = rule.get("verbs") or ()
    names = rule.get("resourceNames") or ()
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in verbs:
                atom = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
                if names:
                    out.extend({**atom, "resourceNames": [n]} for n in names)
                else:
                    out.append(atom)
    for url in rule.get("nonResourceURLs") or ():
        out.extend({"verbs": [verb], "nonResourceURLs": [url]} for verb in verbs)
    return out


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def _resources_cover(owned, wanted) -> bool:
    """Upstream's ``resourceCoversAll``: ``*``, exact names, or ``*/subresource``."""
    if "*" in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource or "*/" + resource.split("/", 1)[1] not in owned:
            return False
    return True


def _rule_covers(owner: dict, atom: dict) -> bool:
    verbs = owner.get("verbs") or ()
    groups = owner.get("apiGroups") or ()
    names = owner.get("resourceNames") or ()
    urls = owner.get("nonResourceURLs") or ()
    wanted_names = atom.get("resourceNames") or ()
    # An owner limited to names covers only atoms limited to some of those names.
    names_cover = not names or bool(wanted_names) and set(wanted_names) <= set(names)
    return (("*" in verbs or set(atom.get("verbs") or ()) <= set(verbs))
            and ("*" in groups or set(atom.get("apiGroups") or ()) <= set(groups))
            and _resources_cover(owner.get("resources") or (), atom.get("resources") or ())
            and names_cover
            and all(any(_url_covers(o, p) for o in urls)
                    for p in atom.get("nonResourceURLs") or ()))


def uncovered(owner_rules, servant_rules) -> list:
    """The atoms (``breakdown``) of ``servant_rules`` that no rule of ``owner_rules`` allows."""
    owner_rules = list(owner_rules or ())
    return [atom for rule in servant_rules or () for atom in breakdown(rule)
            if not any(_rule_covers(owner, atom) for owner in owner_rules)]
