"""
The codecs are tested on their own, without a server; the built-in kinds' Protobuf
presence (``gopresence``) is registered as the server registers it, by building the
built-in catalog.
"""

from platformd.registry.catalog import builtin

builtin()
