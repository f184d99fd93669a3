"""
The fields upstream's Go marshallers write even when they hold their zero value, for
every message under ``proto/`` — the one table ``protoconvert`` needs to produce
upstream's exact bytes (``to_message(..., upstream=True)``) and to read them back the way
upstream's JSON shows them (``from_message(..., upstream=True)``).

Where it comes from.  Upstream's messages are marshalled by the code go-to-protobuf
generates with gogo-protobuf (``MarshalToSizedBuffer`` in ``k8s.io/api/core/v1``,
``k8s.io/api/rbac/v1`` and ``k8s.io/apimachinery/pkg/apis/meta/v1``
``generated.pb.go``).  That code follows the Go type of each struct field, not proto2
presence:

* a non-pointer ``string``, integer or ``bool`` is written unconditionally —
  ``i -= len(m.Name); copy(dAtA[i:], m.Name); ...; dAtA[i] = 0xa`` with no ``if``
  around it — so ``""``/``0``/``false`` go on the wire as tag + zero;
* a non-pointer struct (``ObjectMeta metadata``, ``ListMeta metadata``, ``PodSpec spec``,
  ``RoleRef roleRef``, ``metav1.Time creationTimestamp``, ...) is written
  unconditionally as tag + length + its own encoding, which holds its own
  always-written fields;
* pointers (``*string``, ``*int64``, ``*bool``, ``*metav1.Time``, ``*Struct``) only when
  non-nil (``if m.X != nil``), slices per element and maps per entry (``if len(m.X) >
  0``), map entries sorted by key with both key and value written (a ``[]byte`` value
  only when non-nil, which a decoded value always is);
* fields come out in ascending field-number order (the marshaller fills the buffer
  backwards from the highest number), as the Python library writes them.

Custom marshallers, handled by type in ``protoconvert``: ``metav1.Time``
(``time_proto.go``: a zero time is written as nothing — an always-written Time field is
then tag + ``00`` —, any other time as ``Timestamp{seconds, nanos}`` with both fields
always written and nanos always 0, ``ProtoTime`` dropping them); ``resource.Quantity``
(``quantity_proto.go``: field 1, its canonical string, always); ``FieldsV1`` (``Raw``
when non-nil); ``Verbs`` (a ``[]string`` type whose message holds ``items``, written when
non-nil: a JSON list); ``runtime.Unknown``/``RawExtension`` (the envelope and watch frames,
written by ``protobufcodec`` itself).

Checked against: the Marshal/Size functions of ``core/v1/generated.pb.go`` (ConfigMap,
Container, ContainerPort, ContainerState*, ContainerStatus, EnvVar,
LocalObjectReference, Namespace*, ObjectReference, PodCondition, PodIP, PodList, PodSpec,
PodStatus, Secret, SecretList), ``rbac/v1/generated.pb.go`` (all),
``meta/v1/generated.pb.go`` (APIGroup*, APIResource*, APIVersions,
GroupVersionForDiscovery, GroupVersionKind, ServerAddressByClientCIDR, Verbs, LabelSelector*, ListMeta, ManagedFieldsEntry, ObjectMeta,
OwnerReference, PartialObjectMetadata*, Preconditions, Status*, Timestamp, WatchEvent),
``time_proto.go``; field types and JSON tags in ``meta/v1/types.go`` (1.37-era: the
``ClusterName`` tombstone, ``ShardInfo *ShardInfo``, ``creationTimestamp``
``omitempty,omitzero``), ``rbac/v1/types.go`` and ``core/v1/types.go``.

Where it lives.  ``ALWAYS`` holds the messages no one kind owns (meta, runtime,
resource); each kind's module under ``registry/kinds/`` holds its own messages'
entries (``ResourceType.presence``), which the catalog ``register``s when it adds the
kind.

Notation.  ``ALWAYS[message]`` lists the fields written even when zero.  A trailing
``?`` marks a field whose zero value upstream's JSON leaves out (an ``omitempty``
scalar, a zero ``metav1.Time``); without it JSON always shows the field (a scalar with
no ``omitempty`` — ``ready: false``, ``roleRef.apiGroup: ""`` —, or a struct, shown as
``{}`` when empty: Go's ``omitempty`` never omits a struct).  An empty string means the
message has none (every field a pointer, slice or map).  Every message of the three
files has an entry once the built-in kinds are registered, so a new one fails
``tests/codecs/test_upstream_bytes.py`` until someone reads its Go type.

Our messages carry every always-written field of upstream's, even where platformd acts
on none of them (``Container.stdin``, ``PodSpec.hostPID``, ``PodStatus.resize``, ...):
a field upstream writes as a zero and we could not write would make every Pod's bytes
differ from upstream's.  The int64 ``observedGeneration`` fields of PodStatus and
PodCondition are 1.33+ (PodObservedGenerationTracking) and read from the types.
"""

