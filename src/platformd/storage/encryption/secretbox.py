"""
The ``secretbox`` provider (upstream ``encrypt/secretbox``): XSalsa20-Poly1305 with a
random 24-byte nonce stored first.  Like upstream it authenticates no additional data
(secretbox has none), so the storage key is not bound into the ciphertext.
"""

from __future__ import annotations

import os

import nacl.exceptions
import nacl.secret
from zope.interface import implementer

from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer

NONCE_SIZE = nacl.secret.SecretBox.NONCE_SIZE


@implementer(IValueTransformer)
class Secretbox:
    """``key``: 32 bytes."""

    def __init__(self, key: bytes):
        self._box = nacl.secret.SecretBox(key)

    def to_storage(self, key: str, value: bytes) -> bytes:
        return bytes(self._box.encrypt(value, os.urandom(NONCE_SIZE)))

    def from_storage(self, key: str, data: bytes) -> bytes:
        if len(data) < NONCE_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._box.decrypt(data)
        except nacl.exceptions.CryptoError:
            raise TransformError("output array was not large enough for encryption") from None
