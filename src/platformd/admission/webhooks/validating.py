"""
``ValidatingAdmissionWebhook`` (upstream's ``validating/dispatcher.go``): every relevant
webhook is called at once (in parallel); when all have answered, the first refusal in
webhook order is the request's error: a denial as ``admission webhook "x" denied the
request: <message>`` with the webhook's code and reason, a failed call (failurePolicy
Fail) as 500 ``failed calling webhook "x": ...``.
"""

from __future__ import annotations

from twisted.internet import defer
from zope.interface import implementer

from platformd.admission.interfaces import IValidatingPlugin
from platformd.admission.webhooks.dispatch import Dispatcher, on_call_error, record
from platformd.admission.webhooks.errors import CallError, denied


@implementer(IValidatingPlugin)
class ValidatingAdmissionWebhook(Dispatcher):
    name = "ValidatingAdmissionWebhook"

    def validate(self, a):
        hooks = self.relevant(a)
        if not hooks:
            return None
        calls = [self.call(hook, a) for hook in hooks]
        gathered = defer.DeferredList(calls, consumeErrors=True)
        return gathered.addCallback(self._decide, hooks, a)

    def _decide(self, outcomes, hooks, a) -> None:
        refusal = None
        for hook, (ok, value) in zip(hooks, outcomes):
            if ok:
                if value is None:
                    continue
                record(a, hook, value)
                if not value.allowed and refusal is None:
                    refusal = denied(hook.name, value.status)
                continue
            if value.check(CallError):
                error = on_call_error(hook, value.value)
                if error is not None and refusal is None:
                    refusal = error
            elif refusal is None:
                refusal = value.value
        if refusal is not None:
            raise refusal
