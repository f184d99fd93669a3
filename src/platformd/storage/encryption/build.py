"""
An ``EncryptionConfiguration`` turned into transformers (upstream
``encryptionconfig.getTransformerOverrides`` and ``transformerFromOverrides``): one
``PrefixTransformers`` per entry of ``resources`` (its providers in order), each listed
resource mapped to it, then every served resource given the transformer of its exact
name, else of ``*.<group>`` (``*.`` for the core group), else of ``*.*``, else none
(stored as it is) — all combined in a ``ByKeyPrefix`` by storage key prefix.

Wildcards are resolved against the resources the server serves, given as
``(plural, group)`` pairs so storage need not import the registry.
"""

from __future__ import annotations

from typing import Iterable

from twisted.logger import Logger

import platformd.storage.encryption.aes as aes
import platformd.storage.encryption.config as cfg
from platformd.storage.encryption.errors import EncryptionConfigError
from platformd.storage.encryption.prefix import EncryptCheckIdentity, PrefixTransformers
from platformd.storage.encryption.secretbox import Secretbox
from platformd.storage.transformers import ByKeyPrefix

AESCBC_PREFIX = b"platform:enc:aescbc:v1:"
AESGCM_PREFIX = b"platform:enc:aesgcm:v1:"
SECRETBOX_PREFIX = b"platform:enc:secretbox:v1:"
KMS_V1_PREFIX = b"platform:enc:kms:v1:"
KMS_V2_PREFIX = b"platform:enc:kms:v2:"
#: Upstream's text for the deprecated KMS v1 (an error while feature gate KMSv1 is off).
KMS_V1_DEPRECATED = ("KMSv1 is deprecated and will only receive security updates going "
                     "forward. Use KMSv2 instead.")
KMS_V1_GATE_OFF = (KMS_V1_DEPRECATED + "  Set --feature-gates=KMSv1=true to use the "
                   "deprecated KMSv1 feature.")

log = Logger()


def storage_prefix(resource: str, group: str) -> str:
    """Where platformd stores a resource's objects (``ResourceType.storage_prefix``)."""
    return f"/registry/{resource}.{group}/" if group else f"/registry/{resource}/"


def group_resource_string(resource: str, group: str) -> str:
    """Upstream's ``grYAMLString``."""
    if group == "" and resource == "*":
        return "*."
    return f"{resource}.{group}" if group else resource


def overrides(config: cfg.EncryptionConfiguration, kms_v1: bool = False) -> tuple:
    """
    ``({(resource, group): PrefixTransformers}, [KMS envelopes])``; a resource masked by
    an earlier ``*.<group>`` or ``*.*`` is upstream's error.  ``kms_v1``: feature gate
    ``KMSv1`` (off: a KMS v1 provider is upstream's error).
    """
    lists: dict = {}
    envelopes: list = []
    for entry in config.resources:
        transformers = [_provider(p, envelopes, kms_v1) for p in entry.providers]
        for name in entry.resources:
            gr = cfg.parse_group_resource(name)
            for wildcard in (("*", gr[1]), ("*", "*")):
                if wildcard in lists:
                    raise EncryptionConfigError(
                        f'resource "{group_resource_string(*gr)}" is masked by earlier rule '
                        f'"{group_resource_string(*wildcard)}"')
            lists.setdefault(gr, []).extend(transformers)
    return {gr: PrefixTransformers(ts) for gr, ts in lists.items()}, envelopes


def build(config: cfg.EncryptionConfiguration, served: Iterable[tuple],
          kms_v1: bool = False) -> tuple:
    """
    ``(ByKeyPrefix, [KMS envelopes])`` for ``config``; ``served`` the ``(plural, group)``
    of every resource the server stores; ``kms_v1`` as for ``overrides``.  Makes no
    connection (KMS channels connect on first use, in the storage threads).
    """
    by_resource, envelopes = overrides(config, kms_v1)
    prefixes = {}
    for resource, group in by_resource:  # named resources, served or not yet
        if "*" not in (resource, group):
            prefixes[storage_prefix(resource, group)] = by_resource[(resource, group)]
    for resource, group in served:
        transformer = (by_resource.get((resource, group)) or by_resource.get(("*", group))
                       or by_resource.get(("*", "*")))
        if transformer is not None:
            prefixes[storage_prefix(resource, group)] = transformer
    groups = {group: t for (resource, group), t in by_resource.items()
              if resource == "*" and group != "*"}
    return ByKeyPrefix(prefixes, groups=groups,
                       everything=by_resource.get(("*", "*"))), envelopes


def _provider(provider: cfg.Provider, envelopes: list, kms_v1: bool) -> tuple:
    if provider.type == "identity":
        return b"", EncryptCheckIdentity()
    if provider.type in ("aesgcm", "aescbc", "secretbox"):
        make, prefix, sizes = {
            "aesgcm": (aes.GCM, AESGCM_PREFIX, cfg.AESGCM_KEY_SIZES),
            "aescbc": (aes.CBC, AESCBC_PREFIX, cfg.AESCBC_KEY_SIZES),
            "secretbox": (Secretbox, SECRETBOX_PREFIX, cfg.SECRETBOX_KEY_SIZES),
        }[provider.type]
        name = "Secretbox" if provider.type == "secretbox" else "AES"
        keys = []
        for key in provider.keys:
            if len(key.secret) not in sizes:
                raise EncryptionConfigError(
                    f"error while creating cipher for named key {key.name}: "
                    f"invalid key size {len(key.secret)}")
            keys.append((key.name.encode() + b":", make(key.secret)))
        return prefix, PrefixTransformers(
            keys, f"no matching key was found for the provided {name} transformer")
    if provider.type == "kms":
        assert provider.kms is not None
        return _kms(provider.kms, envelopes, kms_v1)
    raise EncryptionConfigError("provider does not contain any of the expected providers: "
                                "KMS, AESGCM, AESCBC, Secretbox, Identity")


def _kms(kms: cfg.KMS, envelopes: list, kms_v1: bool) -> tuple:
    """Upstream ``kmsPrefixTransformer`` (the plugin modules import grpcio: loaded here)."""
    envelope: object
    if kms.api_version == "v1":
        if not kms_v1:
            raise EncryptionConfigError(KMS_V1_GATE_OFF)
        log.info(KMS_V1_DEPRECATED)
        from platformd.storage.encryption.kmsv1 import KMSv1Client, KMSv1Envelope
        assert kms.cachesize is not None  # config defaults it for v1
        envelope, prefix = (KMSv1Envelope(KMSv1Client(kms.name, kms.endpoint, kms.timeout),
                                          kms.cachesize), KMS_V1_PREFIX)
    elif kms.api_version == "v2":
        from platformd.storage.encryption.kms import KMSv2Client, KMSv2Envelope
        envelope, prefix = KMSv2Envelope(KMSv2Client(kms.name, kms.endpoint, kms.timeout)), \
            KMS_V2_PREFIX
    else:
        raise EncryptionConfigError(f'could not configure KMS plugin "{kms.name}", '
                                    f'unsupported KMS API version "{kms.api_version}"')
    envelopes.append(envelope)
    return prefix + kms.name.encode() + b":", envelope
