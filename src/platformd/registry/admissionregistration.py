"""
The ``admissionregistration.platform.io/v1`` kinds, by name, for callers that want one
(the admission plugins read their configurations through these kinds' informers): each
is defined in its own module under ``registry/kinds/``.
"""

from __future__ import annotations

from platformd.registry.kinds import (
    mutatingwebhookconfiguration, validatingadmissionpolicy, validatingadmissionpolicybinding,
    validatingwebhookconfiguration,
)

MUTATING_WEBHOOK_CONFIGURATION = mutatingwebhookconfiguration.KIND
VALIDATING_WEBHOOK_CONFIGURATION = validatingwebhookconfiguration.KIND
VALIDATING_ADMISSION_POLICY = validatingadmissionpolicy.KIND
VALIDATING_ADMISSION_POLICY_BINDING = validatingadmissionpolicybinding.KIND
