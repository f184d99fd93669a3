"""
The audit policy (``--audit-policy-file``): upstream's ``audit.platform.io/v1`` Policy,
read, validated and evaluated as ``k8s.io/apiserver/pkg/audit/policy`` does.

A request is matched against the rules in order; the first rule that matches gives the
level (None, Metadata, Request, RequestResponse) and the stages to omit (the rule's and
the policy's, united); no rule matching is level None.  A bad file is an error naming
the file with upstream's message (``LoadPolicyFromFile``), which the daemon reports at
startup.  Unknown fields are ignored with a warning, as upstream's lenient fallback.
"""

from __future__ import annotations

from typing import Optional

import attrs
import yaml
from twisted.logger import Logger

from platformd.goformat import gotext
from platformd.model.meta import dns_subdomain
from platformd.storage.encryption.fielderrors import aggregate, go_value

log = Logger()

NONE, METADATA, REQUEST, REQUEST_RESPONSE = "None", "Metadata", "Request", "RequestResponse"
LEVELS = (NONE, METADATA, REQUEST, REQUEST_RESPONSE)
#: A level's rank: ``RANK[a] < RANK[b]`` is upstream's ``a.Less(b)``.
RANK = {level: rank for rank, level in enumerate(LEVELS)}

REQUEST_RECEIVED = "RequestReceived"
RESPONSE_STARTED = "ResponseStarted"
RESPONSE_COMPLETE = "ResponseComplete"
PANIC = "Panic"
STAGES = (REQUEST_RECEIVED, RESPONSE_STARTED, RESPONSE_COMPLETE, PANIC)

GROUP = "audit.platform.io"
#: The versions upstream reads a Policy in (``apiGroupVersions``).
VERSIONS = ("v1", "v1beta1", "v1alpha1")

#: The rule fields, as upstream's PolicyRule names them (anything else is unknown).
_RULE_FIELDS = frozenset({"level", "users", "userGroups", "verbs", "resources", "namespaces",
                          "nonResourceURLs", "omitStages", "omitManagedFields"})
_POLICY_FIELDS = frozenset({"apiVersion", "kind", "metadata", "rules", "omitStages",
                            "omitManagedFields"})
_RESOURCE_FIELDS = frozenset({"group", "resources", "resourceNames"})


class PolicyError(Exception):
    """A policy file that cannot be used (the message is upstream's)."""


@attrs.frozen
class GroupResources:
    group: str = ""
    resources: tuple = ()
    resource_names: tuple = ()

    def matches(self, group: str, resource: str, subresource: str, name: str) -> bool:
        """``ruleMatchesResource``'s inner loop for one entry (group already equal)."""
        if not self.resources:
            return True
        if self.resource_names and name not in self.resource_names:
            return False
        combined = f"{resource}/{subresource}" if subresource else resource
        for spec in self.resources:
            if spec in (combined, "*"):
                return True
            if subresource and spec.startswith("*/") and spec[2:] == subresource:
                return True
            if spec.endswith("/*") and spec[:-2] == resource:
                return True
        return False


@attrs.frozen
class RequestAuditConfig:
    """What a rule decides for one request (upstream's ``RequestAuditConfig``)."""

    level: str
    omit_stages: frozenset = frozenset()
    omit_managed_fields: bool = False


@attrs.frozen
class Rule:
    level: str
    users: tuple = ()
    user_groups: tuple = ()
    verbs: tuple = ()
    resources: tuple = ()  # of GroupResources
    namespaces: tuple = ()
    non_resource_urls: tuple = ()
    omit_stages: frozenset = frozenset()
    #: None: the policy's setting applies.
    omit_managed_fields: Optional[bool] = None

    def matches(self, user, info) -> bool:
        """``ruleMatches``: every field given must match."""
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None
                                 or not any(g in self.user_groups for g in user.groups)):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(info)
        if self.non_resource_urls:
            return not info.is_resource and any(
                _path_matches(info.path, spec) for spec in self.non_resource_urls)
        return True

    def _matches_resource(self, info) -> bool:
        if not info.is_resource:
            return False
        if self.namespaces and info.namespace not in self.namespaces:
            return False  # cluster-scoped requests have the namespace ""
        if not self.resources:
            return True
        return any(gr.group == info.group
                   and gr.matches(info.group, info.resource, info.subresource, info.name)
                   for gr in self.resources)


