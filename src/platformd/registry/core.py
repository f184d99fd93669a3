"""
The core ``v1`` kinds, by name, for callers that want one: each is defined in its own
module under ``registry/kinds/``.
"""

from __future__ import annotations

from platformd.registry.kinds import configmap, namespace, pod, secret, serviceaccount
from platformd.registry.kinds import event
from platformd.registry.kinds import endpoints, endpointslice, service
from platformd.registry.kinds import node, poddisruptionbudget

NAMESPACE = namespace.KIND
POD = pod.KIND
CONFIG_MAP = configmap.KIND
SECRET = secret.KIND
SERVICE_ACCOUNT = serviceaccount.KIND
# Issue 32.
EVENT = event.KIND
SERVICE = service.KIND
ENDPOINTS = endpoints.KIND
ENDPOINT_SLICE = endpointslice.KIND
NODE = node.KIND
POD_DISRUPTION_BUDGET = poddisruptionbudget.KIND
