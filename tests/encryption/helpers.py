"""Shared pieces of the encryption tests: keys and configuration documents."""

from __future__ import annotations

import base64
import json
import os


def key(size: int = 32, fill: bytes | None = None) -> str:
    return base64.b64encode(fill * size if fill else os.urandom(size)).decode()


def document(*entries) -> dict:
    return {"apiVersion": "apiserver.config.platform.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(r), "providers": list(p)} for r, p in entries]}


def keys(kind: str, *named) -> dict:
    return {kind: {"keys": [{"name": n, "secret": s} for n, s in named]}}


IDENTITY = {"identity": {}}


def write(path: str, doc: dict) -> str:
    with open(path, "w") as f:
        json.dump(doc, f)
    return path
