"""
Continue tokens for paged lists (spec 4.4) and the snapshots behind them.

A token says where the next page starts and at which revision the list was taken, as
upstream's does (base64 of ``{"v", "rv", "start"}``), plus when the first page was
served (``t``): a token older than ``--continue-token-ttl`` is refused with 410 Gone,
and so is one whose revision has left the watch cache's history.  The pages of one list
therefore show one consistent snapshot while writes go on.

The snapshot itself (the objects in key order at that revision) is kept in a small
bounded cache so that later pages cost only their own items; when it has been evicted it
is rebuilt from the event history.  Expiry runs from the same LoopingCall as history
expiry (``expiry.py``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from typing import Optional

import attrs

from platformd import errors

TOKEN_VERSION = "meta.platform.io/v1"

EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


@attrs.frozen
class Token:
    revision: int
    start: str
    issued: float


def encode(token: Token) -> str:
    payload = {"v": TOKEN_VERSION, "rv": token.revision, "start": token.start,
               "t": int(token.issued)}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def decode(text: str) -> Token:
    """Parse a continue token; a malformed one is a 400 BadRequest."""
    try:
        padded = text + "=" * (-len(text) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if payload.get("v") != TOKEN_VERSION:
            raise ValueError(f"unsupported continue token version {payload.get('v')!r}")
        revision, start, issued = payload["rv"], payload["start"], payload["t"]
        if not isinstance(revision, int) or revision <= 0 or not isinstance(start, str) \
                or not isinstance(issued, (int, float)):
            raise ValueError("malformed continue token fields")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as e:
        raise errors.bad_request(f"continue key is not valid: {e}") from None
    return Token(revision, start, issued)


class Snapshots:
    """
    The snapshots paged lists read from, keyed by (key prefix, revision); bounded (the
    least recently used goes first) and expired after the token TTL.
    """

    def __init__(self, clock, ttl: float, capacity: int = 256):
        self.clock = clock
        self.ttl = ttl
        self.capacity = capacity
        self._entries: OrderedDict = OrderedDict()  # (prefix, rev) -> (created, entries)

    def get(self, prefix: str, revision: int) -> Optional[list]:
        found = self._entries.get((prefix, revision))
        if found is None:
            return None
        self._entries.move_to_end((prefix, revision))
        return found[1]

    def put(self, prefix: str, revision: int, entries: list) -> None:
        self._entries[(prefix, revision)] = (self.clock.seconds(), entries)
        self._entries.move_to_end((prefix, revision))
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def expired(self, token: Token) -> bool:
        return self.clock.seconds() - token.issued > self.ttl

    def expire(self) -> None:
        cutoff = self.clock.seconds() - self.ttl
        for key in [k for k, (created, _) in self._entries.items() if created < cutoff]:
            del self._entries[key]

    def __len__(self):
        return len(self._entries)


def gone() -> errors.StatusError:
    return errors.gone(EXPIRED_MESSAGE)
