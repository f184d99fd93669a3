"""
``application/vnd.platform.protobuf`` (spec 4.2.1, 4.2.4): upstream's Protobuf encoding.

A body is the magic ``6b 38 73 00`` then a ``runtime.Unknown`` whose ``typeMeta`` names
the object's apiVersion and kind and whose ``raw`` holds the object's message, with
``contentEncoding`` and ``contentType`` written empty — the bytes upstream's serializer
(``runtime.Unknown.NestedMarshalTo``) writes.  Messages are the ones under ``proto/``,
converted from and to the server's plain dicts by ``protoconvert`` in its upstream mode:
the fields upstream's Go marshallers write even when zero (``gopresence``) are written
too, map keys are sorted (``deterministic``), as upstream's generated marshallers sort
them, and decoding gives what upstream's JSON would show.

Only kinds with a message can be served (``serves``): negotiation skips this codec for
any other kind (a custom resource, or the Table view, which upstream never serves in
Protobuf), so ``Accept: <protobuf>, application/json`` falls back to JSON for them.

Upstream's name for the same encoding, ``application/vnd.kubernetes.protobuf``, is an
alias of this codec (``negotiation.ALIASES``): what unmodified kubectl sends and asks for.
The reviews' messages are also known under upstream's group versions
(``authorization.k8s.io/v1``, ``authentication.k8s.io/v1``): the kinds are served at
those names too (``catalog.UPSTREAM_REVIEW_GROUPS``), for kubectl's typed clients.

Lists are built from each item's message bytes (``list_pieces``): a repeated message
field is just tag + length + bytes per item, so a list can be written piece by piece
from bytes cached per object version, as upstream encodes lists item by item.  Watch
events (``watch_frame``) are upstream's stream form: a 4-byte big-endian length, then a
``WatchEvent`` (no envelope) whose ``object.raw`` is the object's full envelope.
"""

from __future__ import annotations

import functools
import struct

from zope.interface import implementer

from platformd.codecs import limits
from platformd.codecs.interface import CodecError, IItemCodec, ITypedCodec

PROTOBUF = "application/vnd.platform.protobuf"
#: Upstream's name for this encoding, an alias of ``PROTOBUF`` (``negotiation.ALIASES``).
KUBERNETES_PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
RBAC = "rbac.authorization.platform.io/v1"
#: The view groups (``meta.k8s.io`` is the alias kubectl asks for).
META_VERSIONS = ("meta.platform.io/v1", "meta.k8s.io/v1")

_CORE_KINDS = ("ConfigMap", "Namespace", "Pod", "Secret", "ServiceAccount", "Event",
               "Node")
#: Service and Endpoints (core), EndpointSlice (discovery).
_SERVICE_KINDS = ("Service", "Endpoints")
DISCOVERY = "discovery.platform.io/v1"
_DISCOVERY_GROUP_KINDS = ("EndpointSlice",)
_RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
ADMISSIONREGISTRATION = "admissionregistration.platform.io/v1"
_ADMISSIONREGISTRATION_KINDS = (
    "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration")
#: The reviews: created and answered, never stored or listed (no List messages).
_REVIEWS = (
    ("authentication.platform.io/v1", "authentication", ("SelfSubjectReview", "TokenRequest",
                                                          "TokenReview")),
    ("authorization.platform.io/v1", "authorization", (
        "LocalSubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
        "SubjectAccessReview")),
)
#: The reviews' group versions as upstream names them (``catalog.UPSTREAM_REVIEW_GROUPS``).
_UPSTREAM_REVIEW_VERSIONS = {"authentication.platform.io/v1": "authentication.k8s.io/v1",
                             "authorization.platform.io/v1": "authorization.k8s.io/v1"}
#: Issue 32: PodDisruptionBudget; the pods' create-only subresources' bodies (Binding,
#: and Eviction also under the group versions upstream's eviction accepts, as unmodified
#: ``kubectl drain`` names them).
POLICY = "policy.platform.io/v1"
_POLICY_KINDS = ("PodDisruptionBudget",)
#: Issue 31: the CustomResourceDefinition kind itself (not the custom resources it
#: defines, which have no message), and the conversion webhooks' ConversionReview.
APIEXTENSIONS = "apiextensions.platform.io/v1"
_SUBRESOURCE_BODIES = (
    ("v1", "core", "Binding"),
    *((version, "policy", "Eviction") for version in (
        POLICY, "policy.platform.io/v1beta1", "policy/v1", "policy/v1beta1")),
)
#: Kinds every group version serves (upstream registers them in each).
_ANY_VERSION = {"Status": ("meta", "Status"), "DeleteOptions": ("meta", "DeleteOptions")}
#: The discovery documents: upstream's unversioned ``v1`` kinds, written without an
#: ``apiVersion`` on the legacy ``/api`` paths.
_DISCOVERY_KINDS = ("APIGroup", "APIGroupList", "APIResourceList", "APIVersions")
#: The aggregated discovery document (``api/aggregateddiscovery.py``), upstream's
#: ``apidiscovery.k8s.io/v2`` message under the platform group.
APIDISCOVERY = "apidiscovery.platform.io/v2"
#: The trailer of every envelope: contentEncoding and contentType, both empty.
_TRAILER = b"\x1a\x00\x22\x00"


