"""
``--feature-gates``: the named switches of spec section 9, with their stated defaults.
An unknown name or a value other than true/false is a startup error.
"""

from __future__ import annotations

import attrs

DEFAULTS = {
    "APIResponseCompression": True,        # beta
    "AllowUnsafeMalformedObjectDeletion": False,  # alpha
    "CBORServingAndStorage": False,        # alpha
    "ListFromCacheSnapshot": True,         # enabled by default
    "PodsAPI": False,                      # alpha: the node-local pods socket
    "ShardedListAndWatch": False,          # alpha
    "WatchList": True,                     # beta: streaming initial state
}


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
        return cls(enabled)
