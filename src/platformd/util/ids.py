"""Identifiers: random ones (object UIDs and audit IDs) and the server's own."""

import base64
import hashlib
import os
import socket

_VARIANT = "89ab"
#: How many UUIDs' worth of randomness one ``os.urandom`` call draws.
_BATCH = 256
#: Unused UUIDs' hex digits, each handed out once.  ``list.pop`` and ``extend`` are
#: atomic, so a pool thread may draw too (a race only ever draws a batch too many).
_pool: list = []


def random_uuid() -> str:
    """
    A random (version 4) UUID string, as upstream's ``uuid.New()``.  Formatted by hand
    from ``os.urandom``, at about a sixth of ``str(uuid.uuid4())``'s cost: every request
    makes an audit ID and every create a UID.  The randomness is drawn for ``_BATCH``
    UUIDs per system call (as upstream's ``uuid.EnableRandPool``), a third off the cost
    of one call per UUID.
    """
    try:
        h = _pool.pop()
    except IndexError:
        h = _refill()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _refill() -> str:
    digits = os.urandom(16 * _BATCH).hex()
    _pool.extend(digits[i:i + 32] for i in range(32, len(digits), 32))
    return digits[:32]


def apiserver_id(hostname: str | None = None) -> str:
    """
    The server's identity as upstream's APIServerIdentity names it (``NewConfig``):
    ``apiserver-`` + base32 (lower case, unpadded) of the first 16 bytes of the host
    name's SHA-256.
    """
    digest = hashlib.sha256((hostname or socket.gethostname()).encode()).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode().rstrip("=").lower()
