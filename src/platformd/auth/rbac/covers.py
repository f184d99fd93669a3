"""
Whether one set of PolicyRules covers another (upstream's ``validation.Covers`` in
``component-helpers/auth/rbac/validation/policy_comparator.go``), and the compact form
of the rules that are not covered, as escalation messages print them
(``CompactRules`` in ``pkg/registry/rbac/validation/policy_compact.go`` and
``CompactString`` in ``pkg/apis/rbac/v1/evaluation_helpers.go``).

Rules are dicts as stored.  The requested rules are broken down into rules of one verb,
one group, one resource and at most one name (or one URL and one verb); each piece is
then covered by a single owner rule or not at all.
"""

from __future__ import annotations

from platformd.goformat.gotext import quote_list
from platformd.auth.rbac.rules import ALL

_FIELDS = ("apiGroups", "resources", "nonResourceURLs", "resourceNames", "verbs")
_LABELS = {"apiGroups": "APIGroups", "resources": "Resources",
           "nonResourceURLs": "NonResourceURLs", "resourceNames": "ResourceNames",
           "verbs": "Verbs"}


def breakdown(rule: dict) -> list:
    """Upstream's ``BreakdownRule``: one verb, group, resource and name per piece."""
    pieces: list = []
    verbs = rule.get("verbs") or ()
    names = rule.get("resourceNames") or ()
    for group in rule.get("apiGroups") or ():
        for resource in rule.get("resources") or ():
            for verb in verbs:
                if names:
                    pieces.extend({"apiGroups": [group], "resources": [resource],
                                   "verbs": [verb], "resourceNames": [name]} for name in names)
                else:
                    pieces.append({"apiGroups": [group], "resources": [resource],
                                   "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or ():
        pieces.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs)
    return pieces


def covers(owner_rules, requested_rules) -> tuple:
    """``(covered, missing)``: whether ``owner_rules`` allow all ``requested_rules`` do,
    and the broken-down pieces they do not."""
    owners = [_Owner(rule) for rule in owner_rules]
    missing = [piece for rule in requested_rules for piece in breakdown(rule)
               if not any(owner.covers(piece) for owner in owners)]
    return not missing, missing


class _Owner:
    """One owner rule as sets (upstream's ``ruleCovers`` against a piece)."""

    __slots__ = ("verbs", "groups", "resources", "names", "urls")

    def __init__(self, rule: dict):
        self.verbs = frozenset(rule.get("verbs") or ())
        self.groups = frozenset(rule.get("apiGroups") or ())
        self.resources = frozenset(rule.get("resources") or ())
        self.names = frozenset(rule.get("resourceNames") or ())
        self.urls = tuple(rule.get("nonResourceURLs") or ())

    def covers(self, piece: dict) -> bool:
        if not (ALL in self.verbs or self.verbs.issuperset(piece.get("verbs") or ())):
            return False
        if not (ALL in self.groups or self.groups.issuperset(piece.get("apiGroups") or ())):
            return False
        if not self._resources_cover(piece.get("resources") or ()):
            return False
        if not all(any(_url_covers(owner, url) for owner in self.urls)
                   for url in piece.get("nonResourceURLs") or ()):
            return False
        names = piece.get("resourceNames") or ()
        if not names:
            return not self.names
        return not self.names or self.names.issuperset(names)

    def _resources_cover(self, wanted) -> bool:
        if ALL in self.resources or self.resources.issuperset(wanted):
            return True
        for path in wanted:
            if path in self.resources:
                continue
            # Only a subresource can be covered otherwise: by "*/subresource".
            if "/" not in path or "*/" + path.split("/", 1)[1] not in self.resources:
                return False
        return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def compact(rules) -> list:
    """
    Upstream's ``CompactRules``: rules of one group and one resource and nothing but
    verbs are merged, their verbs in order; every other rule is kept as it is.
    """
    kept: list = []
    simple: dict = {}
    for rule in rules:
        key = _simple_key(rule)
        if key is None:
            kept.append(rule)
        elif key in simple:
            simple[key]["verbs"] = simple[key]["verbs"] + list(rule.get("verbs") or ())
        else:
            simple[key] = {"apiGroups": list(rule["apiGroups"]),
                           "resources": list(rule["resources"]),
                           "verbs": list(rule.get("verbs") or ())}
    return kept + list(simple.values())


def _simple_key(rule: dict):
    if any(rule.get(field) for field in rule if field not in ("apiGroups", "resources", "verbs")):
        return None
    groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
    if len(groups) != 1 or len(resources) != 1:
        return None
    return groups[0], resources[0]


def compact_string(rule: dict) -> str:
    """Upstream's ``CompactString``: ``{APIGroups:["apps"], Resources:["pods"], Verbs:["get"]}``."""
    parts = [f"{_LABELS[field]}:{quote_list(rule[field])}" for field in _FIELDS
             if rule.get(field)]
    return "{" + ", ".join(parts) + "}"


def missing_descriptions(missing) -> list:
    """The missing rules, compacted, as sorted distinct compact strings (the message's lines)."""
    return sorted({compact_string(rule) for rule in compact(missing)})
