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

``read_admission_configuration(path)`` reads and decodes the file (YAML or JSON; as
upstream's universal decoder, unknown fields are ignored) and makes each plugin's
relative ``path`` absolute against the file's directory.  ``config_for(name)`` answers a
plugin's configuration as bytes: the embedded ``configuration`` (as JSON) if present,
else the contents of ``path``, else None.  A plugin not named in the file has none;
names the file gives that no enabled plugin has are ignored, as upstream.  Errors are
``AdmissionConfigError``, one line in upstream's words (the daemon prefixes
``failed to read plugin config: `` as ``AdmissionOptions.ApplyTo`` does).
"""

from __future__ import annotations

import json
import os
from typing import Optional

import attrs
import yaml

from platformd import gotext

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KIND = "AdmissionConfiguration"
#: Spec 2.5: AdmissionConfiguration exists in v1 only.
API_VERSIONS = frozenset({"apiserver.config.platform.io/v1"})



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


def _compact(data: bytes) -> str:
    return " ".join(data.decode("utf-8", "replace").split())[:200]


def _cannot(value, field: str, go_type: str) -> AdmissionConfigError:
    got = gotext.json_kind(value)
    return AdmissionConfigError(
        f"json: cannot unmarshal {got} into Go struct field {field} of type {go_type}")


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
    return _decode(data, os.path.dirname(path))


def _decode(data: bytes, base: str) -> AdmissionConfiguration:
    try:
        document = yaml.load(data, Loader=_Loader) if data.strip() else None
    except yaml.YAMLError as error:
        raise AdmissionConfigError("error converting YAML to JSON: "
                                   + " ".join(str(error).split())) from None
    if not isinstance(document, dict):
        document = {}
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not kind:
        raise AdmissionConfigError(f"Object 'Kind' is missing in '{_compact(data)}'")
    if not api_version:
        raise AdmissionConfigError(f"Object 'apiVersion' is missing in '{_compact(data)}'")
    if api_version not in API_VERSIONS or kind != KIND:
        raise AdmissionConfigError(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme')
    raw_plugins = document.get("plugins")
    if raw_plugins is None:
        raw_plugins = []
    if not isinstance(raw_plugins, list):
        raise _cannot(raw_plugins, "AdmissionConfiguration.plugins",
                      "[]v1.AdmissionPluginConfiguration")
    plugins = []
    for raw in raw_plugins:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise _cannot(raw, "AdmissionConfiguration.plugins",
                          "v1.AdmissionPluginConfiguration")
        for field in ("name", "path"):
            if raw.get(field) is not None and not isinstance(raw[field], str):
                raise _cannot(raw[field], f"AdmissionPluginConfiguration.plugins.{field}",
                              "string")
        plugin_path = raw.get("path") or ""
        if plugin_path and not os.path.isabs(plugin_path):
            plugin_path = os.path.join(base if base not in ("", ".") else os.getcwd(),
                                       plugin_path)
        plugins.append(AdmissionPluginConfiguration(
            raw.get("name") or "", plugin_path, raw.get("configuration")))
    return AdmissionConfiguration(tuple(plugins))
