"""
ValidatingAdmissionPolicyBinding (``admissionregistration.platform.io/v1``,
cluster-scoped): binds a ValidatingAdmissionPolicy to parameters, resources and
validation actions; shapes, defaulting and validation in
``validatingadmissionpolicyshapes``.
"""

from __future__ import annotations

from platformd.registry.kinds.validatingadmissionpolicyshapes import BINDING_KIND

KIND = BINDING_KIND
