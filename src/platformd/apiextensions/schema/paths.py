"""
Field paths as apimachinery's ``field.Path`` prints them: ``Child`` joins with a dot,
``Key`` appends ``[key]`` and ``Index`` appends ``[i]``
(``spec.versions[0].schema.openAPIV3Schema.properties[spec].type``).
"""

from __future__ import annotations


def child(path: str, *names: str) -> str:
    for name in names:
        path = f"{path}.{name}" if path else name
    return path


def key(path: str, name: str) -> str:
    return f"{path}[{name}]"


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"
