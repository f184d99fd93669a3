"""
Encryption at rest (``--encryption-provider-config``; docs/encryption.md): an
``EncryptionConfiguration`` loaded and validated (``config``), turned into one
transformer per resource (``build``) from the providers ``aesgcm``, ``aescbc`` (``aes``),
``secretbox``, ``identity`` (``prefix``) and ``kms`` v2 (``kms``) and v1 (``kmsv1``),
swapped on reload (``reload``); the KMS providers' health checks (``probes``).
"""
