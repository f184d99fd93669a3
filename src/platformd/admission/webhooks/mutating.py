"""
``MutatingAdmissionWebhook`` (upstream's ``mutating/dispatcher.go``): the relevant
webhooks are called one after another, each seeing the object as the ones before left
it; an answer's JSON Patch is applied to the object in place.  A webhook with
``reinvocationPolicy: IfNeeded`` that was called before a later webhook changed the
object is called once more, after the others (upstream reinvokes it once).  A denial
stops the chain with upstream's message; a failed call stops it under failurePolicy
Fail and is passed over under Ignore.
"""

from __future__ import annotations

import json

import jsonpatch
from twisted.internet import defer
from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import IMutatingPlugin
from platformd.admission.webhooks.dispatch import Dispatcher, on_call_error, record
from platformd.admission.webhooks.errors import CallError, denied
from platformd.admission.webhooks.matching import should_call


@implementer(IMutatingPlugin)
class MutatingAdmissionWebhook(Dispatcher):
    name = "MutatingAdmissionWebhook"
    mutating = True
    span_name = "Call mutating webhook"
    metric_type = "admit"

    def admit(self, a):
        hooks = self.relevant(a)
        if not hooks:
            return None
        return self._run(hooks, a)

    @defer.inlineCallbacks
    def _run(self, hooks, a):
        invoked: list = []
        again: set = set()
        for index, hook in enumerate(hooks):
            changed = yield self._one(hook, a, 0, index)
            if changed is None:
                continue
            if changed:
                again.update(h.uid for h in invoked if h.reinvocation == "IfNeeded")
            invoked.append(hook)
        if again:
            for index, hook in enumerate(hooks):
                if hook.uid in again and should_call(hook, a, self.namespaces):
                    yield self._one(hook, a, 1, index)

    @defer.inlineCallbacks
    def _one(self, hook, a, round_: int, index: int):
        """Call ``hook``: True if it changed the object, False if not, None if skipped."""
        try:
            result = yield self.call(hook, a)
        except CallError as error:
            refusal = on_call_error(hook, error)
            if refusal is not None:
                raise refusal from None
            return None
        if result is None:
            return None
        record(a, hook, result)
        if not result.allowed:
            raise denied(hook.name, result.status)
        changed = False
        if result.patch and a.obj is not None:
            try:
                patched = jsonpatch.apply_patch(a.obj, result.patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException,
                    TypeError, ValueError) as error:
                raise errors.internal(f"JSON Patch: {error}") from None
            if not isinstance(patched, dict):
                raise errors.internal("JSON Patch: the patched object is not an object")
            changed = patched != a.obj
            if changed:
                a.obj.clear()
                a.obj.update(patched)
        annotations = getattr(a.context, "audit_annotations", None)
        if annotations is not None:
            annotations[f"mutation.webhook.admission.platform.io/round_{round_}_index_{index}"] = (
                json.dumps({"configuration": hook.configuration, "webhook": hook.name,
                            "mutated": changed}, separators=(",", ":")))
        return changed