def _path_matches(path: str, spec: str) -> bool:
    if spec in ("*", path):
        return True
    return spec.endswith("*") and path.startswith(spec.rstrip("*"))


@attrs.frozen
class Policy:
    rules: tuple
    omit_stages: frozenset = frozenset()
    omit_managed_fields: bool = False

    def evaluate(self, user, info) -> RequestAuditConfig:
        """The first matching rule's level and stages (upstream's ``EvaluatePolicyRule``)."""
        for rule in self.rules:
            if rule.matches(user, info):
                omit_fields = (self.omit_managed_fields if rule.omit_managed_fields is None
                               else rule.omit_managed_fields)
                return RequestAuditConfig(rule.level, rule.omit_stages | self.omit_stages,
                                          omit_fields)
        return RequestAuditConfig(NONE, self.omit_stages, self.omit_managed_fields)


def load_file(path: str) -> Policy:
    """``LoadPolicyFromFile``: the policy in ``path``, or ``PolicyError``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PolicyError(f'failed to read file path "{path}": '
                          f"{gotext.path_error('open', path, e)}") from None
    try:
        return load(data)
    except PolicyError as e:
        raise PolicyError(f"{e}: from file {path}") from None


def load(data: bytes) -> Policy:
    """``LoadPolicyFromBytes``: decode (YAML or JSON), check the version, validate."""
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise PolicyError(f"failed decoding: error converting YAML to JSON: {e}") from None
    if not isinstance(document, dict):
        raise PolicyError("failed decoding: couldn't get version/kind; json parse error: "
                          "the document is not an object")
    version, kind = document.get("apiVersion") or "", document.get("kind") or ""
    if not kind:
        raise PolicyError("failed decoding: Object 'Kind' is missing in "
                          f"'{_short(data)}'")
    group, _, ver = version.rpartition("/")
    if group != GROUP or ver not in VERSIONS or kind != "Policy":
        raise PolicyError(f'failed decoding: no kind "{kind}" is registered for version '
                          f'"{version}" in scheme "platformd/audit"')
    if ver != "v1":
        log.warn('"{old}" is deprecated and will be removed in a future release, use '
                 '"{new}" instead', old=f"{GROUP}/{ver}", new=f"{GROUP}/v1")
    unknown = _unknown_fields(document)
    if unknown:
        log.warn("Audit policy contains errors, falling back to lenient decoding: "
                 "strict decoding error: {fields}",
                 fields=", ".join(f'unknown field "{u}"' for u in unknown))
    policy = _decode(document)
    problems = _validate(document)
    if problems:
        raise PolicyError(aggregate(problems))
    if not policy.rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    return policy


def _short(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip().replace("\n", " ")[:200]


def _unknown_fields(document: dict) -> list:
    unknown = [key for key in document if key not in _POLICY_FIELDS]
    for i, rule in enumerate(_list(document, "rules")):
        if isinstance(rule, dict):
            unknown += [f"rules[{i}].{k}" for k in rule if k not in _RULE_FIELDS]
            for j, gr in enumerate(_list(rule, "resources")):
                if isinstance(gr, dict):
                    unknown += [f"rules[{i}].resources[{j}].{k}" for k in gr
                                if k not in _RESOURCE_FIELDS]
    return unknown


def _unmarshal_error(value, target: str) -> PolicyError:
    """Go's ``json: cannot unmarshal <kind> into <target>``, as the decoder words it."""
    return PolicyError(f"failed decoding: json: cannot unmarshal "
                       f"{gotext.json_kind(value, 'object')} into {target}")


def _list(document: dict, field: str, path: str = "") -> list:
    value = document.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _unmarshal_error(value, f"Go struct field {path or 'Policy'}.{field} of type []")
    return value


def _strings(document: dict, field: str, path: str) -> tuple:
    values = _list(document, field, path)
    for value in values:
        if not isinstance(value, str):
            raise _unmarshal_error(value, f"Go struct field {path}.{field} of type string")
    return tuple(values)


