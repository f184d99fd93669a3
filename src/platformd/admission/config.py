"""
``--admission-control-config-file``: the ``AdmissionConfiguration`` file (spec 2.5;
upstream's ``admission.ReadAdmissionConfiguration`` and its ``configProvider``).

::

    apiVersion: apiserver.config.platform.io/v1
    kind: AdmissionConfiguration
    plugins:
    - name: ValidatingAdmissionWebhook
      path: webhook-admission.yaml          # relative: against this file's directory
    - name: MutatingAdmissionWebhook
      configuration: {...}                  # embedded: used instead of path

``read_admission_configuration(path)`` reads and decodes the file (YAML or JSON) strictly,
as upstream's codec made with ``serializer.EnableStrict`` (since 1.32): an unknown field is
``strict decoding error: unknown field "plugins[0].foo"``; the embedded ``configuration``
is kept as written (a ``runtime.RawExtension``, not checked here).  Each plugin's
relative ``path`` is made absolute against the file's directory.  ``config_for(name)``
answers a plugin's configuration as bytes: the embedded ``configuration`` (as JSON) if
present, else the contents of ``path``, else None.  Only the enabled plugins are asked
(``plugins.Plugins.build``), so an entry whose name no enabled plugin has, a registered
one or not (``NotARealPlugin``), is never read and never an error, as upstream's
``configProvider.ConfigFor`` is only asked about the enabled names.  Errors are
``AdmissionConfigError``, one line in upstream's words (the daemon prefixes ``failed to
read plugin config: `` as ``AdmissionOptions.ApplyTo`` does).
"""

from __future__ import annotations

import json
import os
from typing import Optional

import attrs

from platformd.files import configfile
from platformd.goformat import gotext
#: Spec 2.5: AdmissionConfiguration exists in v1 only.
_KIND = configfile.Kind(
    "AdmissionConfiguration", frozenset({"apiserver.config.platform.io/v1"}),
    configfile.Struct("AdmissionConfiguration", "v1.AdmissionConfiguration", {
        "plugins": [configfile.Struct(
            "AdmissionPluginConfiguration", "v1.AdmissionPluginConfiguration",
            {"name": "string", "path": "string", "configuration": configfile.RAW})]}))


class AdmissionConfigError(Exception):
    """The configuration file cannot be used (one line, upstream's words)."""


@attrs.frozen
class AdmissionPluginConfiguration:
    name: str
    #: Absolute (made so against the file's directory), or "".
    path: str = ""
    #: The embedded object, or None.
    configuration: Optional[object] = None


@attrs.frozen
class AdmissionConfiguration:
    plugins: tuple = ()

    def config_for(self, name: str) -> Optional[bytes]:
        """The first entry for ``name``: embedded configuration (JSON), else the file at
        its path, else None."""
        for entry in self.plugins:
            if entry.name != name:
                continue
            if entry.configuration is not None:
                return json.dumps(entry.configuration).encode()
            if entry.path:
                try:
                    with open(entry.path, "rb") as f:
                        return f.read()
                except OSError as e:
                    raise AdmissionConfigError(
                        f"Couldn't open admission plugin configuration {entry.path}: "
                        f"{gotext.path_error('open', entry.path, e)}") from None
            return None
        return None


def read_admission_configuration(path: str) -> AdmissionConfiguration:
    """The file at ``path``, decoded, its plugins' paths made absolute; ""/None: empty."""
    if not path:
        return AdmissionConfiguration()
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise AdmissionConfigError(
            f'unable to read admission control configuration from "{path}" '
            f"[{gotext.path_error('open', path, e)}]") from None
    try:
        _, document = configfile.decode(data, _KIND)
    except configfile.DecodeError as error:
        raise AdmissionConfigError(str(error)) from None
    base = os.path.dirname(path)
    return AdmissionConfiguration(tuple(
        AdmissionPluginConfiguration(raw.get("name", ""), _absolute(raw.get("path", ""), base),
                                     raw.get("configuration"))
        for raw in document.get("plugins", ())))


def _absolute(path: str, base: str) -> str:
    """Upstream's ``makeAbs``: against the file's directory, or the working one."""
    if not path or os.path.isabs(path):
        return path
    return os.path.join(base if base not in ("", ".") else os.getcwd(), path)
