"""
ValidatingWebhookConfiguration (``admissionregistration.platform.io/v1``,
cluster-scoped): the webhooks ``ValidatingAdmissionWebhook`` calls
(``admission/webhooks``); shapes, defaulting and validation in ``webhookshapes``.
"""

from __future__ import annotations

from platformd.registry.kinds.webhookshapes import configuration_kind

KIND = configuration_kind(mutating=False)
