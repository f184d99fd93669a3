"""
AES providers, as upstream's ``encrypt/aes``: GCM (random 12-byte nonce, then the
sealed data; the storage key is the additional authenticated data), CBC (random 16-byte
IV, PKCS#7 padding; no authenticated data, as upstream) and the KMS v2 key derivation
(HKDF-SHA256 expand of a 32-byte seed with 32 random info bytes stored first).

Every object here is immutable after construction and safe to share between threads.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from zope.interface import implementer

from platformd.storage.interface import TransformError
from platformd.storage.transformers import IValueTransformer

NONCE_SIZE = 12
BLOCK_SIZE = 16
#: KMS v2: seed size, random info size, derived key size (upstream's constants).
SEED_SIZE = 32
INFO_SIZE = 32
DERIVED_KEY_SIZE = 32


@implementer(IValueTransformer)
class GCM:
    """AES-GCM with a random nonce; ``key`` (16, 24 or 32 bytes); storage key as AAD."""

    def __init__(self, key: bytes):
        self._aead = AESGCM(key)

    def to_storage(self, key: str, value: bytes) -> bytes:
        nonce = os.urandom(NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, value, key.encode())

    def from_storage(self, key: str, data: bytes) -> bytes:
        if len(data) < NONCE_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(data[:NONCE_SIZE], data[NONCE_SIZE:], key.encode())
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None


@implementer(IValueTransformer)
class CBC:
    """AES-CBC with a random IV and PKCS#7 padding (``key`` 32 bytes)."""

    def __init__(self, key: bytes):
        self._algorithm = algorithms.AES(key)

    def to_storage(self, key: str, value: bytes) -> bytes:
        iv = os.urandom(BLOCK_SIZE)
        padder = padding.PKCS7(BLOCK_SIZE * 8).padder()
        padded = padder.update(value) + padder.finalize()
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(padded) + encryptor.finalize()

    def from_storage(self, key: str, data: bytes) -> bytes:
        if len(data) < BLOCK_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        iv, data = data[:BLOCK_SIZE], data[BLOCK_SIZE:]
        if len(data) % BLOCK_SIZE != 0:
            raise TransformError("the stored data is not a multiple of the block size")
        decryptor = Cipher(self._algorithm, modes.CBC(iv)).decryptor()
        result = decryptor.update(data) + decryptor.finalize()
        if not result:
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        pad = result[-1]
        if pad == 0 or pad > BLOCK_SIZE or result[-pad:] != bytes([pad]) * pad:
            raise TransformError("invalid padding on input")
        return result[:-pad]


@implementer(IValueTransformer)
class HKDFExtendedNonceGCM:
    """
    KMS v2's data cipher (upstream ``NewHKDFExtendedNonceGCMTransformer``): each write
    draws 32 random info bytes, derives a one-use AES-256 key as HKDF-SHA256-Expand(seed,
    info) and writes ``info || nonce || AES-GCM(data, AAD = storage key)``.
    """

    def __init__(self, seed: bytes):
        if len(seed) < SEED_SIZE:
            raise ValueError(f"invalid seed length {len(seed)} used for key generation")
        self._seed = seed

    def _gcm(self, info: bytes) -> GCM:
        derived = HKDFExpand(hashes.SHA256(), DERIVED_KEY_SIZE, info).derive(self._seed)
        return GCM(derived)

    def to_storage(self, key: str, value: bytes) -> bytes:
        info = os.urandom(INFO_SIZE)
        return info + self._gcm(info).to_storage(key, value)

    def from_storage(self, key: str, data: bytes) -> bytes:
        if len(data) < INFO_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        return self._gcm(data[:INFO_SIZE]).from_storage(key, data[INFO_SIZE:])