from __future__ import annotations

META = "platform.apimachinery.pkg.apis.meta.v1."
RUNTIME = "platform.apimachinery.pkg.runtime."
RESOURCE = "platform.apimachinery.pkg.api.resource."
INTSTR = "platform.apimachinery.pkg.util.intstr."
APIDISCOVERY = "platform.api.apidiscovery.v2."

#: Types with a hand-written marshaller upstream (see the module docstring).
CUSTOM = frozenset({META + "Time", META + "MicroTime", META + "FieldsV1", META + "Verbs",
                    RESOURCE + "Quantity", INTSTR + "IntOrString"})

ALWAYS = {
    # k8s.io/apimachinery/pkg/apis/meta/v1
    META + "APIGroup": "name preferredVersion",
    META + "APIGroupList": "",
    META + "APIResource": "name namespaced kind singularName group? version? "
                          "storageVersionHash?",
    META + "APIResourceList": "groupVersion",
    META + "APIVersions": "",
    META + "DeleteOptions": "",
    META + "FieldsV1": "",
    META + "GroupVersionForDiscovery": "groupVersion version",
    META + "GroupVersionKind": "group version kind",
    META + "LabelSelector": "",
    META + "LabelSelectorRequirement": "key operator",
    META + "ListMeta": "selfLink? resourceVersion? continue?",
    META + "ManagedFieldsEntry": "manager? operation? apiVersion? fieldsType? subresource?",
    META + "ObjectMeta": "name? generateName? namespace? selfLink? uid? resourceVersion? "
                         "generation? creationTimestamp?",
    META + "OwnerReference": "apiVersion kind name uid",
    META + "PartialObjectMetadata": "metadata",
    META + "PartialObjectMetadataList": "metadata",
    META + "Preconditions": "",
    META + "ServerAddressByClientCIDR": "clientCIDR serverAddress",
    META + "ShardInfo": "selector",
    # Condition: strings without omitempty, a non-pointer Time (null when zero).
    META + "Condition": "type status observedGeneration? lastTransitionTime? reason message",
    META + "Status": "metadata status? message? reason? code?",
    META + "StatusCause": "reason? message? field?",
    META + "StatusDetails": "name? group? kind? uid? retryAfterSeconds?",
    META + "Time": "",
    META + "MicroTime": "",
    META + "Verbs": "",
    META + "WatchEvent": "type object",
    # k8s.io/apimachinery/pkg/runtime (written by protobufcodec, listed for completeness)
    RUNTIME + "RawExtension": "",
    RUNTIME + "TypeMeta": "apiVersion? kind?",
    RUNTIME + "Unknown": "typeMeta contentEncoding contentType",
    # k8s.io/apimachinery/pkg/api/resource
    RESOURCE + "Quantity": "",
    # k8s.io/apimachinery/pkg/util/intstr (intstr/generated.pb.go: type, intVal and
    # strVal always written; handled by type in protoconvert)
    INTSTR + "IntOrString": "",
    # k8s.io/api/apidiscovery/v2 (apidiscovery/v2/types.go and generated.pb.go): the
    # aggregated discovery document, no kind's own (api/aggregateddiscovery.py).
    APIDISCOVERY + "APIGroupDiscoveryList": "metadata",
    APIDISCOVERY + "APIGroupDiscovery": "metadata",
    APIDISCOVERY + "APIVersionDiscovery": "version freshness?",
    APIDISCOVERY + "APIResourceDiscovery": "resource scope singularResource",
    APIDISCOVERY + "APISubresourceDiscovery": "subresource",
}


def register(presence: dict) -> None:
    """
    Add a kind's entries (``ResourceType.presence``: message full name → fields, in
    ``ALWAYS``'s notation), as the catalog does when it adds the kind.  Registering the
    same entry again is a no-op; a different entry for a known message is a ValueError.
    """
    for full_name, words in presence.items():
        known = ALWAYS.get(full_name, words)
        if known != words:
            raise ValueError(f"{full_name}: presence {words!r} differs from {known!r}")
    ALWAYS.update(presence)


def fields(full_name: str) -> list:
    """``[(field name, JSON omits its zero value)]`` for the message, in table order."""
    try:
        words = ALWAYS[full_name]
    except KeyError:
        raise KeyError(f"{full_name}: no presence entry (a kind's messages are registered "
                       "when a catalog adds the kind)") from None
    return [(word.rstrip("?"), word.endswith("?")) for word in words.split()]
