"""Times as the API writes them (RFC 3339, whole seconds, UTC), from a clock's seconds."""

import time


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
