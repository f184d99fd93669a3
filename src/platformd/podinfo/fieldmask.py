"""
Field masks of the pods API (spec 4.10.3): a ``google.protobuf.FieldMask`` carried in the
gRPC metadata key ``x-platform-field-mask`` as comma-separated paths of the Pod message
(``status.phase,status.podIPs``).  Paths use the Pod's field names as written (they are
upstream's JSON names, so ``podIPs``, not ``pod_ips``); a path through a repeated or map
field can only name the whole field.  An unknown path, or an empty one, is
INVALID_ARGUMENT.  Several values of the key are joined.
"""

from __future__ import annotations

from typing import Optional

import grpc
from google.protobuf.field_mask_pb2 import FieldMask

from platformd.podinfo.errors import PodsError
from platformd.protos.platform.api.core.v1.generated_pb2 import Pod

METADATA_KEY = "x-platform-field-mask"


def from_metadata(metadata) -> Optional[FieldMask]:
    """The mask the call's metadata carries, or None (the whole pod)."""
    values = [value for key, value in metadata or () if key == METADATA_KEY]
    if not values:
        return None
    paths = [path.strip() for value in values for path in value.split(",")]
    mask = FieldMask(paths=paths)
    if "" in paths or not mask.IsValidForDescriptor(Pod.DESCRIPTOR):
        raise PodsError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"invalid field mask {','.join(paths)!r} in {METADATA_KEY}: each comma-separated "
            "path must name a field of Pod, such as status.phase or metadata.labels")
    return mask


def restrict(mask: FieldMask, pod: Pod) -> Pod:
    """A new Pod holding only the fields of ``pod`` that ``mask`` names."""
    result = Pod()
    mask.MergeMessage(pod, result)
    return result
