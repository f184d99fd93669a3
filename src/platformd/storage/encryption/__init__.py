"""
Encryption at rest (``--encryption-provider-config``; docs/encryption.md): an
``EncryptionConfiguration`` loaded and validated (``config``), turned into one
transformer per resource (``build``) from the providers ``aesgcm``, ``aescbc`` (``aes``),
``secretbox``, ``identity`` (``prefix``) and ``kms`` v2 (``kms``), swapped on reload
(``reload``).
"""
