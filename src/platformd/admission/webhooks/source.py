"""
The webhooks of every Mutating/ValidatingWebhookConfiguration, read live from the
configuration kind's lister (``ILister``) and compiled once per object version: a webhook
changed, added or deleted is seen by the next request.  Configurations are taken in
name order and each one's webhooks in their order, as upstream sorts them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Optional

import attrs

from platformd.cel import CompileError
from platformd.util.labelselectors import compile_selector


@attrs.frozen
class Webhook:
    """One webhook of a configuration, ready to match and call (upstream's accessor)."""

    name: str
    configuration: str
    #: Unique per webhook version: the configuration's uid and the webhook's index.
    uid: str
    #: ``clientConfig.url``, or the URL of ``clientConfig.service`` (``service_url``).
    url: str
    service: Optional[dict]
    ca_bundle: bytes
    timeout: float
    failure_policy: str
    match_policy: str
    side_effects: str
    review_versions: tuple
    reinvocation: str
    rules: tuple
    #: ``labels -> bool`` or None (everything); a str is the selector's error.
    namespace_selector: Any
    object_selector: Any
    #: ``((name, program), ...)``; a str is a compile error (the policy decides).
    conditions: Any

    @property
    def ignore_failures(self) -> bool:
        return self.failure_policy == "Ignore"


def _selector(selector):
    try:
        return compile_selector(selector)
    except ValueError as error:
        return str(error)


def _conditions(conditions, compile_condition):
    compiled = []
    for condition in conditions or ():
        try:
            compiled.append((condition.get("name", ""),
                             compile_condition(condition.get("expression", ""))))
        except CompileError as error:  # stored before a CEL change
            return f"matchCondition {condition.get('name', '')!r}: {error}"
    return tuple(compiled)


def _ca_bundle(config: dict) -> bytes:
    try:
        return base64.b64decode(config.get("caBundle") or "", validate=True)
    except (binascii.Error, ValueError):
        return b""


def service_url(service: dict) -> str:
    """
    Where upstream's client sends a ``clientConfig.service`` call (its default service
    resolver): ``https://<name>.<namespace>.svc:<port><path>`` (port 443 unless given,
    path ``/`` unless given), so the TLS server name is ``<name>.<namespace>.svc`` and
    the host is found through the resolver (``client.Caller``).
    """
    host = f"{service.get('name', '')}.{service.get('namespace', '')}.svc"
    return f"https://{host}:{service.get('port') or 443}{service.get('path') or '/'}"


def compile_webhooks(obj: dict, compile_condition, mutating: bool) -> tuple:
    meta = obj.get("metadata") or {}
    out = []
    for index, hook in enumerate(obj.get("webhooks") or ()):
        config = hook.get("clientConfig") or {}
        out.append(Webhook(
            name=hook.get("name", ""), configuration=meta.get("name", ""),
            uid=f"{meta.get('uid', meta.get('name', ''))}/{index}",
            url=config.get("url") or service_url(config.get("service") or {}),
            service=config.get("service"),
            ca_bundle=_ca_bundle(config),
            timeout=float(hook.get("timeoutSeconds") or 10),
            failure_policy=hook.get("failurePolicy") or "Fail",
            match_policy=hook.get("matchPolicy") or "Equivalent",
            side_effects=hook.get("sideEffects") or "",
            review_versions=tuple(hook.get("admissionReviewVersions") or ()),
            reinvocation=(hook.get("reinvocationPolicy") or "Never") if mutating else "Never",
            rules=tuple(hook.get("rules") or ()),
            namespace_selector=_selector(hook.get("namespaceSelector")),
            object_selector=_selector(hook.get("objectSelector")),
            conditions=_conditions(hook.get("matchConditions"), compile_condition)))
    return tuple(out)


class WebhookSource:
    """The current webhooks of one configuration kind (its ``ILister``)."""

    def __init__(self, configurations, compile_condition, *, mutating: bool):
        self.configurations = configurations
        self.compile_condition = compile_condition
        self.mutating = mutating
        #: storage key → (object version, compiled webhooks).
        self._compiled: dict = {}

    def webhooks(self) -> list:
        entries = self.configurations.list()
        if not entries:
            self._compiled.clear()
            return []
        out: list = []
        for entry in sorted(entries, key=lambda e: e.name):
            kept = self._compiled.get(entry.key)
            if kept is None or kept[0] is not entry:
                kept = (entry, compile_webhooks(entry.obj, self.compile_condition,
                                                self.mutating))
                self._compiled[entry.key] = kept
            out.extend(kept[1])
        if len(self._compiled) > len(entries):
            current = {entry.key for entry in entries}
            for key in [k for k in self._compiled if k not in current]:
                del self._compiled[key]
        return out
