"""
Pods as the gRPC side sends them: each version of a pod is converted to a ``Pod`` message
once and serialised once (``PodVersion``), however many calls and watchers send it, and
responses are assembled from those bytes.

Every response message of the service (spec 2.6) is one field numbered 1 holding Pods:
``PodListResponse.pods``, ``PodWatchResponse.pod``, ``PodGetResponse.pod``.  The wire
form of such a field is, per pod, the tag byte 0x0A, the pod's length as a varint and the
pod's bytes; so a response is a concatenation of cached bytes, the same bytes the
generated ``SerializeToString`` would write (``tests/podinfo/test_encoding.py`` checks).
"""

from __future__ import annotations

from typing import Optional

from google.protobuf.field_mask_pb2 import FieldMask

from platformd.codecs.protoconvert import to_message
from platformd.podinfo.fieldmask import restrict
from platformd.protos.platform.api.core.v1.generated_pb2 import Pod

#: Field 1, wire type 2 (length-delimited).
_FIELD_1 = b"\x0a"


class PodVersion:
    """
    One version of one pod of this node.  ``obj`` is the plain pod, shared and never
    mutated.  Made on the reactor; its message and bytes are computed on first use by
    whichever gRPC thread needs them (two threads may both compute them; either result
    is the same).
    """

    __slots__ = ("obj", "uid", "_message", "_data")

    def __init__(self, obj: dict):
        self.obj = obj
        self.uid = (obj.get("metadata") or {}).get("uid", "")
        self._message = None
        self._data = None

    @property
    def message(self) -> Pod:
        """The Pod message; read-only, shared between threads."""
        message = self._message
        if message is None:
            message = self._message = to_message(self.obj, Pod)
        return message

    def encoded(self, mask: Optional[FieldMask]) -> bytes:
        """The serialised Pod, restricted to ``mask`` when there is one."""
        if mask is not None:
            return restrict(mask, self.message).SerializeToString()
        data = self._data
        if data is None:
            data = self._data = self.message.SerializeToString()
        return data


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field1(pods) -> bytes:
    """Serialised Pods as the repeated or singular field 1 of a response message."""
    return b"".join(_FIELD_1 + _varint(len(pod)) + pod for pod in pods)
