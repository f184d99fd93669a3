"""
Whether one PolicyRule allows one request (upstream's ``RuleAllows`` over
``pkg/apis/rbac/v1/evaluation_helpers.go``).

A rule as stored is a dict (``verbs``, ``apiGroups``, ``resources``, ``resourceNames``,
``nonResourceURLs``); ``compile_rule`` turns it once into a ``Rule`` of sets, so a
request costs a few set lookups.  The semantics are upstream's:

* verbs, API groups and resources match exactly or by ``*``;
* a request for a subresource is matched as ``resource/subresource``, by ``*/sub`` or
  by ``*`` (``pods`` alone does not allow ``pods/status``);
* a rule with ``resourceNames`` allows only requests naming one of them: a request
  without a name (create, list, watch, deletecollection) never matches it;
* a non-resource path matches a ``nonResourceURLs`` entry exactly, by ``*``, or by
  prefix when the entry ends in ``*``.
"""

from __future__ import annotations

ALL = "*"


class Rule:
    """A PolicyRule compiled for matching; ``source`` is the rule as stored."""

    __slots__ = ("source", "verbs", "any_verb", "groups", "any_group", "resources",
                 "any_resource", "names", "urls", "any_url", "url_prefixes")

    def __init__(self, source: dict):
        self.source = source
        self.verbs = frozenset(source.get("verbs") or ())
        self.any_verb = ALL in self.verbs
        self.groups = frozenset(source.get("apiGroups") or ())
        self.any_group = ALL in self.groups
        self.resources = frozenset(source.get("resources") or ())
        self.any_resource = ALL in self.resources
        self.names = frozenset(source.get("resourceNames") or ())
        urls = source.get("nonResourceURLs") or ()
        self.urls = frozenset(urls)
        self.any_url = ALL in self.urls
        self.url_prefixes = tuple(u.rstrip("*") for u in urls if u.endswith("*"))


def compile_rule(source: dict) -> Rule:
    return Rule(source)


def allows(rule: Rule, info) -> bool:
    """Whether ``rule`` allows the request ``info`` (a ``RequestInfo``)."""
    if not (rule.any_verb or info.verb in rule.verbs):
        return False
    if not info.is_resource:
        return url_matches(rule, info.path)
    if not (rule.any_group or info.group in rule.groups):
        return False
    if not rule.any_resource:
        subresource = info.subresource
        if subresource:
            if (f"{info.resource}/{subresource}" not in rule.resources
                    and f"*/{subresource}" not in rule.resources):
                return False
        elif info.resource not in rule.resources:
            return False
    return not rule.names or info.name in rule.names


def url_matches(rule: Rule, path: str) -> bool:
    if rule.any_url or path in rule.urls:
        return True
    return any(path.startswith(prefix) for prefix in rule.url_prefixes)


def rules_allow(rules, info) -> bool:
    """Whether any of ``rules`` (compiled) allows ``info``."""
    return any(allows(rule, info) for rule in rules)
