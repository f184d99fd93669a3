"""Go-style durations on the command line (``5m``, ``90s``, ``1h30m``, ``250ms``)."""

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the problem."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    if text == "0":
        return 0.0  # Go's time.ParseDuration: "0" alone needs no unit
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"invalid duration {text!r} (examples: 5m, 90s, 1h30m)")
    return total
