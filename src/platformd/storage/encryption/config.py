"""
Loading and validating an ``EncryptionConfiguration`` (``apiserver.config.platform.io/v1``,
YAML or JSON), as upstream's ``encryptionconfig.loadConfig`` and
``validation.ValidateEncryptionConfiguration``: the same defaults (KMS ``apiVersion`` v1,
``timeout`` 3s, ``cachesize`` 1000 for v1 only), the same messages and field paths.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Optional

import attrs
import yaml

from platformd.goformat import gotext
from platformd.goformat.durations import parse_duration
import platformd.storage.encryption.fielderrors as fe
from platformd.storage.encryption.errors import EncryptionConfigError

API_VERSION = "apiserver.config.platform.io/v1"
KIND = "EncryptionConfiguration"
PROVIDER_TYPES = ("aesgcm", "aescbc", "secretbox", "identity", "kms")

#: Key sizes: AES-GCM any AES key, AES-CBC and secretbox 32 bytes (spec 2.5).
AESGCM_KEY_SIZES = (16, 24, 32)
AESCBC_KEY_SIZES = (32,)
SECRETBOX_KEY_SIZES = (32,)
KMS_DEFAULT_TIMEOUT = 3.0
KMS_DEFAULT_CACHESIZE = 1000

_PROVIDERS_ERR = ("provider does not contain any of the expected providers: KMS, AESGCM, "
                  "AESCBC, Secretbox, Identity")
_MORE_THAN_ONE = ("more than one provider specified in a single element, should split into "
                  "different list elements")
_OVERLAP = ("using overlapping resources such as 'secrets' and '*.' in the same resource "
            "list is not allowed as they will be masked")


@attrs.frozen
class Key:
    name: str
    secret: bytes


@attrs.frozen
class KMS:
    name: str
    api_version: str
    endpoint: str
    timeout: float
    cachesize: Optional[int]


@attrs.frozen
class Provider:
    """One element of ``providers``: ``type`` and its keys (or KMS settings)."""

    type: str
    keys: tuple = ()
    kms: Optional[KMS] = None


@attrs.frozen
class ResourceConfiguration:
    resources: tuple
    providers: tuple


@attrs.frozen
class EncryptionConfiguration:
    resources: tuple


def parse_group_resource(text: str) -> tuple:
    """``schema.ParseGroupResource``: ``(resource, group)`` split at the first dot."""
    resource, dot, group = text.partition(".")
    return (resource, group) if dot else (text, "")


def load_file(path: str, reload: bool = False) -> EncryptionConfiguration:
    """Read, decode and validate ``path``; ``EncryptionConfigError`` (upstream's words)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise EncryptionConfigError(
            f"error while parsing file: error opening encryption provider configuration "
            f'file "{path}": {gotext.path_error("open", path, e)}') from None
    if not data:
        raise EncryptionConfigError(f"error while parsing file: encryption provider "
                                    f'configuration file "{path}" is empty')
    try:
        return load(data, reload)
    except EncryptionConfigError as e:
        raise EncryptionConfigError(f"error while parsing file: {e}") from None


def load(data: bytes, reload: bool = False) -> EncryptionConfiguration:
    """Decode and validate a document's bytes (YAML or JSON)."""
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise EncryptionConfigError(f"error converting YAML to JSON: {e}") from None
    if not isinstance(document, dict):
        raise EncryptionConfigError("couldn't get version/kind; json parse error: "
                                    "the document is not an object")
    version, kind = document.get("apiVersion"), document.get("kind")
    if not kind:
        raise EncryptionConfigError(f"Object 'Kind' is missing in '{_short(data)}'")
    if version != API_VERSION or kind != KIND:
        raise EncryptionConfigError(f'no kind "{kind}" is registered for version "{version}" '
                                    f'in scheme "platformd/storage/encryption"')
    errors: list = []
    config = _decode(document, errors)
    errors = validate(document, reload) if not errors else errors
    if errors:
        raise EncryptionConfigError(fe.aggregate(errors))
    return config


def _short(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip().replace("\n", " ")[:200]


def _list(value, path: str, errors: list) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                      f"{path} of type []")
        return []
    return value


