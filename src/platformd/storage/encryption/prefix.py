"""
Upstream's prefix transformers (``value.NewPrefixTransformers``): the first writes, with
its prefix before its output; on read the first whose prefix the data starts with reads
it.  An empty prefix (identity) matches everything, and its refusal of encrypted data
lets the providers after it try.
"""

from __future__ import annotations

from zope.interface import implementer

from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer, is_stale, prepare

#: What every encrypting provider's stored prefix starts with (upstream ``k8s:enc:``).
ENCRYPTED = b"platform:enc:"


@implementer(IValueTransformer)
class PrefixTransformers:
    """``[(prefix, transformer), ...]``; ``error`` when no prefix matches on read."""

    def __init__(self, transformers: list, error: str = "no matching prefix found"):
        if not transformers:
            raise ValueError("at least one transformer")
        self.transformers = [(bytes(p), t) for p, t in transformers]
        self.error = error

    def to_storage(self, key: str, value: bytes) -> bytes:
        prefix, transformer = self.transformers[0]
        return prefix + transformer.to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        errors = []
        for prefix, transformer in self.transformers:
            if data.startswith(prefix):
                try:
                    return transformer.from_storage(key, data[len(prefix):])
                except TransformError as error:
                    if not prefix:  # identity met encrypted data: let the others try
                        errors.append(str(error))
                        continue
                    raise
        raise TransformError(errors[0] if errors else self.error)

    def prepare(self, key: str, reactor):
        """The first's (the writer's) ``prepare``."""
        return prepare(self.transformers[0][1], key, reactor)

    def stale(self, key: str, data: bytes) -> bool:
        """Read by other than the first (the writer), or stale inside it (an old key)."""
        for index, (prefix, transformer) in enumerate(self.transformers):
            if data.startswith(prefix) and not (not prefix and data.startswith(ENCRYPTED)):
                return index > 0 or is_stale(transformer, key, data[len(prefix):])
        return False

    def __repr__(self) -> str:
        return f"PrefixTransformers({[p for p, _ in self.transformers]!r})"


@implementer(IValueTransformer)
class EncryptCheckIdentity:
    """
    The ``identity`` provider (upstream ``identity.NewEncryptCheckTransformer``): values
    stored as they are, but data that carries an encryption prefix is refused on read.
    """

    def to_storage(self, key: str, value: bytes) -> bytes:
        return value

    def from_storage(self, key: str, data: bytes) -> bytes:
        if data.startswith(ENCRYPTED):
            raise TransformError("identity transformer tried to read encrypted data")
        return data

    def __repr__(self) -> str:
        return "EncryptCheckIdentity()"