@functools.cache
def _modules() -> dict:
    """
    The generated message modules by the short names the tables here use, imported
    at the first message needed: with the protobuf runtime they are ~4.5 MiB of a
    server's memory, which one no client asks Protobuf of never needs (``serves``
    answers from the names alone).
    """
    from platformd.protos.platform.api.admissionregistration.v1 import (
        generated_pb2 as admissionregistration,
    )
    from platformd.protos.platform.api.apidiscovery.v2 import generated_pb2 as apidiscovery
    from platformd.protos.platform.apiextensions_apiserver.pkg.apis.apiextensions.v1 import (
        generated_pb2 as apiextensions,
    )
    from platformd.protos.platform.api.authentication.v1 import (
        generated_pb2 as authentication,
    )
    from platformd.protos.platform.api.authorization.v1 import generated_pb2 as authorization
    from platformd.protos.platform.api.coordination.v1 import generated_pb2 as coordination
    from platformd.protos.platform.api.events.v1 import generated_pb2 as eventsv1
    from platformd.protos.platform.api.core.v1 import generated_pb2 as core
    from platformd.protos.platform.api.discovery.v1 import generated_pb2 as discovery
    from platformd.protos.platform.api.policy.v1 import generated_pb2 as policy
    from platformd.protos.platform.api.rbac.v1 import generated_pb2 as rbac
    from platformd.protos.platform.apimachinery.pkg.apis.meta.v1 import generated_pb2 as meta
    from platformd.protos.platform.apimachinery.pkg.runtime import generated_pb2 as runtime
    return {"admissionregistration": admissionregistration, "apidiscovery": apidiscovery,
            "apiextensions": apiextensions, "authentication": authentication,
            "authorization": authorization, "coordination": coordination,
            "events": eventsv1, "core": core, "discovery": discovery, "policy": policy,
            "rbac": rbac, "meta": meta, "runtime": runtime}


def _message(module: str, name: str):
    """The message class ``name`` of the generated module ``module`` (``_modules``)."""
    return getattr(_modules()[module], name)


def builtin_messages() -> dict:
    """
    Where the message of every built-in (apiVersion, kind), lists included, is: its
    module's short name (``_modules``) and its name.  Names only, so a codec knows what
    it serves without importing a message.
    """
    table: dict = {}
    kinds: tuple[str, ...]
    for api_version, module, kinds in (
            ("v1", "core", _CORE_KINDS), (RBAC, "rbac", _RBAC_KINDS),
            ("v1", "core", _SERVICE_KINDS), (DISCOVERY, "discovery", _DISCOVERY_GROUP_KINDS),
            (ADMISSIONREGISTRATION, "admissionregistration", _ADMISSIONREGISTRATION_KINDS),
            ("coordination.platform.io/v1", "coordination", ("Lease",)),
            ("events.platform.io/v1", "events", ("Event",)),
            (POLICY, "policy", _POLICY_KINDS),
            (APIEXTENSIONS, "apiextensions", ("CustomResourceDefinition",))):
        for kind in kinds:
            table[(api_version, kind)] = (module, kind)
            table[(api_version, kind + "List")] = (module, kind + "List")
    for api_version, module, kinds in _REVIEWS:
        for kind in kinds:
            table[(api_version, kind)] = (module, kind)
            table[(_UPSTREAM_REVIEW_VERSIONS[api_version], kind)] = (module, kind)
    table[(APIEXTENSIONS, "ConversionReview")] = ("apiextensions", "ConversionReview")
    for api_version, module, name in _SUBRESOURCE_BODIES:
        table[(api_version, name)] = (module, name)
    for api_version in META_VERSIONS:
        for kind in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            table[(api_version, kind)] = ("meta", kind)
    for kind in _DISCOVERY_KINDS:
        for api_version in ("", "v1"):
            table[(api_version, kind)] = ("meta", kind)
    table[(APIDISCOVERY, "APIGroupDiscoveryList")] = ("apidiscovery", "APIGroupDiscoveryList")
    return table


