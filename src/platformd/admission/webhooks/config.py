"""
The webhook plugins' own configuration: their part of ``--admission-control-config-file``
(its ``path`` or embedded ``configuration``), upstream's ``webhook/config.LoadConfig``::

    apiVersion: apiserver.config.platform.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: /etc/platformd/webhook-credentials.kubeconfig

Decoded strictly, as upstream's codec (``serializer.EnableStrict``).  Only
``WebhookAdmissionConfiguration`` is a kind of ``v1`` (upstream's ``WebhookAdmission``
is the internal type's name, registered for no served version).  ``kubeConfigFile`` may
be absent (no credentials: every webhook is called anonymously); given, it must be an
absolute path.  ``staticManifestsDir`` needs the alpha ``ManifestBasedAdmissionControlConfig``
feature gate, which this server does not have, so it is refused as upstream refuses it
with the gate off.  No configuration at all is the empty one.
"""

from __future__ import annotations

import os
from typing import Optional

from platformd.files import configfile
from platformd.admission.config import AdmissionConfigError
from platformd.goformat.gotext import go_quote

_KIND = configfile.Kind(
    "WebhookAdmissionConfiguration", frozenset({"apiserver.config.platform.io/v1"}),
    configfile.Struct("WebhookAdmission", "v1.WebhookAdmission",
                      {"kubeConfigFile": "string", "staticManifestsDir": "string"}))


def kubeconfig_file(config: Optional[bytes]) -> str:
    """The ``kubeConfigFile`` of ``config`` ("" when none); ``AdmissionConfigError`` in
    upstream's words when the configuration is refused."""
    if config is None:
        return ""
    try:
        _, document = configfile.decode(config, _KIND)
    except configfile.DecodeError as error:
        raise AdmissionConfigError(str(error)) from None
    path = document.get("kubeConfigFile", "")
    if path and not os.path.isabs(path):
        raise AdmissionConfigError(
            f"kubeConfigFile: Invalid value: {go_quote(path)}: must be an absolute file path")
    if document.get("staticManifestsDir"):
        raise AdmissionConfigError(
            "staticManifestsDir: Forbidden: staticManifestsDir requires the "
            "ManifestBasedAdmissionControlConfig feature gate to be enabled")
    return path