def _decode(document: dict, errors: list) -> EncryptionConfiguration:
    """The typed configuration (defaults applied); keys left as base64 for ``validate``."""
    entries = []
    for entry in _list(document.get("resources"), "resources", errors):
        entry = entry if isinstance(entry, dict) else {}
        providers = []
        for p in _list(entry.get("providers"), "providers", errors):
            p = p if isinstance(p, dict) else {}
            present = [t for t in PROVIDER_TYPES if p.get(t) is not None]
            if len(present) != 1:
                providers.append(Provider(type=""))
                continue
            kind = present[0]
            body = p[kind] if isinstance(p[kind], dict) else {}
            if kind == "kms":
                providers.append(Provider(type=kind, kms=_kms(body)))
            elif kind == "identity":
                providers.append(Provider(type=kind))
            else:
                keys = tuple(Key(str(k.get("name") or ""), _secret(k.get("secret")))
                             for k in body.get("keys") or () if isinstance(k, dict))
                providers.append(Provider(type=kind, keys=keys))
        entries.append(ResourceConfiguration(
            tuple(str(r) for r in entry.get("resources") or ()), tuple(providers)))
    return EncryptionConfiguration(tuple(entries))


def _secret(text) -> bytes:
    try:
        return base64.b64decode(str(text or ""), validate=True)
    except (binascii.Error, ValueError):
        return b""


def _timeout(value) -> float:
    if value is None:
        return KMS_DEFAULT_TIMEOUT
    try:
        return parse_duration(str(value))
    except ValueError:
        return 0.0


def _kms(body: dict) -> KMS:
    api_version = str(body.get("apiVersion") or "v1")
    cachesize = body.get("cachesize")
    if cachesize is None and api_version == "v1":
        cachesize = KMS_DEFAULT_CACHESIZE
    return KMS(name=str(body.get("name") or ""), api_version=api_version,
               endpoint=str(body.get("endpoint") or ""), timeout=_timeout(body.get("timeout")),
               cachesize=cachesize)


def validate(document: dict, reload: bool = False) -> list:
    """Upstream's ``ValidateEncryptionConfiguration``: every field error, in its order."""
    root = "resources"
    resources = document.get("resources") or []
    if not resources:
        return [fe.required(root, f"at least one {root} is required")]
    errors: list = []
    kms_names: set = set()
    for i, conf in enumerate(resources):
        conf = conf if isinstance(conf, dict) else {}
        r, p = f"{root}[{i}].resources", f"{root}[{i}].providers"
        names = [str(x) for x in conf.get("resources") or ()]
        if not names:
            errors.append(fe.required(r, f"at least one {r} is required"))
        errors += _overlap(names, r)
        errors += _resource_names(names, r)
        providers = conf.get("providers") or []
        if not providers:
            errors.append(fe.required(p, f"at least one {p} is required"))
        for j, provider in enumerate(providers):
            path = f"{p}[{j}]"
            provider = provider if isinstance(provider, dict) else {}
            present = [t for t in PROVIDER_TYPES if provider.get(t) is not None]
            if not present:
                errors.append(fe.invalid(path, provider, _PROVIDERS_ERR))
            elif len(present) > 1:
                errors.append(fe.invalid(path, provider, _MORE_THAN_ONE))
            # The first of upstream's switch order (kms, aesgcm, aescbc, secretbox).
            for kind in ("kms", "aesgcm", "aescbc", "secretbox"):
                if kind in present:
                    body = provider[kind] if isinstance(provider[kind], dict) else {}
                    if kind == "kms":
                        kms = _kms(body)
                        errors += _validate_kms(kms, body, f"{path}.kms", kms_names, reload)
                        kms_names.add(kms.name)
                    else:
                        sizes = {"aesgcm": AESGCM_KEY_SIZES, "aescbc": AESCBC_KEY_SIZES,
                                 "secretbox": SECRETBOX_KEY_SIZES}[kind]
                        errors += _validate_keys(body.get("keys") or [],
                                                 f"{path}.{kind}.keys", sizes)
                    break
    return errors


def _overlap(resources: list, path: str) -> list:
    if len(resources) < 2:
        return []
    parsed = [parse_group_resource(r) for r in resources]
    overlap = duplicate = False
    for i, (res1, group1) in enumerate(parsed):
        for j, (res2, group2) in enumerate(parsed):
            if i == j:
                continue
            if (res1, group1) == (res2, group2) and not duplicate:
                duplicate = True
                continue
            if overlap:
                continue
            if (res1, group1) == ("*", "*"):
                overlap = True
                continue
            if group1 != group2:
                continue
            if res1 == "*" or res2 == "*":
                overlap = True
    errors = []
    if duplicate:
        errors.append(fe.invalid(path, resources,
                                 "the same resource cannot be specified multiple times"))
    if overlap:
        errors.append(fe.invalid(path, resources, _OVERLAP))
    return errors