@implementer(ITypedCodec, IItemCodec)
class ProtobufCodec:
    media_type = PROTOBUF

    def __init__(self, messages: dict | None = None):
        #: The message classes by (apiVersion, kind) found so far, or ``messages`` (a
        #: test's own table, served alone); and where the built-ins' are
        #: (``builtin_messages``), imported as each is first needed.
        self._classes: dict = dict(messages or {})
        self._names: dict = builtin_messages() if messages is None else {}

    def message_class(self, api_version, kind):
        """The message of (apiVersion, kind), or None when it has none."""
        key = (api_version, kind)
        cls = self._classes.get(key)
        if cls is None:
            where = self._names.get(key) or _ANY_VERSION.get(kind)
            if where is None:
                return None
            cls = self._classes[key] = _message(*where)
        return cls

    def serves(self, api_version: str, kind: str) -> bool:
        key = (api_version, kind)
        return key in self._classes or key in self._names or kind in _ANY_VERSION

    def message_bytes(self, value: dict) -> bytes:
        """The object's own message (no envelope): what a list item or ``raw`` holds."""
        cls = self.message_class(value.get("apiVersion", ""), value.get("kind"))
        if cls is None:
            raise CodecError(f"no Protobuf message for {value.get('apiVersion', '')}, "
                             f"Kind={value.get('kind')}")
        from platformd.codecs import protoconvert
        try:
            message = protoconvert.to_message(value, cls, upstream=True)
        except (protoconvert.ConversionError, TypeError, ValueError) as e:
            raise CodecError(f"cannot encode as Protobuf: {e}") from None
        return message.SerializeToString(deterministic=True)

    def item_bytes(self, value: dict) -> bytes:
        """
        The object as a list holds it: field 2 (tag, length, message).  An envelope's
        ``raw`` is the same field 2, so a GET's body is built around these bytes as is.
        """
        return _field(2, self.message_bytes(value))

    def from_item(self, api_version: str, kind: str, item: bytes) -> bytes:
        """The envelope of one object, from its ``item_bytes``."""
        return _head(api_version, kind) + item + _TRAILER

    def encode(self, value, pretty: bool = False) -> bytes:
        return self.from_item(value.get("apiVersion", ""), value["kind"],
                              self.item_bytes(value))

    def decode(self, data: bytes) -> dict:
        from google.protobuf.message import DecodeError

        from platformd.codecs import protoconvert
        if not data.startswith(MAGIC):
            raise CodecError("provided data does not appear to be a protobuf message, "
                             "expected prefix [107 56 115 0]")
        try:
            unknown = _message("runtime", "Unknown").FromString(data[len(MAGIC):])
        except DecodeError as e:
            raise CodecError(f"invalid Protobuf envelope: {e}") from None
        api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
        cls = self.message_class(api_version, kind)
        if cls is None:
            raise CodecError(f"no Protobuf message for {api_version}, Kind={kind}")
        try:
            message = cls.FromString(unknown.raw)
        except DecodeError as e:
            raise CodecError(f"invalid Protobuf {kind}: {e}") from None
        try:
            plain = protoconvert.from_message(message, upstream=True)
        except ValueError as e:  # a FieldsV1 whose Raw is not JSON
            raise CodecError(f"invalid Protobuf {kind}: {e}") from None
        limits.check_value(plain)
        value = {"kind": kind, **({"apiVersion": api_version} if api_version else {}),
                 **plain}
        if kind.endswith("List") and "items" in value:
            # List items carry no TypeMeta on the wire; give them the list's, as JSON shows them.
            item_type = {"kind": kind[:-len("List")], "apiVersion": api_version}
            value["items"] = [{**item_type, **item} for item in value["items"]]
        return value

    def list_pieces(self, api_version: str, kind: str, meta_value: dict, items: list):
        """
        The enveloped list as byte pieces: the envelope's head, the ListMeta, then the
        items (``item_bytes``: each already the list's field 2) as they are, then the
        trailer.  Joined, they equal ``encode`` of the whole list.
        """
        from platformd.codecs import protoconvert
        list_meta = _message("meta", "ListMeta")
        head = _field(1, protoconvert.to_message(meta_value, list_meta, upstream=True)
                      .SerializeToString(deterministic=True))
        size = len(head) + sum(map(len, items))
        yield _head(api_version, kind) + b"\x12" + _varint(size) + head
        yield from items
        yield _TRAILER


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """The magic and an Unknown holding ``raw``, byte for byte as upstream writes it."""
    return _head(api_version, kind) + _field(2, raw) + _TRAILER


def watch_frame(type_: str, object_envelope: bytes) -> bytes:
    """One watch event of a Protobuf stream: length, then the bare WatchEvent."""
    event = _field(1, type_.encode()) + _field(2, _field(1, object_envelope))
    return struct.pack(">I", len(event)) + event


def read_watch_frames(data: bytes) -> list:
    """The WatchEvent messages of a Protobuf watch stream's bytes (for tests and tools)."""
    events, offset = [], 0
    while offset + 4 <= len(data):
        (length,) = struct.unpack_from(">I", data, offset)
        events.append(_message("meta", "WatchEvent").FromString(data[offset + 4:offset + 4 + length]))
        offset += 4 + length
    return events


def _head(api_version: str, kind: str) -> bytes:
    """An envelope up to its ``raw``: the magic and the Unknown's TypeMeta."""
    return MAGIC + _field(1, _type_meta(api_version, kind))


def _type_meta(api_version: str, kind: str) -> bytes:
    return _field(1, api_version.encode()) + _field(2, kind.encode())


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (tag, length, bytes); every tag here is one byte."""
    return bytes((number << 3 | 2,)) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)