def _string(document: dict, field: str, path: str) -> str:
    value = document.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _unmarshal_error(value, f"Go struct field {path}.{field} of type string")
    return value


def _bool(document: dict, field: str, path: str) -> Optional[bool]:
    value = document.get(field)
    if value is not None and not isinstance(value, bool):
        raise _unmarshal_error(value, f"Go struct field {path}.{field} of type bool")
    return value


def _decode(document: dict) -> Policy:
    rules = []
    for raw in _list(document, "rules"):
        if not isinstance(raw, dict):
            raise _unmarshal_error(raw, "Go struct field Policy.rules of type v1.PolicyRule")
        resources = []
        for gr in _list(raw, "resources", "PolicyRule"):
            if not isinstance(gr, dict):
                raise _unmarshal_error(gr, "Go struct field PolicyRule.rules.resources of type "
                                           "v1.GroupResources")
            resources.append(GroupResources(
                _string(gr, "group", "GroupResources"),
                _strings(gr, "resources", "GroupResources"),
                _strings(gr, "resourceNames", "GroupResources")))
        rules.append(Rule(
            level=_string(raw, "level", "PolicyRule"),
            users=_strings(raw, "users", "PolicyRule"),
            user_groups=_strings(raw, "userGroups", "PolicyRule"),
            verbs=_strings(raw, "verbs", "PolicyRule"),
            resources=tuple(resources),
            namespaces=_strings(raw, "namespaces", "PolicyRule"),
            non_resource_urls=_strings(raw, "nonResourceURLs", "PolicyRule"),
            omit_stages=frozenset(_strings(raw, "omitStages", "PolicyRule")),
            omit_managed_fields=_bool(raw, "omitManagedFields", "PolicyRule")))
    return Policy(tuple(rules), frozenset(_strings(document, "omitStages", "Policy")),
                  bool(_bool(document, "omitManagedFields", "Policy")))


def _validate(document: dict) -> list:
    """``ValidatePolicy``: each rule's problems, in upstream's order and words."""
    problems: list = _omit_stages(document, "omitStages")
    for i, rule in enumerate(document.get("rules") or ()):
        path = f"rules[{i}]"
        level = rule.get("level") or ""
        if not level:
            problems.append(f"{path}.level: Required value")
        elif level not in LEVELS:
            supported = ", ".join(f'"{v}"' for v in LEVELS)
            problems.append(f"{path}.level: Unsupported value: {go_value(level)}: "
                            f"supported values: {supported}")
        urls = rule.get("nonResourceURLs") or []
        for j, url in enumerate(urls):
            if url == "*":
                continue
            if not url.startswith("/"):
                problems.append(f"{path}.nonResourceURLs[{j}]: Invalid value: {go_value(url)}: "
                                "non-resource URL rules must begin with a '/' character")
            if url and "*" in url[:-1]:
                problems.append(f"{path}.nonResourceURLs[{j}]: Invalid value: {go_value(url)}: "
                                "non-resource URL wildcards '*' must be the final character "
                                "of the rule")
        for gr in rule.get("resources") or ():
            group = gr.get("group") or ""
            messages = dns_subdomain(group) if group else []
            if messages:
                problems.append(f"{path}.resources.group: Invalid value: {go_value(group)}: "
                                + ",".join(messages))
            if gr.get("resourceNames") and not gr.get("resources"):
                problems.append(f"{path}.resources.resourceNames: Invalid value: "
                                f"{go_value(gr['resourceNames'])}: using resourceNames "
                                "requires at least one resource")
        problems += _omit_stages(rule, f"{path}.omitStages")
        if urls and (rule.get("resources") or rule.get("namespaces")):
            problems.append(f"{path}.nonResourceURLs: Invalid value: {go_value(urls)}: rules "
                            "cannot apply to both regular resources and non-resource URLs")
    return problems


def _omit_stages(document: dict, path: str) -> list:
    return [f"{path}[{j}]: Invalid value: {go_value(stage)}: allowed stages are "
            f"{','.join(STAGES)}"
            for j, stage in enumerate(document.get("omitStages") or ()) if stage not in STAGES]
