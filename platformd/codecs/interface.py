"""
The seam between wire formats and the rest of the server.

A codec turns bytes of one media type into plain Python values (dicts, lists, scalars)
and back.  Handlers only ever see plain values; which codec runs is decided once per
request by content negotiation (``negotiation.py``).  A codec that cannot encode every
kind (Protobuf: only kinds with a message) says which it serves (``ITypedCodec``), so
negotiation can fall back to the next acceptable type for the others.
"""

from zope.interface import Attribute, Interface


class ICodec(Interface):
    media_type = Attribute("The canonical media type, for example 'application/json'.")

    def decode(data: bytes):
        """
        Parse ``data`` into plain values.  Objects whose keys repeat come back as
        ``DuplicateKeysDict`` (see ``duplicates.py``) so field validation can name them.
        Raises ``CodecError`` with a message fit for a 400.
        """

    def encode(value, pretty: bool = False) -> bytes:
        """Serialise plain values."""


class ITypedCodec(ICodec):
    """A codec that encodes only some kinds."""

    def serves(api_version: str, kind: str) -> bool:
        """Whether objects of (apiVersion, kind) can be encoded and decoded."""


class CodecError(Exception):
    """Bytes that are not a well-formed document of the codec's media type."""
