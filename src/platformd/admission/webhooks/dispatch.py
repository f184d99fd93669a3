"""
What both webhook plugins do per webhook: pick the relevant ones, check dry run against
``sideEffects``, evaluate the match conditions, call, and verify the answer; and what
they record on the request's context (warnings, audit annotations).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from platformd.admission.webhooks.errors import CallError, dry_run_unsupported, failed
from platformd.admission.webhooks.matching import conditions_match, exempt, should_call
from platformd.admission.webhooks.review import BadResponse, Invocation, review_version, verify
from platformd.tracing import spans

NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")


class Dispatcher:
    """The part the mutating and validating plugins share."""

    mutating = False
    #: Upstream's span around one webhook's call.
    span_name = "Call validating webhook"
    #: The ``type`` label of upstream's webhook duration metric.
    metric_type = "validating"

    def __init__(self, source, namespaces, caller, metrics=None):
        #: ``WebhookSource`` of this plugin's configuration kind.
        self.source = source
        #: ``matching.Namespaces``: the Namespace kind and lister (namespaceSelector).
        self.namespaces = namespaces
        self.caller = caller
        #: The server's ``APIServerMetrics``: each call timed (None: not measured).
        self.metrics = metrics

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE", "DELETE")

    def relevant(self, a) -> list:
        """The webhooks whose rules and selectors match ``a`` (none: [], at once)."""
        if exempt(a):
            return []
        hooks = self.source.webhooks()
        if not hooks:
            return []
        return [hook for hook in hooks if should_call(hook, a, self.namespaces)]

    def call(self, hook, a) -> Any:
        """
        A Deferred firing with the verified ``review.Result``, or None when the match
        conditions skip the webhook; failing with ``CallError`` (the policy decides) or
        a ``StatusError`` (dry run unsupported).  Timed as upstream's
        ``apiserver_admission_webhook_admission_duration_seconds``.
        """
        answer = self._call(hook, a)
        if self.metrics is None:
            return answer
        return answer.addBoth(self._observe, hook, a.operation, perf_counter())

    def _observe(self, result, hook, operation: str, started: float):
        """Upstream's ``rejected``: a refusal, or a failure the policy does not ignore."""
        if isinstance(result, Failure):
            rejected = not (result.check(CallError) and hook.ignore_failures)
        else:
            rejected = result is not None and not result.allowed
        self.metrics.admission_webhooks.observe(
            (hook.name, self.metric_type, operation, "true" if rejected else "false"),
            perf_counter() - started)
        return result

    def _call(self, hook, a) -> Any:
        invocation = Invocation.of(a, self.namespaces)
        try:
            if not conditions_match(hook, {"object": a.obj, "oldObject": a.old,
                                           "request": invocation.request}):
                return defer.succeed(None)
        except CallError as error:
            return defer.fail(error)
        if a.dry_run and hook.side_effects not in NO_SIDE_EFFECTS:
            return defer.fail(dry_run_unsupported(hook.name))
        version = review_version(hook)
        if version is None:
            return defer.fail(CallError(
                hook.name, "webhook does not accept known AdmissionReview versions"))
        span = spans.child(getattr(a.context, "span", None), self.span_name,
                           _span_attributes(hook, a, invocation.uid))
        answer = self.caller.post(hook, invocation.body(version), span)
        answer.addCallback(self._verify, hook, version, invocation.uid)
        return answer if span is None else answer.addBoth(spans.ended, span)

    def _verify(self, body: bytes, hook, version: str, uid: str):
        try:
            return verify(body, version, uid, self.mutating)
        except BadResponse as error:
            raise CallError(hook.name, str(error)) from None


def _span_attributes(hook, a, uid: str) -> dict:
    """Upstream's attributes of the call's span (the resource as a GroupVersionResource
    prints)."""
    kind = a.kind
    return {"configuration": hook.configuration, "webhook": hook.name,
            "resource": f"{kind.group}/{kind.version}, Resource={kind.plural}",
            "subresource": a.subresource, "operation": a.operation, "UID": uid}


def record(a, hook, result) -> None:
    """The answer's warnings and audit annotations (``webhook-name/key``) on the context."""
    context = a.context
    warnings = getattr(context, "warnings", None)
    if warnings is not None:
        warnings.extend(result.warnings)
    annotations = getattr(context, "audit_annotations", None)
    if annotations is not None:
        for key, value in result.audit_annotations.items():
            annotations.setdefault(f"{hook.name}/{key}", value)


def on_call_error(hook, error: CallError):
    """failurePolicy: Ignore → None (go on); Fail → the 500 to raise."""
    if hook.ignore_failures:
        return None
    return failed(error)
