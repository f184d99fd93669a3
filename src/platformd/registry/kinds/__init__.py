"""
One module per served kind, each exporting ``KIND``, a ``ResourceType`` holding
everything that differs for that kind: schema, defaulting, validation, create- and
update-time state, deletion, table columns, field selector labels and the Protobuf
presence of its messages.  Shapes and rules several kinds share live in
``coreshapes``, ``configdata`` and ``rbacshapes``.  ``catalog.builtin()`` lists the
kinds served.
"""

from __future__ import annotations


def presence(package: str, kind: str, own: dict) -> dict:
    """
    ``ResourceType.presence`` from short message names: ``own`` (the kind's message and
    the messages only it uses, ``{name: fields}`` in ``gopresence``'s notation) and the
    kind's List, whose ``ListMeta metadata`` upstream always writes.
    """
    out = {package + name: fields for name, fields in own.items()}
    out[package + kind + "List"] = "metadata"
    return out
