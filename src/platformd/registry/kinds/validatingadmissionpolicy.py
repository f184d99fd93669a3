"""
ValidatingAdmissionPolicy (``admissionregistration.platform.io/v1``, cluster-scoped, with
a ``status`` subresource): CEL validations the ``ValidatingAdmissionPolicy`` admission
plugin (``admission/policy``) applies through bindings; shapes, defaulting and validation
in ``validatingadmissionpolicyshapes``.
"""

from __future__ import annotations

from platformd.registry.kinds.validatingadmissionpolicyshapes import POLICY_KIND

KIND = POLICY_KIND
