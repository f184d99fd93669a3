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
        ``DuplicateKeysDict`` (see ``duplicates.py``) so field validation can name them,
        unless the codec reports them itself (YAML's ``decode_strict``: ``(value,
        problems)``, go-yaml's strict error for them).  Raises ``CodecError`` with a
        message fit for a 400.
        """

    def encode(value, pretty: bool = False) -> bytes:
        """Serialise plain values."""


class ITypedCodec(ICodec):
    """A codec that encodes only some kinds."""

    def serves(api_version: str, kind: str) -> bool:
        """Whether objects of (apiVersion, kind) can be encoded and decoded."""


class IItemCodec(ICodec):
    """
    A codec whose lists are its items' bytes laid end to end between a head and a tail
    (Protobuf, CBOR): each object's item is encoded once per object version and cached
    (``CachedObject.encoded``), and a GET, a LIST or a watch event is assembled from it.
    """

    def item_bytes(value: dict) -> bytes:
        """The object as a list of its kind holds it."""

    def from_item(api_version: str, kind: str, item: bytes) -> bytes:
        """The whole response body of one object, from its ``item_bytes``."""

    def list_pieces(api_version: str, kind: str, meta_value: dict, items: list):
        """
        The list (kind ``kind``, ListMeta ``meta_value``) of ``items`` (``item_bytes``)
        as byte pieces; joined, they equal ``encode`` of the whole list.
        """


class CodecError(Exception):
    """Bytes that are not a well-formed document of the codec's media type."""