def _resource_names(resources: list, path: str) -> list:
    errors = []
    for j, res in enumerate(resources):
        at = f"{path}[{j}]"
        resource, group = parse_group_resource(res)
        if res.lower() != res:
            detail = "resource name should not contain capital letters"
        elif res == "*":
            detail = ("use '*.' to encrypt all the resources from core API group or *.* to "
                      "encrypt all resources")
        elif res in ("apiserveripinfo", "serviceipallocations", "servicenodeportallocations"):
            detail = "resources which do not have REST API/s cannot be encrypted"
        elif group == "events.platform.io":
            detail = ("'*.events.platform.io' objects are stored using the 'events' API group "
                      "in etcd. Use 'events' instead in the config file")
        elif group == "extensions":
            detail = "'extensions' group has been removed and cannot be used for encryption"
        elif group == "*" and resource != "*":
            detail = "encrypting the same resource across groups is not supported"
        else:
            continue
        errors.append(fe.invalid(at, res, detail))
    return errors


def _validate_keys(keys: list, path: str, sizes: tuple) -> list:
    if not keys:
        return [fe.required(path, "at least one keys is required")]
    errors = []
    for i, key in enumerate(keys):
        key = key if isinstance(key, dict) else {}
        at = f"{path}[{i}]"
        if not key.get("name"):
            errors.append(fe.required(f"{at}.name", "name is a mandatory field for a key"))
        if not key.get("secret"):
            errors.append(fe.required(f"{at}.secret", "secret is a mandatory field for a key"))
            continue
        try:
            secret = base64.b64decode(str(key["secret"]), validate=True)
        except (binascii.Error, ValueError):
            errors.append(fe.invalid(f"{at}.secret", "REDACTED", "secrets must be base64 encoded"))
            continue
        if len(secret) not in sizes:
            expected = "[" + " ".join(str(s) for s in sizes) + "]"
            errors.append(fe.invalid(
                f"{at}.secret", "REDACTED",
                f"secret is not of the expected length, got {len(secret)}, "
                f"expected one of {expected}"))
    return errors


def _validate_kms(kms: KMS, body: dict, path: str, names: set, reload: bool) -> list:
    errors = []
    # name
    if not kms.name:
        errors.append(fe.required(f"{path}.name", "name is a mandatory field for a provider"))
    if kms.api_version != "v1" and ":" in kms.name:
        errors.append(fe.invalid(f"{path}.name", kms.name,
                                 f"invalid KMS provider name {kms.name}, must not contain ':'"))
    if (reload or kms.api_version != "v1") and kms.name in names:
        errors.append(fe.invalid(f"{path}.name", kms.name,
                                 f"duplicate KMS provider name {kms.name}, names must be unique"))
    # timeout
    if kms.timeout <= 0:
        errors.append(fe.invalid(f"{path}.timeout", str(body.get("timeout")),
                                 "timeout should be a positive value", raw=True))
    # endpoint
    if not kms.endpoint:
        errors.append(fe.invalid(f"{path}.endpoint", "",
                                 "endpoint is a mandatory field for a kms"))
    else:
        scheme = urllib.parse.urlsplit(kms.endpoint).scheme
        if scheme != "unix":
            errors.append(fe.invalid(
                f"{path}.endpoint", kms.endpoint,
                f'unsupported scheme "{scheme}" for KMS provider, only unix is supported'))
    # cachesize
    if kms.api_version != "v1" and body.get("cachesize") is not None:
        errors.append(fe.invalid(f"{path}.cachesize", body.get("cachesize"),
                                 "cachesize is not supported in v2"))
    if kms.api_version == "v1" and kms.cachesize == 0:
        errors.append(fe.invalid(f"{path}.cachesize", 0,
                                 "cachesize should be a positive value, or negative to disable"))
    # apiVersion (upstream formats the literal word "apiVersion" into its message)
    if kms.api_version not in ("v1", "v2"):
        errors.append(fe.invalid(
            f"{path}.apiVersion", kms.api_version,
            "unsupported apiVersion apiVersion for KMS provider, only v1 and v2 are supported"))
    return errors
