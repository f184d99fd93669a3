"""
Failures of the pods API as values: a gRPC status code and a message, raised where the
fault is found (a bad field mask, a cache not yet synced) and turned into the call's
status once, by the servicer.
"""

from __future__ import annotations

import attrs
import grpc


@attrs.define(eq=False)
class PodsError(Exception):
    code: grpc.StatusCode
    message: str

    def __str__(self) -> str:
        return self.message


def not_synced() -> PodsError:
    """Spec 7.3: until this node's pods are known, every method fails this way."""
    return PodsError(grpc.StatusCode.FAILED_PRECONDITION,
                     "the node's pod cache has not finished its initial sync; retry")


def stopping() -> PodsError:
    return PodsError(grpc.StatusCode.UNAVAILABLE, "platformd is stopping; retry elsewhere or later")
