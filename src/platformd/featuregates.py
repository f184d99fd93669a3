"""
``--feature-gates``: the named switches of spec section 9, with their stated defaults.
An unknown name or a value other than true/false is a startup error.
"""

from __future__ import annotations

import attrs
from twisted.logger import Logger

DEFAULTS = {
    "APIResponseCompression": True,        # beta
    "AllowUnsafeMalformedObjectDeletion": False,  # alpha
    "CBORServingAndStorage": False,        # alpha
    "KMSv1": False,                        # deprecated (upstream: off since 1.29)
    "ListFromCacheSnapshot": True,         # enabled by default
    "PodsAPI": False,                      # alpha: the node-local pods socket
    "ShardedListAndWatch": False,          # alpha
    "WatchList": True,                     # beta: streaming initial state
}

#: Gates upstream marks deprecated: setting one logs upstream's warning.
DEPRECATED = frozenset({"KMSv1"})

log = Logger()


class FeatureGateError(ValueError):
    """A malformed ``--feature-gates`` value."""


@attrs.frozen
class FeatureGates:
    enabled: dict = attrs.field(factory=lambda: dict(DEFAULTS))

    def __getitem__(self, name: str) -> bool:
        return self.enabled[name]

    @classmethod
    def parse(cls, text: str) -> "FeatureGates":
        enabled = dict(DEFAULTS)
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name, value = name.strip(), value.strip().lower()
            if not sep:
                raise FeatureGateError(f"missing bool value for {name}")
            if name not in DEFAULTS:
                raise FeatureGateError(
                    f"unrecognized feature gate: {name} (known: {', '.join(sorted(DEFAULTS))})")
            if value not in ("true", "false"):
                raise FeatureGateError(f"invalid value of {name}={value}, err: must be true or false")
            enabled[name] = value == "true"
            if name in DEPRECATED:
                log.warn("Setting deprecated feature gate {name}={value}. It will be removed "
                         "in a future release.", name=name, value=value)
        return cls(enabled)
