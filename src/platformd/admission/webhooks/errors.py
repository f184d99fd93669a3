"""The webhook plugins' errors, worded as upstream's ``webhook/errors`` and ``util/webhook``."""

from __future__ import annotations

from platformd import errors
from platformd.goformat.gotext import go_quote


class CallError(Exception):
    """upstream's ``ErrCallingWebhook``: the call failed; the failure policy decides."""

    def __init__(self, webhook: str, reason: str):
        super().__init__(webhook, reason)
        self.webhook = webhook
        self.reason = reason

    def __str__(self):
        if self.reason:
            return f"failed calling webhook {_q(self.webhook)}: {self.reason}"
        return f"failed calling webhook {_q(self.webhook)}; no further details available"


def _q(text: str) -> str:
    return go_quote(text)


def failed(error: CallError) -> errors.StatusError:
    """A call error under failurePolicy Fail: 500 InternalError."""
    return errors.internal(str(error))


def dry_run_unsupported(webhook: str) -> errors.StatusError:
    """``NewDryRunUnsupportedErr``: a webhook with side effects on a dry-run request."""
    return errors.bad_request(f"admission webhook {_q(webhook)} does not support dry run")


def denied(webhook: str, status) -> errors.StatusError:
    """``ToStatusErr``: the webhook's ``response.status`` as the request's error."""
    status = status if isinstance(status, dict) else {}
    denied_by = f"admission webhook {_q(webhook)} denied the request"
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        code = 400
    message = status.get("message") if isinstance(status.get("message"), str) else ""
    reason = status.get("reason") if isinstance(status.get("reason"), str) else ""
    if message:
        message = f"{denied_by}: {message}"
    elif reason:
        message = f"{denied_by}: {reason}"
    else:
        message = f"{denied_by} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else {}
    causes = tuple(errors.Cause(str(c.get("reason", "")), str(c.get("message", "")),
                                str(c.get("field", "")))
                   for c in details.get("causes") or () if isinstance(c, dict))
    return errors.StatusError(code, reason, message,
                              name=details.get("name") or None,
                              group=details.get("group") or None,
                              kind=details.get("kind") or None, causes=causes)
